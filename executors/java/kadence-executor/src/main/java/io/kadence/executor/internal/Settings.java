package io.kadence.executor.internal;

import io.kadence.executor.wire.ExecutorKey;
import io.kadence.executor.wire.TrustedKeys;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;

/**
 * An executor's checked settings (the builder checks them; see {@code ExecutorBuilder} for
 * their meanings and defaults). {@code classic} is the group protocol; {@code tansu} the broker
 * kind; {@code executorKey} null means unsigned, an empty {@code trustedKeys} unverified.
 */
public record Settings(
        String brokers,
        String app,
        String topicPrefix,
        String executorId,
        boolean classic,
        boolean tansu,
        boolean shadow,
        TrustedKeys trustedKeys,
        ExecutorKey executorKey,
        Duration sessionTimeout,
        Duration beatInterval,
        Duration commitInterval,
        Duration drainTimeout,
        Duration handBackWait,
        Duration killMemory,
        int maxInFlight,
        int maxConcurrentPerJob,
        int maxLogLines,
        InetSocketAddress metricsAddress,
        Map<String, String> kafkaOptions) {

    public static final String VERSION = "java-0.1.0";

    public String triggerTopic() {
        return topicPrefix + ".triggers." + app;
    }

    public String controlTopic() {
        return topicPrefix + ".control";
    }

    public String group() {
        return topicPrefix + (shadow ? ".shadow." : ".executor.") + app;
    }

    /** The settings every client shares: the brokers and the caller's own options. */
    public Properties clientConfig() {
        Properties config = new Properties();
        config.put("bootstrap.servers", brokers);
        config.put("client.id", "kadence-" + executorId);
        config.putAll(kafkaOptions);
        return config;
    }
}
