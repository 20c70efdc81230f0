package io.kadence.xxljob;

import com.xxl.job.core.context.XxlJobHelper;
import com.xxl.job.core.handler.annotation.XxlJob;

/**
 * The sample's BEAN-mode handlers, one {@link XxlJob} method each, registered through {@code
 * XxlJobSimpleExecutor.setXxlJobBeanList}. Their log lines and results are fixed so that tests
 * can assert them exactly:
 *
 * <ul>
 *   <li>{@code ok}: logs {@code ok: params={params}}, succeeds with {@code ok {params}};
 *   <li>{@code fail}: logs a line, fails with {@code failed on purpose: {params}};
 *   <li>{@code sleep}: sleeps {params} ms (default 60000) in steps of at most 200 ms, logging
 *       {@code slept {n} ms} at every full second and at the end; an interrupt (XXL-JOB's kill
 *       or timeout) ends it with the {@link InterruptedException};
 *   <li>{@code lines}: logs {@code line {i} of {N}} for i from 1 to N (default 5);
 *   <li>{@code shard}: logs and succeeds with {@code shard {index} of {total}};
 *   <li>{@code echo}: succeeds with its params verbatim.
 * </ul>
 *
 * GLUE jobs need no handler here: xxl-job-core runs them itself.
 */
public final class SampleHandlers {
    /** The longest single sleep of {@code sleep}, so that it notices an interrupt quickly. */
    private static final long SLEEP_STEP_MS = 200;

    /** The default params of {@code sleep}: long enough for any test to kill or time it out. */
    private static final long DEFAULT_SLEEP_MS = 60_000;

    /** The default params of {@code lines}. */
    private static final long DEFAULT_LINES = 5;

    /** Creates the handlers; they keep no state. */
    public SampleHandlers() {}

    /** Logs its params and succeeds with them. */
    @XxlJob("ok")
    public void ok() {
        String params = XxlJobHelper.getJobParam();
        XxlJobHelper.log("ok: params={}", params);
        XxlJobHelper.handleSuccess("ok " + params);
    }

    /** Logs a line and fails with its params in the message. */
    @XxlJob("fail")
    public void fail() {
        String params = XxlJobHelper.getJobParam();
        XxlJobHelper.log("failing on purpose: params={}", params);
        XxlJobHelper.handleFail("failed on purpose: " + params);
    }

    /**
     * Sleeps the given milliseconds and succeeds.
     *
     * @throws InterruptedException when the job thread is interrupted: XXL-JOB's kill and its
     *     timeout do that, and the exception must reach xxl-job-core so that it reports the run
     *     as killed or timed out, as it would for any handler
     */
    @XxlJob("sleep")
    public void sleep() throws InterruptedException {
        Long total = count("sleep", DEFAULT_SLEEP_MS);
        if (total == null) {
            return;
        }
        long slept = 0;
        while (slept < total) {
            long step = Math.min(SLEEP_STEP_MS, total - slept);
            Thread.sleep(step);
            slept += step;
            // Counted in requested steps rather than measured, so the lines are the same on
            // every run (1000, 2000, ... and the total).
            if (slept % 1000 == 0 || slept == total) {
                XxlJobHelper.log("slept {} ms", slept);
            }
        }
        XxlJobHelper.handleSuccess("slept " + total + " ms");
    }

    /** Logs N numbered lines and succeeds. */
    @XxlJob("lines")
    public void lines() {
        Long n = count("lines", DEFAULT_LINES);
        if (n == null) {
            return;
        }
        for (long i = 1; i <= n; i++) {
            XxlJobHelper.log("line {} of {}", i, n);
        }
        XxlJobHelper.handleSuccess();
    }

    /** Logs and succeeds with its shard of a broadcast. */
    @XxlJob("shard")
    public void shard() {
        String shard = "shard " + XxlJobHelper.getShardIndex() + " of " + XxlJobHelper.getShardTotal();
        XxlJobHelper.log(shard);
        XxlJobHelper.handleSuccess(shard);
    }

    /** Succeeds with its params, verbatim, as the message. */
    @XxlJob("echo")
    public void echo() {
        XxlJobHelper.handleSuccess(XxlJobHelper.getJobParam());
    }

    /**
     * The job's params as a count of at least zero, or {@code fallback} when they are blank. On
     * anything else the run fails with a message naming the handler, and this returns {@code
     * null}.
     */
    private static Long count(String handler, long fallback) {
        String params = XxlJobHelper.getJobParam();
        if (params == null || params.isBlank()) {
            return fallback;
        }
        try {
            long value = Long.parseLong(params.strip());
            if (value >= 0) {
                return value;
            }
        } catch (NumberFormatException notANumber) {
            // failed below, like a negative count
        }
        XxlJobHelper.handleFail(handler + ": params must be a whole number of at least 0, not '" + params + "'");
        return null;
    }
}
