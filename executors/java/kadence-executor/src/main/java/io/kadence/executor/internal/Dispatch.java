package io.kadence.executor.internal;

import io.kadence.executor.wire.Records.BlockStrategy;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Predicate;

/**
 * A trigger's way from admission to its start (PROTOCOL.md section 4, steps 6 and 7), as pure
 * bookkeeping: no Kafka, no threads, time passed in. Only the consumer's thread uses it.
 *
 * <ul>
 *   <li>The <b>hold</b>: a trigger that arrives before its {@code scheduled_at_ms} waits for
 *       that millisecond (held triggers count as queued in beats and can be killed).
 *   <li>The <b>lanes</b>, one per job with runs here: "busy" means a run of the job is running
 *       or queued. SERIAL_EXECUTION queues FIFO behind it, DISCARD_LATER refuses the newcomer,
 *       COVER_EARLY stops what runs and refuses what is queued, then starts the newcomer,
 *       CONCURRENT runs up to {@code concurrentCap} at once and queues beyond.
 * </ul>
 *
 * Every event answers with {@link Step}s: start a run, or refuse a trigger with a message.
 */
public final class Dispatch {
    /** What the consumer does next. */
    public sealed interface Step permits Start, Refuse {}

    /** Start the handler of this run. */
    public record Start(Run run) implements Step {}

    /** Answer the trigger with a failure message without running it. */
    public record Refuse(Pending pending, String message) implements Step {}

    private record Held(long atMs, long arrival, Pending pending) {}

    private static final class Lane {
        final Set<Run> running = new LinkedHashSet<>();
        final ArrayDeque<Pending> queued = new ArrayDeque<>();
    }

    private final String executorId;
    private final int concurrentCap;
    private final PriorityQueue<Held> held =
            new PriorityQueue<>(Comparator.comparingLong(Held::atMs).thenComparingLong(Held::arrival));
    private final Map<Long, Lane> lanes = new HashMap<>();
    private long arrivals;

    public Dispatch(String executorId, int concurrentCap) {
        this.executorId = executorId;
        this.concurrentCap = Math.max(1, concurrentCap);
    }

    /** A trigger that passed admission: held until its millisecond, or placed now. */
    public List<Step> admit(Pending pending, long nowMs) {
        long atMs = pending.trigger().scheduledAtMs();
        if (atMs > nowMs) {
            held.add(new Held(atMs, arrivals++, pending));
            return List.of();
        }
        return place(pending);
    }

    /** When the next held trigger is due, or null. */
    public Long nextReleaseMs() {
        Held next = held.peek();
        return next == null ? null : next.atMs();
    }

    /** Places every held trigger due at {@code nowMs}. */
    public List<Step> releaseDue(long nowMs) {
        List<Step> steps = new ArrayList<>();
        while (!held.isEmpty() && held.peek().atMs() <= nowMs) {
            steps.addAll(place(held.poll().pending()));
        }
        return steps;
    }

    /** {@code run} ended (with a result or without): its lane may start queued triggers. */
    public List<Step> finished(Run run) {
        Lane lane = lanes.get(run.jobId());
        if (lane == null) {
            return List.of();
        }
        lane.running.remove(run);
        List<Step> steps = new ArrayList<>();
        while (!lane.queued.isEmpty()) {
            BlockStrategy strategy = lane.queued.peek().trigger().blockStrategy();
            boolean mayStart = strategy == BlockStrategy.CONCURRENT
                    ? lane.running.size() < concurrentCap
                    : lane.running.isEmpty();
            if (!mayStart) {
                break;
            }
            steps.add(start(lane, lane.queued.poll()));
        }
        dropIfIdle(run.jobId(), lane);
        return steps;
    }

