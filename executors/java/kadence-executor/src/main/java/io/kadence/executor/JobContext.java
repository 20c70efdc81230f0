package io.kadence.executor;

import io.kadence.executor.internal.JobLog;
import io.kadence.executor.internal.Outcome;
import io.kadence.executor.internal.Run;
import io.kadence.executor.wire.Records.TriggerRecord;

/**
 * What a handler receives for one run: the trigger's parameters and identity, the run's log,
 * its cancellation, and how to set its result without throwing (XXL-JOB's {@code XxlJobHelper}
 * calls, also reachable statically through {@link KadenceJobHelper} on the run's thread).
 *
 * <p>Cancellation (KILL, COVER_EARLY, timeout, hand-back, shutdown) sets {@link #isCancelled()}
 * and interrupts the handler's thread; the executor answers for the run at once and ignores
 * what the handler does afterwards, so a handler should return soon.
 */
public final class JobContext {
    /** The longest success note a result carries, in bytes of UTF-8 (the scheduler's limit). */
    public static final int MAX_NOTE_BYTES = 16 * 1024;

    private final TriggerRecord trigger;
    private final JobLog log;
    private final Run run;
    private final boolean shadow;
    private volatile Outcome verdict;

    JobContext(TriggerRecord trigger, JobLog log, Run run, boolean shadow) {
        this.trigger = trigger;
        this.log = log;
        this.run = run;
        this.shadow = shadow;
    }

    /** The job's parameters (XXL-JOB's executorParam). */
    public String params() {
        return trigger.params();
    }

    /** The shard of a broadcast, 0-based; 0 when not broadcast. */
    public int shardIndex() {
        return trigger.shardIndex();
    }

    /** The number of shards of a broadcast; 1 when not broadcast. */
    public int shardTotal() {
        return trigger.shardTotal();
    }

    public String triggerId() {
        return trigger.triggerId();
    }

    public long jobId() {
        return trigger.jobId();
    }

    /** The scheduler's job-log row id of the run. */
    public long logId() {
        return trigger.logId();
    }

    /** 0 for the first attempt, n for the n-th retry. */
    public int attempt() {
        return trigger.attempt();
    }

    /** Why the run was triggered: {@code CRON}, {@code MANUAL}, {@code RETRY}, … */
    public String triggerType() {
        return trigger.triggerType().name();
    }

    public long scheduledAtMs() {
        return trigger.scheduledAtMs();
    }

    /** True when a shadow executor runs it: the same trigger runs in production, and this
     * result is only compared with that one. Leave side effects out when it is set. */
    public boolean isShadow() {
        return shadow;
    }

    /** Whether the run was stopped from outside; the handler's thread is interrupted too. */
    public boolean isCancelled() {
        return run.isCancelled();
    }

    /** Appends a line (several if it has newlines) to the run's log. */
    public void log(String line) {
        log.log(line);
    }

    /** Appends a formatted line, as {@code XxlJobHelper.log(pattern, args)}: {@code {}} marks
     * are replaced by the arguments in order (SLF4J style); a last Throwable argument adds its
     * stack trace. */
    public void log(String pattern, Object... args) {
        log.log(KadenceJobHelper.format(pattern, args));
    }

    /** Ends the run with success when the handler returns, carrying {@code note} (may be null;
     * at most {@link #MAX_NOTE_BYTES}, a longer one is cut). */
    public boolean handleSuccess(String note) {
        verdict = Outcome.success(boundNote(note));
        return true;
    }

    /** Ends the run with failure (500) and {@code message} when the handler returns. */
    public boolean handleFail(String message) {
        verdict = Outcome.failure(message);
        return true;
    }

    /** Ends the run as timed out (502) with {@code message} when the handler returns. */
    public boolean handleTimeout(String message) {
        verdict = Outcome.timeout(message);
        return true;
    }

    /** The result the handler set through the handle methods, or null. */
    Outcome verdict() {
        return verdict;
    }

    /** {@code note} cut to {@link #MAX_NOTE_BYTES} at a character boundary. */
    static String boundNote(String note) {
        if (note == null || note.length() * 3 <= MAX_NOTE_BYTES) {
            return note;
        }
        int bytes = 0;
        for (int i = 0; i < note.length(); i++) {
            int cp = note.codePointAt(i);
            int size = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
            if (bytes + size > MAX_NOTE_BYTES) {
                return note.substring(0, i);
            }
            bytes += size;
            if (cp >= 0x10000) {
                i++;
            }
        }
        return note;
    }
}
