"""Records on the wire: Avro with Confluent framing (PROTOCOL.md section 2).

Byte 0 is 0x00, bytes 1-4 the schema id (big-endian), the rest one Avro datum. Schema id =
record family x 1000 + version. The released schemas are packaged under ``avro/`` as
``<record>_v<N>.avsc``, byte for byte the repository's ``schemas/avro/history`` files (a test
keeps them equal). Decoding reads with the writer schema the id names, resolved to the newest
version this package knows (Avro resolution: a v1 trigger's enum symbols are matched by name,
and a v1 datum naming a tenth trigger type is malformed, since v1 lists nine). Encoding writes
the oldest released version that holds the record (``writer_id``): for every record but a
trigger and a beat, the newest; a trigger goes as v3 with a validity window (``expires_at_ms``),
else as v2 when a BACKFILL, else as v1; a beat goes as v2 when it lists ``features``, else as
v1. Every failure is a ``CodecError`` whose message is fit for a dead-letter reason, worded as
the Rust SDK's.
"""

import io
import json
import re
import struct
from importlib import resources

import fastavro

MAGIC_BYTE = 0
HEADER_LEN = 5

#: (schema id, record, file) of every released version, oldest first per record.
CATALOG = [
    (1001, "TriggerRecord", "trigger_record_v1.avsc"),
    (1002, "TriggerRecord", "trigger_record_v2.avsc"),
    (1003, "TriggerRecord", "trigger_record_v3.avsc"),
    (2001, "ResultRecord", "result_record_v1.avsc"),
    (3001, "ControlRecord", "control_record_v1.avsc"),
    (4001, "ExecutorBeat", "executor_beat_v1.avsc"),
    (4002, "ExecutorBeat", "executor_beat_v2.avsc"),
    (5001, "LogRecord", "log_record_v1.avsc"),
    (5002, "LogRecord", "log_record_v2.avsc"),
]

_TRIGGER_ID = re.compile(r"^[A-Za-z0-9_-]{3,128}$")


class CodecError(Exception):
    """A record that cannot be encoded or decoded; the message says why."""


def _load(file_name):
    text = resources.files(__package__).joinpath("avro", file_name).read_text()
    return fastavro.parse_schema(json.loads(text))


_SCHEMAS = {schema_id: (record, _load(file)) for schema_id, record, file in CATALOG}


def _newest(record):
    ids = [schema_id for schema_id, (name, _) in _SCHEMAS.items() if name == record]
    return max(ids)


def accepted_ids(record):
    """The ids of `record` this reader decodes, oldest first."""
    return sorted(i for i, (name, _) in _SCHEMAS.items() if name == record)


#: TriggerRecord v2 (1002) only appended these trigger types: every other trigger is the same
#: datum under v1 (1001), which executors that predate v2 read (PROTOCOL.md section 2).
_V2_TRIGGER_TYPES = {"BACKFILL"}
TRIGGER_RECORD_V1 = 1001
TRIGGER_RECORD_V2 = 1002
#: v3 appended the validity window ``expires_at_ms``.
TRIGGER_RECORD_V3 = 1003
#: ExecutorBeat v2 (4002) only appended ``features``: a beat that lists none is the same datum
#: under v1 (4001), which schedulers that predate v2 read (PROTOCOL.md section 2).
EXECUTOR_BEAT_V1 = 4001
EXECUTOR_BEAT_V2 = 4002


def writer_id(record, datum):
    """The schema id ``encode`` writes `datum` of `record` with: the oldest released version
    that holds it (for a trigger: v3 with a validity window, else v2 for a BACKFILL, else
    v1; for a beat: v2 when it lists features, else v1), the newest for every other record."""
    if record == "ExecutorBeat":
        return EXECUTOR_BEAT_V2 if datum.get("features") else EXECUTOR_BEAT_V1
    if record != "TriggerRecord":
        return _newest(record)
    if datum.get("expires_at_ms") is not None:
        return TRIGGER_RECORD_V3
    if datum.get("trigger_type") in _V2_TRIGGER_TYPES:
        return TRIGGER_RECORD_V2
    return TRIGGER_RECORD_V1


def encode(record, datum):
    """Frames `datum` (a dict) as the version of `record` that ``writer_id`` picks."""
    schema_id = writer_id(record, datum)
    out = io.BytesIO()
    out.write(struct.pack(">bI", MAGIC_BYTE, schema_id))
    try:
        fastavro.schemaless_writer(out, _SCHEMAS[schema_id][1], datum)
    except (ValueError, TypeError, KeyError) as error:
        raise CodecError(f"cannot encode {record}: {error}") from error
    return out.getvalue()


def decode(record, data):
    """The datum of a framed `record` written with any released version of its schema."""
    if not data:
        raise CodecError(
            "record is empty: expected Confluent-framed Avro (magic byte 0x00, "
            "4-byte schema id, datum)"
        )
    if data[0] != MAGIC_BYTE:
        raise CodecError(
            f"record is not Confluent-framed Avro: first byte is {data[0]:#04x}, expected 0x00"
        )
    if len(data) < HEADER_LEN:
        raise CodecError(
            f"record is {len(data)} bytes: too short for a Confluent frame (5-byte header)"
        )
    (schema_id,) = struct.unpack(">I", data[1:HEADER_LEN])
    if schema_id not in _SCHEMAS:
        accepted = ", ".join(str(i) for i in accepted_ids(record))
        raise CodecError(
            f"unknown schema id {schema_id}: this reader accepts {record} ids {accepted}; "
            "the record was written by a newer Kadence (upgrade this reader) or not by Kadence"
        )
    found, writer = _SCHEMAS[schema_id]
    if found != record:
        raise CodecError(
            f"schema id {schema_id} is a {found}, expected a {record}: "
            "the producer wrote to the wrong topic"
        )
    reader = _SCHEMAS[_newest(record)][1]
    payload = io.BytesIO(data[HEADER_LEN:])
    try:
        datum = fastavro.schemaless_reader(payload, writer, reader)
    except Exception as error:  # fastavro raises many kinds on garbage
        raise CodecError(
            f"malformed {record} payload, corrupt or not written with its schema id: {error!r}"
        ) from error
    left = len(data) - HEADER_LEN - payload.tell()
    if left:
        raise CodecError(
            f"{left} unexpected bytes after the {record} datum: "
            "the record is corrupt or not written with its schema id"
        )
    _check(record, datum)
    return datum


def check_trigger_id(text):
    """Raises CodecError unless `text` is a trigger id (PROTOCOL.md section 2)."""
    job, dash, rest = text.partition("-")
    valid = (
        _TRIGGER_ID.match(text)
        and dash
        and rest
        and job.isdigit()
        and job.isascii()
        and 0 < int(job) < 2**63
    )
    if not valid:
        raise CodecError(
            f"invalid trigger id {text!r}: 3 to 128 of A-Z a-z 0-9 - _, "
            "starting with the job id and a dash"
        )


def _check(record, datum):
    """The rules a decoded record must keep beyond its schema."""
    if record in ("TriggerRecord", "ResultRecord", "LogRecord"):
        try:
            check_trigger_id(datum["trigger_id"])
        except CodecError as error:
            raise CodecError(f"invalid {record}: {error}") from None
    if record == "ControlRecord" and datum.get("trigger_id") is not None:
        try:
            check_trigger_id(datum["trigger_id"])
        except CodecError as error:
            raise CodecError(f"invalid {record}: {error}") from None
    if datum.get("job_id") is not None and datum["job_id"] <= 0:
        raise CodecError(f"invalid {record}: job id {datum['job_id']} is not positive")
