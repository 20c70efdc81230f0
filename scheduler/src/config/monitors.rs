//! The `[monitors]` section: the follow-up of finished runs, and the reports.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The follow-up monitor (see [`crate::monitors::follow_up`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MonitorConfig {
    /// Pause between follow-up steps when there is nothing to do. Default `500ms`.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// How long a node holds a claimed run before another may take it over (it died, or an
    /// alarm server hangs). Keep it well above `alarm.timeout`: a claimed failed run's alarm
    /// takes up to that, and a claim that expires first has its alarm sent again. Default
    /// `1m`.
    #[serde(with = "humantime_serde")]
    pub lock: Duration,
    /// Runs followed up per step at most, and alarms in delivery at once at most (see
    /// [`crate::monitors::follow_up`]). Default 200.
    pub batch_size: u32,
    /// Pause between refreshes of the daily reports (each folds the runs settled since into
    /// the counts, then rewrites yesterday's and today's rows). Default `1m`.
    #[serde(with = "humantime_serde")]
    pub report_interval: Duration,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            interval: Duration::from_millis(500),
            lock: Duration::from_secs(60),
            batch_size: 200,
            report_interval: Duration::from_secs(60),
        }
    }
}
