package io.kadence.executor.wire;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
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
 */
public final class TrustedKeys {
    public static final String SIGNATURE_KEY = "kadence.signature.key";
    public static final String SIGNATURE = "kadence.signature";
    private static final byte[] DOMAIN = "kadence-trigger-v1\n".getBytes(StandardCharsets.UTF_8);

    private final Map<String, Ed25519.PublicPoint> keys;

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
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(raw);
            return HexFormat.of().formatHex(digest, 0, 8);
        } catch (GeneralSecurityException impossible) {
            throw new IllegalStateException("every JDK has SHA-256", impossible);
        }
    }

    public boolean isEmpty() {
        return keys.isEmpty();
    }

    public List<String> keyIds() {
        return new ArrayList<>(keys.keySet());
    }

    /** Returns the id of the trusted key that signed {@code value} on {@code topic}, or throws. */
    public String verify(String topic, byte[] value, Headers headers) throws VerifyException {
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
        String keyId;
        try {
            keyId = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(signer)).toString();
        } catch (CharacterCodingException error) {
            throw malformed(SIGNATURE_KEY, "not UTF-8 text");
        }
        Ed25519.PublicPoint key = keys.get(keyId);
        if (key == null) {
            throw new VerifyException("unknown_key", "signed by unknown key " + printable(keyId)
                    + ": not one of this executor's trusted keys (forged, or signed by a newer scheduler key: "
                    + "add its public key from `kadence key list`)");
        }
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
            throw new VerifyException("bad_signature", "bad signature by key " + keyId
                    + ": the record was changed after signing, copied from another topic, or forged");
        }
        return keyId;
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
