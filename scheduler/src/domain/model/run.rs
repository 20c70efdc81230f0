//! Runs: a pending fire on its way to the broker, the job-log row it becomes, the result that
//! completes it, the alarm status of a failure, and the daily counts of the report page.

use std::time::Duration;

use kadence_schemas::{
    AppName, BlockStrategy, GlueType, JobId, TriggerId, TriggerRecord, TriggerType,
};
use serde::{Deserialize, Serialize};

use super::job::{Job, RouteStrategy};
use crate::domain::enums::string_enum;

string_enum!(
    /// XXL-JOB's alarm status of a run.
    AlarmStatus, "alarm status", {
        /// Not looked at yet.
        Unprocessed => "UNPROCESSED",
        /// A scheduler node is deciding or sending.
        Locked => "LOCKED",
        /// The run succeeded, or its job has no alarm targets.
        NotNeeded => "NOT_NEEDED",
        /// Every alarm channel took it.
        Sent => "SENT",
        /// A channel refused it (logged).
        Failed => "FAILED",
    }
);

/// One day's counts of one job's runs (UTC days, by scheduled time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct DailyReport {
    /// The day's midnight, UTC, ms since the epoch.
    pub day_ms: i64,
    /// The app.
    pub app: String,
    /// The job.
    pub job_id: i64,
    /// Runs not finished yet.
    pub running: i64,
    /// Runs that succeeded.
    pub succeeded: i64,
    /// Runs that failed (any non-200 result).
    pub failed: i64,
}

string_enum!(
    /// Where a run is in its life: written by the pre-read loop, acknowledged by the broker,
    /// or completed by a result.
    RunState, "run state", {
        /// A pending fire: written durably, owned by a scheduler node under a lease, not yet
        /// acknowledged by the broker.
        Scheduled => "SCHEDULED",
        /// The broker acknowledged the trigger record; an executor will pick it up.
        Dispatched => "DISPATCHED",
        /// A result arrived (first result wins).
        Finished => "FINISHED",
        /// A fire the job's schedule planned, cancelled before any node emitted it: the job
        /// was stopped, or its schedule changed (the message says which).
        Cancelled => "CANCELLED",
    }
);

/// A job-log row: one trigger of a job and, once known, its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Run {
    /// Row id (the `log_id` carried in trigger and result records).
    pub log_id: i64,
    /// Deterministic trigger id, unique.
    pub trigger_id: TriggerId,
    /// The job.
    pub job_id: JobId,
    /// Why it fired.
    pub trigger_type: TriggerType,
    /// Parameters sent to the handler.
    pub params: String,
    /// 0 for the first attempt.
    pub attempt: i32,
    /// Shard index (0 unless broadcast).
    pub shard_index: i32,
    /// Shard total (1 unless broadcast).
    pub shard_total: i32,
    /// The time the fire was scheduled for, ms.
    pub scheduled_at_ms: i64,
    /// Lifecycle state.
    pub state: RunState,
    /// Partition the trigger went to, once dispatched.
    pub partition: Option<i32>,
    /// When the broker acknowledged the trigger, ms.
    pub dispatched_at_ms: Option<i64>,
    /// Executor that reported the result.
    pub executor_id: Option<String>,
    /// When the handler started, ms.
    pub started_at_ms: Option<i64>,
    /// Result code: 200 success, 500 failure, 502 timeout.
    pub handle_code: Option<i32>,
    /// Result message, if any.
    pub handle_msg: Option<String>,
    /// When the result was reported, ms.
    pub handle_at_ms: Option<i64>,
    /// For a retry: the first attempt's log id (the rows of one run's attempts link to it).
    pub first_log_id: Option<i64>,
    /// XXL-JOB's alarm status.
    pub alarm_status: AlarmStatus,
    /// For a replay (and its retries): the trigger it replays.
    #[serde(default)]
    pub replay_of: Option<TriggerId>,
    /// The replay or backfill that made it (`GET /api/replays/{id}`).
    #[serde(default)]
    pub operation_id: Option<i64>,
}

