package io.kadence.executor.wire;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.bouncycastle.math.ec.rfc8032.Ed25519;

/**
 * The scheduler keys whose Ed25519 signatures an executor accepts on triggers and control
 * records (PROTOCOL.md section 3; several during a rotation).
 *
 * <p>Bouncy Castle's RFC 8032 code verifies, not the JDK's {@code Signature.getInstance("Ed25519")}:
 * the JDK's takes about 1 ms a signature on a server core (JDK 17 and 25 alike), so verifying
 * alone would hold an executor under about 1 000 triggers a second a core; Bouncy Castle's takes
 * about 0.1 ms. Each trusted key is decoded and checked once, when the executor is built, into
 * the point the verifications reuse.
 *
 * <p>Checks run in the order of the protocol decisions: both headers absent → unsigned; one of
 * the two present → malformed (naming the missing one); key id not UTF-8 → malformed; key id
 * compared byte for byte with the trusted ids (lowercase hex) → unknown key; signature not
 * base64 or not 64 bytes → malformed; then the signature itself over
 * {@code kadence-trigger-v1\n{topic}\n{value}}, a null value verified as zero bytes. Of
 * repeated headers the last one counts, as Kafka's {@code lastHeader} reads them.
 *
 * <p>A record with a {@code kadence.signature.round} header was signed with the rest of its
 * dispatch round: the scheduler signed the RFC 6962 Merkle root (SHA-256) of the round's records
 * once. That header holds the round's size (big-endian long), root and Ed25519 signature over
 * {@code kadence-trigger-round-v1\n{size}{root}}, 104 bytes; {@code kadence.signature.proof}
 * holds the record's index (big-endian long) and its RFC 9162 inclusion path, 32 bytes a hash.
 * A leaf is {@code SHA-256(0x00 || kadence-trigger-leaf-v1\n{topic}\n{partition}\n{value})}.
 * Checks, in order: the key id as above, the two headers' lengths, the proof, then the round's
 * signature, checked once per round and remembered.
 */
public final class TrustedKeys {
    public static final String SIGNATURE_KEY = "kadence.signature.key";
    public static final String SIGNATURE = "kadence.signature";
    public static final String ROUND_SIGNATURE = "kadence.signature.round";
    public static final String ROUND_PROOF = "kadence.signature.proof";
    /**
     * The feature every beat of this SDK lists (PROTOCOL.md section 9): {@link #verify} takes
     * round-signed triggers as well as those signed one by one. Executors built before round
     * signatures dead-letter a round-signed trigger as unsigned, so the scheduler signs an app's
     * triggers by the round only while its executors list this.
     */
    public static final String ROUND_SIGNATURES_FEATURE = "round-signatures";
    private static final byte[] DOMAIN = "kadence-trigger-v1\n".getBytes(StandardCharsets.UTF_8);
    private static final byte[] ROUND_DOMAIN = "kadence-trigger-round-v1\n".getBytes(StandardCharsets.UTF_8);
    private static final byte[] LEAF_DOMAIN = "kadence-trigger-leaf-v1\n".getBytes(StandardCharsets.UTF_8);
    private static final int ROUND_SIGNATURE_LENGTH = 104;
    private static final int HASH_LENGTH = 32;
    /** Rounds remembered at most; then the set starts again empty (one more check per round still arriving). */
    private static final int VERIFIED_ROUNDS_LIMIT = 4096;

    private final Map<String, Ed25519.PublicPoint> keys;
    /** Round signatures checked already, by key id and header (hex): a round's other records need only their proofs. */
    private final Set<String> verifiedRounds = ConcurrentHashMap.newKeySet();

    private TrustedKeys(Map<String, Ed25519.PublicPoint> keys) {
        this.keys = keys;
    }

    /** No key: verifies nothing (an executor built with {@code allowUnverified()}). */
    public static TrustedKeys none() {
        return new TrustedKeys(Map.of());
    }

