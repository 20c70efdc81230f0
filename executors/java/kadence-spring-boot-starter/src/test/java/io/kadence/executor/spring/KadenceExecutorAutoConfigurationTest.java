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

    /** As an application maps them from an environment that lacks the variables. */
    @Test
    void blankPropertiesCountAsUnset() {
        runner.withPropertyValues("kadence.executor.app=billing", "kadence.executor.brokers=localhost:9092",
                "kadence.executor.allow-unverified=true", "kadence.executor.allow-unsigned=true",
                "kadence.executor.executor-id=", "kadence.executor.metrics-address=", "kadence.executor.executor-key=",
                "kadence.executor.group-protocol=", "kadence.executor.broker-kind=", "kadence.executor.trusted-keys=",
                "kadence.executor.drain-timeout=", "kadence.executor.auto-startup=false")
                .run(context -> {
                    Executor executor = context.getBean(KadenceExecutorLifecycle.class).builder().build();
                    assertTrue(executor.executorId().startsWith("billing-"), executor.executorId());
                });
        for (String[] unset : new String[][] {{"kadence.executor.app= ", "no app: "},
                {"kadence.executor.brokers= ", "no brokers: "}}) {
            runner.withPropertyValues("kadence.executor.app=billing", "kadence.executor.brokers=localhost:9092",
                    "kadence.executor.allow-unverified=true", "kadence.executor.allow-unsigned=true",
                    "kadence.executor.auto-startup=false", unset[0])
                    .run(context -> assertRefused(context.getBean(KadenceExecutorLifecycle.class), unset[1]));
        }
        runner.withPropertyValues("kadence.executor.app=billing", "kadence.executor.brokers=localhost:9092",
                "kadence.executor.allow-unverified=true", "kadence.executor.allow-unsigned=true",
                "kadence.executor.broker-kind=redpanda", "kadence.executor.auto-startup=false")
                .run(context -> assertRefused(context.getBean(KadenceExecutorLifecycle.class),
                        "kadence.executor.broker-kind: broker kind must be kafka or tansu, not redpanda"));
    }

    /** A session shorter than 10 s needs a hand-back wait of at most half of it, which the
     * starter takes from {@code hand-back-wait}. */
    @Test
    void aShortSessionStartsWithAShortHandBackWait() {
        String[] base = {"kadence.executor.app=billing", "kadence.executor.brokers=localhost:9092",
                "kadence.executor.allow-unverified=true", "kadence.executor.allow-unsigned=true",
                "kadence.executor.auto-startup=false", "kadence.executor.session-timeout=6s"};
        runner.withPropertyValues(base).run(context -> assertRefused(
                context.getBean(KadenceExecutorLifecycle.class), "handBackWait (5000 ms) must be at most half"));
        runner.withPropertyValues(base).withPropertyValues("kadence.executor.hand-back-wait=3s")
                .run(context -> context.getBean(KadenceExecutorLifecycle.class).builder().build());
    }

    private static void assertRefused(KadenceExecutorLifecycle lifecycle, String start) {
        try {
            lifecycle.builder().build();
            throw new AssertionError("built without refusing " + start);
        } catch (ExecutorConfigException refused) {
            assertTrue(refused.getMessage().startsWith(start), refused.getMessage());
        }
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
