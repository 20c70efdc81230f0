package io.kadence.executor.internal;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeSet;

/**
 * Offsets for at-least-once with concurrent runs (PROTOCOL.md section 7). Triggers of one
 * partition finish out of order, but Kafka keeps one committed offset per partition meaning
 * "everything before this is done". So a partition's committable offset is its lowest offset
 * not done, or one past the highest received when every one is. A trigger whose answer could
 * not be published is never completed: nothing past it is committed until the partition is
 * left, and its next owner runs it. Used by the consumer's thread and the answering threads.
 */
public final class OffsetTracker {
    private static final class State {
        final TreeSet<Long> inFlight = new TreeSet<>();
        long nextAfterSeen;
        Long committed;
    }

    private final Map<Integer, State> partitions = new HashMap<>();

    public synchronized void track(int partition, long offset) {
        State state = partitions.computeIfAbsent(partition, p -> new State());
        state.inFlight.add(offset);
        state.nextAfterSeen = Math.max(state.nextAfterSeen, offset + 1);
    }

    /** The trigger at {@code offset} is done: answered (acknowledged) or recognised. */
    public synchronized void complete(int partition, long offset) {
        State state = partitions.get(partition);
        if (state != null) {
            state.inFlight.remove(offset);
        }
    }

    /** Every partition whose committable offset moved since it was last taken; marks them taken. */
    public synchronized Map<Integer, Long> takeCommittable() {
        Map<Integer, Long> ready = new LinkedHashMap<>();
        partitions.forEach((partition, state) -> {
            long offset = committable(state);
            if (state.committed == null || state.committed != offset) {
                state.committed = offset;
                ready.put(partition, offset);
            }
        });
        return ready;
    }

    /** Forgets revoked {@code partitions}; returns their committable offsets not yet committed. */
    public synchronized Map<Integer, Long> release(Iterable<Integer> released) {
        Map<Integer, Long> ready = new LinkedHashMap<>();
        for (int partition : released) {
            State state = partitions.remove(partition);
            if (state != null) {
                long offset = committable(state);
                if (state.committed == null || state.committed != offset) {
                    ready.put(partition, offset);
                }
            }
        }
        return ready;
    }

    /** Forgets lost {@code partitions}: nothing of them is committed (the group moved on). */
    public synchronized void drop(Iterable<Integer> lost) {
        for (int partition : lost) {
            partitions.remove(partition);
        }
    }

    /** A commit of {@code partitions} failed: take their offsets again next time. */
    public synchronized void commitFailed(Iterable<Integer> failed) {
        for (int partition : failed) {
            State state = partitions.get(partition);
            if (state != null) {
                state.committed = null;
            }
        }
    }

    /** The committed offset last taken for {@code partition}, or null. */
    public synchronized Long committed(int partition) {
        State state = partitions.get(partition);
        return state == null ? null : state.committed;
    }

    private static long committable(State state) {
        return state.inFlight.isEmpty() ? state.nextAfterSeen : state.inFlight.first();
    }
}
