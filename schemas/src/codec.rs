//! Confluent framing: byte 0 is the magic byte `0`, bytes 1–4 the big-endian schema id, the
//! rest one Avro binary datum.
//!
//! Encoding writes the newest catalog version of the record (for triggers: the oldest that
//! holds it, see [`AvroRecord::writer_entry_for`]). Decoding reads with the writer
//! schema named by the id (any released version) and resolves to the current schema, so old
//! records stay readable. Decoding never panics: every malformed input is a [`CodecError`]
//! whose message is fit for a dead-letter header.

use apache_avro::{Schema, from_avro_datum, from_value, write_avro_datum_ref};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use crate::allocation::{MAX_ALLOCATION_BYTES, limit_allocations};
use crate::catalog::{self, CatalogEntry};
use crate::datum_check;
use crate::records::{ControlRecord, ExecutorBeat, LogRecord, ResultRecord, TriggerRecord};

/// The Confluent magic byte.
pub const MAGIC_BYTE: u8 = 0;
/// Magic byte plus schema id.
pub const HEADER_LEN: usize = 5;

/// A record that could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// No bytes at all.
    #[error(
        "record is empty: expected Confluent-framed Avro (magic byte 0x00, 4-byte schema id, datum)"
    )]
    Empty,
    /// Fewer bytes than the frame header.
    #[error("record is {len} bytes: too short for a Confluent frame (5-byte header)")]
    TooShort {
        /// Bytes received.
        len: usize,
    },
    /// Not Confluent framing.
    #[error("record is not Confluent-framed Avro: first byte is {found:#04x}, expected 0x00")]
    WrongMagicByte {
        /// The first byte.
        found: u8,
    },
    /// The schema id is not in the catalog.
    #[error(
        "unknown schema id {id}: this reader accepts {expected} ids {accepted}; the record was \
         written by a newer Kadence (upgrade this reader) or not by Kadence"
    )]
    UnknownSchemaId {
        /// The id.
        id: u32,
        /// The record asked for.
        expected: &'static str,
        /// The ids of `expected` this reader decodes, comma separated, oldest first.
        accepted: String,
    },
    /// The schema id belongs to another record type.
    #[error(
        "schema id {id} is a {found}, expected a {expected}: the producer wrote to the wrong topic"
    )]
    WrongRecordType {
        /// The id.
        id: u32,
        /// The record the id names.
        found: &'static str,
        /// The record asked for.
        expected: &'static str,
    },
    /// The Avro payload is truncated or garbage.
    #[error("malformed {record} payload, corrupt or not written with its schema id: {message}")]
    MalformedAvro {
        /// The record type.
        record: &'static str,
        /// The decoder's complaint.
        message: String,
    },
    /// Bytes left after the datum.
    #[error(
        "{count} unexpected bytes after the {record} datum: the record is corrupt or not written with its schema id"
    )]
    TrailingBytes {
        /// The record type.
        record: &'static str,
        /// How many.
        count: usize,
    },
    /// The datum decoded but holds an invalid value (e.g. a malformed trigger id).
    #[error("invalid {record}: {message}")]
    InvalidValue {
        /// The record type.
        record: &'static str,
        /// What is invalid.
        message: String,
    },
    /// The record could not be encoded.
    #[error(
        "cannot encode {record}: {message} (the record type and its schema disagree: a Kadence bug)"
    )]
    Encode {
        /// The record type.
        record: &'static str,
        /// Why.
        message: String,
    },
}

/// A record type with a schema in the catalog.
pub trait AvroRecord: Serialize + DeserializeOwned {
    /// The Avro record name, e.g. `TriggerRecord`.
    const RECORD: &'static str;

    /// The version the codec writes: the newest in the catalog, identical to the current
    /// `.avsc` (the compatibility tests check both).
    fn writer_entry() -> &'static CatalogEntry {
        catalog::latest(Self::RECORD).expect("every record type has a catalog entry")
    }

    /// The schema id [`encode`] writes in the frame.
    fn schema_id() -> u32 {
        Self::writer_entry().id
    }

    /// The schema [`encode`] writes with.
    fn schema() -> &'static Schema {
        &Self::writer_entry().schema
    }

    /// The schema decoded records are resolved to.
    fn reader_schema() -> &'static Schema {
        catalog::current_schema(Self::RECORD).expect("every record type has a current schema")
    }

    /// The version [`encode`] writes this record with: the newest, unless the record type
    /// knows an older one holds this record exactly (then readers that predate the newer
    /// version keep reading every record they can represent).
    fn writer_entry_for(&self) -> &'static CatalogEntry {
        Self::writer_entry()
    }
}

impl AvroRecord for TriggerRecord {
    const RECORD: &'static str = "TriggerRecord";

    /// v2 (1002) only added the `BACKFILL` trigger type, at the end of the enum: every other
    /// trigger is the same datum under v1 (1001), which executors built before v2 read. v3
    /// (1003) added the validity window `expires_at_ms`. So a trigger with a window needs an
    /// executor that knows 1003, and one without needs 1002 only when it is a backfill.
    fn writer_entry_for(&self) -> &'static CatalogEntry {
        let id = match (self.expires_at_ms, self.trigger_type) {
            (Some(_), _) => TRIGGER_RECORD_V3,
            (None, crate::records::TriggerType::Backfill) => TRIGGER_RECORD_V2,
            (None, _) => TRIGGER_RECORD_V1,
        };
        catalog::schema_for_id(id).expect("TriggerRecord v1 to v3 are released")
    }
}

