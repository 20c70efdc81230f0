//! Kadence's scheduling centre.
//!
//! A tour, following one fire:
//! - [`config`]: typed configuration (file, then `KADENCE_…` environment).
//! - [`store`]: the [`Store`](store::Store) trait with SQLite and PostgreSQL backends: apps,
//!   jobs and job-log rows (one per trigger, keyed by its deterministic trigger id).
//! - [`schedule`]: Quartz cron, fixed rate and manual-only schedules, per-job time zone.
//! - [`preread`]: `pre_read_once(now)` reads due jobs under the schedule lock, plans their fires
//!   and writes each as a pending job-log row (the durable half of the time wheel).
//! - [`wheel`]: the in-memory millisecond time wheel that releases each pending fire at its time.
//! - [`routing`]: the route strategy picks the partition of `{prefix}.triggers.{app}`.
//! - [`dispatch`]: builds the `TriggerRecord`, produces it with an idempotent producer, retries
//!   retriable errors, and marks acknowledged runs dispatched in batches.
//! - [`claims`]: takes over pending fires whose owner's lease expired (a dead node) and emits
//!   them with the same trigger ids.
//! - [`results`]: consumes `{prefix}.results` and completes job-log rows, first result wins.
//! - [`kafka`]: client settings, topic administration and the dead-letter queue.
//! - [`api`]: the HTTP API (axum) the CLI and console use; [`cli`]: the `kadence` command.
//! - [`app`]: wires everything into a running [`Scheduler`](app::Scheduler) with one shutdown.
//! - [`clock`]: injectable time for the step functions.

pub mod api;
pub mod app;
pub mod claims;
pub mod cli;
pub mod clock;
pub mod config;
pub mod dispatch;
pub mod kafka;
pub mod model;
pub mod preread;
pub mod results;
pub mod routing;
pub mod schedule;
pub mod store;
pub mod wheel;
