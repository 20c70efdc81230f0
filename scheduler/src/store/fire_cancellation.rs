//! What a stop or a schedule edit cancels: the job's planned fires, by log id and fire time.

use crate::domain::model::PendingFire;
use kadence_schemas::JobId;

/// The planned fires of one job that a stop or a schedule edit cancelled: they are never
/// emitted nor become runs, neither from a node's wheel (see [`crate::engine::cancellations`]) nor
/// from a claimed fire batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FireCancellation {
    /// The job.
    pub job_id: JobId,
    /// The highest job-log id given out when the change was written: every fire planned
    /// before it has an id up to this one, every fire planned after it a higher one.
    pub up_to_log_id: i64,
    /// Fires due up to this instant were left alone (they may have been emitted already,
    /// ahead of their time); the job's scheduled fires with ids up to `up_to_log_id` due
    /// after it were cancelled.
    pub from_ms: i64,
    /// Until when nodes keep it in memory, ms (see [`CANCELLATION_MEMORY_MS`]); claims
    /// read the table, which keeps it an hour longer.
    pub until_ms: i64,
}

/// How long nodes keep a cancellation in memory: longer than a fire waits in a wheel.
pub const CANCELLATION_MEMORY_MS: i64 = 10 * 60 * 1000;

impl FireCancellation {
    /// Whether it cancels `fire`: planned by the job's schedule before the change, and due
    /// after its cutoff. Manual, API, retry and child fires are kept: someone asked for those.
    pub fn covers(&self, fire: &PendingFire) -> bool {
        let planned_by_schedule = matches!(
            fire.trigger_type,
            kadence_schemas::TriggerType::Cron
                | kadence_schemas::TriggerType::FixRate
                | kadence_schemas::TriggerType::FixDelay
                | kadence_schemas::TriggerType::Misfire
        );
        planned_by_schedule
            && fire.job_id == self.job_id
            && fire.log_id <= self.up_to_log_id
            && fire.fire_at_ms > self.from_ms
    }
}
