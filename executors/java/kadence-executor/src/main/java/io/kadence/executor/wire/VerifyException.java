package io.kadence.executor.wire;

/**
 * A record refused by signature verification. {@link #kind()} is the short label the metrics
 * count it under ({@code unsigned}, {@code unknown_key}, {@code bad_signature}, {@code bad_proof},
 * {@code malformed_signature}); the message is the Rust SDK's wording.
 */
public final class VerifyException extends Exception {
    private final String kind;

    public VerifyException(String kind, String message) {
        super(message);
        this.kind = kind;
    }

    public String kind() {
        return kind;
    }
}
