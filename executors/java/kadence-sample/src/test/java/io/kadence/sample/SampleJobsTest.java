package io.kadence.sample;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.kadence.executor.spring.KadenceExecutorAutoConfiguration;
import io.kadence.executor.spring.KadenceExecutorLifecycle;
import io.kadence.executor.spring.KadenceExecutorProperties;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ConfigurableApplicationContext;

class SampleJobsTest {
    @Test
    void theStarterFindsTheSamplesHandlers() {
        new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(KadenceExecutorAutoConfiguration.class))
                .withBean(SampleJobs.class)
                .withPropertyValues("kadence.executor.app=sample", "kadence.executor.brokers=localhost:9092",
                        "kadence.executor.allow-unverified=true", "kadence.executor.allow-unsigned=true",
                        "kadence.executor.auto-startup=false")
                .run(context -> assertEquals(List.of("demoJobHandler", "reportJobHandler", "shardingJobHandler"),
                        context.getBean(KadenceExecutorLifecycle.class).builder().build().handlers()));
    }

    /** The sample started with {@code arguments} (which outrank the environment), its executor left unstarted. */
    private static KadenceExecutorProperties propertiesWith(String... arguments) {
        String[] all = new String[arguments.length + 1];
        System.arraycopy(arguments, 0, all, 0, arguments.length);
        all[arguments.length] = "--kadence.executor.auto-startup=false";
        try (ConfigurableApplicationContext context = new SpringApplicationBuilder(SampleApplication.class)
                .web(WebApplicationType.NONE).run(all)) {
            return context.getBean(KadenceExecutorProperties.class);
        }
    }

    @Test
    void theSampleReadsTheVariablesEveryKadenceExecutorReads() {
        KadenceExecutorProperties p = propertiesWith("--KADENCE_BROKERS=kafka-1:9092,kafka-2:9092",
                "--KADENCE_BROKER_KIND=tansu", "--KADENCE_APP=reports", "--KADENCE_TOPIC_PREFIX=staging",
                "--KADENCE_EXECUTOR_ID=reports-1", "--KADENCE_TRUSTED_KEYS=old-key, new-key",
                "--KADENCE_EXECUTOR_KEY=0123456789abcdef.secret", "--KADENCE_METRICS_ADDRESS=127.0.0.1:9465",
                "--KADENCE_GROUP_PROTOCOL=consumer", "--KADENCE_ALLOW_UNVERIFIED=1", "--KADENCE_ALLOW_UNSIGNED=true",
                "--KADENCE_BEAT_INTERVAL_MS=1000", "--KADENCE_DRAIN_TIMEOUT_MS=5000");
        assertEquals(List.of("kafka-1:9092,kafka-2:9092", "tansu", "reports", "staging", "reports-1",
                "0123456789abcdef.secret", "127.0.0.1:9465", "consumer"),
                List.of(p.getBrokers(), p.getBrokerKind(), p.getApp(), p.getTopicPrefix(), p.getExecutorId(),
                        p.getExecutorKey(), p.getMetricsAddress(), p.getGroupProtocol()));
        assertEquals(List.of("old-key", "new-key"), p.getTrustedKeys());
        assertEquals(List.of(true, true), List.of(p.isAllowUnverified(), p.isAllowUnsigned()));
        assertEquals(List.of(Duration.ofSeconds(1), Duration.ofSeconds(5)), List.of(p.getBeatInterval(),
                p.getDrainTimeout()));
    }

    /** Empty variables leave the executor's defaults (the starter takes blank as unset). */
    @Test
    void emptyVariablesLeaveTheExecutorsDefaults() {
        KadenceExecutorProperties p = propertiesWith("--KADENCE_BROKERS=", "--KADENCE_EXECUTOR_ID=",
                "--KADENCE_TRUSTED_KEYS=", "--KADENCE_BEAT_INTERVAL_MS=", "--KADENCE_DRAIN_TIMEOUT_MS=");
        assertEquals(List.of("", ""), List.of(p.getBrokers(), p.getExecutorId()));
        assertEquals(List.of(), p.getTrustedKeys());
        assertNull(p.getBeatInterval());
        assertNull(p.getDrainTimeout());
    }
}
