//! The embedded schema catalog: every released version of every record, with a stable id.
//!
//! Kadence frames records the Confluent way (magic byte, 4-byte schema id, Avro binary) but
//! ships its own catalog instead of calling a schema registry: the ids below are stable
//! forever, so any consumer with this crate can read any record, and tools that speak the
//! Confluent framing can split id from payload. Id = record family × 1000 + version.
//!
//! The current schema of each record is `schemas/avro/<record>.avsc`; released versions are
//! frozen under `schemas/avro/history/<record>/v<N>.avsc`. To change a record:
//! 1. edit `<record>.avsc` (new fields need defaults; BACKWARD_TRANSITIVE compatibility is
//!    required and tested against every frozen version);
//! 2. copy it to `history/<record>/v<N+1>.avsc` and add an entry to [`CATALOG_SOURCES`] with id
//!    `family × 1000 + N+1`; the newest entry of a family is what the codec writes, unless
//!    the record type says an older version holds a record (see
//!    [`AvroRecord::writer_entry_for`](crate::codec::AvroRecord::writer_entry_for)).

use std::sync::LazyLock;

use apache_avro::Schema;
use apache_avro::schema_compatibility::SchemaCompatibility;

/// One released schema version.
#[derive(Debug, Clone)]
pub struct CatalogEntry {
    /// The stable schema id written in the Confluent frame.
    pub id: u32,
    /// Record name, e.g. `TriggerRecord`.
    pub record: &'static str,
    /// Version within the record, from 1.
    pub version: u32,
    /// The parsed schema.
    pub schema: Schema,
    /// The `.avsc` text.
    pub source: &'static str,
}

/// `(id, record, version, .avsc)` of every released version, oldest first per record.
pub const CATALOG_SOURCES: &[(u32, &str, u32, &str)] = &[
    (
        1001,
        "TriggerRecord",
        1,
        include_str!("../avro/history/trigger_record/v1.avsc"),
    ),
    (
        1002,
        "TriggerRecord",
        2,
        include_str!("../avro/history/trigger_record/v2.avsc"),
    ),
    (
        1003,
        "TriggerRecord",
        3,
        include_str!("../avro/history/trigger_record/v3.avsc"),
    ),
    (
        2001,
        "ResultRecord",
        1,
        include_str!("../avro/history/result_record/v1.avsc"),
    ),
    (
        3001,
        "ControlRecord",
        1,
        include_str!("../avro/history/control_record/v1.avsc"),
    ),
    (
        4001,
        "ExecutorBeat",
        1,
        include_str!("../avro/history/executor_beat/v1.avsc"),
    ),
    (
        4002,
        "ExecutorBeat",
        2,
        include_str!("../avro/history/executor_beat/v2.avsc"),
    ),
    (
        5001,
        "LogRecord",
        1,
        include_str!("../avro/history/log_record/v1.avsc"),
    ),
    (
        5002,
        "LogRecord",
        2,
        include_str!("../avro/history/log_record/v2.avsc"),
    ),
];

/// The current schema of each record: `(record, .avsc)`.
pub const CURRENT_SOURCES: &[(&str, &str)] = &[
    ("TriggerRecord", include_str!("../avro/trigger_record.avsc")),
    ("ResultRecord", include_str!("../avro/result_record.avsc")),
    ("ControlRecord", include_str!("../avro/control_record.avsc")),
    ("ExecutorBeat", include_str!("../avro/executor_beat.avsc")),
    ("LogRecord", include_str!("../avro/log_record.avsc")),
];

static ENTRIES: LazyLock<Vec<CatalogEntry>> = LazyLock::new(|| {
    // Every encode and decode loads the catalog first: the earliest point to cap apache-avro.
    crate::allocation::limit_allocations();
    CATALOG_SOURCES
        .iter()
        .map(|&(id, record, version, source)| CatalogEntry {
            id,
            record,
            version,
            // The files are compiled in and parsed by the tests: a failure is a build defect.
            schema: Schema::parse_str(source).unwrap_or_else(|error| {
                panic!("catalog schema {id} ({record}) is invalid: {error}")
            }),
            source,
        })
        .collect()
});

static CURRENT: LazyLock<Vec<(&'static str, Schema)>> = LazyLock::new(|| {
    CURRENT_SOURCES
        .iter()
        .map(|&(record, source)| {
            let schema = Schema::parse_str(source)
                .unwrap_or_else(|error| panic!("current schema of {record} is invalid: {error}"));
            (record, schema)
        })
        .collect()
});

/// Every released version.
pub fn entries() -> &'static [CatalogEntry] {
    &ENTRIES
}

/// The released version with schema id `id`.
pub fn schema_for_id(id: u32) -> Option<&'static CatalogEntry> {
    ENTRIES.iter().find(|entry| entry.id == id)
}

/// The newest released version of `record`: what the codec writes.
pub fn latest(record: &str) -> Option<&'static CatalogEntry> {
    ENTRIES
        .iter()
        .filter(|entry| entry.record == record)
        .max_by_key(|entry| entry.version)
}

/// The released version of `record` whose schema is `avsc`, compared in Avro's Parsing
/// Canonical Form (formatting, docs and defaults aside), as a schema registry looks a schema
/// up; `Err` with the parser's message if `avsc` is not a valid schema.
pub fn released_version_of(
    record: &str,
    avsc: &str,
) -> Result<Option<&'static CatalogEntry>, String> {
    let wanted = Schema::parse_str(avsc)
        .map_err(|error| error.to_string())?
        .canonical_form();
    Ok(ENTRIES
        .iter()
        .find(|entry| entry.record == record && entry.schema.canonical_form() == wanted))
}

/// The current (reader) schema of `record`, from `schemas/avro/<record>.avsc`.
pub fn current_schema(record: &str) -> Option<&'static Schema> {
    CURRENT
        .iter()
        .find(|(name, _)| *name == record)
        .map(|(_, schema)| schema)
}

/// A schema change that breaks readers of older data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "schema cannot read data written with version {version}: {reason} (new fields need a default; \
     fields, types and enum symbols already written must stay readable)"
)]
pub struct CompatibilityError {
    /// The earlier version (1-based position in the list given) that cannot be read.
    pub version: usize,
    /// What is incompatible.
    pub reason: String,
}

/// Checks BACKWARD_TRANSITIVE compatibility: `reader` must read data written with every one
/// of `earlier_writers` (oldest first).
pub fn check_backward_transitive(
    reader: &Schema,
    earlier_writers: &[Schema],
) -> Result<(), CompatibilityError> {
    for (index, writer) in earlier_writers.iter().enumerate() {
        SchemaCompatibility::can_read(writer, reader).map_err(|error| CompatibilityError {
            version: index + 1,
            reason: error.to_string(),
        })?;
    }
    Ok(())
}
