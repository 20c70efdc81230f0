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
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.EncoderFactory;
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
        ExecutorBeat beat = beat(List.of(TrustedKeys.ROUND_SIGNATURES_FEATURE));
        assertEquals(beat, Codec.decodeBeat(Codec.encode(beat)));
        ControlRecord kill = new ControlRecord(ControlCommand.KILL, "billing", 42L, null, null, 5);
        assertEquals(kill, Codec.decodeControl(Codec.encode(kill)));
    }

    static ExecutorBeat beat(List<String> features) {
        return new ExecutorBeat("e-1", "billing", "host", "java-0.1.0", List.of("a"), List.of(0, 2), List.of(42L),
                List.of(), ExecutorState.STOPPING, 9, features);
    }

    private static int schemaId(byte[] framed) {
        return ((framed[1] & 0xff) << 24) | ((framed[2] & 0xff) << 16) | ((framed[3] & 0xff) << 8) | (framed[4] & 0xff);
    }

    @Test
    void aBeatWithFeaturesGoesAsV2AndOneWithoutAsV1() throws Exception {
        ExecutorBeat withFeatures = beat(List.of(TrustedKeys.ROUND_SIGNATURES_FEATURE, "some-later-feature"));
        byte[] v2 = Codec.encode(withFeatures);
        assertEquals(4002, Codec.writerId(withFeatures));
        assertEquals(4002, schemaId(v2));
        assertEquals(withFeatures, Codec.decodeBeat(v2));

        // Schedulers that predate v2 still read a beat that lists nothing.
        ExecutorBeat without = beat(List.of());
        byte[] v1 = Codec.encode(without);
        assertEquals(4001, Codec.writerId(without));
        assertEquals(4001, schemaId(v1));
        assertEquals(without, Codec.decodeBeat(v1));
        assertTrue(v1.length < v2.length, "a v1 datum has no features field at all");
    }

    @Test
    void aV1BeatReadsAsListingNoFeatures() throws Exception {
        // Written with the frozen v1 schema itself, as an executor of an older version writes it.
        GenericData.Record datum = new GenericData.Record(Codec.schema(4001));
        datum.put("executor_id", "e-9");
        datum.put("app", "billing");
        datum.put("host", "old-host");
        datum.put("version", "0.0.9");
        datum.put("handlers", List.of("report"));
        datum.put("owned_partitions", List.of(1));
        datum.put("running_jobs", List.of());
        datum.put("queued_jobs", List.of(7L));
        datum.put("state", new GenericData.EnumSymbol(Codec.schema(4001).getField("state").schema(), "RUNNING"));
        datum.put("sent_at_ms", 1_234L);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.writeBytes(new byte[] {0, 0, 0, 0x0f, (byte) 0xa1}); // 4001
        BinaryEncoder encoder = EncoderFactory.get().directBinaryEncoder(out, null);
        new GenericDatumWriter<GenericRecord>(datum.getSchema()).write(datum, encoder);
        encoder.flush();

        ExecutorBeat decoded = Codec.decodeBeat(out.toByteArray());
        assertEquals(new ExecutorBeat("e-9", "billing", "old-host", "0.0.9", List.of("report"), List.of(1), List.of(),
                List.of(7L), ExecutorState.RUNNING, 1_234, List.of()), decoded);
    }

    @Test
    void theJarHoldsTheRepositorysSchemasAndTheNewestEqualsTheCurrentOne() throws IOException {
        Path avro = Path.of("../../../schemas/avro");
        assertEquals(parse(avro.resolve("trigger_record.avsc")), Codec.schema(1003));
        assertEquals(parse(avro.resolve("result_record.avsc")), Codec.schema(2001));
        assertEquals(parse(avro.resolve("control_record.avsc")), Codec.schema(3001));
        assertEquals(parse(avro.resolve("executor_beat.avsc")), Codec.schema(4002));
        assertEquals(parse(avro.resolve("history/executor_beat/v1.avsc")), Codec.schema(4001));
        assertEquals(parse(avro.resolve("log_record.avsc")), Codec.schema(5002));
        assertEquals(parse(avro.resolve("history/log_record/v1.avsc")), Codec.schema(5001));
        assertEquals(parse(avro.resolve("history/trigger_record/v1.avsc")), Codec.schema(1001));
        assertEquals(List.of(1001, 1002, 1003), Codec.acceptedIds(Codec.TRIGGER));
        assertEquals(List.of(4001, 4002), Codec.acceptedIds(Codec.BEAT));
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
