//! The scheduler's domain nouns: apps, jobs, runs (job-log rows) and pending fires.
//!
//! Enumerations that users type (strategies, statuses) are parsed here, at the boundary: an
//! unknown value is a [`ModelError`] that lists the accepted values, never a silent default.

use kadence_schemas::{AppName, BlockStrategy, GlueType, JobId, TriggerId, TriggerType};
use serde::{Deserialize, Serialize};

use crate::schedule::{MisfireStrategy, ScheduleSpec};

pub use crate::enums::ModelError;
use crate::enums::string_enum;

string_enum!(
    /// Whether the pre-read loop considers a job (XXL-JOB's `trigger_status`).
    JobStatus, "job status", {
        /// Scheduled: the pre-read loop fires it.
        Running => "RUNNING",
        /// Not scheduled; manual and API triggers still work.
        Stopped => "STOPPED",
    }
);

string_enum!(
    /// How the scheduler picks the partition of `{prefix}.triggers.{app}` for a trigger.
    ///
    /// The consumer group then decides which executor owns that partition (see
    /// [`crate::routing`]). FAILOVER and BUSYOVER read the executor registry built from beats.
    RouteStrategy, "route strategy", {
        /// Always partition 0 (XXL-JOB's default).
        First => "FIRST",
        /// Always the last partition.
        Last => "LAST",
        /// A uniformly random partition.
        Random => "RANDOM",
        /// A per-job counter, from a random start.
        Round => "ROUND",
        /// XXL-JOB's MD5 ring: a job always lands on the same partition.
        ConsistentHash => "CONSISTENT_HASH",
        /// The partition this job used least (per job, reset daily).
        LeastFrequentlyUsed => "LEAST_FREQUENTLY_USED",
        /// The partition this job used longest ago (per job, reset daily).
        LeastRecentlyUsed => "LEAST_RECENTLY_USED",
        /// The first partition whose owning executor's beat is fresh.
        Failover => "FAILOVER",
        /// The first partition whose (live) owner reports this job idle.
        Busyover => "BUSYOVER",
        /// One trigger per partition: shard index = partition, shard total = partition count.
        ShardingBroadcast => "SHARDING_BROADCAST",
    }
);

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

string_enum!(
    /// When a sharded parent fires its child jobs.
    #[derive(Default)]
    ChildTriggerMode, "child trigger mode", {
        /// Once per succeeded shard (XXL-JOB's behaviour; the default).
        #[default]
        EachShard => "EACH_SHARD",
        /// Once per fire, when every shard of it succeeded.
        AllShards => "ALL_SHARDS",
    }
);

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

/// One day's counts of one job's runs (UTC days, by scheduled time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
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

/// One executor as the registry knows it from its latest beat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// An executor app (XXL-JOB's executor group): one trigger topic with a fixed partition count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct App {
    /// Name, also the suffix of the trigger topic.
    pub name: AppName,
    /// Human-readable title.
    pub title: String,
    /// Partition count of `{prefix}.triggers.{name}`.
    pub partitions: i32,
    /// Creation time, ms since the epoch.
    pub created_at_ms: i64,
}

/// Everything needed to create a job, already parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// The executor app that runs it.
    pub app: AppName,
    /// Display name (XXL-JOB's `job_desc`).
    pub name: String,
    /// When it fires.
    pub schedule: ScheduleSpec,
    /// IANA time zone the schedule is evaluated in.
    pub time_zone: chrono_tz::Tz,
    /// What to do when a fire was missed by more than the pre-read window.
    pub misfire_strategy: MisfireStrategy,
    /// How the partition is chosen.
    pub route_strategy: RouteStrategy,
    /// Name of the handler the executor runs.
    pub handler: String,
    /// Parameters handed to the handler.
    pub params: String,
    /// What an executor does when a trigger arrives while the previous run is still going.
    pub block_strategy: BlockStrategy,
    /// Run timeout in ms, 0 for none.
    pub timeout_ms: i64,
    /// Owner, for people.
    pub author: String,
    /// Where failure alarms are e-mailed.
    pub alarm_emails: Vec<String>,
    /// Where failure alarms are POSTed, if anywhere.
    pub alarm_webhook: Option<String>,
    /// Retries of a failed run.
    pub retry: RetryPolicy,
    /// How the handler is provided: a registered handler, or a script.
    pub glue: Glue,
    /// Jobs fired (trigger type PARENT) when this one succeeds.
    pub child_job_ids: Vec<JobId>,
    /// For a sharded run: fire the children per succeeded shard or once all shards succeeded.
    pub child_trigger_mode: ChildTriggerMode,
}

