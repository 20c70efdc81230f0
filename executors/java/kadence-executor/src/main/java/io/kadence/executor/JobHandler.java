package io.kadence.executor;

/**
 * A handler registered without annotations: {@code builder.handler("report", ctx -> ...)}. It
 * runs on a thread of the executor's own, never the consumer's; returning ends the run with
 * success, throwing fails it (a {@link JobFailedException} with its message and retry hint,
 * anything else with the exception's {@code toString()}, its class and message: a Java
 * handler's unexpected exception is its crash, and the class says more to an operator than a
 * message that may be null). A success note, or a failure without an exception,
 * goes through {@link JobContext#handleSuccess(String)} and its siblings, as XXL-JOB's
 * {@code XxlJobHelper} does.
 */
@FunctionalInterface
public interface JobHandler {
    void run(JobContext context) throws Exception;
}
