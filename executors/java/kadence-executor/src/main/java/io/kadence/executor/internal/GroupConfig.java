package io.kadence.executor.internal;

import java.util.Properties;
import org.apache.kafka.clients.consumer.RangeAssignor;

/** The trigger consumer's settings (PROTOCOL.md section 1 and the protocol decisions). */
final class GroupConfig {
    private GroupConfig() {}

    static Properties of(Settings settings) {
        Properties config = settings.clientConfig();
        config.put("group.id", settings.group());
        config.put("enable.auto.commit", "false");
        config.put("allow.auto.create.topics", "false");
        // A shadow group starts at the live end (section 10); production at the beginning.
        config.put("auto.offset.reset", settings.shadow() ? "latest" : "earliest");
        if (settings.classic()) {
            config.put("group.protocol", "classic");
            config.put("session.timeout.ms", Long.toString(settings.sessionTimeout().toMillis()));
            config.put("heartbeat.interval.ms", Long.toString(Math.min(1000, settings.sessionTimeout().toMillis() / 3)));
            config.put("partition.assignment.strategy", RangeAssignor.class.getName());
        } else {
            // The broker keeps the session and divides the partitions (KIP-848).
            config.put("group.protocol", "consumer");
        }
        if (settings.tansu()) {
            // tansu holds a fetch for its whole wait even when records are there.
            config.put("fetch.max.wait.ms", "10");
        }
        return config;
    }
}
