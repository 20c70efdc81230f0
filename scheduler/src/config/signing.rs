//! The `[signing]` section: how the nodes keep their signing key current, and how long a trigger stays valid.

use std::num::NonZeroUsize;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How trigger records are signed (PROTOCOL.md section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TriggerSignatures {
    /// By the round for each app whose executors all verify round signatures (their beats
    /// list `round-signatures`) while one of them is live; each trigger alone otherwise.
    Auto,
    /// Each trigger signed alone: what every executor understands.
    Record,
    /// One signature per dispatch round, each trigger carrying its proof of inclusion in the
    /// round: a fraction of the signing and verifying per trigger. Executors built before
    /// round signatures refuse such triggers (to the DLQ), whatever their beats say.
    Round,
}

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
    /// `record` signs each trigger alone; `round` signs each dispatch round of triggers once,
    /// every trigger carrying its proof of inclusion (an executor still checks each trigger
    /// alone, and each round's signature once), which costs the scheduler and the executors a
    /// fraction of the CPU per trigger. Executors of a Kadence version before round signatures
    /// refuse round-signed triggers, so `auto` signs an app's triggers by the round only while
    /// every executor of it that beats says it verifies them (the Rust, Python and Java SDKs
    /// and the XXL-JOB bridge of this version do), and each alone otherwise. Pin `record`
    /// while executors of an older version may still join. Default `auto`.
    pub trigger_signatures: TriggerSignatures,
}

impl Default for SigningConfig {
    fn default() -> Self {
        SigningConfig {
            key_refresh_interval: Duration::from_secs(10),
            threads: None,
            trigger_validity: Duration::from_secs(3600),
            trigger_signatures: TriggerSignatures::Auto,
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
