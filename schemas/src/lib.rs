//! Kadence's wire contract, shared by the scheduler, the executor SDK and any tool that reads
//! Kadence's topics.
//!
//! - [`ids`]: [`JobId`], [`TriggerId`] (deterministic run ids), [`AppName`], parsed at the
//!   boundary.
//! - [`topics`]: topic and group names under a prefix ([`Topics`]) and Kafka header names.
//! - [`records`]: the five record types — [`TriggerRecord`] (scheduler → executors),
//!   [`ResultRecord`] (executors → scheduler), [`ControlRecord`], [`ExecutorBeat`],
//!   [`LogRecord`] — mirroring the `.avsc` files in `schemas/avro/`, the source of truth.
//! - [`catalog`]: every released schema version with its stable id, and the
//!   BACKWARD_TRANSITIVE compatibility check the tests run.
//! - [`codec`]: Confluent framing ([`codec::encode`], [`codec::decode`]) with errors fit for a
//!   dead-letter header.

pub mod catalog;
pub mod codec;
pub mod ids;
pub mod records;
pub mod topics;

pub use codec::{AvroRecord, CodecError};
pub use ids::{AppName, IdError, JobId, TriggerId};
pub use records::{
    BlockStrategy, ControlCommand, ControlRecord, ExecutorBeat, ExecutorState, GlueType, LogRecord,
    ResultRecord, TriggerRecord, TriggerType, UnknownEnumValue, result_code,
};
pub use topics::{Topics, headers};