impl NewJob {
    /// A job of `app` running `handler` on `schedule`, everything else at XXL-JOB's defaults:
    /// UTC, misfire DO_NOTHING, route FIRST, SERIAL_EXECUTION, no params, no timeout, no
    /// retries, no alarms, no children, a registered (BEAN) handler.
    pub fn new(app: AppName, name: &str, schedule: ScheduleSpec, handler: &str) -> NewJob {
        NewJob {
            app,
            name: name.to_owned(),
            schedule,
            time_zone: chrono_tz::Tz::UTC,
            misfire_strategy: MisfireStrategy::DoNothing,
            route_strategy: RouteStrategy::First,
            handler: handler.to_owned(),
            params: String::new(),
            block_strategy: BlockStrategy::SerialExecution,
            timeout_ms: 0,
            author: String::new(),
            alarm_emails: Vec::new(),
            alarm_webhook: None,
            retry: RetryPolicy::default(),
            glue: Glue::default(),
            child_job_ids: Vec::new(),
            child_trigger_mode: ChildTriggerMode::EachShard,
        }
    }
}

/// Retries of a failed run (XXL-JOB's `executorFailRetryCount`, plus an optional backoff).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub count: u32,
    /// Wait before each retry.
    pub backoff: RetryBackoff,
}

/// Wait before a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetryBackoff {
    /// Retry at once (XXL-JOB's behaviour).
    #[default]
    None,
    /// The same delay before every retry.
    Fixed {
        /// Delay, ms.
        delay_ms: i64,
    },
    /// `base × 2^(attempt-1)`, at most `cap`.
    Exponential {
        /// First delay, ms.
        base_ms: i64,
        /// Largest delay, ms.
        cap_ms: i64,
    },
}

impl RetryBackoff {
    /// The stored name: NONE, FIXED or EXPONENTIAL.
    pub fn kind(self) -> &'static str {
        match self {
            RetryBackoff::None => "NONE",
            RetryBackoff::Fixed { .. } => "FIXED",
            RetryBackoff::Exponential { .. } => "EXPONENTIAL",
        }
    }

    /// Builds a backoff from its stored or typed parts.
    pub fn from_parts(kind: &str, delay_ms: i64, cap_ms: i64) -> Result<RetryBackoff, ModelError> {
        match kind.trim().to_ascii_uppercase().as_str() {
            "NONE" => Ok(RetryBackoff::None),
            "FIXED" => Ok(RetryBackoff::Fixed { delay_ms }),
            "EXPONENTIAL" => Ok(RetryBackoff::Exponential {
                base_ms: delay_ms,
                cap_ms: cap_ms.max(delay_ms),
            }),
            _ => Err(ModelError::UnknownValue {
                kind: "retry backoff",
                value: kind.to_owned(),
                expected: "NONE, FIXED, EXPONENTIAL",
            }),
        }
    }

    /// The wait before retry `retry` (1 for the first retry), ms: none, the fixed delay, or
    /// `base × 2^(retry-1)` capped.
    pub fn delay_before(self, retry: u32) -> i64 {
        match self {
            RetryBackoff::None => 0,
            RetryBackoff::Fixed { delay_ms } => delay_ms.max(0),
            RetryBackoff::Exponential { base_ms, cap_ms } => {
                let doublings = retry.saturating_sub(1).min(62);
                base_ms
                    .max(0)
                    .saturating_mul(1_i64 << doublings)
                    .min(cap_ms.max(base_ms).max(0))
            }
        }
    }

    /// `(delay or base, cap)` in ms, as stored.
    pub fn parts(self) -> (i64, i64) {
        match self {
            RetryBackoff::None => (0, 0),
            RetryBackoff::Fixed { delay_ms } => (delay_ms, 0),
            RetryBackoff::Exponential { base_ms, cap_ms } => (base_ms, cap_ms),
        }
    }
}

/// A job's handler source (XXL-JOB's glue).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Glue {
    /// BEAN (a handler registered in the executor) or a script type.
    pub glue_type: GlueType,
    /// The script, for GLUE_* types.
    pub source: Option<String>,
    /// Note on the latest change.
    pub remark: String,
}

/// One saved version of a job's script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlueVersion {
    /// Script type.
    pub glue_type: GlueType,
    /// The script.
    pub source: String,
    /// Note on the change.
    pub remark: String,
    /// When it was saved, ms.
    pub created_at_ms: i64,
}

