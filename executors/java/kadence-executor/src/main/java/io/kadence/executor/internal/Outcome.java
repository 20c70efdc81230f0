package io.kadence.executor.internal;

/**
 * How a run ended: the result it answers with, or none ({@link #NO_RESULT}: handed back at a
 * rebalance, its partition lost, or cancelled when a graceful stop gave up draining; the trigger
 * stays uncommitted and its next owner runs it).
 */
public record Outcome(boolean answers, int code, String message, Long retryAfterMs) {
    public static final int SUCCESS = 200;
    public static final int FAILURE = 500;
    public static final int TIMEOUT = 502;
    public static final Outcome NO_RESULT = new Outcome(false, 0, null, null);

    public static Outcome success(String note) {
        return new Outcome(true, SUCCESS, note, null);
    }

    public static Outcome failure(String message) {
        return new Outcome(true, FAILURE, message, null);
    }

    public static Outcome failure(String message, Long retryAfterMs) {
        return new Outcome(true, FAILURE, message, retryAfterMs);
    }

    public static Outcome timeout(String message) {
        return new Outcome(true, TIMEOUT, message, null);
    }
}
