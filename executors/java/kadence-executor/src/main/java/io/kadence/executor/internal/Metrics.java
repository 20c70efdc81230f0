package io.kadence.executor.internal;

import com.sun.net.httpserver.HttpServer;
import io.kadence.executor.wire.Records.GlueType;
import io.kadence.executor.wire.Records.TriggerRecord;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Tags;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Every metric the executor exports, under exactly the Rust SDK's names, labels and meanings
 * ({@code executor-sdk/src/metrics.rs}), so the shipped dashboards and alert rules
 * ({@code dashboards/}) work unchanged. Micrometer names map to Prometheus's: a counter
 * {@code kadence.executor.results} is {@code kadence_executor_results_total}, a distribution
 * summary with base unit seconds {@code kadence_executor_run_duration_seconds} (with the same
 * buckets as {@code _bucket} series).
 *
 * Micrometer also exports a {@code _max} gauge beside each distribution summary; the Rust
 * SDK has none, and no dashboard reads it.
 *
 * <p>Every series carries {@code app}, and on a shadow executor {@code shadow="true"} (common
 * tags). Label sets are bounded: {@code handler} (registered names, {@code script} for every
 * GLUE_* job), {@code outcome} (a fixed set, {@link #outcomeOf}), {@code reason} (dead-letter
 * kinds), {@code change}, {@code topic}, {@code partition}. Job ids are never labels.
 */
public final class Metrics {
    private static final double[] WAIT_BUCKETS =
            {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0};
    private static final double[] DURATION_BUCKETS =
            {0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0};
    /** The kinds of reason a trigger is dead-lettered (or skipped) for, and a control record ignored. */
    public static final String[] REASONS =
            {"unsigned", "unknown_key", "bad_signature", "bad_proof", "malformed_signature", "no_value", "undecodable"};
    /** Weight of the newest run in a partition's mean run duration (about the last ten runs). */
    private static final double RUN_WEIGHT = 0.2;

    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final AtomicLong held = new AtomicLong();
    private final AtomicLong queuedJobs = new AtomicLong();
    private final AtomicLong runningJobs = new AtomicLong();
    private final Map<Integer, AtomicLong> lag = new ConcurrentHashMap<>();
    private final Map<Integer, AtomicReference<Double>> expectedWait = new ConcurrentHashMap<>();
    private final Map<Integer, Double> meanRunMs = new ConcurrentHashMap<>();
    private HttpServer server;

    public Metrics(String app, boolean shadow) {
        Tags common = Tags.of("app", app);
        if (shadow) {
            common = common.and("shadow", "true");
        }
        registry.config().commonTags(common);
        Gauge.builder("kadence.executor.held.triggers", held, AtomicLong::get)
                .description("Triggers that arrived early, held until their scheduled time.").register(registry);
        Gauge.builder("kadence.executor.queued.jobs", queuedJobs, AtomicLong::get)
                .description("Jobs with triggers queued or held here.").register(registry);
        Gauge.builder("kadence.executor.running.jobs", runningJobs, AtomicLong::get)
                .description("Jobs with a run in progress here.").register(registry);
        redeliveries();
        handBacks(0);
        logRecordsDropped();
        for (String topic : new String[] {"results", "dlq"}) {
            publishRetries(topic);
        }
        for (String reason : REASONS) {
            deadLetters(reason);
            shadowSkipped(reason);
            controlRefused(reason);
        }
        rebalances("assigned", 0);
        rebalances("revoked", 0);
    }

    public PrometheusMeterRegistry registry() {
        return registry;
    }

    /** A run of {@code trigger} started at {@code startedAtMs}. */
    public void started(TriggerRecord trigger, long startedAtMs) {
        DistributionSummary.builder("kadence.executor.trigger.to.start").baseUnit("seconds")
                .description("Time from a trigger's scheduled time to its handler's start.")
                .serviceLevelObjectives(WAIT_BUCKETS).tag("handler", handlerLabel(trigger)).register(registry)
                .record(seconds(startedAtMs - trigger.scheduledAtMs()));
    }

    /** A run of {@code trigger} on {@code partition} took {@code millis}. */
    public void ran(TriggerRecord trigger, int partition, long millis) {
        DistributionSummary.builder("kadence.executor.run.duration").baseUnit("seconds")
                .description("How long runs took, from the handler's start to its end.")
                .serviceLevelObjectives(DURATION_BUCKETS).tag("handler", handlerLabel(trigger)).register(registry)
                .record(seconds(millis));
        meanRunMs.merge(partition, (double) millis, (mean, now) -> mean + RUN_WEIGHT * (now - mean));
    }

    /** A result published for {@code trigger}. */
    public void answered(TriggerRecord trigger, int code, String message) {
        Counter.builder("kadence.executor.results")
                .description("Triggers answered with a result, by outcome: success, failure, timeout, killed, "
                        + "covered (COVER_EARLY), discarded (DISCARD_LATER), unknown_handler, scripts_off.")
                .tags("handler", handlerLabel(trigger), "outcome", outcomeOf(code, message))
                .register(registry).increment();
    }

    public Counter redeliveries() {
        return Counter.builder("kadence.executor.redeliveries")
                .description("Redelivered triggers recognised by their id and not run again.").register(registry);
    }

    public void handBacks(int count) {
        Counter.builder("kadence.executor.hand.backs")
                .description("Runs of revoked partitions handed back unfinished to the new owner.")
                .register(registry).increment(count);
    }

    /** Brings {@code kadence_executor_publish_retries_total} up to the client's counts. */
    public void publishRetries(Map<String, Double> totals) {
        totals.forEach((topic, total) -> {
            Counter counter = publishRetries(topic);
            double missing = total - counter.count();
            if (missing > 0) {
                counter.increment(missing);
            }
        });
    }

    public Counter publishRetries(String topic) {
        return Counter.builder("kadence.executor.publish.retries")
                .description("Publishes retried after a retriable broker error.").tag("topic", topic).register(registry);
    }

    public Counter logRecordsDropped() {
        return Counter.builder("kadence.executor.log.records.dropped")
                .description("Log records (up to 500 lines of a run) the broker did not acknowledge within the "
                        + "producer's delivery timeout: dropped, so that the run's result is not held back.")
                .register(registry);
    }

    public Counter deadLetters(String reason) {
        return Counter.builder("kadence.executor.dead.letters")
                .description("Trigger records sent to the dead-letter queue: unverified (signature), undecodable, "
                        + "or expired (received past their validity).")
                .tag("reason", reason).register(registry);
    }

    public Counter shadowSkipped(String reason) {
        return Counter.builder("kadence.executor.shadow.skipped")
                .description("Trigger records a shadow executor could not take (unverified, undecodable or "
                        + "expired) and skipped without a dead letter: the production group dead-letters them.")
                .tag("reason", reason).register(registry);
    }

    public Counter controlRefused(String reason) {
        return Counter.builder("kadence.executor.control.refused")
                .description("Control records (KILL) read and ignored, never applied: failing signature "
                        + "verification (when scheduler keys are trusted), empty or undecodable.")
                .tag("reason", reason).register(registry);
    }

    public void rebalances(String change, int partitions) {
        Counter.builder("kadence.executor.rebalances")
                .description("Partition assignments and revocations by the consumer group.")
                .tag("change", change).register(registry).increment(partitions);
    }

    /** The dispatch's counts now. */
    public void activity(int heldTriggers, int queued, int running) {
        held.set(heldTriggers);
        queuedJobs.set(queued);
        runningJobs.set(running);
    }

    /** The lag of an owned {@code partition}: records not yet done (high watermark minus the
     * committed offset). */
    public void lag(int partition, long records) {
        lag.computeIfAbsent(partition, p -> {
            AtomicLong value = new AtomicLong();
            Gauge.builder("kadence.executor.consumer.lag", value, AtomicLong::get)
                    .description("Trigger records of an owned partition not yet done: high watermark minus the "
                            + "committed offset.")
                    .tag("partition", Integer.toString(p)).register(registry);
            return value;
        }).set(records);
    }

    /**
     * Sets {@code partition}'s expected wait: the triggers not started ahead of its newest
     * ({@code lag} minus {@code held} minus {@code running}) times the mean run duration, over
     * the runs going at once. Nothing while no run of it has been timed.
     */
    public void expectedWait(int partition, long lagRecords, int heldTriggers, int running) {
        Double mean = meanRunMs.get(partition);
        if (mean == null) {
            return;
        }
        double waiting = Math.max(0, lagRecords - heldTriggers - running);
        double seconds = waiting * mean / Math.max(1, running) / 1000.0;
        expectedWait.computeIfAbsent(partition, p -> {
            AtomicReference<Double> value = new AtomicReference<>(0.0);
            Gauge.builder("kadence.executor.expected.wait", value, AtomicReference::get).baseUnit("seconds")
                    .description("How long the newest trigger of a partition can expect to wait before it starts: "
                            + "triggers not started ahead of it times the recent mean run duration, over the runs "
                            + "going at once.")
                    .tag("partition", Integer.toString(p)).register(registry);
            return value;
        }).set(seconds);
    }

    /** The handler label of {@code trigger}: its handler, or {@code script} for a script job. */
    static String handlerLabel(TriggerRecord trigger) {
        return trigger.glueType() == GlueType.BEAN ? trigger.handler() : "script";
    }

    /** The outcome label of a result: the protocol's fixed messages tell refusals apart. */
    public static String outcomeOf(int code, String message) {
        String text = message == null ? "" : message;
        if (code == Outcome.SUCCESS) {
            return "success";
        }
        if (code == Outcome.TIMEOUT) {
            return "timeout";
        }
        if (text.startsWith("killed: ")) {
            return "killed";
        }
        if (text.startsWith("covered by trigger ")) {
            return "covered";
        }
        if (text.startsWith("discarded: ")) {
            return "discarded";
        }
        if (text.contains(" has no handler named ")) {
            return "unknown_handler";
        }
        if (text.contains(" does not run scripts ")) {
            return "scripts_off";
        }
        return "failure";
    }

    private static double seconds(long millis) {
        return Math.max(0, millis) / 1000.0;
    }

    /** Serves {@code GET /metrics} at {@code address}; binding fails the start if it is taken. */
    public InetSocketAddress serve(InetSocketAddress address) throws IOException {
        server = HttpServer.create(address, 16);
        server.createContext("/metrics", exchange -> {
            try (exchange) {
                if (!exchange.getRequestMethod().equals("GET") || !exchange.getRequestURI().getPath().equals("/metrics")) {
                    exchange.sendResponseHeaders(404, -1);
                    return;
                }
                byte[] body = registry.scrape().getBytes(StandardCharsets.UTF_8);
                exchange.getResponseHeaders().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
                exchange.sendResponseHeaders(200, body.length);
                try (OutputStream out = exchange.getResponseBody()) {
                    out.write(body);
                }
            }
        });
        server.start();
        return server.getAddress();
    }

    public void close() {
        if (server != null) {
            server.stop(0);
        }
    }
}
