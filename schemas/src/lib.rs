//! Kadence's wire contract, shared by the scheduler, the executor SDK and any tool that reads
//! Kadence's topics.
//!
//! # Data flow
//!
//! ```text
//! scheduler ──TriggerRecord──▶ {prefix}.triggers.{app} ──▶ executors of {app}
//! executors ──ResultRecord───▶ {prefix}.results        ──▶ scheduler (first result wins)
//! scheduler ──ControlRecord──▶ {prefix}.control        ──▶ executors (kill, …)
//! executors ──ExecutorBeat───▶ {prefix}.beats          ──▶ scheduler (liveness, load)
//! executors ──LogRecord──────▶ {prefix}.logs           ──▶ scheduler / log viewers
//! any consumer, on a record it cannot decode ──▶ {prefix}.dlq (reason in headers)
//! ```
//!
//! Every record is Avro with Confluent framing: magic byte `0`, a 4-byte big-endian schema
//! id, then one Avro binary datum. The `.avsc` files in `schemas/avro/` are the source of
//! truth; the Rust types mirror them.
//!
//! # Modules
//!
//! - [`ids`]: [`JobId`], [`TriggerId`] (deterministic run ids), [`AppName`], parsed at the
//!   boundary so that a value of these types is valid.
//! - [`topics`]: topic and group names under a prefix ([`Topics`]) and Kafka header names
//!   ([`headers`]).
//! - [`records`]: the five record types — [`TriggerRecord`], [`ResultRecord`],
//!   [`ControlRecord`], [`ExecutorBeat`], [`LogRecord`] — and their enums.
//! - [`catalog`]: every released schema version with its stable id, and the
//!   BACKWARD_TRANSITIVE compatibility check the tests run on every change.
//! - `allocation`: the cap on apache-avro's allocations (16 MiB), applied before any decode
//!   (re-exported as [`codec::limit_allocations`]).
//! - `datum_check`: the structural check a datum passes before apache-avro reads it.
//! - [`time`]: [`now_ms`], the milliseconds since the Unix epoch that every record's times
//!   are in.
//! - [`codec`]: Confluent framing ([`codec::encode`], [`codec::decode`]). Decoding reads any
//!   released version into the current type, never panics, and returns errors fit for a
//!   dead-letter header.
//! - `openapi` (feature `openapi`): the OpenAPI schemas of the identifiers, for the
//!   scheduler's API document.
//!
//! ```
//! use kadence_schemas::codec::{decode, encode};
//! use kadence_schemas::{AppName, ControlCommand, ControlRecord, JobId, Topics};
//!
//! let app = AppName::parse("billing")?;
//! let kill = ControlRecord {
//!     command: ControlCommand::Kill,
//!     app: app.clone(),
//!     job_id: Some(JobId::new(42)?),
//!     trigger_id: None,
//!     reason: Some("stuck on a lock".into()),
//!     requested_at_ms: 1_767_225_600_000,
//! };
//! let bytes = encode(&kill)?;
//! assert_eq!(decode::<ControlRecord>(&bytes)?, kill);
//! assert_eq!(Topics::default().triggers(&app), "kadence.triggers.billing");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod allocation;
pub mod catalog;
pub mod codec;
mod datum_check;
pub mod ids;
#[cfg(feature = "openapi")]
mod openapi;
pub mod records;
pub mod time;
pub mod topics;

pub use codec::{AvroRecord, CodecError};
pub use ids::{AppName, IdError, JobId, TriggerId};
pub use records::{
    BlockStrategy, ControlCommand, ControlRecord, ExecutorBeat, ExecutorState, GlueType, LogRecord,
    ResultRecord, TriggerRecord, TriggerType, UnknownEnumValue, result_code,
};
pub use time::now_ms;
pub use topics::{DEFAULT_PREFIX, Topics, headers};
