package io.kadence.executor.internal;

import java.util.List;

/**
 * The handlers, as the consumer sees them: whether one exists and how to start it. The
 * executor's public side implements it ({@code HandlerRegistry}), so the handler API and its
 * per-thread helper stay in {@code io.kadence.executor}.
 */
public interface RunLauncher {
    /** The registered handler names, ascending. */
    List<String> names();

    /** Whether script triggers (GLUE_*) run here: scripts switched on. */
    boolean runsScripts();

    /** Whether {@code name} is registered. */
    boolean has(String name);

    /**
     * Starts {@code run}'s handler (its script, for a GLUE_* trigger) on a thread of the executor's own, its lines to {@code log};
     * when the handler ends, {@link Run#handlerEnded} gets how. Returns at once.
     */
    void launch(Run run, JobLog log, boolean shadow);

    /** Runs every handler's destroy hook whose init ran. */
    void destroyAll();
}
