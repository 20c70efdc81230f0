package io.kadence.executor;

import io.kadence.executor.internal.JobLog;
import io.kadence.executor.internal.Outcome;
import io.kadence.executor.internal.Run;
import io.kadence.executor.internal.RunLauncher;
import io.kadence.executor.wire.Records.GlueType;
import io.kadence.executor.wire.Records.TriggerRecord;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The registered handlers and the threads they run on. Each run's handler runs on a thread of
 * a cached pool (platform threads: Java 17), never the consumer's; the run's context is bound
 * to that thread for {@link KadenceJobHelper} while the handler runs.
 *
 * <p>Hooks ({@link KadenceJob#init()} / {@link KadenceJob#destroy()}): init runs once, on the
 * thread of the handler's first run, before it (a failing init fails that run, 500
 * {@code init of handler "{name}" failed: …}, and is tried again on the next); destroy runs
 * once when the executor stops, for every handler whose init ran. XXL-JOB runs them per job
 * thread; Kadence has no job threads, so once per executor is the closest meaning.
 */
final class HandlerRegistry implements RunLauncher {
    private static final Logger LOG = LoggerFactory.getLogger(HandlerRegistry.class);

    /** A handler and its hooks (either may be null). */
    record Entry(String name, JobHandler handler, Runnable init, Runnable destroy) {}

    private final Map<String, Entry> entries;
    private final Map<String, Boolean> initialised = new TreeMap<>();
    private final ExecutorService threads;
    private final ScriptHandler scripts;

    /** {@code scripts}: the runner of script triggers, or null when scripts are off. */
    HandlerRegistry(Map<String, Entry> entries, ScriptHandler scripts) {
        this.entries = new TreeMap<>(entries);
        this.scripts = scripts;
        AtomicInteger count = new AtomicInteger();
        ThreadFactory factory = task -> {
            Thread thread = new Thread(task, "kadence-run-" + count.incrementAndGet());
            thread.setDaemon(true);
            return thread;
        };
        this.threads = Executors.newCachedThreadPool(factory);
    }

    @Override
    public List<String> names() {
        return new ArrayList<>(entries.keySet());
    }

    @Override
    public boolean has(String name) {
        return entries.containsKey(name);
    }

    @Override
    public boolean runsScripts() {
        return scripts != null;
    }

    @Override
    public void launch(Run run, JobLog log, boolean shadow) {
        TriggerRecord trigger = run.pending().trigger();
        Entry entry = trigger.glueType() == GlueType.BEAN
                ? entries.get(trigger.handler())
                : new Entry("script", context -> scripts.run(context, trigger), null, null);
        JobContext context = new JobContext(run.pending().trigger(), log, run, shadow);
        long startedAt = System.currentTimeMillis();
        run.startsAt(startedAt);
        run.started(startedAt, threads.submit(() -> run.handlerEnded(call(entry, context))));
    }

    private Outcome call(Entry entry, JobContext context) {
        KadenceJobHelper.bind(context);
        try {
            String failedInit = initialise(entry);
            if (failedInit != null) {
                return Outcome.failure(failedInit);
            }
            entry.handler().run(context);
            Outcome verdict = context.verdict();
            return verdict != null ? verdict : Outcome.success(null);
        } catch (JobFailedException failed) {
            Long retryAfter = failed.retryAfter() == null ? null : failed.retryAfter().toMillis();
            return Outcome.failure(failed.getMessage(), retryAfter);
        } catch (Throwable crashed) {
            // A handler's crash is its run's failure; a stopped run's answer was given already.
            return Outcome.failure(crashed.toString());
        } finally {
            KadenceJobHelper.unbind();
        }
    }

    /** Runs the init hook once; returns the failure message, or null. */
    private String initialise(Entry entry) {
        if (entry.init() == null) {
            return null;
        }
        synchronized (entry) {
            if (initialised.containsKey(entry.name())) {
                return null;
            }
            try {
                entry.init().run();
                synchronized (initialised) {
                    initialised.put(entry.name(), true);
                }
                return null;
            } catch (RuntimeException error) {
                return "init of handler \"" + entry.name() + "\" failed: " + error;
            }
        }
    }

    @Override
    public void destroyAll() {
        for (Entry entry : entries.values()) {
            boolean ran;
            synchronized (initialised) {
                ran = initialised.containsKey(entry.name()) || entry.init() == null;
            }
            if (entry.destroy() != null && ran) {
                try {
                    entry.destroy().run();
                } catch (RuntimeException error) {
                    LOG.warn("destroy of handler \"{}\" failed: {}", entry.name(), error.toString());
                }
            }
        }
        threads.shutdownNow();
        try {
            threads.awaitTermination(1, TimeUnit.SECONDS);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** The handlers of {@code bean}'s {@link KadenceJob} methods. */
    static List<Entry> annotated(Object bean) {
        List<Entry> found = new ArrayList<>();
        for (Class<?> type = bean.getClass(); type != null && type != Object.class; type = type.getSuperclass()) {
            for (Method method : type.getDeclaredMethods()) {
                KadenceJob job = method.getAnnotation(KadenceJob.class);
                if (job != null) {
                    found.add(entry(bean, method, job));
                }
            }
        }
        return found;
    }

    private static Entry entry(Object bean, Method method, KadenceJob job) {
        String where = bean.getClass().getName() + "." + method.getName();
        Class<?>[] parameters = method.getParameterTypes();
        boolean takesContext = parameters.length == 1 && parameters[0] == JobContext.class;
        if (!(parameters.length == 0 || takesContext)) {
            throw new ExecutorConfigException("@KadenceJob(\"" + job.value() + "\") " + where
                    + " must take nothing or a JobContext");
        }
        Class<?> returns = method.getReturnType();
        if (returns != void.class && returns != String.class) {
            throw new ExecutorConfigException("@KadenceJob(\"" + job.value() + "\") " + where
                    + " must return void or String (a success note)");
        }
        method.setAccessible(true);
        JobHandler handler = context -> {
            Object note = invoke(bean, method, takesContext ? new Object[] {context} : new Object[0]);
            if (note != null && context.verdict() == null) {
                context.handleSuccess(note.toString());
            }
        };
        return new Entry(job.value(), handler, hook(bean, job.init(), job.value(), "init"),
                hook(bean, job.destroy(), job.value(), "destroy"));
    }

    private static Runnable hook(Object bean, String name, String job, String kind) {
        if (name.isEmpty()) {
            return null;
        }
        for (Class<?> type = bean.getClass(); type != null; type = type.getSuperclass()) {
            try {
                Method method = type.getDeclaredMethod(name);
                method.setAccessible(true);
                return () -> {
                    try {
                        invoke(bean, method, new Object[0]);
                    } catch (Exception error) {
                        throw new IllegalStateException(error.getMessage(), error);
                    }
                };
            } catch (NoSuchMethodException notHere) {
                // look in the superclass
            }
        }
        throw new ExecutorConfigException("@KadenceJob(\"" + job + "\") names " + kind + " = \"" + name
                + "\", but " + bean.getClass().getName() + " has no method " + name + "() without parameters");
    }

    private static Object invoke(Object bean, Method method, Object[] args) throws Exception {
        try {
            return method.invoke(bean, args);
        } catch (InvocationTargetException thrown) {
            Throwable cause = thrown.getCause();
            if (cause instanceof Exception exception) {
                throw exception;
            }
            if (cause instanceof Error error) {
                throw error;
            }
            throw thrown;
        }
    }
}
