package io.kadence.executor.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import java.util.Properties;
import org.junit.jupiter.api.Test;

class PublisherTest {
    /** The producer's metrics include many without a topic tag: reading the retry counts must
     * pass over them (a lookup of a null topic once stopped the executor after 5 s). */
    @Test
    void retriesAreReadFromTheProducersMetricsWithoutABroker() {
        Properties config = new Properties();
        config.put("bootstrap.servers", "127.0.0.1:1");
        try (Publisher publisher = new Publisher(config, "kadence", false, null)) {
            assertEquals(Map.of(), publisher.retries());
        }
    }
}
