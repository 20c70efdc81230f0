package io.kadence.executor.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kadence.executor.Executor;
import io.kadence.executor.ExecutorConfigException;
import io.kadence.executor.JobContext;
import io.kadence.executor.KadenceJob;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

class KadenceExecutorAutoConfigurationTest {
    /** A bean with handlers, as an application declares them. */
    public static class Reports {
        @KadenceJob("dailyReport")
        public String dailyReport(JobContext ctx) {
            return "done";
        }

        @KadenceJob("cleanup")
        public void cleanup() {}
    }

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(KadenceExecutorAutoConfiguration.class))
            .withBean(Reports.class);

    @Test
    void withAnAppTheExecutorIsBuiltFromThePropertiesAndTheHandlerBeans() {
        runner.withPropertyValues("kadence.executor.app=billing", "kadence.executor.brokers=localhost:9092",
                "kadence.executor.allow-unverified=true",
                "kadence.executor.executor-key=0123456789abcdef.AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",
                "kadence.executor.auto-startup=false", "kadence.executor.kafka.security.protocol=PLAINTEXT")
                .run(context -> {
                    KadenceExecutorLifecycle lifecycle = context.getBean(KadenceExecutorLifecycle.class);
                    assertFalse(lifecycle.isRunning());
                    Executor executor = lifecycle.builder().build();
                    assertEquals(List.of("cleanup", "dailyReport"), executor.handlers());
                });
    }

    @Test
    void withoutAnAppNothingIsConfigured() {
        runner.run(context -> assertTrue(context.getBeansOfType(KadenceExecutorLifecycle.class).isEmpty()));
    }

    @Test
    void missingKeysAreRefusedAsTheBuilderRefusesThem() {
        runner.withPropertyValues("kadence.executor.app=billing", "kadence.executor.brokers=localhost:9092",
                "kadence.executor.auto-startup=false")
                .run(context -> {
                    KadenceExecutorLifecycle lifecycle = context.getBean(KadenceExecutorLifecycle.class);
                    try {
                        lifecycle.builder().build();
                        throw new AssertionError("built without a trusted key");
                    } catch (ExecutorConfigException refused) {
                        assertTrue(refused.getMessage().startsWith("no trusted key"), refused.getMessage());
                    }
                });
    }
}
