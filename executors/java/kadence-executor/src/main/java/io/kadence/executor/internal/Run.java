package io.kadence.executor.internal;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;

/**
 * One started run and how it is stopped from outside. Its {@link #outcome()} completes once:
 * by the handler's end, or first by a stop (KILL, COVER_EARLY, timeout: a result with that
 * message; hand-back, lost partition, drain deadline: no result). The first completion wins,
 * so a run killed and then covered says it was killed, and a run stopped while its handler
 * returns answers as stopped. A stop also marks the run cancelled (what the handler's
 * {@code isCancelled()} reads) and interrupts the handler's thread. Identity is the run: the
 * same trigger id may run again after a hand-back while the abandoned handler still returns.
 */
public final class Run {
    private final Pending pending;
    private final CompletableFuture<Outcome> outcome = new CompletableFuture<>();
    private volatile boolean cancelled;
    private volatile boolean started;
    private Future<?> handlerTask;
    private volatile long startedAtMs;

    public Run(Pending pending) {
        this.pending = pending;
    }

    public Pending pending() {
        return pending;
    }

    public String triggerId() {
        return pending.trigger().triggerId();
    }

    public long jobId() {
        return pending.trigger().jobId();
    }

    public int partition() {
        return pending.partition();
    }

    public CompletableFuture<Outcome> outcome() {
        return outcome;
    }

    public boolean isCancelled() {
        return cancelled;
    }

    public boolean isStarted() {
        return started;
    }

    public long startedAtMs() {
        return startedAtMs;
    }

    /** The run starts at {@code atMs}: set before its handler is submitted, so that a handler
     * ending at once finds it set. */
    public void startsAt(long atMs) {
        if (startedAtMs == 0) {
            startedAtMs = atMs;
        }
    }

    /** The handler was submitted at {@code atMs} as {@code task}; a stop interrupts it. The
     * start is set before the task is submitted (see {@link #startsAt}) when it may end at once:
     * its log records and result carry it. */
    public synchronized void started(long atMs, Future<?> task) {
        startsAt(atMs);
        this.handlerTask = task;
        this.started = true;
        if (cancelled) {
            task.cancel(true);
        }
    }

    /** Ends the run with {@code outcome} unless it has ended; cancels the handler either way. */
    public boolean stop(Outcome stopped) {
        boolean first = outcome.complete(stopped);
        cancel();
        return first;
    }

    /** Ends the run answering 500 {@code reason} (KILL, COVER_EARLY) unless it has ended. */
    public boolean stop(String reason) {
        return stop(Outcome.failure(reason));
    }

    /** Ends the run without a result unless it has ended. */
    public boolean abandon() {
        return stop(Outcome.NO_RESULT);
    }

    private synchronized void cancel() {
        cancelled = true;
        if (handlerTask != null) {
            handlerTask.cancel(true);
        }
    }

    /** The handler ended with {@code ended}: the run's outcome unless a stop came first. */
    public void handlerEnded(Outcome ended) {
        outcome.complete(ended);
    }
}