/// A fire written durably and waiting for the broker's acknowledgement: everything needed to
/// build its `TriggerRecord` without another database read.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingFire {
    /// Job-log row id.
    pub log_id: i64,
    /// Deterministic trigger id.
    pub trigger_id: TriggerId,
    /// The job.
    pub job_id: JobId,
    /// The executor app.
    pub app: AppName,
    /// Handler name.
    pub handler: String,
    /// Handler parameters.
    pub params: String,
    /// Why it fires.
    pub trigger_type: TriggerType,
    /// Shard index (0 unless broadcast).
    pub shard_index: i32,
    /// Shard total (1 unless broadcast).
    pub shard_total: i32,
    /// 0 for the first attempt.
    pub attempt: i32,
    /// The time the fire is scheduled for (its identity), ms.
    pub scheduled_at_ms: i64,
    /// The time the wheel emits it (differs from `scheduled_at_ms` for misfires), ms.
    pub fire_at_ms: i64,
    /// Partition choice.
    pub route_strategy: RouteStrategy,
    /// Executor-side block strategy.
    pub block_strategy: BlockStrategy,
    /// Timeout in ms, 0 for none.
    pub timeout_ms: i64,
    /// Handler kind.
    pub glue_type: GlueType,
    /// Script, for GLUE_* kinds.
    pub glue_source: Option<String>,
    /// Script version, ms.
    pub glue_updated_at_ms: Option<i64>,
    /// The partitions the route strategy may choose from, when not all of the app's: a manual
    /// trigger's override, or the single partition of a broadcast shard.
    pub route_partitions: Option<Vec<i32>>,
    /// The trigger this run replays (a replay and its retries); carried in the record.
    pub replay_of: Option<TriggerId>,
    /// The replay or backfill that made this fire (see [`crate::operations::replay`]).
    pub operation_id: Option<i64>,
}

impl PendingFire {
    /// A fire of `job` as its definition stands, scheduled and fired at `scheduled_at_ms`,
    /// with the job's params and every partition of its app, before it has a row (log id 0).
    pub fn of_job(
        job: &Job,
        trigger_id: TriggerId,
        trigger_type: TriggerType,
        scheduled_at_ms: i64,
    ) -> PendingFire {
        PendingFire {
            log_id: 0,
            trigger_id,
            job_id: job.id,
            app: job.spec.app.clone(),
            handler: job.spec.handler.clone(),
            params: job.spec.params.clone(),
            trigger_type,
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            scheduled_at_ms,
            fire_at_ms: scheduled_at_ms,
            route_strategy: job.spec.route_strategy,
            block_strategy: job.spec.block_strategy,
            timeout_ms: job.spec.timeout_ms,
            glue_type: job.spec.glue.glue_type,
            glue_source: job.spec.glue.source.clone(),
            glue_updated_at_ms: job.glue_updated_at_ms,
            route_partitions: None,
            replay_of: None,
            operation_id: None,
        }
    }

    /// The shards of a SHARDING_BROADCAST fire: one per candidate partition (every partition
    /// of the app unless the trigger named some), shard index = position among the candidates
    /// (= the partition when all are candidates), shard total = number of candidates, each
    /// routed to its own partition and identified `{trigger id}-{shard}`. Any other fire is
    /// returned as it is.
    pub fn into_shards(self, partitions: i32) -> Vec<PendingFire> {
        if self.route_strategy != RouteStrategy::ShardingBroadcast || self.shard_total > 1 {
            // Not a broadcast, or already a shard (a retry of one shard re-fires only it).
            return vec![self];
        }
        let candidates: Vec<i32> = match &self.route_partitions {
            Some(named) => named.clone(),
            None => (0..partitions.max(1)).collect(),
        };
        let total = candidates.len() as i32;
        candidates
            .into_iter()
            .enumerate()
            .map(|(index, partition)| PendingFire {
                trigger_id: self.trigger_id.shard_of(index as u32),
                shard_index: index as i32,
                shard_total: total,
                route_partitions: Some(vec![partition]),
                ..self.clone()
            })
            .collect()
    }

    /// The record an executor receives for this fire, emitted at `emitted_at_ms` and valid
    /// for `validity` after its scheduled time or its emission, whichever is later (a backfill
    /// or a replay of a fire long past is emitted now, and an executor holds a trigger emitted
    /// early until its time); `None` gives it no window.
    pub fn trigger_record(&self, emitted_at_ms: i64, validity: Option<Duration>) -> TriggerRecord {
        let expires_at_ms = validity.map(|validity| {
            let validity_ms = i64::try_from(validity.as_millis()).unwrap_or(i64::MAX);
            self.scheduled_at_ms
                .max(emitted_at_ms)
                .saturating_add(validity_ms)
        });
        TriggerRecord {
            trigger_id: self.trigger_id.clone(),
            log_id: self.log_id,
            job_id: self.job_id,
            app: self.app.clone(),
            handler: self.handler.clone(),
            params: self.params.clone(),
            shard_index: self.shard_index,
            shard_total: self.shard_total,
            block_strategy: self.block_strategy,
            timeout_ms: self.timeout_ms,
            trigger_type: self.trigger_type,
            scheduled_at_ms: self.scheduled_at_ms,
            emitted_at_ms,
            attempt: self.attempt,
            glue_type: self.glue_type,
            glue_source: self.glue_source.clone(),
            glue_updated_at_ms: self.glue_updated_at_ms,
            replay_of: self.replay_of.clone(),
            expires_at_ms,
        }
    }
}

