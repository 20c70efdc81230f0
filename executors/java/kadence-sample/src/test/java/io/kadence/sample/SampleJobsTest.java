package io.kadence.sample;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.kadence.executor.spring.KadenceExecutorAutoConfiguration;
import io.kadence.executor.spring.KadenceExecutorLifecycle;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

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
}
