package io.kadence.executor.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kadence.executor.wire.Codec;
import io.kadence.executor.wire.Records.BlockStrategy;
import io.kadence.executor.wire.Records.ControlCommand;
import io.kadence.executor.wire.Records.ControlRecord;
import io.kadence.executor.wire.Records.GlueType;
import io.kadence.executor.wire.Records.TriggerRecord;
import io.kadence.executor.wire.Records.TriggerType;
import io.kadence.executor.wire.TrustedKeys;
import java.nio.charset.StandardCharsets;
import java.security.KeyPairGenerator;
import java.time.Duration;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;

class IntakeTest {
    private static final String TOPIC = "kadence.triggers.billing";

    private static Settings settings(TrustedKeys keys) {
        return new Settings("b", "billing", "kadence", "e-1", true, false, false, keys, null, Duration.ofSeconds(10),
                Duration.ofSeconds(3), Duration.ofSeconds(1), Duration.ofSeconds(30), Duration.ofSeconds(5),
                Duration.ofHours(24), 20_000, 16, 10_000, null, Map.of());
    }

    /** Handlers {@code report} only; scripts as {@code scripts} says. */
    private static RunLauncher launcher(boolean scripts) {
        return new RunLauncher() {
            public List<String> names() {
                return List.of("report");
            }

            public boolean runsScripts() {
                return scripts;
            }

            public boolean has(String name) {
                return name.equals("report");
            }

            public void launch(Run run, JobLog log, boolean shadow) {}

            public void destroyAll() {}
        };
    }

    private static TriggerRecord trigger(String id, String handler, GlueType glue, Long expiresAt) {
        return new TriggerRecord(id, 1, 42, "billing", handler, "", 0, 1, BlockStrategy.SERIAL_EXECUTION, 0,
                TriggerType.CRON, 0, 50, 0, glue, null, null, null, expiresAt);
    }

    private static ConsumerRecord<byte[], byte[]> record(byte[] value, RecordHeaders headers) {
        return new ConsumerRecord<>(TOPIC, 0, 7, 0, TimestampType.CREATE_TIME, 0, value == null ? -1 : value.length,
                "42".getBytes(StandardCharsets.UTF_8), value, headers, Optional.empty());
    }

    private final RecentTriggers recent = new RecentTriggers(10);
    private final RememberedKills kills = new RememberedKills(Duration.ofHours(1).toMillis());

    private Intake intake(TrustedKeys keys, boolean scripts) {
        return new Intake(settings(keys), recent, kills, launcher(scripts));
    }

    @Test
    void theSignatureIsCheckedBeforeAnythingElseEvenANullValue() throws Exception {
        var generated = KeyPairGenerator.getInstance("Ed25519").generateKeyPair().getPublic().getEncoded();
        String key = Base64.getEncoder().encodeToString(Arrays.copyOfRange(generated, generated.length - 32,
                generated.length));
        Intake verifying = intake(TrustedKeys.parse(List.of(key)), false);
        var refused = assertInstanceOf(Intake.CannotTake.class, verifying.admit(record(null, new RecordHeaders()), 100));
        assertEquals("unsigned", refused.kind());
        assertTrue(refused.reason().startsWith("refused trigger record: unsigned record: "), refused.reason());
    }

    @Test
    void unreadableAndExpiredTriggersCannotBeTaken() {
        Intake open = intake(TrustedKeys.none(), false);
        assertEquals(new Intake.CannotTake("no_value", "trigger record has no value"),
                open.admit(record(null, new RecordHeaders()), 100));
        var garbage = assertInstanceOf(Intake.CannotTake.class,
                open.admit(record("{}".getBytes(StandardCharsets.UTF_8), new RecordHeaders()), 100));
        assertEquals("undecodable trigger record: record is not Confluent-framed Avro: first byte is 0x7b, "
                + "expected 0x00", garbage.reason());
        var expired = assertInstanceOf(Intake.CannotTake.class,
                open.admit(record(Codec.encode(trigger("42-1", "report", GlueType.BEAN, 90L)), new RecordHeaders()), 100));
        assertEquals("expired trigger record: 42-1 was valid until 90 (ms since the epoch) and arrived 10 ms later; "
                + "a copy, or a trigger that waited in its topic past its validity", expired.reason());
        assertInstanceOf(Intake.Take.class,
                open.admit(record(Codec.encode(trigger("42-2", "report", GlueType.BEAN, 100L)), new RecordHeaders()), 100),
                "valid up to and including its last millisecond");
    }

    @Test
    void thenRedeliveriesRememberedKillsAndHandlers() {
        Intake open = intake(TrustedKeys.none(), false);
        byte[] report = Codec.encode(trigger("42-1", "report", GlueType.BEAN, null));
        assertInstanceOf(Intake.Take.class, open.admit(record(report, new RecordHeaders()), 100));
        assertEquals(new Intake.Redelivered("42-1"), open.admit(record(report, new RecordHeaders()), 100));
        kills.remember(new ControlRecord(ControlCommand.KILL, "billing", 42L, null, null, 60), 100);
        var killed = assertInstanceOf(Intake.Answer.class,
                open.admit(record(Codec.encode(trigger("42-2", "report", GlueType.BEAN, null)), new RecordHeaders()), 100));
        assertEquals("killed: requested by an operator", killed.message());
        TriggerRecord later = new TriggerRecord("42-3", 1, 42, "billing", "nope", "", 0, 1,
                BlockStrategy.SERIAL_EXECUTION, 0, TriggerType.CRON, 0, 70, 0, GlueType.BEAN, null, null, null, null);
        var unknown = assertInstanceOf(Intake.Answer.class, open.admit(record(Codec.encode(later), new RecordHeaders()), 100));
        assertEquals("executor e-1 has no handler named \"nope\" (it has: report)", unknown.message());
        TriggerRecord script = new TriggerRecord("42-4", 1, 42, "billing", "", "", 0, 1,
                BlockStrategy.SERIAL_EXECUTION, 0, TriggerType.CRON, 0, 70, 0, GlueType.GLUE_SHELL, "echo", null, null, null);
        var scriptsOff = assertInstanceOf(Intake.Answer.class,
                open.admit(record(Codec.encode(script), new RecordHeaders()), 100));
        assertEquals("executor e-1 does not run scripts (GLUE_SHELL): script handlers are switched off",
                scriptsOff.message());
        TriggerRecord script2 = new TriggerRecord("42-5", 1, 42, "billing", "", "", 0, 1,
                BlockStrategy.SERIAL_EXECUTION, 0, TriggerType.CRON, 0, 70, 0, GlueType.GLUE_SHELL, "echo", null, null, null);
        assertInstanceOf(Intake.Take.class, intake(TrustedKeys.none(), true)
                .admit(record(Codec.encode(script2), new RecordHeaders()), 100));
    }
}
