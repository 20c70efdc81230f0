//! Executors as the registry knows them from their beats.

use kadence_schemas::AppName;
use serde::{Deserialize, Serialize};

use crate::domain::enums::string_enum;

string_enum!(
    /// An executor's state in the registry.
    ExecutorStatus, "executor status", {
        /// Beating and taking triggers.
        Running => "RUNNING",
        /// Announced a graceful stop: no new triggers are routed to it.
        Stopping => "STOPPING",
        /// Its beats stopped for longer than the registry's dead timeout.
        Dead => "DEAD",
    }
);

/// One executor as the registry knows it from its latest beat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExecutorEntry {
    /// The executor's id (unique per process).
    pub executor_id: String,
    /// Its app.
    pub app: AppName,
    /// Host it runs on.
    pub host: String,
    /// Its SDK version.
    pub version: String,
    /// Handlers it has.
    pub handlers: Vec<String>,
    /// Partitions of the app's trigger topic it owns.
    pub owned_partitions: Vec<i32>,
    /// Jobs with a run in progress on it.
    pub running_jobs: Vec<i64>,
    /// Jobs with runs queued on it.
    pub queued_jobs: Vec<i64>,
    /// RUNNING, STOPPING or DEAD.
    pub state: ExecutorStatus,
    /// First beat seen, ms since the epoch.
    pub first_seen_at_ms: i64,
    /// Latest beat (the earlier of its send and receive times), ms since the epoch.
    pub last_beat_at_ms: i64,
    /// Protocol features its latest beat lists (PROTOCOL.md section 9), e.g.
    /// `round-signatures`: whether the scheduler may sign its app's triggers by the round.
    pub features: Vec<String>,
}

impl ExecutorEntry {
    /// Whether its latest beat lists `round-signatures`: it verifies round-signed triggers.
    pub fn verifies_round_signatures(&self) -> bool {
        (self.features.iter())
            .any(|feature| feature == kadence_schemas::ExecutorBeat::ROUND_SIGNATURES)
    }
}