    /** Parses keys given as base64 of their 32 raw bytes, as {@code kadence key list} prints them. */
    public static TrustedKeys parse(List<String> base64Keys) {
        Map<String, Ed25519.PublicPoint> keys = new TreeMap<>();
        for (String text : base64Keys) {
            byte[] raw;
            try {
                raw = Base64.getDecoder().decode(text.strip());
            } catch (IllegalArgumentException error) {
                throw new IllegalArgumentException("trusted key " + Ids.quote(text)
                        + " is not the base64 of an Ed25519 public key: " + error.getMessage());
            }
            if (raw.length != 32) {
                throw new IllegalArgumentException("trusted key " + Ids.quote(text)
                        + " is not the base64 of an Ed25519 public key: " + raw.length + " bytes instead of 32");
            }
            Ed25519.PublicPoint point = Ed25519.validatePublicKeyFullExport(raw, 0);
            if (point == null) {
                throw new IllegalArgumentException("trusted key " + Ids.quote(text)
                        + " is not an Ed25519 public key: its 32 bytes are not a point of the curve, or one of "
                        + "small order");
            }
            keys.put(keyId(raw), point);
        }
        return new TrustedKeys(keys);
    }

    /** The id of a 32-byte public key: the first 8 bytes of its SHA-256, lowercase hex. */
    public static String keyId(byte[] raw) {
        return HexFormat.of().formatHex(sha256().digest(raw), 0, 8);
    }

    public boolean isEmpty() {
        return keys.isEmpty();
    }

    public List<String> keyIds() {
        return new ArrayList<>(keys.keySet());
    }

    /**
     * Returns the id of the trusted key that signed {@code value} on {@code topic} (and, for a
     * round-signed record, {@code partition}), or throws.
     */
    public String verify(String topic, int partition, byte[] value, Headers headers) throws VerifyException {
        byte[] round = last(headers, ROUND_SIGNATURE);
        if (round != null) {
            return verifyRound(topic, partition, value == null ? new byte[0] : value, headers, round);
        }
        byte[] signer = last(headers, SIGNATURE_KEY);
        byte[] signature = last(headers, SIGNATURE);
        if (signer == null && signature == null) {
            throw new VerifyException("unsigned", "unsigned record: it has no kadence.signature headers, and this "
                    + "executor runs only records signed by a trusted scheduler key");
        }
        if (signature == null) {
            throw malformed(SIGNATURE, "missing while the other signature header is there");
        }
        if (signer == null) {
            throw malformed(SIGNATURE_KEY, "missing while the other signature header is there");
        }
        String keyId = keyIdOf(signer);
        Ed25519.PublicPoint key = trusted(keyId);
        byte[] raw;
        try {
            raw = Base64.getDecoder().decode(signature);
        } catch (IllegalArgumentException error) {
            throw malformed(SIGNATURE, "not base64: " + error.getMessage());
        }
        if (raw.length != 64) {
            throw malformed(SIGNATURE, raw.length + " bytes instead of 64");
        }
        byte[] message = signedMessage(topic, value);
        if (!Ed25519.verify(raw, 0, key, message, 0, message.length)) {
            throw badSignature(keyId);
        }
        return keyId;
    }

    private String verifyRound(String topic, int partition, byte[] value, Headers headers, byte[] round)
            throws VerifyException {
        byte[] signer = last(headers, SIGNATURE_KEY);
        if (signer == null) {
            throw malformed(SIGNATURE_KEY, "missing while the other signature header is there");
        }
        String keyId = keyIdOf(signer);
        Ed25519.PublicPoint key = trusted(keyId);
        if (round.length != ROUND_SIGNATURE_LENGTH) {
            throw malformed(ROUND_SIGNATURE, round.length + " bytes instead of " + ROUND_SIGNATURE_LENGTH);
        }
        byte[] proof = last(headers, ROUND_PROOF);
        if (proof == null) {
            throw malformed(ROUND_PROOF, "missing while " + ROUND_SIGNATURE + " is there");
        }
        if (proof.length < 8 || (proof.length - 8) % HASH_LENGTH != 0) {
            throw malformed(ROUND_PROOF, proof.length + " bytes, not an 8-byte index and 32-byte hashes");
        }
        long size = ByteBuffer.wrap(round, 0, 8).getLong();
        long index = ByteBuffer.wrap(proof, 0, 8).getLong();
        byte[] root = rootFromProof(leafHash(topic, partition, value), index, size, proof);
        if (root == null || !MessageDigest.isEqual(root, Arrays.copyOfRange(round, 8, 8 + HASH_LENGTH))) {
            throw new VerifyException("bad_proof", "bad round proof by key " + keyId
                    + ": the record was changed after signing, moved to another topic or partition, or forged");
        }
        String remembered = keyId + "/" + HexFormat.of().formatHex(round);
        if (!verifiedRounds.contains(remembered)) {
            byte[] message = ByteBuffer.allocate(ROUND_DOMAIN.length + 8 + HASH_LENGTH)
                    .put(ROUND_DOMAIN).put(round, 0, 8 + HASH_LENGTH).array();
            if (!Ed25519.verify(round, 8 + HASH_LENGTH, key, message, 0, message.length)) {
                throw badSignature(keyId);
            }
            if (verifiedRounds.size() >= VERIFIED_ROUNDS_LIMIT) {
                verifiedRounds.clear();
            }
            verifiedRounds.add(remembered);
        }
        return keyId;
    }

