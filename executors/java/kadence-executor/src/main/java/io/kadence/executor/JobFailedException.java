package io.kadence.executor;

import java.time.Duration;

/**
 * Thrown by a handler to fail its run with this message (result code 500); {@code retryAfter}
 * hints that a retry makes sense after so long (the result's {@code retry_after_ms}).
 */
public class JobFailedException extends Exception {
    private final Duration retryAfter;

    public JobFailedException(String message) {
        this(message, null);
    }

    public JobFailedException(String message, Duration retryAfter) {
        super(message);
        this.retryAfter = retryAfter;
    }

    /** The retry hint, or null. */
    public Duration retryAfter() {
        return retryAfter;
    }
}
