package io.kadence.executor.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.MessageDigest;
import java.security.Signature;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

/**
 * Triggers signed as a round (PROTOCOL.md section 3): written here from RFC 6962's own recursive
 * definitions of the tree and its paths, the way the scheduler signs them, and checked by
 * {@link TrustedKeys#verify}.
 */
class RoundSigningTest {
    private static final String TOPIC = "kadence.triggers.app";

    private record Leaf(String topic, int partition, byte[] value) {}

    private final KeyPair pair = generate();
    private final TrustedKeys keys = trusting(pair);
    private final String id = TrustedKeys.keyId(raw(pair));
    /** Seven triggers over three partitions. */
    private final List<Leaf> records = sevenRecords();

    @Test
    void eachRecordVerifiesAloneAndInAnyOrder() throws Exception {
        List<Headers> signed = sign(records, pair);
        for (int i = records.size() - 1; i >= 0; i--) {
            Leaf record = records.get(i);
            assertEquals(id, trusting(pair).verify(record.topic(), record.partition(), record.value(), signed.get(i)));
            assertEquals(id, keys.verify(record.topic(), record.partition(), record.value(), signed.get(i)));
        }
        List<Headers> lone = sign(records.subList(0, 1), pair);
        assertEquals(8, lone.get(0).lastHeader(TrustedKeys.ROUND_PROOF).value().length);
        assertEquals(id, keys.verify(TOPIC, 0, records.get(0).value(), lone.get(0)));
    }

    @Test
    void aRecordChangedMovedOrGivenAnotherProofIsRefused() throws Exception {
        List<Headers> signed = sign(records, pair);
        Leaf record = records.get(4);
        String expected = "bad round proof by key " + id
                + ": the record was changed after signing, moved to another topic or partition, or forged";
        assertRefused("bad_proof", expected, TOPIC, 0, record.value(), signed.get(4));
        assertRefused("bad_proof", expected, "kadence.triggers.other", record.partition(), record.value(), signed.get(4));
        assertRefused("bad_proof", expected, TOPIC, record.partition(), "changed".getBytes(StandardCharsets.UTF_8),
                signed.get(4));
        assertRefused("bad_proof", expected, TOPIC, record.partition(), record.value(), signed.get(5));
        byte[] tampered = signed.get(4).lastHeader(TrustedKeys.ROUND_PROOF).value().clone();
        tampered[20] ^= 1;
        assertRefused("bad_proof", expected, TOPIC, record.partition(), record.value(),
                replaced(signed.get(4), TrustedKeys.ROUND_PROOF, tampered));
    }

    @Test
    void aRoundByAnotherKeyOrWithItsSignatureChangedIsRefused() throws Exception {
        Leaf record = records.get(2);
        KeyPair retired = generate();
        VerifyException unknown = assertThrows(VerifyException.class, () -> keys.verify(TOPIC, record.partition(),
                record.value(), sign(records, retired).get(2)));
        assertEquals("unknown_key", unknown.kind());
        List<Headers> signed = sign(records, pair);
        assertEquals(id, keys.verify(TOPIC, record.partition(), record.value(), signed.get(2)));
        byte[] forged = signed.get(2).lastHeader(TrustedKeys.ROUND_SIGNATURE).value().clone();
        forged[forged.length - 1] ^= 1;
        assertRefused("bad_signature", "bad signature by key " + id
                + ": the record was changed after signing, copied from another topic, or forged", TOPIC,
                record.partition(), record.value(), replaced(signed.get(2), TrustedKeys.ROUND_SIGNATURE, forged));
    }

    @Test
    void malformedRoundHeadersSayWhichAndWhy() throws Exception {
        Headers headers = sign(records, pair).get(1);
        Leaf record = records.get(1);
        assertRefused("malformed_signature",
                "malformed signature header kadence.signature.round: 5 bytes instead of 104", TOPIC,
                record.partition(), record.value(),
                replaced(headers, TrustedKeys.ROUND_SIGNATURE, "short".getBytes(StandardCharsets.UTF_8)));
        assertRefused("malformed_signature",
                "malformed signature header kadence.signature.proof: missing while kadence.signature.round is there",
                TOPIC, record.partition(), record.value(), replaced(headers, TrustedKeys.ROUND_PROOF, null));
        assertRefused("malformed_signature",
                "malformed signature header kadence.signature.proof: 9 bytes, not an 8-byte index and 32-byte hashes",
                TOPIC, record.partition(), record.value(), replaced(headers, TrustedKeys.ROUND_PROOF, new byte[9]));
        assertRefused("malformed_signature",
                "malformed signature header kadence.signature.key: missing while the other signature header is there",
                TOPIC, record.partition(), record.value(), replaced(headers, TrustedKeys.SIGNATURE_KEY, null));
    }

