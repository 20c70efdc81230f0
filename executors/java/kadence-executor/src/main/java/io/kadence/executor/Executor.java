package io.kadence.executor;

import io.kadence.executor.internal.ExecutorLoop;
import io.kadence.executor.internal.Metrics;
import io.kadence.executor.internal.Settings;
import io.micrometer.core.instrument.MeterRegistry;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;

/**
 * A Kadence executor: joins its app's consumer group, runs the triggers of the partitions the
 * group gives it with the registered handlers, and answers each with one result
 * ({@code schemas/PROTOCOL.md}). Build one with {@link #builder()}.
 *
 * <p>{@link #run()} runs it on the calling thread until it is stopped; {@link #start()} on a
 * thread of its own. Either registers a JVM shutdown hook, so SIGTERM (and SIGINT) stops it
 * gracefully: no new triggers, running runs drained (30 s), offsets committed, the group left,
 * a last beat sent. {@link #close()} does the same from the application (a Spring bean's
 * destroy method).
 */
public final class Executor implements AutoCloseable {
    private final Settings settings;
    private final HandlerRegistry handlers;
    private final Metrics metrics;
    private final ExecutorLoop loop;
    private Thread hook;
    private Thread thread;

    Executor(Settings settings, HandlerRegistry handlers) {
        this.settings = settings;
        this.handlers = handlers;
        this.metrics = new Metrics(settings.app(), settings.shadow());
        this.loop = new ExecutorLoop(settings, handlers, metrics);
    }

    public static ExecutorBuilder builder() {
        return new ExecutorBuilder();
    }

    public String executorId() {
        return settings.executorId();
    }

    /** The registered handler names, ascending. */
    public List<String> handlers() {
        return handlers.names();
    }

    /** The executor's metrics (also served on the metrics address when one is set). */
    public MeterRegistry meterRegistry() {
        return metrics.registry();
    }

    /** Tells {@code listener} the owned partitions of the trigger topic (ascending) whenever the
     * group assigns or revokes some, on the consumer's thread: return quickly. */
    public Executor onPartitions(Consumer<List<Integer>> listener) {
        loop.onPartitions(listener);
        return this;
    }

    /** Runs the executor on the calling thread until a graceful stop has finished. */
    public void run() {
        prepare();
        try {
            loop.run();
        } finally {
            release();
        }
    }

    /** Runs the executor on a thread of its own and returns. */
    public synchronized Executor start() {
        prepare();
        thread = new Thread(() -> {
            try {
                loop.run();
            } finally {
                release();
            }
        }, "kadence-consumer");
        thread.start();
        return this;
    }

    private synchronized void prepare() {
        if (settings.metricsAddress() != null) {
            try {
                InetSocketAddress bound = metrics.serve(settings.metricsAddress());
                org.slf4j.LoggerFactory.getLogger(Executor.class).info("metrics on http://{}/metrics", bound);
            } catch (IOException error) {
                throw new UncheckedIOException("cannot serve metrics on " + settings.metricsAddress(), error);
            }
        }
        Duration patience = settings.drainTimeout().plusSeconds(30);
        hook = new Thread(() -> {
            loop.stop();
            try {
                loop.awaitFinished(patience);
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
            }
        }, "kadence-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);
    }

    private synchronized void release() {
        metrics.close();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException shuttingDown) {
            // the hook is what stopped it
        }
    }

    /** Begins a graceful stop and returns. */
    public void stop() {
        loop.stop();
    }

    /** Waits for the executor to end; false if {@code limit} passed first. */
    public boolean awaitTermination(Duration limit) throws InterruptedException {
        return loop.awaitFinished(limit);
    }

    /** Stops gracefully and waits for the end (drain timeout plus 30 s at most). */
    @Override
    public void close() {
        stop();
        try {
            awaitTermination(settings.drainTimeout().plusSeconds(30));
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
