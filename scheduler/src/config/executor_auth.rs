//! The `[executor_auth]` section: whether executors must sign what they write.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Whether executors must sign what they write, and how the nodes keep the keys current.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecutorAuthConfig {
    /// Refuse (to the DLQ, with the reason) every result, shadow result, log record and beat
    /// that is not signed by an executor key of its app, and ignore such dead letters of
    /// triggers. `false` takes unsigned records as before (records that carry a signature are
    /// still checked): only while an upgrade gives every executor its key. Default `true`.
    pub required: bool,
    /// How often a node reads the active executor keys from the database: a revoked key is
    /// refused by every node within this. Default `10s`.
    #[serde(with = "humantime_serde")]
    pub key_refresh_interval: Duration,
}

impl Default for ExecutorAuthConfig {
    fn default() -> Self {
        ExecutorAuthConfig {
            required: true,
            key_refresh_interval: Duration::from_secs(10),
        }
    }
}
