"""The codec against the repository's schemas and the protocol's rules."""

import io
import pathlib
import unittest

import fastavro

from kadence_executor import codec

REPOSITORY = pathlib.Path(__file__).resolve().parents[3]
PACKAGED = pathlib.Path(codec.__file__).parent / "avro"


def trigger(**changes):
    record = {
        "trigger_id": "7-1000", "log_id": 3, "job_id": 7, "app": "billing",
        "handler": "report", "params": "p", "shard_index": 0, "shard_total": 1,
        "block_strategy": "SERIAL_EXECUTION", "timeout_ms": 0, "trigger_type": "CRON",
        "scheduled_at_ms": 1000, "emitted_at_ms": 900, "attempt": 0, "glue_type": "BEAN",
        "glue_source": None, "glue_updated_at_ms": None, "replay_of": None,
        "expires_at_ms": None,
    }
    record.update(changes)
    return record


class PackagedSchemas(unittest.TestCase):
    def test_the_packaged_schemas_are_the_released_ones(self):
        for schema_id, _record, file_name in codec.CATALOG:
            record_dir, version = file_name.removesuffix(".avsc").rsplit("_v", 1)
            released = REPOSITORY / "schemas/avro/history" / record_dir / f"v{version}.avsc"
            self.assertEqual(
                (PACKAGED / file_name).read_bytes(), released.read_bytes(), schema_id
            )

    def test_every_released_schema_is_packaged(self):
        history = REPOSITORY / "schemas/avro/history"
        released = {f"{d.name}_{v.name}" for d in history.iterdir() for v in d.glob("v*.avsc")}
        self.assertEqual(released, {file for _, _, file in codec.CATALOG})


class Framing(unittest.TestCase):
    def test_round_trip_with_the_confluent_frame(self):
        data = codec.encode("TriggerRecord", trigger())
        self.assertEqual(data[:5], b"\x00\x00\x00\x03\xe9")  # magic byte, id 1001
        self.assertEqual(codec.decode("TriggerRecord", data), trigger())

    def test_bad_records_say_why(self):
        good = codec.encode("TriggerRecord", trigger())
        cases = [
            (b"", "record is empty"),
            (b'{"a": 1}', "record is not Confluent-framed Avro: first byte is 0x7b"),
            (b"\x00\x00", "record is 2 bytes: too short for a Confluent frame"),
            (b"\x00\x00\x00\x07\xcf" + good[5:],
             "unknown schema id 1999: this reader accepts TriggerRecord ids 1001, 1002, 1003;"),
            (codec.encode("ResultRecord", result()),
             "schema id 2001 is a ResultRecord, expected a TriggerRecord"),
            (good[:-3], "malformed TriggerRecord payload"),
            (good + b"\x00\x01", "2 unexpected bytes after the TriggerRecord datum"),
            (codec.encode("TriggerRecord", trigger(trigger_id="x-1")),
             "invalid TriggerRecord: invalid trigger id 'x-1'"),
        ]
        for data, message in cases:
            with self.assertRaises(codec.CodecError, msg=message) as raised:
                codec.decode("TriggerRecord", data)
            self.assertIn(message, str(raised.exception))


class TriggerRecordV2(unittest.TestCase):
    """v2 (1002) appends BACKFILL to the trigger types; everything else is still written as
    v1 (1001), which executors that predate v2 read."""

    def test_backfills_are_written_as_v2_and_everything_else_as_v1(self):
        backfill = codec.encode("TriggerRecord", trigger(trigger_type="BACKFILL"))
        self.assertEqual(backfill[:5], b"\x00\x00\x00\x03\xea")  # id 1002
        self.assertEqual(codec.decode("TriggerRecord", backfill), trigger(trigger_type="BACKFILL"))
        for trigger_type in ("CRON", "MANUAL", "REPLAY"):
            data = codec.encode("TriggerRecord", trigger(trigger_type=trigger_type))
            self.assertEqual(codec.writer_id("TriggerRecord", trigger(trigger_type=trigger_type)), 1001)
            self.assertEqual(data[:5], b"\x00\x00\x00\x03\xe9", trigger_type)
        self.assertEqual(codec.writer_id("ResultRecord", result()), 2001)

    def test_a_v2_record_of_any_trigger_type_reads(self):
        for trigger_type in ("CRON", "RETRY", "MISFIRE", "BACKFILL"):
            data = _framed(1002, trigger(trigger_type=trigger_type))
            self.assertEqual(codec.decode("TriggerRecord", data), trigger(trigger_type=trigger_type))

    def test_a_v1_record_naming_a_tenth_trigger_type_is_malformed(self):
        # The same datum as a v2 BACKFILL, framed as v1: v1 lists nine trigger types.
        data = bytearray(codec.encode("TriggerRecord", trigger(trigger_type="BACKFILL")))
        data[1:5] = (1001).to_bytes(4, "big")
        with self.assertRaises(codec.CodecError) as raised:
            codec.decode("TriggerRecord", bytes(data))
        self.assertTrue(str(raised.exception).startswith("malformed TriggerRecord payload"))

    def test_the_reader_accepts_every_released_id(self):
        self.assertEqual(codec.accepted_ids("TriggerRecord"), [1001, 1002, 1003])