/// A stored job.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Identifier.
    pub id: JobId,
    /// The definition.
    pub spec: NewJob,
    /// Running (scheduled) or stopped.
    pub status: JobStatus,
    /// The scheduled time of the latest fire written, ms.
    pub last_fire_ms: Option<i64>,
    /// The next scheduled time not yet written as a fire, ms.
    pub next_fire_ms: Option<i64>,
    /// Creation time, ms.
    pub created_at_ms: i64,
    /// Last update time, ms.
    pub updated_at_ms: i64,
    /// When the script last changed (its version), ms.
    pub glue_updated_at_ms: Option<i64>,
}

/// A job-log row: one trigger of a job and, once known, its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

impl PendingFire {
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
        }
    }
}

/// A result to record on a run (first result wins).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The run's trigger id.
    pub trigger_id: TriggerId,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionOutcome {
    /// The run was unfinished and is now complete.
    Applied,
    /// The run already had a result; this one was ignored.
    Duplicate,
    /// No run has this trigger id.
    UnknownTrigger,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enumerations_parse_case_insensitively_and_reject_unknown_values() {
        assert_eq!("first".parse::<RouteStrategy>(), Ok(RouteStrategy::First));
        assert_eq!(
            " RANDOM ".parse::<RouteStrategy>(),
            Ok(RouteStrategy::Random)
        );
        let err = "BUSY".parse::<RouteStrategy>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown route strategy \"BUSY\": expected one of FIRST, LAST, RANDOM, ROUND, \
             CONSISTENT_HASH, LEAST_FREQUENTLY_USED, LEAST_RECENTLY_USED, FAILOVER, BUSYOVER, \
             SHARDING_BROADCAST"
        );
        assert_eq!("stopped".parse::<JobStatus>(), Ok(JobStatus::Stopped));
        assert!("paused".parse::<JobStatus>().is_err());
        assert_eq!(RunState::Dispatched.to_string(), "DISPATCHED");
    }

    fn broadcast_fire(route_partitions: Option<Vec<i32>>) -> PendingFire {
        PendingFire {
            route_strategy: RouteStrategy::ShardingBroadcast,
            route_partitions,
            ..PendingFire::for_test(7, 5_000)
        }
    }

    #[test]
    fn a_broadcast_fire_becomes_one_shard_per_partition() {
        let shards = broadcast_fire(None).into_shards(3);
        let job = JobId::new(7).unwrap();
        let summary: Vec<_> = shards
            .iter()
            .map(|s| {
                (
                    s.trigger_id.clone(),
                    s.shard_index,
                    s.shard_total,
                    s.route_partitions.clone(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            (0..3)
                .map(|p| (TriggerId::shard(job, 5_000, p as u32), p, 3, Some(vec![p])))
                .collect::<Vec<_>>()
        );
        // Named partitions: shards over those only, indexed by position (XXL-JOB's address list).
        let named = broadcast_fire(Some(vec![2, 5])).into_shards(6);
        let summary: Vec<_> = named
            .iter()
            .map(|s| (s.shard_index, s.shard_total, s.route_partitions.clone()))
            .collect();
        assert_eq!(summary, vec![(0, 2, Some(vec![2])), (1, 2, Some(vec![5]))]);
        // A shard (e.g. a retry of one) and any other strategy stay as they are.
        assert_eq!(shards[1].clone().into_shards(3), vec![shards[1].clone()]);
        let mut single = broadcast_fire(None);
        single.route_strategy = RouteStrategy::First;
        assert_eq!(single.clone().into_shards(3), vec![single]);
    }

    #[test]
    fn retry_backoff_is_none_fixed_or_exponential_with_a_cap() {
        assert_eq!(RetryBackoff::None.delay_before(3), 0);
        assert_eq!(RetryBackoff::Fixed { delay_ms: 500 }.delay_before(1), 500);
        assert_eq!(RetryBackoff::Fixed { delay_ms: 500 }.delay_before(9), 500);
        let exponential = RetryBackoff::Exponential {
            base_ms: 1_000,
            cap_ms: 5_000,
        };
        let delays: Vec<i64> = (1..=5)
            .map(|retry| exponential.delay_before(retry))
            .collect();
        assert_eq!(delays, vec![1_000, 2_000, 4_000, 5_000, 5_000]);
        assert_eq!(exponential.delay_before(200), 5_000, "no overflow");
    }
}
