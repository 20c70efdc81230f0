package io.kadence.executor.wire;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.Base64;
import java.util.regex.Pattern;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * An app's executor key (PROTOCOL.md section 3): signs every record the executor writes
 * (results, shadow results, logs, beats, dead letters) with HMAC-SHA256 over
 * {@code kadence-executor-v1\n{topic}\n{value}}, so only the app's executors complete its runs
 * or steer routing through beats.
 *
 * <p>The key is the text {@code {key id}.{secret}} that {@code kadence executor-key create --app
 * APP} shows once: 16 lowercase hex digits, a dot, and the unpadded base64url of 32 bytes. It is
 * stripped of surrounding whitespace (a key read from a file ends with a newline) and otherwise
 * taken only exactly as the scheduler writes it (a non-canonical last character is refused).
 * Messages about a refused key never show the secret. {@link #toString()} shows the key id only.
 */
public final class ExecutorKey {
    public static final String KEY_HEADER = "kadence.executor.key";
    public static final String SIGNATURE_HEADER = "kadence.executor.signature";
    private static final Pattern KEY_ID = Pattern.compile("[0-9a-f]{16}");
    private static final Pattern SECRET_CHARS = Pattern.compile("[A-Za-z0-9_-]*");
    private static final byte[] DOMAIN = "kadence-executor-v1\n".getBytes(StandardCharsets.UTF_8);
    private static final int SECRET_LENGTH = 43;

    private final String keyId;
    private final SecretKeySpec secret;

    private ExecutorKey(String keyId, byte[] secret) {
        this.keyId = keyId;
        this.secret = new SecretKeySpec(secret, "HmacSHA256");
    }

    /** Parses {@code {key id}.{secret}}; an IllegalArgumentException says what is wrong. */
    public static ExecutorKey parse(String text) {
        String stripped = text.strip();
        int dot = stripped.indexOf('.');
        if (dot < 0) {
            throw bad("it has no dot");
        }
        String keyId = stripped.substring(0, dot);
        String secret = stripped.substring(dot + 1);
        if (keyId.length() != 16) {
            throw bad("its key id (before the dot) is " + keyId.length() + " characters, not 16");
        }
        if (!KEY_ID.matcher(keyId).matches()) {
            throw bad("its key id (before the dot) is not all lowercase hex digits (0-9 a-f)");
        }
        String about = "the secret of key " + keyId + " ";
        if (!SECRET_CHARS.matcher(secret).matches()) {
            throw bad(about + "has characters outside unpadded base64url (A-Z a-z 0-9 - _)");
        }
        byte[] raw;
        try {
            raw = Base64.getUrlDecoder().decode(secret);
        } catch (IllegalArgumentException error) {
            throw bad(about + "is " + secret.length() + " characters, not " + SECRET_LENGTH);
        }
        if (raw.length != 32) {
            throw bad(about + "decodes to " + raw.length + " bytes instead of 32 (" + SECRET_LENGTH + " characters)");
        }
        if (!Base64.getUrlEncoder().withoutPadding().encodeToString(raw).equals(secret)) {
            throw bad(about + "is not as the scheduler writes it: its last character is not canonical");
        }
        return new ExecutorKey(keyId, raw);
    }

    private static IllegalArgumentException bad(String reason) {
        return new IllegalArgumentException("executor key is not {key id}.{secret} as "
                + "`kadence executor-key create --app APP` shows it: " + reason);
    }

    public String keyId() {
        return keyId;
    }

    /** The {@code kadence.executor.signature} value (base64, padded) of {@code value} (null:
     * empty) written to {@code topic}. */
    public String sign(String topic, byte[] value) {
        byte[] topicBytes = topic.getBytes(StandardCharsets.UTF_8);
        byte[] body = value == null ? new byte[0] : value;
        byte[] message = ByteBuffer.allocate(DOMAIN.length + topicBytes.length + 1 + body.length)
                .put(DOMAIN).put(topicBytes).put((byte) '\n').put(body).array();
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(secret);
            return Base64.getEncoder().encodeToString(mac.doFinal(message));
        } catch (GeneralSecurityException impossible) {
            throw new IllegalStateException("every JDK has HmacSHA256", impossible);
        }
    }

    @Override
    public String toString() {
        return "ExecutorKey(" + keyId + ")";
    }
}
