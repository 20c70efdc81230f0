package io.kadence.executor.spring;

import io.kadence.executor.BrokerKind;
import io.kadence.executor.Executor;
import io.kadence.executor.ExecutorBuilder;
import io.kadence.executor.GroupProtocol;
import io.kadence.executor.KadenceJob;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import org.springframework.context.ApplicationContext;
import org.springframework.context.SmartLifecycle;

/**
 * The executor of a Spring application: built when the context starts, from the
 * {@code kadence.executor.*} properties and every bean with {@link KadenceJob} methods (as
 * XXL-JOB's Spring executor finds its {@code @XxlJob} methods), started on a thread of its own,
 * and stopped gracefully (drain, commit, leave, last beat) when the context closes. It starts
 * last and stops first (the highest phase), so the handlers' dependencies are up for every run.
 */
public class KadenceExecutorLifecycle implements SmartLifecycle {
    private final KadenceExecutorProperties properties;
    private final ApplicationContext context;
    private Executor executor;

    public KadenceExecutorLifecycle(KadenceExecutorProperties properties, ApplicationContext context) {
        this.properties = properties;
        this.context = context;
    }

    /** The builder the properties and the handler beans describe. */
    public ExecutorBuilder builder() {
        KadenceExecutorProperties p = properties;
        ExecutorBuilder builder = Executor.builder().brokers(p.getBrokers()).app(p.getApp())
                .topicPrefix(p.getTopicPrefix()).groupProtocol(GroupProtocol.parse(p.getGroupProtocol()))
                .brokerKind(BrokerKind.parse(p.getBrokerKind())).shadow(p.isShadow()).scripts(p.isScripts());
        if (p.getExecutorId() != null) {
            builder.executorId(p.getExecutorId());
        }
        p.getTrustedKeys().stream().filter(key -> !key.isBlank()).forEach(builder::trustedKey);
        if (p.isAllowUnverified()) {
            builder.allowUnverified();
        }
        if (p.getExecutorKey() != null && !p.getExecutorKey().isBlank()) {
            builder.executorKey(p.getExecutorKey());
        }
        if (p.isAllowUnsigned()) {
            builder.allowUnsigned();
        }
        if (p.getMetricsAddress() != null) {
            builder.metricsAddress(p.getMetricsAddress());
        }
        if (p.getSessionTimeout() != null) {
            builder.sessionTimeout(p.getSessionTimeout());
        }
        if (p.getBeatInterval() != null) {
            builder.beatInterval(p.getBeatInterval());
        }
        if (p.getDrainTimeout() != null) {
            builder.drainTimeout(p.getDrainTimeout());
        }
        p.getKafka().forEach(builder::kafkaOption);
        handlerBeans().forEach(builder::handlers);
        return builder;
    }

    /** The beans with at least one {@link KadenceJob} method (on their class, not a proxy's). */
    public List<Object> handlerBeans() {
        List<Object> beans = new ArrayList<>();
        for (String name : context.getBeanDefinitionNames()) {
            Class<?> type = context.getType(name, false);
            if (type == null || !hasJobs(type)) {
                continue;
            }
            beans.add(context.getBean(name));
        }
        return beans;
    }

    private static boolean hasJobs(Class<?> type) {
        for (Class<?> at = type; at != null && at != Object.class; at = at.getSuperclass()) {
            for (Method method : at.getDeclaredMethods()) {
                if (method.isAnnotationPresent(KadenceJob.class)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The running executor, or null before the start. */
    public synchronized Executor executor() {
        return executor;
    }

    @Override
    public synchronized void start() {
        if (executor == null) {
            executor = builder().build().start();
        }
    }

    @Override
    public synchronized void stop() {
        if (executor != null) {
            executor.close();
            executor = null;
        }
    }

    @Override
    public synchronized boolean isRunning() {
        return executor != null;
    }

    @Override
    public boolean isAutoStartup() {
        return properties.isAutoStartup();
    }

    @Override
    public int getPhase() {
        return Integer.MAX_VALUE;
    }
}
