package io.kadence.executor;

/** The builder refuses the settings; the message says what to set. */
public final class ExecutorConfigException extends RuntimeException {
    public ExecutorConfigException(String message) {
        super(message);
    }
}
