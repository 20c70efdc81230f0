package io.kadence.executor;

import java.io.PrintWriter;
import java.io.StringWriter;

/**
 * The static equivalents of XXL-JOB's {@code XxlJobHelper}, for porting handlers mechanically:
 * replace {@code XxlJobHelper} by {@code KadenceJobHelper}. Each call acts on the run of the
 * calling thread (bound while its handler runs); outside a run they return null, -1 or false,
 * as XXL-JOB's do. Prefer the {@link JobContext} in new code.
 */
public final class KadenceJobHelper {
    private static final ThreadLocal<JobContext> CURRENT = new ThreadLocal<>();

    private KadenceJobHelper() {}

    static void bind(JobContext context) {
        CURRENT.set(context);
    }

    static void unbind() {
        CURRENT.remove();
    }

    /** The context of the calling thread's run, or null. */
    public static JobContext current() {
        return CURRENT.get();
    }

    public static String getJobParam() {
        JobContext context = CURRENT.get();
        return context == null ? null : context.params();
    }

    public static long getJobId() {
        JobContext context = CURRENT.get();
        return context == null ? -1 : context.jobId();
    }

    /** The scheduler's job-log row id of the run ({@code XxlJobHelper.getJobLogId}). */
    public static long getJobLogId() {
        JobContext context = CURRENT.get();
        return context == null ? -1 : context.logId();
    }

    public static int getShardIndex() {
        JobContext context = CURRENT.get();
        return context == null ? -1 : context.shardIndex();
    }

    public static int getShardTotal() {
        JobContext context = CURRENT.get();
        return context == null ? -1 : context.shardTotal();
    }

    /** Appends a line to the run's log; false outside a run. */
    public static boolean log(String line) {
        JobContext context = CURRENT.get();
        if (context == null) {
            return false;
        }
        context.log(line);
        return true;
    }

    /** Appends a formatted line ({@code {}} marks, SLF4J style); false outside a run. */
    public static boolean log(String pattern, Object... args) {
        return log(format(pattern, args));
    }

    /** Appends a throwable's stack trace to the run's log; false outside a run. */
    public static boolean log(Throwable error) {
        return log(stackTrace(error));
    }

    public static boolean handleSuccess() {
        return handleSuccess(null);
    }

    /** The run succeeds with {@code note} as its message. */
    public static boolean handleSuccess(String note) {
        JobContext context = CURRENT.get();
        return context != null && context.handleSuccess(note);
    }

    public static boolean handleFail() {
        return handleFail(null);
    }

    /** The run fails (500) with {@code message}. */
    public static boolean handleFail(String message) {
        JobContext context = CURRENT.get();
        return context != null && context.handleFail(message);
    }

    public static boolean handleTimeout() {
        return handleTimeout(null);
    }

    /** The run ends as timed out (502) with {@code message}. */
    public static boolean handleTimeout(String message) {
        JobContext context = CURRENT.get();
        return context != null && context.handleTimeout(message);
    }

    /** {@code pattern} with each {@code {}} replaced by the next argument; a Throwable left
     * over as the last argument adds its stack trace on the following lines. */
    static String format(String pattern, Object... args) {
        StringBuilder out = new StringBuilder();
        int used = 0;
        int at = 0;
        while (true) {
            int mark = pattern.indexOf("{}", at);
            if (mark < 0 || used >= args.length) {
                out.append(pattern, at, pattern.length());
                break;
            }
            out.append(pattern, at, mark).append(args[used++]);
            at = mark + 2;
        }
        if (used < args.length && args[args.length - 1] instanceof Throwable error) {
            out.append('\n').append(stackTrace(error));
        }
        return out.toString();
    }

    private static String stackTrace(Throwable error) {
        StringWriter text = new StringWriter();
        error.printStackTrace(new PrintWriter(text));
        return text.toString();
    }
}