/// The schema id of `TriggerRecord` v1: a trigger without a validity window, not a backfill.
pub const TRIGGER_RECORD_V1: u32 = 1001;
/// The schema id of `TriggerRecord` v2: a backfill without a validity window.
pub const TRIGGER_RECORD_V2: u32 = 1002;
/// The schema id of `TriggerRecord` v3: a trigger with a validity window.
pub const TRIGGER_RECORD_V3: u32 = 1003;
impl AvroRecord for ResultRecord {
    const RECORD: &'static str = "ResultRecord";
}
impl AvroRecord for ControlRecord {
    const RECORD: &'static str = "ControlRecord";
}
impl AvroRecord for ExecutorBeat {
    const RECORD: &'static str = "ExecutorBeat";

    /// v2 (4002) only appended `features`: a beat that lists none is the same datum under v1
    /// (4001), which schedulers built before v2 read.
    fn writer_entry_for(&self) -> &'static CatalogEntry {
        let id = if self.features.is_empty() {
            EXECUTOR_BEAT_V1
        } else {
            EXECUTOR_BEAT_V2
        };
        catalog::schema_for_id(id).expect("ExecutorBeat v1 and v2 are released")
    }
}

/// The schema id of `ExecutorBeat` v1: a beat that lists no features.
pub const EXECUTOR_BEAT_V1: u32 = 4001;
/// The schema id of `ExecutorBeat` v2: a beat that lists features.
pub const EXECUTOR_BEAT_V2: u32 = 4002;
impl AvroRecord for LogRecord {
    const RECORD: &'static str = "LogRecord";
}

/// Encodes `record` as `[0, schema id (BE u32), Avro datum]`, with the version
/// [`AvroRecord::writer_entry_for`] picks.
///
/// The datum is written by apache-avro's schema-aware serializer, straight from the serde
/// derive into the frame. Its generic route (`to_value`, `resolve`, `to_avro_datum`) builds a
/// value tree and resolves the schema again for every record: at 100 000 triggers/s that was a
/// quarter of the scheduler's CPU (measured with `perf`, see the book's benchmarks page, `docs/src/measurements/benchmarks.md`).
/// The direct route writes each field as the derive hands it over, so a record type's fields
/// must be declared in its schema's order, and its schema must define every named type inline
/// (the serializer is given no table of names; a reference is an error, never wrong bytes).
/// The codec tests hold every record type to the generic encoder's bytes.
pub fn encode<R: AvroRecord>(record: &R) -> Result<Vec<u8>, CodecError> {
    let entry = record.writer_entry_for();
    let mut framed = Vec::with_capacity(256);
    framed.push(MAGIC_BYTE);
    framed.extend_from_slice(&entry.id.to_be_bytes());
    write_avro_datum_ref(&entry.schema, record, &mut framed).map_err(|error| {
        CodecError::Encode {
            record: R::RECORD,
            message: error.to_string(),
        }
    })?;
    Ok(framed)
}

/// Splits a frame into its schema id and payload.
pub fn split_frame(bytes: &[u8]) -> Result<(u32, &[u8]), CodecError> {
    match bytes {
        [] => Err(CodecError::Empty),
        [first, ..] if *first != MAGIC_BYTE => Err(CodecError::WrongMagicByte { found: *first }),
        _ if bytes.len() < HEADER_LEN => Err(CodecError::TooShort { len: bytes.len() }),
        _ => {
            let id = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
            Ok((id, &bytes[HEADER_LEN..]))
        }
    }
}

/// The released ids of `record`, comma separated, oldest first: what a reader accepts.
fn accepted_ids(record: &str) -> String {
    catalog::entries()
        .iter()
        .filter(|entry| entry.record == record)
        .map(|entry| entry.id.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Decodes a framed record written with any released version of `R`'s schema.
pub fn decode<R: AvroRecord>(bytes: &[u8]) -> Result<R, CodecError> {
    limit_allocations();
    let (id, mut payload) = split_frame(bytes)?;
    let entry = catalog::schema_for_id(id).ok_or_else(|| CodecError::UnknownSchemaId {
        id,
        expected: R::RECORD,
        accepted: accepted_ids(R::RECORD),
    })?;
    if entry.record != R::RECORD {
        return Err(CodecError::WrongRecordType {
            id,
            found: entry.record,
            expected: R::RECORD,
        });
    }
    let malformed = |message: String| CodecError::MalformedAvro {
        record: R::RECORD,
        message,
    };
    // Structure first, so that apache-avro only ever reads a complete, plausible datum.
    let datum_len = datum_check::datum_len(&entry.schema, payload).map_err(malformed)?;
    if datum_len < payload.len() {
        return Err(CodecError::TrailingBytes {
            record: R::RECORD,
            count: payload.len() - datum_len,
        });
    }
    let value = from_avro_datum(&entry.schema, &mut payload, Some(R::reader_schema()))
        .map_err(|error| malformed(error.to_string()))?;
    from_value::<R>(&value).map_err(|error| CodecError::InvalidValue {
        record: R::RECORD,
        message: error.to_string(),
    })
}
