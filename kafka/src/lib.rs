//! Kafka plumbing the Kadence scheduler and its executors share, so that both sides classify
//! errors, configure clients, dead-letter records and close consumers the same way.
//!
//! - [`settings`]: [`KafkaSettings`], the brokers plus the operator's raw librdkafka options,
//!   merged over Kadence's defaults for each client; the idempotent producer both sides use.
//! - [`retry`]: [`is_retriable`] (which errors may succeed when tried again) and [`Backoff`],
//!   the one pace every retry loop waits at; [`failure_log`]: [`FailureLog`], how such a
//!   loop logs its failures (a streak's beginning, once a minute, its end; not every tick).
//! - [`closing`]: [`close_consumer`], closing a consumer on a thread of its own with a limit
//!   (librdkafka's close has no deadline and would block a runtime worker).
//! - [`dead_letter`]: [`DeadLetters`] and the `kadence.dlq.*` headers naming why and where
//!   from a record went to `{prefix}.dlq`.
//! - [`resume`]: [`ResumePoints`], where a group member starts a partition it is assigned:
//!   at the committed offset, by a detour on tansu, whose fetches skip the rest of a batch.
//! - [`batch`]: [`BatchConsumer`] and [`run_steps`], the one shape of a reader that takes a
//!   batch, processes it and commits past it only when done.
//! - [`producer`]: [`KafkaProducer`], the producer every Kadence process sends with: a
//!   future of the broker's answer per record, polled without rdkafka's idle spin.
//! - [`signal`]: [`shutdown_signal`], the future a process stops on (SIGTERM or SIGINT).
//! - [`executor_signing`]: executor keys, the HMAC-SHA256 executors sign every record they
//!   write with (results, logs, beats, dead letters) and the scheduler verifies.
//! - [`signing`]: Ed25519 signatures of trigger and control records, bound to their topic:
//!   [`RecordSigner`] (the scheduler signs every record it produces) and [`TrustedKeys`]
//!   (executors verify before they read a record, and refuse it saying why: [`VerifyError`]).
//! - [`trace`]: one trace per run across Kafka: the `traceparent` header on trigger and
//!   result records, and [`RunTracer`], the OpenTelemetry tracer (optionally exporting over
//!   OTLP) each component starts its spans with.
//!
//! The executor SDK re-exports only [`shutdown_signal`] and [`BrokerKind`](settings::BrokerKind) (its builder takes trusted keys as
//! base64 text, parsed with [`PublicKey::parse`]); the rest is internal plumbing of
//! Kadence's own processes and not part of the SDK's API.

#![warn(missing_docs)]

pub mod batch;
pub mod closing;
pub mod dead_letter;
pub mod executor_signing;
pub mod failure_log;
pub mod producer;
pub mod resume;
pub mod retry;
pub mod settings;
pub mod signal;
pub mod signing;
pub mod trace;

pub use batch::{
    BatchConsumer, BatchStep, CONSUMER_CLOSE_LIMIT, partition_lags, reads_every_partition,
    run_steps,
};
pub use closing::close_consumer;
pub use dead_letter::{DeadLetters, RecordOrigin, dead_letter_headers};
pub use executor_signing::{
    ExecutorAuthError, ExecutorKey, ExecutorKeyError, verify_executor_record,
};
pub use failure_log::{FailureLog, Severity};
pub use producer::{DeliveryFuture, KafkaProducer};
pub use resume::{ResumePoints, rebalance_resuming};
pub use retry::{Backoff, is_retriable};
pub use settings::KafkaSettings;
pub use signal::shutdown_signal;
pub use signing::{
    KeyError, PublicKey, ROUND_SIGNATURE_LEN, RecordSigner, RoundRecord, TrustedKeys, VerifyError,
};
pub use trace::{RunTracer, TraceError};
