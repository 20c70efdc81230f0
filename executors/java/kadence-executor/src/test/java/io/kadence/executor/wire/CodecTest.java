package io.kadence.executor.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kadence.executor.wire.Records.BlockStrategy;
import io.kadence.executor.wire.Records.ControlCommand;
import io.kadence.executor.wire.Records.ControlRecord;
import io.kadence.executor.wire.Records.ExecutorBeat;
import io.kadence.executor.wire.Records.ExecutorState;
import io.kadence.executor.wire.Records.GlueType;
import io.kadence.executor.wire.Records.LogRecord;
import io.kadence.executor.wire.Records.ResultRecord;
import io.kadence.executor.wire.Records.TriggerRecord;
import io.kadence.executor.wire.Records.TriggerType;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.apache.avro.Schema;
import org.junit.jupiter.api.Test;

class CodecTest {
    static TriggerRecord trigger(String id, TriggerType type, Long expiresAt) {
        return new TriggerRecord(id, 7, 42, "billing", "report", "p", 0, 1, BlockStrategy.SERIAL_EXECUTION, 0,
                type, 1_000, 900, 0, GlueType.BEAN, null, null, null, expiresAt);
    }

    @Test
    void triggersRoundTripUnderTheOldestVersionThatHoldsThem() throws Exception {
        TriggerRecord v1 = trigger("42-1000", TriggerType.CRON, null);
        TriggerRecord v2 = trigger("42-1000", TriggerType.BACKFILL, null);
        TriggerRecord v3 = trigger("42-1000", TriggerType.CRON, 5_000L);
        assertEquals(1001, Codec.writerId(v1));
        assertEquals(1002, Codec.writerId(v2));
        assertEquals(1003, Codec.writerId(v3));
        for (TriggerRecord trigger : List.of(v1, v2, v3)) {
            byte[] framed = Codec.encode(trigger);
            assertEquals(0, framed[0]);
            assertEquals(Codec.writerId(trigger), ((framed[3] & 0xff) << 8) | (framed[4] & 0xff));
            assertEquals(trigger, Codec.decodeTrigger(framed));
        }
    }

    @Test
    void everyOtherRecordRoundTrips() throws Exception {
        ResultRecord result = new ResultRecord("42-1000", 7, 42, "billing", "e-1", 500, "boom", 1, 2, 3, 60_000L);
        assertEquals(result, Codec.decodeResult(Codec.encode(result)));
        LogRecord log = new LogRecord("42-1000", 7, 42, "e-1", 1, List.of("a", "b"), 3, 2L);
        byte[] framed = Codec.encode(log);
        assertEquals(5002, ((framed[3] & 0xff) << 8) | (framed[4] & 0xff), "log records are written as v2");
        assertEquals(log, Codec.decodeLog(framed));
        ExecutorBeat beat = new ExecutorBeat("e-1", "billing", "host", "java-0.1.0", List.of("a"), List.of(0, 2),
                List.of(42L), List.of(), ExecutorState.STOPPING, 9);
        assertEquals(beat, Codec.decodeBeat(Codec.encode(beat)));
        ControlRecord kill = new ControlRecord(ControlCommand.KILL, "billing", 42L, null, null, 5);
        assertEquals(kill, Codec.decodeControl(Codec.encode(kill)));
    }

    @Test
    void theJarHoldsTheRepositorysSchemasAndTheNewestEqualsTheCurrentOne() throws IOException {
        Path avro = Path.of("../../../schemas/avro");
        assertEquals(parse(avro.resolve("trigger_record.avsc")), Codec.schema(1003));
        assertEquals(parse(avro.resolve("result_record.avsc")), Codec.schema(2001));
        assertEquals(parse(avro.resolve("control_record.avsc")), Codec.schema(3001));
        assertEquals(parse(avro.resolve("executor_beat.avsc")), Codec.schema(4001));
        assertEquals(parse(avro.resolve("log_record.avsc")), Codec.schema(5002));
        assertEquals(parse(avro.resolve("history/log_record/v1.avsc")), Codec.schema(5001));
        assertEquals(parse(avro.resolve("history/trigger_record/v1.avsc")), Codec.schema(1001));
        assertEquals(List.of(1001, 1002, 1003), Codec.acceptedIds(Codec.TRIGGER));
    }

    private static Schema parse(Path file) throws IOException {
        return new Schema.Parser().parse(Files.readString(file));
    }

    @Test
    void theDecoderSaysWhatIsWrongAsTheRustSdkWordsIt() {
        byte[] good = Codec.encode(trigger("42-1000", TriggerType.CRON, null));
        assertMessage("record is empty: expected Confluent-framed Avro (magic byte 0x00, 4-byte schema id, datum)",
                new byte[0]);
        assertMessage("record is 3 bytes: too short for a Confluent frame (5-byte header)", new byte[] {0, 0, 3});
        assertMessage("record is not Confluent-framed Avro: first byte is 0x7b, expected 0x00", "{\"a\":1}".getBytes());
        assertMessage("unknown schema id 921: this reader accepts TriggerRecord ids 1001, 1002, 1003; the record was "
                + "written by a newer Kadence (upgrade this reader) or not by Kadence", new byte[] {0, 0, 0, 3, (byte) 0x99, 1});
        byte[] result = Codec.encode(new ResultRecord("42-1", 1, 42, "a", "e", 200, null, 1, 2, 0, null));
        assertMessage("schema id 2001 is a ResultRecord, expected a TriggerRecord: the producer wrote to the wrong "
                + "topic", result);
        assertStartsWith("malformed TriggerRecord payload, corrupt or not written with its schema id: ",
                Arrays.copyOf(good, good.length - 3));
        byte[] longer = Arrays.copyOf(good, good.length + 2);
        assertMessage("2 unexpected bytes after the TriggerRecord datum: the record is corrupt or not written with "
                + "its schema id", longer);
        assertMessage("invalid TriggerRecord: invalid trigger id \"12 5\": use only A-Z a-z 0-9 - _",
                Codec.encode(trigger("12 5", TriggerType.CRON, null)));
        assertMessage("invalid TriggerRecord: invalid trigger id \"x-1\": it must start with the job id and a dash",
                Codec.encode(trigger("x-1", TriggerType.CRON, null)));
        assertMessage("invalid TriggerRecord: invalid trigger id \"1\": use 3 to 128 characters",
                Codec.encode(trigger("1", TriggerType.CRON, null)));
    }

    @Test
    void aV1DatumNamingATenthTriggerTypeIsMalformed() {
        byte[] backfill = Codec.encode(trigger("42-1000", TriggerType.BACKFILL, null));
        backfill[4] = (byte) 0xe9; // 1002 -> 1001: v1 lists nine trigger types
        assertStartsWith("malformed TriggerRecord payload", backfill);
    }

    @Test
    void nullableFieldsStayNull() throws Exception {
        TriggerRecord decoded = Codec.decodeTrigger(Codec.encode(trigger("42-1000", TriggerType.CRON, null)));
        assertNull(decoded.expiresAtMs());
        assertNull(decoded.glueSource());
        assertArrayEquals(Codec.encode(decoded), Codec.encode(trigger("42-1000", TriggerType.CRON, null)));
    }

    private static void assertMessage(String expected, byte[] data) {
        CodecException error = assertThrows(CodecException.class, () -> Codec.decodeTrigger(data));
        assertEquals(expected, error.getMessage());
    }

    private static void assertStartsWith(String expected, byte[] data) {
        CodecException error = assertThrows(CodecException.class, () -> Codec.decodeTrigger(data));
        assertTrue(error.getMessage().startsWith(expected), error.getMessage());
    }
}