#[cfg(test)]
impl PendingFire {
    /// A plain CRON fire of job `job` at `at_ms` (log id = `at_ms`), for unit tests.
    pub(crate) fn for_test(job: i64, at_ms: i64) -> PendingFire {
        let job = JobId::new(job).expect("positive job id");
        PendingFire {
            log_id: at_ms,
            trigger_id: TriggerId::scheduled(job, at_ms),
            job_id: job,
            app: AppName::parse("demo").expect("valid app name"),
            handler: "h".to_owned(),
            params: String::new(),
            trigger_type: TriggerType::Cron,
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            scheduled_at_ms: at_ms,
            fire_at_ms: at_ms,
            route_strategy: RouteStrategy::First,
            block_strategy: BlockStrategy::SerialExecution,
            timeout_ms: 0,
            glue_type: GlueType::Bean,
            glue_source: None,
            glue_updated_at_ms: None,
            route_partitions: None,
            replay_of: None,
            operation_id: None,
        }
    }
}

/// A result to record on a run (first result wins).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The run's trigger id.
    pub trigger_id: TriggerId,
    /// The app the result speaks for: the run is completed only if it is of this app. `None`
    /// for the scheduler's own completions (lost runs, dead letters), which checked the run.
    pub app: Option<String>,
    /// Executor that ran it.
    pub executor_id: String,
    /// 200 / 500 / 502.
    pub code: i32,
    /// Result message, already bounded in size.
    pub message: Option<String>,
    /// When the handler started, ms.
    pub started_at_ms: i64,
    /// When the handler finished, ms.
    pub finished_at_ms: i64,
    /// The handler's "retry after" hint, ms (failures only).
    pub retry_after_ms: Option<i64>,
}

/// What happened to one [`Completion`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionOutcome {
    /// The run was unfinished and is now complete.
    Applied,
    /// The run already had a result; this one was ignored.
    Duplicate,
    /// No run has this trigger id.
    UnknownTrigger,
    /// The run is of another app than the result's: nothing changed.
    OtherApp {
        /// The run's app.
        run_app: String,
    },
}

impl CompletionOutcome {
    /// The outcome in snake case, as traces and logs name it.
    pub fn label(&self) -> &'static str {
        match self {
            CompletionOutcome::Applied => "applied",
            CompletionOutcome::Duplicate => "duplicate",
            CompletionOutcome::UnknownTrigger => "unknown_trigger",
            CompletionOutcome::OtherApp { .. } => "other_app",
        }
    }
}

#[cfg(test)]
mod tests {
    use kadence_schemas::codec;

    use super::*;

    #[test]
    fn a_trigger_is_valid_for_the_window_after_its_time_or_its_emission_if_later() {
        let hour = Some(Duration::from_secs(3_600));
        let early = PendingFire::for_test(1, 10_000).trigger_record(9_000, hour);
        assert_eq!(
            early.expires_at_ms,
            Some(3_610_000),
            "emitted early: from its time"
        );
        let late = PendingFire::for_test(1, 10_000).trigger_record(50_000, hour);
        assert_eq!(
            late.expires_at_ms,
            Some(3_650_000),
            "emitted late: from its emission"
        );
        let bytes = codec::encode(&late).unwrap();
        assert_eq!(bytes[1..5], codec::TRIGGER_RECORD_V3.to_be_bytes());
    }

    #[test]
    fn without_a_window_a_trigger_is_written_for_executors_that_predate_windows() {
        let record = PendingFire::for_test(1, 10_000).trigger_record(9_000, None);
        assert_eq!(record.expires_at_ms, None);
        let bytes = codec::encode(&record).unwrap();
        assert_eq!(bytes[1..5], codec::TRIGGER_RECORD_V1.to_be_bytes());
    }
}
