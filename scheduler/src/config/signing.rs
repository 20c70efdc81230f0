//! The `[signing]` section: how the nodes keep their signing key current, and how long a trigger stays valid.

use std::num::NonZeroUsize;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How the nodes keep their signing key current (see [`crate::engine::signer`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SigningConfig {
    /// How often a node reads the newest signing key from the database: after
    /// `kadence key rotate`, every node signs with the new key within this. Default `10s`.
    #[serde(with = "humantime_serde")]
    pub key_refresh_interval: Duration,
    /// Threads that sign a batch of triggers together (an Ed25519 signature costs ~15 µs, the
    /// largest share of a trigger's cost on the node). Default: one per core.
    pub threads: Option<NonZeroUsize>,
    /// How long a trigger stays valid after its scheduled time (or its emission, if later).
    /// The end of that window is in the signed record (`expires_at_ms`): an executor that
    /// receives the trigger later dead-letters it as expired and the scheduler fails its run
    /// with that reason, so a captured copy cannot run after it and a trigger that waited out
    /// a long executor outage is failed (and retried, alarmed) rather than run hours late.
    /// `0s` writes no window and the trigger record versions executors built before the window
    /// read (for the time of a rolling upgrade: upgrade the executors first). Default `1h`.
    #[serde(with = "humantime_serde")]
    pub trigger_validity: Duration,
}

impl Default for SigningConfig {
    fn default() -> Self {
        SigningConfig {
            key_refresh_interval: Duration::from_secs(10),
            threads: None,
            trigger_validity: Duration::from_secs(3600),
        }
    }
}

impl SigningConfig {
    /// The validity window triggers carry, `None` when configured off (`0s`).
    pub fn trigger_validity(&self) -> Option<Duration> {
        (!self.trigger_validity.is_zero()).then_some(self.trigger_validity)
    }

    /// The signing threads to use: as configured, or one per core.
    pub fn signing_threads(&self) -> NonZeroUsize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN))
    }
}