    private void assertRefused(String kind, String message, String topic, int partition, byte[] value,
            Headers headers) {
        VerifyException error = assertThrows(VerifyException.class,
                () -> keys.verify(topic, partition, value, headers));
        assertEquals(kind, error.kind());
        assertEquals(message, error.getMessage());
    }

    /** Each record's headers when {@code records} are signed as one round by {@code signer}. */
    private static List<Headers> sign(List<Leaf> records, KeyPair signer) throws Exception {
        List<byte[]> leaves = new ArrayList<>();
        for (Leaf record : records) {
            leaves.add(TrustedKeys.leafHash(record.topic(), record.partition(), record.value()));
        }
        byte[] root = treeHash(leaves);
        byte[] size = ByteBuffer.allocate(8).putLong(leaves.size()).array();
        Signature ed25519 = Signature.getInstance("Ed25519");
        ed25519.initSign(signer.getPrivate());
        ed25519.update("kadence-trigger-round-v1\n".getBytes(StandardCharsets.UTF_8));
        ed25519.update(size);
        ed25519.update(root);
        byte[] round = ByteBuffer.allocate(104).put(size).put(root).put(ed25519.sign()).array();
        byte[] keyId = TrustedKeys.keyId(raw(signer)).getBytes(StandardCharsets.UTF_8);
        List<Headers> signed = new ArrayList<>();
        for (int index = 0; index < leaves.size(); index++) {
            List<byte[]> path = path(index, leaves);
            ByteBuffer proof = ByteBuffer.allocate(8 + 32 * path.size()).putLong(index);
            path.forEach(proof::put);
            RecordHeaders headers = new RecordHeaders();
            headers.add(TrustedKeys.SIGNATURE_KEY, keyId);
            headers.add(TrustedKeys.ROUND_SIGNATURE, round);
            headers.add(TrustedKeys.ROUND_PROOF, proof.array());
            signed.add(headers);
        }
        return signed;
    }

    /** RFC 6962 section 2.1's Merkle Tree Hash, by its recursive definition. */
    private static byte[] treeHash(List<byte[]> leaves) throws Exception {
        if (leaves.size() == 1) {
            return leaves.get(0);
        }
        int split = Integer.highestOneBit(leaves.size() - 1);
        return node(treeHash(leaves.subList(0, split)), treeHash(leaves.subList(split, leaves.size())));
    }

    /** RFC 6962 section 2.1.1's audit path, by its recursive definition. */
    private static List<byte[]> path(int index, List<byte[]> leaves) throws Exception {
        if (leaves.size() == 1) {
            return new ArrayList<>();
        }
        int split = Integer.highestOneBit(leaves.size() - 1);
        List<byte[]> path;
        if (index < split) {
            path = path(index, leaves.subList(0, split));
            path.add(treeHash(leaves.subList(split, leaves.size())));
        } else {
            path = path(index - split, leaves.subList(split, leaves.size()));
            path.add(treeHash(leaves.subList(0, split)));
        }
        return path;
    }

    private static byte[] node(byte[] left, byte[] right) throws Exception {
        MessageDigest sha256 = MessageDigest.getInstance("SHA-256");
        sha256.update((byte) 0x01);
        sha256.update(left);
        sha256.update(right);
        return sha256.digest();
    }

    /** {@code headers} with {@code name}'s value replaced by {@code value}, or left out (null). */
    private static Headers replaced(Headers headers, String name, byte[] value) {
        RecordHeaders changed = new RecordHeaders();
        headers.forEach(header -> {
            if (!header.key().equals(name)) {
                changed.add(header);
            } else if (value != null) {
                changed.add(name, value);
            }
        });
        return changed;
    }

    private static List<Leaf> sevenRecords() {
        List<Leaf> records = new ArrayList<>();
        for (int i = 0; i < 7; i++) {
            records.add(new Leaf(TOPIC, i % 3, ("trigger " + i).getBytes(StandardCharsets.UTF_8)));
        }
        return records;
    }

    private static KeyPair generate() {
        try {
            return KeyPairGenerator.getInstance("Ed25519").generateKeyPair();
        } catch (Exception impossible) {
            throw new IllegalStateException(impossible);
        }
    }

    /** The 32 raw bytes of the public key (the last 32 of its X.509 encoding). */
    private static byte[] raw(KeyPair pair) {
        byte[] encoded = pair.getPublic().getEncoded();
        return Arrays.copyOfRange(encoded, encoded.length - 32, encoded.length);
    }

    private static TrustedKeys trusting(KeyPair pair) {
        return TrustedKeys.parse(List.of(Base64.getEncoder().encodeToString(raw(pair))));
    }
}
