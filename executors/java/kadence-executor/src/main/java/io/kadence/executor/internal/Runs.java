package io.kadence.executor.internal;

import io.kadence.executor.wire.Records.LogRecord;
import io.kadence.executor.wire.Records.ResultRecord;
import io.kadence.executor.wire.Records.TriggerRecord;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The answers to triggers (PROTOCOL.md sections 4, 6 and 8): runs, refusals and dead letters,
 * each carried out on threads of the executor's own, never the consumer's.
 *
 * <p>A run's handler starts through the {@link RunLauncher}; its timeout and its log shipping
 * (every 250 ms) are timer tasks; when its {@link Run#outcome()} completes, an answering thread
 * ships its remaining lines (each log record acknowledged), then publishes exactly one result
 * and marks the offset done once the broker acknowledged it. A run ended without a result
 * (hand-back, lost partition, drain deadline) publishes nothing and its offset stays.
 *
 * <p>Every answer under way is <em>live</em> until its record is acknowledged: a revocation
 * waits for the live answers of its partitions. Each answer reports to the consumer's thread
 * through {@code done} ({@link Done}), which updates the dispatch and the in-flight count.
 */
public final class Runs {
    private static final Logger LOG = LoggerFactory.getLogger(Runs.class);
    private static final long FLUSH_INTERVAL_MS = 250;

    /** An answer finished: {@code run} (null for a refusal or a dead letter) left its lane;
     * {@code forget}: a trigger id to forget (its answer could not be published). */
    public record Done(Run run, String forget) {}

    private final Settings settings;
    private final RunLauncher launcher;
    private final Publisher publisher;
    private final OffsetTracker tracker;
    private final Metrics metrics;
    private final BlockingQueue<Object> done;
    private final AtomicBoolean hardStop = new AtomicBoolean();
    private final Map<Object, Integer> live = new ConcurrentHashMap<>();
    private final ExecutorService answers;
    private final ScheduledExecutorService timer;

    public Runs(Settings settings, RunLauncher launcher, Publisher publisher, OffsetTracker tracker,
            Metrics metrics, BlockingQueue<Object> done) {
        this.settings = settings;
        this.launcher = launcher;
        this.publisher = publisher;
        this.tracker = tracker;
        this.metrics = metrics;
        this.done = done;
        AtomicInteger count = new AtomicInteger();
        this.answers = Executors.newCachedThreadPool(task -> daemon(task, "kadence-answer-" + count.incrementAndGet()));
        this.timer = Executors.newSingleThreadScheduledExecutor(task -> daemon(task, "kadence-timer"));
    }

    private static Thread daemon(Runnable task, String name) {
        Thread thread = new Thread(task, name);
        thread.setDaemon(true);
        return thread;
    }

    /** Starts {@code run}'s handler. */
    public void start(Run run) {
        live.put(run, run.partition());
        TriggerRecord trigger = run.pending().trigger();
        JobLog log = new JobLog(settings.maxLogLines());
        ReentrantLock shipping = new ReentrantLock();
        launcher.launch(run, log, settings.shadow());
        metrics.started(trigger, run.startedAtMs());
        List<ScheduledFuture<?>> timers = new ArrayList<>(2);
        if (trigger.timeoutMs() > 0) {
            String message = "run timed out after " + humanize(trigger.timeoutMs()) + " and was cancelled";
            timers.add(timer.schedule(() -> run.stop(Outcome.timeout(message)), trigger.timeoutMs(), TimeUnit.MILLISECONDS));
        }
        timers.add(timer.scheduleWithFixedDelay(() -> {
            if (log.hasUnshipped()) {
                answers.execute(() -> ship(run, log, shipping, false));
            }
        }, FLUSH_INTERVAL_MS, FLUSH_INTERVAL_MS, TimeUnit.MILLISECONDS));
        run.outcome().whenCompleteAsync((outcome, error) -> finish(run, log, shipping, outcome, timers), answers);
    }

    private void finish(Run run, JobLog log, ReentrantLock shipping, Outcome outcome, List<ScheduledFuture<?>> timers) {
        timers.forEach(task -> task.cancel(false));
        TriggerRecord trigger = run.pending().trigger();
        long finishedAt = System.currentTimeMillis();
        metrics.ran(trigger, run.partition(), finishedAt - run.startedAtMs());
        String forget = null;
        try {
            if (!outcome.answers()) {
                return; // handed back, lost or given up: the next owner runs it
            }
            ship(run, log, shipping, true);
            boolean published = publish(run.pending(), outcome, run.startedAtMs(), finishedAt);
            if (!published) {
                forget = run.triggerId();
            }
        } finally {
            live.remove(run);
            done.add(new Done(run, forget));
        }
    }

    /** Ships the run's unshipped lines: each log record acknowledged before the next (and all
     * before the result, when {@code finishing}); a record that cannot be delivered is dropped. */
    private void ship(Run run, JobLog log, ReentrantLock shipping, boolean finishing) {
        if (finishing) {
            shipping.lock();
        } else if (!shipping.tryLock()) {
            return; // a shipment is under way; the next tick takes these lines
        }
        try {
            TriggerRecord trigger = run.pending().trigger();
            if (finishing && log.undelivered() > 0) {
                log.log("[kadence] " + log.undelivered() + " log lines of this run could not be delivered to "
                        + "the broker and were dropped");
            }
            for (JobLog.Chunk chunk : log.take(finishing)) {
                if (settings.shadow()) {
                    // Keyed by trigger id, they would mix into the production run's log.
                    long number = chunk.firstLine();
                    for (String line : chunk.lines()) {
                        LOG.debug("shadow run {} log line {}: {}", trigger.triggerId(), number++, line);
                    }
                    continue;
                }
                LogRecord record = new LogRecord(trigger.triggerId(), trigger.logId(), trigger.jobId(),
                        settings.executorId(), chunk.firstLine(), chunk.lines(), System.currentTimeMillis(),
                        run.startedAtMs());
                if (!publisher.log(record, hardStop::get)) {
                    metrics.logRecordsDropped().increment();
                    log.undeliverable(chunk.lines().size());
                    LOG.warn("log lines {}.. of run {} could not be delivered; dropped", chunk.firstLine(),
                            trigger.triggerId());
                }
            }
        } finally {
            shipping.unlock();
        }
    }

    /** Answers {@code pending} with 500 {@code message} without running it. */
    public void refuse(Pending pending, String message) {
        Object token = new Object();
        live.put(token, pending.partition());
        answers.execute(() -> {
            String forget = null;
            try {
                long at = System.currentTimeMillis();
                if (!publish(pending, Outcome.failure(message), at, at)) {
                    forget = pending.trigger().triggerId();
                }
            } finally {
                live.remove(token);
                done.add(new Done(null, forget));
            }
        });
    }

    /** Publishes the result; marks the offset done once acknowledged. */
    private boolean publish(Pending pending, Outcome outcome, long startedAt, long finishedAt) {
        TriggerRecord trigger = pending.trigger();
        ResultRecord result = new ResultRecord(trigger.triggerId(), trigger.logId(), trigger.jobId(), trigger.app(),
                settings.executorId(), outcome.code(), outcome.message(), startedAt, finishedAt, trigger.attempt(),
                outcome.retryAfterMs());
        boolean published = publisher.result(result, pending.traceparent(), hardStop::get);
        if (published) {
            tracker.complete(pending.partition(), pending.offset());
            metrics.answered(trigger, outcome.code(), outcome.message());
        }
        return published;
    }

    /** Sends {@code record} to the DLQ with {@code reason}; marks it done once acknowledged. */
    public void deadLetter(ConsumerRecord<byte[], byte[]> record, String reason) {
        Object token = new Object();
        live.put(token, record.partition());
        answers.execute(() -> {
            try {
                if (publisher.deadLetter(record, reason, hardStop::get)) {
                    tracker.complete(record.partition(), record.offset());
                }
            } finally {
                live.remove(token);
                done.add(new Done(null, null));
            }
        });
    }

    /** Runs {@code task} on an answering thread: what may wait for the producer (a beat waits
     * while the client looks up a topic) never holds the consumer's thread. */
    public void background(Runnable task) {
        answers.execute(task);
    }

    /** Whether an answer of one of {@code partitions} is under way. */
    public boolean liveOn(Collection<Integer> partitions) {
        return live.values().stream().anyMatch(partitions::contains);
    }

    /** The runs under way on {@code partitions}. */
    public List<Run> runsOn(Collection<Integer> partitions) {
        List<Run> runs = new ArrayList<>();
        live.forEach((token, partition) -> {
            if (token instanceof Run run && partitions.contains(partition)) {
                runs.add(run);
            }
        });
        return runs;
    }

    /** The drain deadline passed: stop waiting for the broker and end every run without a result. */
    public void giveUp() {
        hardStop.set(true);
        live.keySet().forEach(token -> {
            if (token instanceof Run run) {
                run.abandon();
            }
        });
    }

    public void close() {
        timer.shutdownNow();
        answers.shutdown();
        try {
            answers.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** A timeout as the protocol words it: whole seconds as {@code n s}, else {@code n ms}. */
    public static String humanize(long millis) {
        return millis % 1000 == 0 ? (millis / 1000) + " s" : millis + " ms";
    }
}
