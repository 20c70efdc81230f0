//! The `[replay]` section: the limits of replays and backfills.

use serde::{Deserialize, Serialize};

/// Limits of replays and backfills (`[replay]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReplayConfig {
    /// Most triggers one replay or backfill may emit (each is a run row and a wheel entry
    /// until emitted). Default 100 000.
    pub max_triggers: usize,
    /// Triggers emitted per second when the request names no rate. Default 100.
    pub rate_per_second: u32,
    /// Highest rate a request may ask for. Default 10 000.
    pub max_rate_per_second: u32,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            max_triggers: 100_000,
            rate_per_second: 100,
            max_rate_per_second: 10_000,
        }
    }
}
