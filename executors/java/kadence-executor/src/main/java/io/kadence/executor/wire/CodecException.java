package io.kadence.executor.wire;

/** A record that cannot be encoded or decoded; the message is fit for a dead-letter reason. */
public final class CodecException extends Exception {
    public CodecException(String message) {
        super(message);
    }
}