    /**
     * A KILL: stops the runs of {@code jobId} (or the one run of {@code triggerId}; either may
     * be null) with {@code reason}, and refuses their queued and held triggers with it.
     */
    public List<Step> kill(Long jobId, String triggerId, String reason) {
        Predicate<Pending> covered = p -> (jobId != null && p.trigger().jobId() == jobId)
                || (triggerId != null && p.trigger().triggerId().equals(triggerId));
        for (Lane lane : lanes.values()) {
            for (Run run : lane.running) {
                if (covered.test(run.pending())) {
                    run.stop(reason);
                }
            }
        }
        List<Step> refused = new ArrayList<>();
        for (Pending pending : removeWaiting(covered)) {
            refused.add(new Refuse(pending, reason));
        }
        return refused;
    }

    /** Removes the queued and held triggers {@code which} selects, without an answer: those of
     * revoked or lost partitions, or all of them when a graceful stop begins. */
    public List<Pending> removeWaiting(Predicate<Pending> which) {
        List<Pending> removed = new ArrayList<>();
        for (Iterator<Map.Entry<Long, Lane>> it = lanes.entrySet().iterator(); it.hasNext(); ) {
            Lane lane = it.next().getValue();
            lane.queued.removeIf(p -> which.test(p) && removed.add(p));
            if (lane.running.isEmpty() && lane.queued.isEmpty()) {
                it.remove();
            }
        }
        held.removeIf(h -> which.test(h.pending()) && removed.add(h.pending()));
        return removed;
    }

    /** The runs going now. */
    public List<Run> running() {
        List<Run> runs = new ArrayList<>();
        for (Lane lane : lanes.values()) {
            runs.addAll(lane.running);
        }
        return runs;
    }

    /** Job ids with a run going, ascending. */
    public List<Long> runningJobs() {
        TreeSet<Long> jobs = new TreeSet<>();
        lanes.forEach((job, lane) -> {
            if (!lane.running.isEmpty()) {
                jobs.add(job);
            }
        });
        return new ArrayList<>(jobs);
    }

    /** Job ids with a trigger queued or held, ascending. */
    public List<Long> queuedJobs() {
        TreeSet<Long> jobs = new TreeSet<>();
        lanes.forEach((job, lane) -> {
            if (!lane.queued.isEmpty()) {
                jobs.add(job);
            }
        });
        held.forEach(h -> jobs.add(h.pending().trigger().jobId()));
        return new ArrayList<>(jobs);
    }

    public int heldCount() {
        return held.size();
    }

    /** Held triggers of {@code partition}. */
    public int heldOn(int partition) {
        return (int) held.stream().filter(h -> h.pending().partition() == partition).count();
    }

    private List<Step> place(Pending pending) {
        long jobId = pending.trigger().jobId();
        BlockStrategy strategy = pending.trigger().blockStrategy();
        Lane lane = lanes.computeIfAbsent(jobId, job -> new Lane());
        boolean busy = !lane.running.isEmpty() || !lane.queued.isEmpty();
        switch (strategy) {
            case SERIAL_EXECUTION -> {
                if (busy) {
                    lane.queued.add(pending);
                    return List.of();
                }
            }
            case DISCARD_LATER -> {
                if (busy) {
                    return List.of(new Refuse(pending, "discarded: job " + jobId
                            + " is already running or queued on executor " + executorId
                            + " (block strategy DISCARD_LATER)"));
                }
            }
            case COVER_EARLY -> {
                if (busy) {
                    String reason = "covered by trigger " + pending.trigger().triggerId()
                            + " (block strategy COVER_EARLY)";
                    lane.running.forEach(run -> run.stop(reason));
                    List<Step> steps = new ArrayList<>();
                    lane.queued.forEach(queued -> steps.add(new Refuse(queued, reason)));
                    lane.queued.clear();
                    steps.add(start(lane, pending));
                    return steps;
                }
            }
            case CONCURRENT -> {
                if (lane.running.size() >= concurrentCap || !lane.queued.isEmpty()) {
                    lane.queued.add(pending);
                    return List.of();
                }
            }
        }
        return List.of(start(lane, pending));
    }

    private static Start start(Lane lane, Pending pending) {
        Run run = new Run(pending);
        lane.running.add(run);
        return new Start(run);
    }

    private void dropIfIdle(long jobId, Lane lane) {
        if (lane.running.isEmpty() && lane.queued.isEmpty()) {
            lanes.remove(jobId);
        }
    }
}
