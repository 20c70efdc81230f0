//! The `[retention]` section: how long runs, log lines and reports are kept.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Retention (see [`crate::monitors::retention`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// Finished runs, their log lines and report rows older than this many days are deleted.
    /// Default 30 (XXL-JOB's `logretentiondays`).
    pub days: u32,
    /// Pause between retention passes. Default `1h`.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Rows deleted per transaction. Default 1000.
    pub batch_size: u32,
    /// Batches of each kind per retention pass at most (the next pass goes on). Default 100.
    /// The drop of unkept runs is not capped by it but by time (half of
    /// `monitors.report_interval`): see [`crate::monitors::retention`].
    pub max_batches: u32,
    /// How long a finished run that its job's history policy does not keep (FAILURES, NONE)
    /// stays before it is counted and dropped, with the report refresh every
    /// `monitors.report_interval`: long enough that a result delivered again is still
    /// recognised as a repeat. A quick success that never had a row (rows held for their
    /// results) is counted at the next refresh, and its record kept as long for the same
    /// reason. Default `10m`.
    #[serde(with = "humantime_serde")]
    pub unkept_runs_for: Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            days: 30,
            interval: Duration::from_secs(3600),
            batch_size: 1000,
            max_batches: 100,
            unkept_runs_for: Duration::from_secs(600),
        }
    }
}