    /** The Merkle leaf of a round-signed record: where it was produced and its value. */
    public static byte[] leafHash(String topic, int partition, byte[] value) {
        MessageDigest sha256 = sha256();
        sha256.update((byte) 0x00);
        sha256.update(LEAF_DOMAIN);
        sha256.update(topic.getBytes(StandardCharsets.UTF_8));
        sha256.update((byte) '\n');
        sha256.update(Integer.toString(partition).getBytes(StandardCharsets.UTF_8));
        sha256.update((byte) '\n');
        sha256.update(value);
        return sha256.digest();
    }

    /**
     * The root the inclusion path in {@code proof} (after its 8-byte index) leads to from
     * {@code leaf} at {@code index} of a tree of {@code size} leaves, RFC 9162 section 2.1.3.2;
     * null when it leads nowhere (an index out of range, a path too long or too short).
     */
    static byte[] rootFromProof(byte[] leaf, long index, long size, byte[] proof) {
        if (index < 0 || size <= 0 || Long.compareUnsigned(index, size) >= 0) {
            return null;
        }
        long fn = index;
        long sn = size - 1;
        byte[] hashed = leaf;
        for (int at = 8; at < proof.length; at += HASH_LENGTH) {
            if (sn == 0) {
                return null;
            }
            byte[] sibling = Arrays.copyOfRange(proof, at, at + HASH_LENGTH);
            if ((fn & 1) == 1 || fn == sn) {
                hashed = nodeHash(sibling, hashed);
                while ((fn & 1) == 0 && fn != 0) {
                    fn >>= 1;
                    sn >>= 1;
                }
            } else {
                hashed = nodeHash(hashed, sibling);
            }
            fn >>= 1;
            sn >>= 1;
        }
        return sn == 0 ? hashed : null;
    }

    private static byte[] nodeHash(byte[] left, byte[] right) {
        MessageDigest sha256 = sha256();
        sha256.update((byte) 0x01);
        sha256.update(left);
        sha256.update(right);
        return sha256.digest();
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (GeneralSecurityException impossible) {
            throw new IllegalStateException("every JDK has SHA-256", impossible);
        }
    }

    private static String keyIdOf(byte[] signer) throws VerifyException {
        try {
            return StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(signer)).toString();
        } catch (CharacterCodingException error) {
            throw malformed(SIGNATURE_KEY, "not UTF-8 text");
        }
    }

    private Ed25519.PublicPoint trusted(String keyId) throws VerifyException {
        Ed25519.PublicPoint key = keys.get(keyId);
        if (key == null) {
            throw new VerifyException("unknown_key", "signed by unknown key " + printable(keyId)
                    + ": not one of this executor's trusted keys (forged, or signed by a newer scheduler key: "
                    + "add its public key from `kadence key list`)");
        }
        return key;
    }

    private static VerifyException badSignature(String keyId) {
        return new VerifyException("bad_signature", "bad signature by key " + keyId
                + ": the record was changed after signing, copied from another topic, or forged");
    }

    /** The bytes a trigger's or control record's signature covers. */
    public static byte[] signedMessage(String topic, byte[] value) {
        byte[] topicBytes = topic.getBytes(StandardCharsets.UTF_8);
        byte[] body = value == null ? new byte[0] : value;
        return ByteBuffer.allocate(DOMAIN.length + topicBytes.length + 1 + body.length)
                .put(DOMAIN).put(topicBytes).put((byte) '\n').put(body).array();
    }

    private static byte[] last(Headers headers, String name) {
        if (headers == null) {
            return null;
        }
        Header header = headers.lastHeader(name);
        if (header == null) {
            return null;
        }
        return header.value() == null ? new byte[0] : header.value();
    }

    private static String printable(String text) {
        StringBuilder out = new StringBuilder();
        text.codePoints().limit(64).forEach(c -> {
            if (Character.isISOControl(c)) {
                out.append('?');
            } else {
                out.appendCodePoint(c);
            }
        });
        return out.toString();
    }

    private static VerifyException malformed(String header, String reason) {
        return new VerifyException("malformed_signature", "malformed signature header " + header + ": " + reason);
    }
}
