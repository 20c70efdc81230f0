//! Follow-up and monitors: what the scheduler does once runs finished, and the watches that
//! judge what can no longer speak for itself (a dead executor, a lost run, the database).
//! Each is a step function driven by a loop and tested with an injected clock:
//! - [`follow_up`]: every finished run once — retries with backoff, alarms, child jobs;
//! - [`alarm`]: the alarm channels (e-mail over SMTP, webhook) behind one trait, and who
//!   learns why a delivery failed;
//! - [`webhook_target`]: where a webhook may point (no internal address unless allowed),
//!   checked when its job is saved and again as its host is resolved at delivery;
//! - [`reports`]: daily counts per app and job, recounted;
//! - [`retention`]: old runs, log lines and reports deleted in bounded batches;
//! - [`lost_runs`]: fails runs whose executor died and whose result can no longer arrive,
//!   judged by the executors' beats;
//! - [`executor_sweep`]: marks executors whose beats stopped DEAD, and forgets them later;
//! - [`database_watch`]: whether this node reaches its database, checked every second: one
//!   log line per outage, a gauge, and the readiness answer `GET /health/ready`.

pub mod alarm;
pub mod database_watch;
pub mod executor_sweep;
pub mod follow_up;
pub mod lost_runs;
pub mod reports;
pub mod retention;
pub mod webhook_target;
