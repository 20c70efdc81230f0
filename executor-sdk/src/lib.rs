//! The Kadence executor SDK: register plain async functions as handlers by name, and the
//! executor runs them when the scheduler triggers their jobs.
//!
//! ```no_run
//! use kadence_executor::{Executor, JobContext, JobError, JobResult};
//!
//! async fn send_report(ctx: JobContext) -> JobResult {
//!     println!("report for {} (attempt {})", ctx.params(), ctx.attempt());
//!     Ok(())
//! }
//!
//! async fn import_orders(ctx: JobContext) -> JobResult {
//!     if ctx.params().is_empty() {
//!         return Err(JobError::new("params must name the source"));
//!     }
//!     Ok(())
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), kadence_executor::ExecutorError> {
//!     let executor = Executor::builder()
//!         .brokers("127.0.0.1:9092")
//!         .app("billing")
//!         // The scheduler's public key, from `kadence key list`: only what it signed runs.
//!         .trusted_key("nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=")
//!         .handler("sendReport", send_report)
//!         .handler("importOrders", import_orders)
//!         .build()?;
//!     executor.run(kadence_executor::shutdown_signal()).await
//! }
//! ```
//!
//! # How it works
//!
//! A trigger's way through the executor: `consumer` receives it (and, when the executor
//! trusts scheduler keys, verifies its signature first) and `decode`s it → `handler` finds
//! its handler → `dispatch` holds it (`hold`) and applies its job's block strategy (`lanes`)
//! → `runner` runs it → `publisher` publishes its result (after its `joblog` lines) without
//! waiting → `offsets` lets its offset be committed once the broker has the result. Beside
//! that way: `beats`, `handoff`, `script`.
//!
//! The way is kept lean, because every trigger takes it and a second's triggers are often
//! due on the same millisecond: nothing on it waits for the broker, a run that logs nothing
//! costs no timer, the consumer takes whatever has arrived in one turn, and after its
//! handler a run lets the runs due now start before it reports.
//!
//! What a handler author meets:
//! - [`ExecutorBuilder`] (`builder`): settings and handlers, checked once in `build`;
//!   [`GroupProtocol`] (`settings`): the consumer group protocol it joins with, classic or
//!   Kafka's KIP-848 consumer protocol; [`BrokerKind`] (from `kadence-kafka`, re-exported):
//!   Apache Kafka (the default) or tansu, the development broker, whose quirks the client
//!   works round.
//! - [`JobContext`], [`JobResult`], [`JobError`] (`context`): what a handler receives and
//!   returns.
//! - [`ExecutorError`] (`error`): why an executor could not be built or could not run.
//! - [`OwnedPartitions`] (`partitions`): the partitions the group assigns, as they change
//!   ([`Executor::partitions`]).
//! - [`testing`]: [`TestWorker`](testing::TestWorker) runs a handler for a trigger without
//!   Kafka, through the same registry and runner, and returns the result it would publish.
//! - For an executor that hands triggers on to others instead of running them (the XXL-JOB
//!   bridge): [`ExecutorBuilder::fallback_handler`] takes every BEAN trigger no handler
//!   registered, [`ExecutorBuilder::script_runner`] the script triggers, [`JobContext::partition`]
//!   says which partition a trigger came from, and a [`BeatPlan`] (`beats`) makes the beats
//!   name the executors it fronts.
//! - [`shutdown_signal`] (from `kadence-kafka`, re-exported): the future to stop on: SIGTERM
//!   (what Kubernetes and systemd send) or SIGINT, so a stop drains instead of killing runs
//!   mid-way.
//!
//! Inside:
//! - `settings`: `ExecutorSettings`, what a built executor runs with.
//! - `handler`: handlers in their type-erased form, their init/destroy hooks, and the
//!   registry that resolves a trigger's handler (or the failure saying why there is none).
//! - `consumer`: the loop (consuming → draining → done). Joins the consumer group
//!   `{prefix}.executor.{app}` (a shadow: `{prefix}.shadow.{app}`) on
//!   `{prefix}.triggers.{app}`; the group decides which
//!   partitions (and so which triggers) this executor owns. Every trigger runs in its own
//!   task; the loop never waits for a handler. Its files: the group and rebalance callbacks,
//!   a run's task, the control topic (KILL), redelivery recognition.
//!
//! # Signed triggers
//!
//! The scheduler signs every trigger and control record (Ed25519; key id and signature in
//! the `kadence.signature.key` and `kadence.signature` headers, over the record's exact bytes
//! on its topic), or a dispatch round of triggers at once (one signature over the round's
//! Merkle root in `kadence.signature.round`, each trigger's inclusion proof, bound to its
//! topic and partition, in `kadence.signature.proof`; a round's signature is checked once).
//! Both forms are accepted. Give the executor the scheduler's public key, from `kadence key list`, with
//! [`ExecutorBuilder::trusted_key`] (twice during a key rotation), and it runs only records
//! signed by a trusted key: a trigger that is unsigned, signed by another key, changed after
//! signing or copied from another topic goes to `{prefix}.dlq` with the reason instead, and
//! such a control record is logged and ignored. A trusted key is required:
//! [`ExecutorBuilder::build`] fails without one, unless
//! [`ExecutorBuilder::allow_unverified`] (or, for script jobs,
//! [`ExecutorBuilder::allow_unverified_scripts`]) says to run unverified, which the executor
//! then logs as an error when it starts. The checking itself is `kadence-kafka`'s
//! `signing` module, shared with the scheduler.
//! - `dispatch`: a trigger's way from admission to its start, as steps (start this run,
//!   refuse that trigger) the consumer carries out; no Kafka in it.
//! - `hold`: a trigger that arrives before its `scheduled_at_ms` (the scheduler may emit
//!   ahead) waits there and runs at its millisecond, never early.
//! - `lanes`: block strategies per job (SERIAL_EXECUTION queues, DISCARD_LATER refuses,
//!   COVER_EARLY cancels what runs and is queued, CONCURRENT runs in parallel up to a cap).
//! - `clock`: where "now" comes from: the system clock, or in tests one that follows tokio's
//!   paused time, so the hold and the block strategies are tested to the millisecond.
//! - `runner`: runs a handler under the trigger's timeout (code 502 when it passes), turns a
//!   panic into a failed run, and builds the `ResultRecord`.
//! - `joblog`: the lines a run writes with [`JobContext::log`] go to `{prefix}.logs`, shipped
//!   every 250 ms and before the result, bounded per run.
//! - `script`: XXL-JOB's GLUE_* script handlers: the source from the trigger, run by its
//!   interpreter in its own process group (killed whole on timeout, kill and exit), output
//!   into the run's log. Off unless the builder says `.scripts(true)`.
//! - `decode`: trigger records read straight into their struct (`TriggerRecord` v1 and v2,
//!   each with its own enum symbols), falling back to the generic codec for other versions
//!   and for the exact error of a record that does not decode.
//! - `publisher`: publishes results to `{prefix}.results` (`{prefix}.shadow-results` for a
//!   shadow; enqueued without waiting, the consumer settles them when acknowledged), log
//!   lines to `{prefix}.logs` and unreadable records to `{prefix}.dlq`.
//! - `partitions`: the partitions the group assigns (kept by the rebalance callbacks, read by
//!   beats and runs, and from outside as [`OwnedPartitions`]).
//! - `beats`: every few seconds, and at once when partitions move, an `ExecutorBeat` to
//!   `{prefix}.beats` with the handlers, owned partitions and running/queued jobs; STOPPING
//!   on a graceful shutdown. The scheduler's registry and FAILOVER/BUSYOVER routing read them.
//! - `handoff`: on a rebalance, runs of revoked partitions finish (and are committed) within
//!   `rebalance_timeout`, or are handed back uncommitted to the new owner.
//! - `metrics`: every Prometheus metric the executor counts (trigger-to-start, run durations,
//!   outcomes, held/queued/running, rebalances, hand-backs, consumer lag), served on
//!   `/metrics` when the builder gives an address.
//! - `traces`: the executor's spans of a run's trace (`kadence.consume` from receipt to the
//!   published result, `kadence.handler` inside it), children of the scheduler's dispatch
//!   span the trigger's `traceparent` names; the result carries the consume span's
//!   `traceparent` back. Exported over OTLP when the builder names an endpoint.
//! - `offsets`: commits a partition's offset only up to its lowest trigger whose result is
//!   not yet published, so a crash re-runs at most the unfinished triggers (at-least-once);
//!   redeliveries are recognised by trigger id.
//! - Kafka plumbing shared with the scheduler (client settings, retries, dead letters,
//!   closing consumers) is the `kadence-kafka` crate, not part of this API.
//!
//! Result codes follow XXL-JOB: 200 success, 500 failure (the [`JobError`] message is stored
//! on the run), 502 timeout.
//!
//! # Shadow executors
//!
//! [`ExecutorBuilder::shadow`] starts an executor that runs a candidate version of an app's
//! handlers on a copy of its production triggers: it joins the group `{prefix}.shadow.{app}`
//! on the same trigger topic (starting at its live end), publishes its results to
//! `{prefix}.shadow-results` instead of `{prefix}.results` (they complete nothing; the
//! scheduler compares them with production's by trigger id), and sends no beats, ships no
//! job log lines (they go to its `tracing` output) and dead-letters nothing. Handlers see
//! [`JobContext::is_shadow`]. The flag reaches the group (`consumer::group`), the publisher,
//! the beats and the runs' logs and dead letters (`consumer`, `joblog`); the rest of the way
//! is production's.

#![warn(missing_docs)]

mod beats;
mod builder;
mod clock;
mod consumer;
mod context;
mod decode;
mod dispatch;
mod error;
mod handler;
mod handoff;
mod hold;
mod joblog;
mod lanes;
mod metrics;
mod offsets;
mod partitions;
mod publisher;
mod runner;
mod script;
mod settings;
pub mod testing;
mod traces;

use std::future::Future;
use std::sync::Arc;

pub use beats::BeatPlan;
pub use builder::ExecutorBuilder;
pub use context::{JobContext, JobError, JobResult};
pub use error::ExecutorError;
pub use joblog::{FLUSH_INTERVAL, JobLogger, MAX_LINE_BYTES};
pub use kadence_kafka::settings::BrokerKind;
pub use kadence_kafka::shutdown_signal;
/// Every metric an executor exports (what the book's metrics reference is generated from).
pub use metrics::catalogue as metric_catalogue;
pub use partitions::OwnedPartitions;
pub use settings::GroupProtocol;

use handler::Registry;
use partitions::Assignment;
use settings::ExecutorSettings;

/// An executor: a member of its app's consumer group that runs the registered handlers.
pub struct Executor {
    settings: ExecutorSettings,
    registry: Arc<Registry>,
    /// The partitions the group assigns, kept by the consumer once it runs.
    assignment: Assignment,
}

impl Executor {
    /// Starts building an executor.
    pub fn builder() -> ExecutorBuilder {
        ExecutorBuilder::default()
    }

    /// This executor's id, as reported on its results.
    pub fn id(&self) -> &str {
        &self.settings.executor_id
    }

    /// The app this executor serves.
    pub fn app(&self) -> &str {
        self.settings.app.as_str()
    }

    /// Whether this is a shadow executor ([`ExecutorBuilder::shadow`]).
    pub fn is_shadow(&self) -> bool {
        self.settings.shadow
    }

    /// The partitions of `{prefix}.triggers.{app}` the consumer group assigns to this
    /// executor once it runs, as they change: a way to wait until it consumes (a shadow
    /// executor, which sends no beats, has no other). Take it before [`run`](Self::run).
    pub fn partitions(&self) -> OwnedPartitions {
        OwnedPartitions::new(&self.assignment)
    }

    /// Runs until `shutdown` resolves, then drains: stops taking triggers, lets what it took
    /// go on (running handlers finish, queued and held triggers start in their turn) up to the
    /// drain timeout, commits, and leaves the group. What has not finished at the deadline is
    /// answered by no result and left uncommitted, for the partition's next owner.
    /// Handlers registered with hooks run their destroy hook after the drain, if their init
    /// ran.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), ExecutorError> {
        let registry = Arc::clone(&self.registry);
        let result = consumer::run(self.settings, registry, self.assignment, shutdown).await;
        self.registry.destroy_initialized().await;
        result
    }
}
