package io.kadence.executor.spring;

import io.kadence.executor.BrokerKind;
import io.kadence.executor.Executor;
import io.kadence.executor.ExecutorBuilder;
import io.kadence.executor.ExecutorConfigException;
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
 *
 * <p>SIGTERM (and Ctrl-C) closes the context through Spring Boot's shutdown hook, which waits
 * for that graceful stop (the drain timeout plus 30 s at most); the JVM then exits with 143
 * (128 + SIGTERM; 130 after SIGINT), as every Spring Boot service does. The starter leaves that
 * code alone: the process belongs to the application, and ending it any other way (a
 * {@code Runtime.halt(0)} as the SDK's test executor does) would cut the other shutdown hooks
 * short. A run in flight at SIGTERM still gets its result; service managers take 143 as a
 * clean stop (Kubernetes ignores the code of a pod it stops; systemd needs
 * {@code SuccessExitStatus=143}, as for any JVM service).
 */
public class KadenceExecutorLifecycle implements SmartLifecycle {
    private final KadenceExecutorProperties properties;
    private final ApplicationContext context;
    private Executor executor;

    public KadenceExecutorLifecycle(KadenceExecutorProperties properties, ApplicationContext context) {
        this.properties = properties;
        this.context = context;
    }

    /**
     * The builder the properties and the handler beans describe. A blank property counts as
     * unset (an application maps {@code kadence.executor.brokers=${KADENCE_BROKERS:}} from an
     * environment that may lack it), so the builder's own message says what is missing; a
     * group protocol or broker kind it cannot parse is refused naming the property.
     */
    public ExecutorBuilder builder() {
        KadenceExecutorProperties p = properties;
        ExecutorBuilder builder = Executor.builder().brokers(given(p.getBrokers())).app(given(p.getApp()))
                .topicPrefix(p.getTopicPrefix()).groupProtocol(groupProtocol(p.getGroupProtocol()))
                .brokerKind(brokerKind(p.getBrokerKind())).shadow(p.isShadow()).scripts(p.isScripts());
        if (given(p.getExecutorId()) != null) {
            builder.executorId(p.getExecutorId().strip());
        }
        p.getTrustedKeys().stream().filter(key -> !key.isBlank()).map(String::strip).forEach(builder::trustedKey);
        if (p.isAllowUnverified()) {
            builder.allowUnverified();
        }
        if (given(p.getExecutorKey()) != null) {
            builder.executorKey(p.getExecutorKey().strip());
        }
        if (p.isAllowUnsigned()) {
            builder.allowUnsigned();
        }
        if (given(p.getMetricsAddress()) != null) {
            builder.metricsAddress(p.getMetricsAddress().strip());
        }
        if (p.getSessionTimeout() != null) {
            builder.sessionTimeout(p.getSessionTimeout());
        }
        if (p.getBeatInterval() != null) {
            builder.beatInterval(p.getBeatInterval());
        }
        if (p.getHandBackWait() != null) {
            builder.handBackWait(p.getHandBackWait());
        }
        if (p.getDrainTimeout() != null) {
            builder.drainTimeout(p.getDrainTimeout());
        }
        p.getKafka().forEach(builder::kafkaOption);
        handlerBeans().forEach(builder::handlers);
        return builder;
    }

    /** {@code value}, or null when it is null or blank. */
    private static String given(String value) {
        return value == null || value.isBlank() ? null : value;
    }

    private static GroupProtocol groupProtocol(String value) {
        try {
            return given(value) == null ? GroupProtocol.CLASSIC : GroupProtocol.parse(value);
        } catch (IllegalArgumentException invalid) {
            throw new ExecutorConfigException("kadence.executor.group-protocol: " + invalid.getMessage());
        }
    }

    private static BrokerKind brokerKind(String value) {
        try {
            return BrokerKind.parse(value == null ? "" : value);
        } catch (IllegalArgumentException invalid) {
            throw new ExecutorConfigException("kadence.executor.broker-kind: " + invalid.getMessage());
        }
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
