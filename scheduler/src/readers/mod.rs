//! The readers: what executors write to Kafka, read back into the store, each a batch reader
//! of `kadence_kafka::batch` that commits only what it applied.
//!
//! - [`batch`]: the body the logs, shadow results and beats readers share (signature check,
//!   decoding, dead letters, commits), and the readers' one error type;
//! - [`results`]: consumes `{prefix}.results` and completes job-log rows, first result wins;
//! - [`logs`]: stores the lines runs write (`{prefix}.logs`) for the rolling log view;
//! - [`beats`]: reads `{prefix}.beats` into the in-memory executor registry
//!   ([`crate::engine::registry`]) and the `executors` table;
//! - [`shadow_results`]: stores shadow executors' results (`{prefix}.shadow-results`) apart
//!   from production's, for the replay operations' diff report;
//! - [`dead_letters`]: fails the runs whose triggers an executor dead-lettered, with the
//!   reason, so that alarms and retries see them;
//! - [`executor_auth`]: what executors write must be signed by an executor key of its app;
//!   every reader checks it with the node's keyring.

pub mod batch;
pub mod beats;
pub mod dead_letters;
pub mod executor_auth;
pub mod logs;
pub mod results;
pub mod shadow_results;
