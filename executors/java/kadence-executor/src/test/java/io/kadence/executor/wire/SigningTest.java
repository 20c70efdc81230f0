package io.kadence.executor.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.Signature;
import java.util.Arrays;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

class SigningTest {
    /** PROTOCOL.md section 3's test vector. */
    @Test
    void theExecutorKeySignsTheProtocolsTestVector() {
        ExecutorKey key = ExecutorKey.parse("0123456789abcdef.AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8\n");
        byte[] value = HexFormat.of().parseHex("00000007d168656c6c6f");
        assertEquals("NWdDj5mX85f2963FIKyZ1SaPJJgjDZmOPqgfu4HvdiI=", key.sign("kadence.results", value));
        assertEquals("0123456789abcdef", key.keyId());
        assertEquals("ExecutorKey(0123456789abcdef)", key.toString());
    }

    /**
     * A signature made by the Rust code (kadence_kafka::signing::RecordSigner, the scheduler's
     * signer) with the secret bytes 0, 1, …, 31 over the value of the executor key's test
     * vector on {@code kadence.triggers.billing}: it verifies here.
     */
    @Test
    void aSignatureMadeByTheRustSchedulerVerifies() throws Exception {
        TrustedKeys keys = TrustedKeys.parse(List.of("A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg="));
        assertEquals(List.of("56475aa75463474c"), keys.keyIds());
        byte[] value = HexFormat.of().parseHex("00000007d168656c6c6f");
        String signature = "qQTx6Hv12jVDwGc6zcEGNHFJ4ko+mfkdtHRtBQ8tDjKgax79mWZK0rF7ODAuz5VFtvoL4qs4e0pswhtZbuxcAA==";
        assertEquals("56475aa75463474c", keys.verify("kadence.triggers.billing", 0, value,
                headers("56475aa75463474c", signature)));
        assertEquals("bad_signature", assertThrows(VerifyException.class,
                () -> keys.verify("kadence.triggers.other", 0, value, headers("56475aa75463474c", signature))).kind());
    }

    /** 32 bytes that are no usable Ed25519 key are refused when the executor is built, not at
     * the first trigger. */
    @Test
    void aTrustedKeyThatIsNoCurvePointIsRefused() {
        String notAPoint = Base64.getEncoder().encodeToString(filled((byte) 1));
        String smallOrder = Base64.getEncoder().encodeToString(new byte[32]);
        for (String text : List.of(notAPoint, smallOrder)) {
            IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
                    () -> TrustedKeys.parse(List.of(text)));
            assertEquals("trusted key \"" + text + "\" is not an Ed25519 public key: its 32 bytes are not a point "
                    + "of the curve, or one of small order", error.getMessage());
        }
    }

    private static byte[] filled(byte value) {
        byte[] bytes = new byte[32];
        Arrays.fill(bytes, value);
        return bytes;
    }

    @Test
    void aKeyTextNotAsTheSchedulerWritesItIsRefusedWithoutShowingTheSecret() {
        String secret = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";
        for (String text : List.of(secret, "0123456789ABCDEF." + secret, "0123.456" + secret,
                "0123456789abcdef." + secret.substring(1), "0123456789abcdef." + secret.replace('8', '9'),
                "0123456789abcdef." + secret + "=")) {
            IllegalArgumentException error = assertThrows(IllegalArgumentException.class, () -> ExecutorKey.parse(text));
            assertTrue(error.getMessage().startsWith("executor key is not {key id}.{secret}"), error.getMessage());
            assertTrue(!error.getMessage().contains(secret.substring(5, 20)), error.getMessage());
        }
    }

    @Test
    void triggersAreVerifiedInTheDecidedOrder() throws Exception {
        KeyPairGenerator generator = KeyPairGenerator.getInstance("Ed25519");
        KeyPair pair = generator.generateKeyPair();
        byte[] encoded = pair.getPublic().getEncoded();
        byte[] raw = Arrays.copyOfRange(encoded, encoded.length - 32, encoded.length);
        TrustedKeys keys = TrustedKeys.parse(List.of(Base64.getEncoder().encodeToString(raw)));
        String id = TrustedKeys.keyId(raw);
        byte[] value = "a trigger".getBytes(StandardCharsets.UTF_8);
        Signature signer = Signature.getInstance("Ed25519");
        signer.initSign(pair.getPrivate());
        signer.update(TrustedKeys.signedMessage("kadence.triggers.app", value));
        String signature = Base64.getEncoder().encodeToString(signer.sign());

        assertEquals(id, keys.verify("kadence.triggers.app", 0, value, headers(id, signature)));
        assertRefused(keys, value, new RecordHeaders(), "unsigned", "unsigned record: it has no kadence.signature "
                + "headers, and this executor runs only records signed by a trusted scheduler key");
        assertRefused(keys, value, headers(id, null), "malformed_signature",
                "malformed signature header kadence.signature: missing while the other signature header is there");
        assertRefused(keys, value, headers(null, signature), "malformed_signature",
                "malformed signature header kadence.signature.key: missing while the other signature header is there");
        RecordHeaders binaryId = new RecordHeaders();
        binaryId.add(TrustedKeys.SIGNATURE_KEY, new byte[] {(byte) 0xff, (byte) 0xfe});
        binaryId.add(TrustedKeys.SIGNATURE, signature.getBytes(StandardCharsets.UTF_8));
        assertRefused(keys, value, binaryId, "malformed_signature",
                "malformed signature header kadence.signature.key: not UTF-8 text");
        VerifyException upper = assertThrows(VerifyException.class,
                () -> keys.verify("kadence.triggers.app", 0, value, headers(id.toUpperCase(), signature)));
        assertEquals("unknown_key", upper.kind());
        assertTrue(upper.getMessage().startsWith("signed by unknown key " + id.toUpperCase() + ": "));
        assertEquals("malformed_signature", assertThrows(VerifyException.class,
                () -> keys.verify("kadence.triggers.app", 0, value, headers(id, "not base64!"))).kind());
        assertRefused(keys, value, headers(id, "AAAA"), "malformed_signature",
                "malformed signature header kadence.signature: 3 bytes instead of 64");
        VerifyException moved = assertThrows(VerifyException.class,
                () -> keys.verify("kadence.triggers.other", 0, value, headers(id, signature)));
        assertEquals("bad_signature", moved.kind());
        assertTrue(moved.getMessage().startsWith("bad signature by key " + id + ": "));
        // A null value is verified as zero bytes.
        assertEquals("bad_signature", assertThrows(VerifyException.class,
                () -> keys.verify("kadence.triggers.app", 0, null, headers(id, signature))).kind());
    }

    private static RecordHeaders headers(String keyId, String signature) {
        RecordHeaders headers = new RecordHeaders();
        if (keyId != null) {
            headers.add(TrustedKeys.SIGNATURE_KEY, keyId.getBytes(StandardCharsets.UTF_8));
        }
        if (signature != null) {
            headers.add(TrustedKeys.SIGNATURE, signature.getBytes(StandardCharsets.UTF_8));
        }
        return headers;
    }

    private static void assertRefused(TrustedKeys keys, byte[] value, RecordHeaders headers, String kind, String message) {
        VerifyException error = assertThrows(VerifyException.class,
                () -> keys.verify("kadence.triggers.app", 0, value, headers));
        assertEquals(kind, error.kind());
        assertEquals(message, error.getMessage());
    }

    @Test
    void aTrustedKeyThatIsNotOneIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> TrustedKeys.parse(List.of("not base64!")));
        assertThrows(IllegalArgumentException.class, () -> TrustedKeys.parse(List.of("c2VjcmV0")));
    }
}
