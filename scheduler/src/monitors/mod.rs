//! What the scheduler does after runs finish, each as a step function driven by a loop and
//! tested with an injected clock:
//! - [`follow_up`]: every finished run once — retries with backoff, alarms, child jobs;
//! - [`alarm`]: the alarm channels (e-mail over SMTP, webhook) behind one trait, and who
//!   learns why a delivery failed;
//! - [`webhook_target`]: where a webhook may point (no internal address unless allowed),
//!   checked when its job is saved and again as its host is resolved at delivery;
//! - [`reports`]: daily counts per app and job, recounted;
//! - [`retention`]: old runs, log lines and reports deleted in bounded batches.
//!
//! The lost-run monitor lives in [`crate::lost_runs`], beside the executor registry it reads.

pub mod alarm;
pub mod follow_up;
pub mod reports;
pub mod retention;
pub mod webhook_target;
