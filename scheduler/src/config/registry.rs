//! The `[registry]` section: when an executor counts as dead, and when it is forgotten.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The executor registry (see [`crate::engine::registry`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RegistryConfig {
    /// An executor whose latest beat is older than this is dead: FAILOVER and BUSYOVER stop
    /// routing to its partitions and the lost-run monitor may fail its runs. Default `10s`:
    /// executors beat every 3 s, so two lost beats are tolerated, and it is well under Kafka's
    /// default consumer session timeout (45 s), so FAILOVER moves triggers away from a crashed
    /// executor long before the group rebalances its partitions.
    #[serde(with = "humantime_serde")]
    pub dead_timeout: Duration,
    /// Pause between sweeps that mark dead executors in the database. Default `2s`.
    #[serde(with = "humantime_serde")]
    pub sweep_interval: Duration,
    /// How long a dead executor stays listed before it is deleted. Default `1h`.
    #[serde(with = "humantime_serde")]
    pub forget_after: Duration,
    /// A run still unfinished this long after dispatch, whose executor is dead and which no
    /// live executor reports running or queued, is failed as lost. Default `10m` (XXL-JOB's).
    #[serde(with = "humantime_serde")]
    pub lost_run_after: Duration,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            dead_timeout: Duration::from_secs(10),
            sweep_interval: Duration::from_secs(2),
            forget_after: Duration::from_secs(3600),
            lost_run_after: Duration::from_secs(600),
        }
    }
}