class TriggerRecordV3(unittest.TestCase):
    """v3 (1003) appends the validity window ``expires_at_ms``: a trigger with one is written
    as v3, one without as before, and v1 and v2 records read with no window."""

    def test_a_trigger_with_a_window_is_written_as_v3_and_reads_back(self):
        for trigger_type in ("CRON", "BACKFILL"):
            windowed = trigger(trigger_type=trigger_type, expires_at_ms=3_601_000)
            data = codec.encode("TriggerRecord", windowed)
            self.assertEqual(data[:5], b"\x00\x00\x00\x03\xeb")  # id 1003
            self.assertEqual(codec.decode("TriggerRecord", data), windowed)

    def test_older_records_read_with_no_window(self):
        for schema_id in (1001, 1002):
            decoded = codec.decode("TriggerRecord", _framed(schema_id, trigger()))
            self.assertIsNone(decoded["expires_at_ms"])


class LogRecordV2(unittest.TestCase):
    """v2 (5002) appends ``run_started_at_ms``, naming the run the lines belong to: every log
    record is written as v2, and a v1 record reads with no run start."""

    def test_a_log_record_is_written_as_v2_and_reads_back(self):
        data = codec.encode("LogRecord", log_record(run_started_at_ms=1_500))
        self.assertEqual(data[:5], b"\x00\x00\x00\x13\x8a")  # id 5002
        self.assertEqual(codec.decode("LogRecord", data), log_record(run_started_at_ms=1_500))

    def test_a_v1_record_reads_with_no_run_start(self):
        v1 = log_record()
        del v1["run_started_at_ms"]
        decoded = codec.decode("LogRecord", _framed(5001, v1))
        self.assertEqual(decoded, log_record(run_started_at_ms=None))


class ExecutorBeatV2(unittest.TestCase):
    """v2 (4002) appends ``features``: a beat that lists some is written as v2, one that lists
    none as v1 (4001), which schedulers that predate v2 read, and a v1 beat reads with none."""

    def test_a_beat_with_features_is_written_as_v2_and_reads_back(self):
        # A name this executor does not define is carried as it is: readers ignore it.
        listed = beat(features=["round-signatures", "some-later-feature"])
        data = codec.encode("ExecutorBeat", listed)
        self.assertEqual(data[:5], b"\x00\x00\x00\x0f\xa2")  # id 4002
        self.assertEqual(codec.decode("ExecutorBeat", data), listed)

    def test_a_beat_without_features_is_written_as_v1(self):
        for unlisted in (beat(features=[]), _without_features(beat())):
            data = codec.encode("ExecutorBeat", unlisted)
            self.assertEqual(data[:5], b"\x00\x00\x00\x0f\xa1")  # id 4001
            self.assertEqual(data[5:], _framed(4001, _without_features(beat()))[5:])
            self.assertEqual(codec.decode("ExecutorBeat", data), beat(features=[]))

    def test_a_v1_beat_reads_with_no_features(self):
        decoded = codec.decode("ExecutorBeat", _framed(4001, _without_features(beat())))
        self.assertEqual(decoded["features"], [])
        self.assertEqual(decoded, beat(features=[]))

    def test_the_reader_accepts_both_ids(self):
        self.assertEqual(codec.accepted_ids("ExecutorBeat"), [4001, 4002])


def beat(**changes):
    record = {
        "executor_id": "billing-1", "app": "billing", "host": "h", "version": "python-0.1.0",
        "handlers": ["report"], "owned_partitions": [0, 2], "running_jobs": [7],
        "queued_jobs": [8], "state": "RUNNING", "sent_at_ms": 10_000,
        "features": ["round-signatures"],
    }
    record.update(changes)
    return record


def _without_features(datum):
    """`datum` as a writer that predates ExecutorBeat v2 has it."""
    return {name: value for name, value in datum.items() if name != "features"}


def log_record(**changes):
    record = {
        "trigger_id": "7-1000", "log_id": 3, "job_id": 7, "executor_id": "e",
        "first_line": 1, "lines": ["one", "two"], "emitted_at_ms": 2_000,
        "run_started_at_ms": 1_500,
    }
    record.update(changes)
    return record


def _framed(schema_id, datum):
    """`datum` written with the packaged schema of `schema_id` (whichever the codec picks)."""
    out = io.BytesIO()
    out.write(b"\x00" + schema_id.to_bytes(4, "big"))
    fastavro.schemaless_writer(out, codec._SCHEMAS[schema_id][1], datum)
    return out.getvalue()


def result():
    return {
        "trigger_id": "7-1000", "log_id": 3, "job_id": 7, "app": "billing",
        "executor_id": "e", "code": 200, "message": None, "started_at_ms": 1,
        "finished_at_ms": 2, "attempt": 0, "retry_after_ms": None,
    }


if __name__ == "__main__":
    unittest.main()
