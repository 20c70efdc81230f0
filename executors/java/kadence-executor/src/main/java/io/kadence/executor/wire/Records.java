package io.kadence.executor.wire;

import java.util.List;

/**
 * The records of {@code schemas/avro} as Java values (PROTOCOL.md section 2). The codec maps
 * them to and from Avro generic records; these types are what the rest of the SDK handles.
 */
public final class Records {
    private Records() {}

    /** What an executor does with a trigger while the same job runs or waits here. */
    public enum BlockStrategy { SERIAL_EXECUTION, DISCARD_LATER, COVER_EARLY, CONCURRENT }

    /** Why a run was triggered. */
    public enum TriggerType { CRON, FIX_RATE, FIX_DELAY, MANUAL, API, RETRY, PARENT, MISFIRE, REPLAY, BACKFILL }

    /** How the handler is provided: a registered handler, or a script in the trigger. */
    public enum GlueType { BEAN, GLUE_SHELL, GLUE_PYTHON, GLUE_NODEJS, GLUE_PHP, GLUE_POWERSHELL }

    /** A control command. */
    public enum ControlCommand { KILL }

    /** An executor's lifecycle state in its beats. */
    public enum ExecutorState { RUNNING, STOPPING }

    /** One run of a job ({@code TriggerRecord}). Nullable fields are boxed. */
    public record TriggerRecord(
            String triggerId,
            long logId,
            long jobId,
            String app,
            String handler,
            String params,
            int shardIndex,
            int shardTotal,
            BlockStrategy blockStrategy,
            long timeoutMs,
            TriggerType triggerType,
            long scheduledAtMs,
            long emittedAtMs,
            int attempt,
            GlueType glueType,
            String glueSource,
            Long glueUpdatedAtMs,
            String replayOf,
            Long expiresAtMs) {}

    /** The outcome of one run ({@code ResultRecord}). */
    public record ResultRecord(
            String triggerId,
            long logId,
            long jobId,
            String app,
            String executorId,
            int code,
            String message,
            long startedAtMs,
            long finishedAtMs,
            int attempt,
            Long retryAfterMs) {}

    /** Consecutive log lines of one run ({@code LogRecord}); {@code runStartedAtMs} is the run's
     * start (its result's {@code started_at_ms}), null in records written before v2. */
    public record LogRecord(
            String triggerId,
            long logId,
            long jobId,
            String executorId,
            long firstLine,
            List<String> lines,
            long emittedAtMs,
            Long runStartedAtMs) {}

    /** An executor's heartbeat ({@code ExecutorBeat}); {@code features} are the protocol features
     * it supports, ascending (such as {@link TrustedKeys#ROUND_SIGNATURES_FEATURE}), empty in
     * beats written before v2. */
    public record ExecutorBeat(
            String executorId,
            String app,
            String host,
            String version,
            List<String> handlers,
            List<Integer> ownedPartitions,
            List<Long> runningJobs,
            List<Long> queuedJobs,
            ExecutorState state,
            long sentAtMs,
            List<String> features) {}

    /** A command from the scheduler ({@code ControlRecord}). */
    public record ControlRecord(
            ControlCommand command,
            String app,
            Long jobId,
            String triggerId,
            String reason,
            long requestedAtMs) {}
}
