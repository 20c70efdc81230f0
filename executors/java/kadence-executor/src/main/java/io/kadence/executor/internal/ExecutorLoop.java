package io.kadence.executor.internal;

import io.kadence.executor.wire.Records.ControlRecord;
import io.kadence.executor.wire.Records.ExecutorBeat;
import io.kadence.executor.wire.Records.ExecutorState;
import io.kadence.executor.wire.TrustedKeys;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The consumer loop (PROTOCOL.md sections 1, 4, 7 and 9): consuming, then draining, then done.
 *
 * <p>One thread (the caller of {@link #run}) owns the Kafka consumer, which is not thread-safe,
 * and the bookkeeping: the {@link Dispatch}, redelivery memory and remembered KILLs. It polls
 * once the control reader has caught up, admits each record (verify, decode, validity window,
 * redelivery, remembered KILL, handler), holds it or applies its block strategy, releases held
 * triggers at their millisecond, commits every second and beats every few seconds. Runs,
 * refusals and dead letters are carried out by {@link Runs} on other threads and report back
 * through a queue; the loop never waits for a handler. It pauses fetching while
 * {@code maxInFlight} triggers are received and unanswered (held and queued ones count).
 *
 * <p>The group's callbacks run on this thread, inside {@code poll}: an assignment adds
 * partitions, a revocation hands back exactly the partitions revoked (their answers under way
 * get the hand-back wait, 5 s, then their runs are ended without a result and their ids
 * forgotten; their queued and held triggers never start here; their offsets are committed),
 * and lost partitions are dropped at once with nothing committed. That is what both group
 * protocols need: eager classic rebalances revoke everything, KIP-848's only what moves. The
 * pause is kept per partition by the client, so it is set afresh after every change.
 *
 * <p>A graceful stop ({@link #stop}): no more triggers are taken, a STOPPING beat goes at once,
 * and what was taken goes on within the drain timeout: running runs finish, queued ones start
 * as their lane frees, held ones at their millisecond. Then the loop commits, leaves the group
 * (closing the consumer) and sends a last STOPPING beat that owns nothing. Whatever has not
 * finished at the drain deadline (running, queued or held) gets no result and no commit.
 */
public final class ExecutorLoop {
    private static final Logger LOG = LoggerFactory.getLogger(ExecutorLoop.class);
    private static final Duration LAG_INTERVAL = Duration.ofSeconds(5);
    /** How long a start waits for the trigger topic to appear in the metadata. */
    private static final long TOPIC_PATIENCE_S = 30;
    /**
     * What every beat lists, ascending: {@link Intake} verifies triggers with {@link TrustedKeys},
     * which takes round-signed ones too, so the scheduler may sign this app's triggers by the round.
     */
    private static final List<String> FEATURES = List.of(TrustedKeys.ROUND_SIGNATURES_FEATURE);

    private final Settings settings;
    private final RunLauncher launcher;
    private final Metrics metrics;
    private final String topic;
    private final LinkedBlockingQueue<Object> events = new LinkedBlockingQueue<>();
    private final Dispatch dispatch;
    private final RecentTriggers recent = new RecentTriggers(10_000);
    private final RememberedKills kills;
    private final Intake intake;
    private final OffsetTracker tracker = new OffsetTracker();
    private final ResumePoints resume;
    private final Set<Integer> owned = new TreeSet<>();
    private final List<Consumer<List<Integer>>> partitionListeners = new CopyOnWriteArrayList<>();
    private final CountDownLatch finished = new CountDownLatch(1);
    private volatile boolean stopping;
    private Publisher publisher;
    private KafkaConsumer<byte[], byte[]> consumer;
    private Runs runs;
    private ControlReader control;
    private int inFlight;
    private Boolean paused = false;
    private boolean beatNow = true;

    public ExecutorLoop(Settings settings, RunLauncher launcher, Metrics metrics) {
        this.settings = settings;
        this.launcher = launcher;
        this.metrics = metrics;
        this.topic = settings.triggerTopic();
        this.dispatch = new Dispatch(settings.executorId(), settings.maxConcurrentPerJob());
        this.kills = new RememberedKills(settings.killMemory().toMillis());
        this.resume = new ResumePoints(settings.tansu());
        this.intake = new Intake(settings, recent, kills, launcher);
    }

    /** Tells {@code listener} the owned partitions (ascending) after every change. */
    public void onPartitions(Consumer<List<Integer>> listener) {
        partitionListeners.add(listener);
    }

    /** Begins a graceful stop (from any thread). */
    public void stop() {
        stopping = true;
    }

    /** Waits until the loop has ended; false if {@code limit} passed first. */
    public boolean awaitFinished(Duration limit) throws InterruptedException {
        return finished.await(limit.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** Runs the executor on the calling thread until a graceful stop has finished. */
    public void run() {
        try {
            announceStart();
            publisher = new Publisher(settings.clientConfig(), settings.topicPrefix(), settings.shadow(),
                    settings.executorKey());
            runs = new Runs(settings, launcher, publisher, tracker, metrics, events);
            consumer = new KafkaConsumer<>(GroupConfig.of(settings), new ByteArrayDeserializer(),
                    new ByteArrayDeserializer());
            checkTopic();
            control = new ControlReader(settings, metrics, command -> events.add(command));
            Thread controlThread = new Thread(control, "kadence-control");
            controlThread.setDaemon(true);
            controlThread.start();
            consumer.subscribe(List.of(topic), new Rebalances());
            try {
                loop();
            } finally {
                finish(controlThread);
            }
        } finally {
            finished.countDown();
        }
    }

    private void announceStart() {
        if (settings.trustedKeys().isEmpty()) {
            LOG.error("RUNNING UNVERIFIED (allowUnverified()): no trusted scheduler key, so triggers and control "
                    + "records are not verified, and whoever can write these topics runs and kills handlers here");
        }
        if (settings.executorKey() == null) {
            LOG.error("RUNNING UNSIGNED (allowUnsigned()): no executor key, so results, logs and beats go "
                    + "unsigned, and a scheduler that requires executor signatures (the default) refuses them");
        }
    }

    /**
     * Fails clearly when the trigger topic does not exist (the scheduler creates it). A topic
     * made a moment ago may not be in the brokers' metadata yet, so it looks for
     * {@value #TOPIC_PATIENCE_S} s before it gives up.
     */
    private void checkTopic() {
        long deadline = System.nanoTime() + Duration.ofSeconds(TOPIC_PATIENCE_S).toNanos();
        while (true) {
            List<PartitionInfo> partitions;
            try {
                partitions = consumer.partitionsFor(topic, Duration.ofSeconds(TOPIC_PATIENCE_S));
            } catch (RuntimeException error) {
                LOG.warn("cannot look up the trigger topic {}: {}", topic, error.toString());
                return;
            }
            if (partitions != null && !partitions.isEmpty()) {
                return;
            }
            if (System.nanoTime() >= deadline || stopping) {
                throw new IllegalStateException("the trigger topic " + topic + " does not exist: the scheduler "
                        + "creates it when the app is added (`kadence app add " + settings.app() + "`)");
            }
            sleep(250);
        }
    }

    private void loop() {
        long nextCommit = System.nanoTime();
        long nextBeat = System.nanoTime();
        long nextLag = System.nanoTime() + LAG_INTERVAL.toNanos();
        Long drainDeadline = null;
        while (true) {
            handleEvents();
            boolean draining = drainDeadline != null;
            if (!draining && stopping) {
                // What was taken goes on: running runs finish, queued ones start as their lane
                // frees, held ones at their millisecond, all within the drain timeout.
                drainDeadline = System.nanoTime() + settings.drainTimeout().toNanos();
                draining = true;
                LOG.info("draining {} triggers taken", inFlight);
                beatNow = true;
            }
            carryOut(dispatch.releaseDue(System.currentTimeMillis()));
            if (draining && inFlight <= 0) {
                break;
            }
            if (draining && System.nanoTime() >= drainDeadline) {
                // Whatever has not finished (running, queued or held) gets no result and no
                // commit: the partition's next owner runs it.
                int waiting = dispatch.removeWaiting(pending -> true).size();
                LOG.warn("drain deadline passed; ending the remaining runs and leaving {} queued or held triggers "
                        + "without a result (redelivered later)", waiting);
                runs.giveUp();
                break;
            }
            poll(draining);
            long now = System.nanoTime();
            if (now >= nextCommit) {
                commit();
                nextCommit = now + settings.commitInterval().toNanos();
            }
            if (beatNow || now >= nextBeat) {
                beat(draining ? ExecutorState.STOPPING : ExecutorState.RUNNING);
                nextBeat = now + settings.beatInterval().toNanos();
            }
            if (now >= nextLag) {
                report();
                nextLag = now + LAG_INTERVAL.toNanos();
            }
        }
    }

    private void poll(boolean draining) {
        boolean caughtUp = control.caughtUp().getCount() == 0;
        boolean mayTake = caughtUp && !draining;
        setPaused(!mayTake || inFlight >= settings.maxInFlight());
        long wait = 20;
        Long release = dispatch.nextReleaseMs();
        if (release != null) {
            wait = Math.max(0, Math.min(wait, release - System.currentTimeMillis()));
        }
        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(wait));
        if (records.isEmpty()) {
            return;
        }
        if (!mayTake) {
            // Fetched before the pause took effect: read them again later (or, draining, let
            // the next owner).
            if (!draining) {
                rewind(records);
            }
            return;
        }
        for (ConsumerRecord<byte[], byte[]> record : records) {
            if (resume.admits(record.partition(), record.offset())) {
                admit(record);
            }
        }
    }

    private void rewind(ConsumerRecords<byte[], byte[]> records) {
        for (TopicPartition partition : records.partitions()) {
            consumer.seek(partition, records.records(partition).get(0).offset());
        }
    }

    private void setPaused(boolean pause) {
        if (paused != null && paused == pause) {
            return;
        }
        Set<TopicPartition> assignment = consumer.assignment();
        if (pause) {
            consumer.pause(assignment);
        } else {
            consumer.resume(assignment);
        }
        paused = pause;
    }

    // Admission (PROTOCOL.md section 4, the checks in Intake).

    private void admit(ConsumerRecord<byte[], byte[]> record) {
        tracker.track(record.partition(), record.offset());
        inFlight++;
        Intake.Verdict verdict = intake.admit(record, System.currentTimeMillis());
        if (verdict instanceof Intake.Take take) {
            carryOut(dispatch.admit(take.pending(), take.pending().receivedAtMs()));
        } else if (verdict instanceof Intake.Answer answer) {
            LOG.info("not running trigger {}: {}", answer.pending().trigger().triggerId(), answer.message());
            runs.refuse(answer.pending(), answer.message());
        } else if (verdict instanceof Intake.CannotTake cannot) {
            cannotTake(record, cannot.kind(), cannot.reason());
        } else if (verdict instanceof Intake.Redelivered redelivered) {
            LOG.info("trigger {} redelivered; it ran here already", redelivered.triggerId());
            metrics.redeliveries().increment();
            tracker.complete(record.partition(), record.offset());
            inFlight--;
        }
    }

    /** A record that must not run: dead-lettered, or on a shadow executor skipped (production's
     * group dead-letters the same record; a second letter would double it). */
    private void cannotTake(ConsumerRecord<byte[], byte[]> record, String kind, String reason) {
        if (settings.shadow()) {
            metrics.shadowSkipped(kind).increment();
            LOG.warn("shadow executor skipping the trigger record at {}/{} (production dead-letters it): {}",
                    record.partition(), record.offset(), reason);
            tracker.complete(record.partition(), record.offset());
            inFlight--;
            return;
        }
        metrics.deadLetters(kind).increment();
        LOG.warn("sending the trigger record at {}/{} to the dead-letter queue: {}", record.partition(),
                record.offset(), reason);
        runs.deadLetter(record, reason);
    }

    private void carryOut(List<Dispatch.Step> steps) {
        for (Dispatch.Step step : steps) {
            if (step instanceof Dispatch.Start start) {
                runs.start(start.run());
            } else if (step instanceof Dispatch.Refuse refuse) {
                runs.refuse(refuse.pending(), refuse.message());
            }
        }
    }

    private void handleEvents() {
        Object event;
        while ((event = events.poll()) != null) {
            if (event instanceof ControlRecord command) {
                long now = System.currentTimeMillis();
                kills.remember(command, now);
                carryOut(dispatch.kill(command.jobId(), command.triggerId(), RememberedKills.message(command)));
            } else if (event instanceof Runs.Done done) {
                inFlight--;
                if (done.forget() != null) {
                    recent.forget(done.forget());
                }
                if (done.run() != null) {
                    // Draining too: a queued trigger starts as its lane frees.
                    carryOut(dispatch.finished(done.run()));
                }
            }
        }
    }

    // Commits, beats, lag.

    private void commit() {
        Map<Integer, Long> ready = tracker.takeCommittable();
        if (ready.isEmpty()) {
            return;
        }
        try {
            consumer.commitSync(offsets(ready), Duration.ofSeconds(10));
        } catch (RuntimeException error) {
            tracker.commitFailed(ready.keySet());
            LOG.warn("cannot commit offsets; trying again: {}", error.toString());
        }
    }

    private Map<TopicPartition, OffsetAndMetadata> offsets(Map<Integer, Long> ready) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        ready.forEach((partition, offset) -> offsets.put(new TopicPartition(topic, partition), new OffsetAndMetadata(offset)));
        return offsets;
    }

    private void beat(ExecutorState state) {
        beatNow = false;
        metrics.activity(dispatch.heldCount(), dispatch.queuedJobs().size(), dispatch.runningJobs().size());
        if (settings.shadow()) {
            return; // not production: routing and the lost-run monitor must not count it
        }
        ExecutorBeat beat = beatRecord(state, new ArrayList<>(owned), dispatch.runningJobs(), dispatch.queuedJobs());
        runs.background(() -> publisher.beat(beat));
    }

    /** The beat of this executor now (package-private for tests); both the periodic beats and the
     * last one build it here, so every beat lists the same features. */
    ExecutorBeat beatRecord(ExecutorState state, List<Integer> partitions, List<Long> running, List<Long> queued) {
        return new ExecutorBeat(settings.executorId(), settings.app(), host(), Settings.VERSION, launcher.names(),
                partitions, running, queued, state, System.currentTimeMillis(), FEATURES);
    }

    private static String host() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (Exception unknown) {
            return "unknown";
        }
    }

    /** The periodic metrics: lag, expected waits, publish retries. A failure here is logged and
     * never stops the executor. */
    private void report() {
        try {
            updateLag();
            metrics.publishRetries(publisher.retries());
        } catch (RuntimeException error) {
            LOG.warn("cannot update the consumer metrics: {}", error.toString());
        }
    }

    private void updateLag() {
        for (int partition : owned) {
            TopicPartition tp = new TopicPartition(topic, partition);
            try {
                OptionalLong lag = consumer.currentLag(tp);
                if (lag.isEmpty()) {
                    continue;
                }
                long position = consumer.position(tp, Duration.ZERO);
                Long committed = tracker.committed(partition);
                long records = lag.getAsLong() + Math.max(0, position - (committed == null ? position : committed));
                metrics.lag(partition, records);
                int running = runs.runsOn(List.of(partition)).size();
                metrics.expectedWait(partition, records, dispatch.heldOn(partition), running);
            } catch (RuntimeException unknown) {
                // no position yet: nothing to report
            }
        }
    }

    private void finish(Thread controlThread) {
        try {
            commit();
            consumer.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(10)));
        } catch (RuntimeException error) {
            LOG.warn("closing the trigger consumer: {}", error.toString());
        }
        control.stop();
        try {
            controlThread.join(5_000);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
        owned.clear();
        if (!settings.shadow()) {
            publisher.beat(beatRecord(ExecutorState.STOPPING, List.of(), List.of(), List.of()));
        }
        runs.close();
        publisher.close();
        launcher.destroyAll();
        LOG.info("executor {} stopped", settings.executorId());
    }

    private void tellPartitions() {
        List<Integer> now = new ArrayList<>(owned);
        for (Consumer<List<Integer>> listener : partitionListeners) {
            listener.accept(now);
        }
    }

    /** The group's callbacks (on the consumer's thread, inside {@code poll} and {@code close}). */
    private final class Rebalances implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            Set<Integer> ids = ResumePoints.ids(partitions, topic);
            if (settings.shadow()) {
                commitEnds(partitions);
            }
            resume.assigned(consumer, partitions);
            owned.addAll(ids);
            metrics.rebalances("assigned", ids.size());
            LOG.info("partitions assigned: {}", new TreeSet<>(ids));
            changed();
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            Set<Integer> ids = ResumePoints.ids(partitions, topic);
            if (ids.isEmpty()) {
                return;
            }
            long deadline = System.nanoTime() + settings.handBackWait().toNanos();
            while (System.nanoTime() < deadline && runs.liveOn(ids)) {
                sleep(10);
            }
            int handedBack = 0;
            for (Run run : runs.runsOn(ids)) {
                if (run.abandon()) {
                    // Forgotten at once: its redelivery runs if the partition comes back here.
                    recent.forget(run.triggerId());
                    handedBack++;
                }
            }
            forgetWaiting(ids);
            Map<Integer, Long> released = tracker.release(ids);
            owned.removeAll(ids);
            resume.forget(ids);
            if (!released.isEmpty()) {
                try {
                    consumer.commitSync(offsets(released), Duration.ofSeconds(10));
                } catch (RuntimeException error) {
                    LOG.warn("cannot commit the offsets of revoked partitions: {}", error.toString());
                }
            }
            metrics.rebalances("revoked", ids.size());
            metrics.handBacks(handedBack);
            LOG.info("partitions revoked: {} ({} runs handed back)", new TreeSet<>(ids), handedBack);
            changed();
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            Set<Integer> ids = ResumePoints.ids(partitions, topic);
            for (Run run : runs.runsOn(ids)) {
                if (run.abandon()) {
                    recent.forget(run.triggerId());
                }
            }
            forgetWaiting(ids);
            tracker.drop(ids);
            owned.removeAll(ids);
            resume.forget(ids);
            metrics.rebalances("revoked", ids.size());
            LOG.warn("partitions lost (the group moved on; nothing committed for them): {}", new TreeSet<>(ids));
            changed();
        }

        /** After every change: the pause is set afresh (the client keeps it per partition), a
         * beat goes at once, and the listeners hear what is owned now. */
        private void changed() {
            paused = null;
            beatNow = true;
            tellPartitions();
        }

        /** Queued and held triggers of {@code ids} never start here; their ids are forgotten. */
        private void forgetWaiting(Set<Integer> ids) {
            for (Pending pending : dispatch.removeWaiting(p -> ids.contains(p.partition()))) {
                recent.forget(pending.trigger().triggerId());
                inFlight--;
            }
        }

        /** A shadow group starts at the live end: commits the end of each assigned partition the
         * group has no offset for, before the assignment is announced. */
        private void commitEnds(Collection<TopicPartition> partitions) {
            if (partitions.isEmpty()) {
                return;
            }
            try {
                Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(Set.copyOf(partitions));
                List<TopicPartition> fresh = partitions.stream().filter(p -> committed.get(p) == null)
                        .collect(Collectors.toList());
                if (fresh.isEmpty()) {
                    return;
                }
                Map<TopicPartition, OffsetAndMetadata> ends = new HashMap<>();
                consumer.endOffsets(fresh).forEach((p, end) -> ends.put(p, new OffsetAndMetadata(end)));
                consumer.commitSync(ends);
                LOG.info("shadow group starts at the end of {}", ends);
            } catch (RuntimeException error) {
                LOG.warn("cannot fix the shadow group's start (it starts where the client finds the end): {}",
                        error.toString());
            }
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
