package io.kadence.executor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kadence.executor.internal.JobLog;
import io.kadence.executor.internal.Outcome;
import io.kadence.executor.internal.Pending;
import io.kadence.executor.internal.Run;
import io.kadence.executor.wire.Records.BlockStrategy;
import io.kadence.executor.wire.Records.GlueType;
import io.kadence.executor.wire.Records.TriggerRecord;
import io.kadence.executor.wire.Records.TriggerType;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ExecutorBuilderTest {
    private static final String KEY = "0123456789abcdef.AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";

    private static ExecutorBuilder complete() {
        return Executor.builder().brokers("localhost:9092").app("billing").allowUnverified().executorKey(KEY);
    }

    private static String refusal(ExecutorBuilder builder) {
        return assertThrows(ExecutorConfigException.class, builder::build).getMessage();
    }

    @Test
    void theBuilderSaysWhatToSet() {
        assertTrue(refusal(Executor.builder().brokers("b").app("a").executorKey(KEY)).startsWith("no trusted key"));
        String unsigned = refusal(Executor.builder().brokers("b").app("a").allowUnverified());
        assertTrue(unsigned.startsWith("no executor key") && unsigned.contains("executor-key create"), unsigned);
        assertTrue(refusal(complete().brokers(" ")).startsWith("no brokers"));
        assertTrue(refusal(complete().app(null)).startsWith("no app"));
        assertTrue(refusal(complete().app("a.b")).startsWith("invalid app name \"a.b\""));
        assertTrue(refusal(complete().trustedKey("nope!")).startsWith("trustedKey: "));
        assertTrue(refusal(complete().executorKey("nope")).startsWith("executorKey: executor key is not"));
        assertTrue(refusal(complete().sessionTimeout(Duration.ofSeconds(5))).startsWith("handBackWait (5000 ms)"));
        assertTrue(refusal(complete().sessionTimeout(Duration.ofSeconds(10)).handBackWait(Duration.ofMillis(5_001)))
                .startsWith("handBackWait (5001 ms) must be at most half of the session timeout (10000 ms)"));
        complete().sessionTimeout(Duration.ofSeconds(10)).handBackWait(Duration.ofSeconds(5)).handler("ok", ctx -> {})
                .build();
        // The broker keeps the session under the consumer protocol: the wait answers to it only.
        complete().groupProtocol(GroupProtocol.CONSUMER).sessionTimeout(Duration.ofSeconds(10))
                .handBackWait(Duration.ofSeconds(10)).handler("ok", ctx -> {}).build();
        assertTrue(refusal(complete().groupProtocol(GroupProtocol.CONSUMER).kafkaOption("session.timeout.ms", "1"))
                .contains("not allowed with groupProtocol(GroupProtocol.CONSUMER)"));
        assertTrue(refusal(Executor.builder().brokers("b").app("a").executorKey(KEY).scripts(true))
                .startsWith("scripts(true) runs the source that triggers carry"));
        assertEquals(List.of("ok"), complete().handler("ok", ctx -> {}).build().handlers());
    }

    /** Handlers of the test below: every shape {@link KadenceJob} allows. */
    public static final class Jobs {
        int inits;

        @KadenceJob(value = "noted", init = "open")
        public String noted(JobContext ctx) {
            return "note for " + ctx.params();
        }

        @KadenceJob("helper")
        public void helper() {
            KadenceJobHelper.log("param {}", KadenceJobHelper.getJobParam());
            KadenceJobHelper.handleFail("failed through the helper");
        }

        @KadenceJob("timeout")
        public void timeout() {
            KadenceJobHelper.handleTimeout("took too long");
        }

        @KadenceJob("throws")
        public void fails() throws JobFailedException {
            throw new JobFailedException("no", Duration.ofSeconds(30));
        }

        void open() {
            inits++;
        }
    }

    @Test
    void annotatedMethodsRunAsHandlers() throws Exception {
        Jobs jobs = new Jobs();
        Map<String, HandlerRegistry.Entry> entries = new java.util.TreeMap<>();
        HandlerRegistry.annotated(jobs).forEach(entry -> entries.put(entry.name(), entry));
        HandlerRegistry registry = new HandlerRegistry(entries, null);
        assertEquals(List.of("helper", "noted", "throws", "timeout"), registry.names());
        assertEquals(Outcome.success("note for x"), run(registry, "noted"));
        assertEquals(Outcome.success("note for x"), run(registry, "noted"));
        assertEquals(1, jobs.inits, "init runs once");
        assertEquals(Outcome.failure("failed through the helper"), run(registry, "helper"));
        assertEquals(Outcome.timeout("took too long"), run(registry, "timeout"));
        assertEquals(Outcome.failure("no", 30_000L), run(registry, "throws"));
        registry.destroyAll();
    }

    private static Outcome run(HandlerRegistry registry, String handler) throws Exception {
        TriggerRecord trigger = new TriggerRecord("1-1", 1, 1, "app", handler, "x", 0, 1,
                BlockStrategy.SERIAL_EXECUTION, 0, TriggerType.MANUAL, 0, 0, 0, GlueType.BEAN, null, null, null, null);
        Run run = new Run(new Pending(trigger, 0, 0, 0, null));
        registry.launch(run, new JobLog(10), false);
        return run.outcome().get(10, TimeUnit.SECONDS);
    }

    @Test
    void aSuccessNoteIsCutAt16KiB() {
        String note = "é".repeat(10_000); // 20 000 bytes
        String cut = JobContext.boundNote(note);
        assertEquals(JobContext.MAX_NOTE_BYTES, cut.getBytes(java.nio.charset.StandardCharsets.UTF_8).length);
        assertEquals("short", JobContext.boundNote("short"));
    }

    @Test
    void aHandlerWithAnotherShapeIsRefused() {
        Object bean = new Object() {
            @KadenceJob("bad")
            public int bad(String text) {
                return 1;
            }
        };
        assertTrue(assertThrows(ExecutorConfigException.class, () -> HandlerRegistry.annotated(bean)).getMessage()
                .contains("must take nothing or a JobContext"));
    }
}
