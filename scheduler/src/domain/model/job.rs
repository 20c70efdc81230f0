//! Apps and jobs: what is scheduled, where it runs, how it is routed, retried and chained
//! (XXL-JOB's `xxl_job_group` and `xxl_job_info`, and the GLUE script versions).

use kadence_schemas::{AppName, BlockStrategy, GlueType, JobId};
use serde::{Deserialize, Serialize};

use crate::domain::enums::{ModelError, string_enum};
use crate::domain::schedule::{MisfireStrategy, ScheduleSpec};

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
    /// [`crate::engine::routing`]). FAILOVER and BUSYOVER read the executor registry built from beats.
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
    /// Which of a job's runs are kept as job-log rows once they are done. Counters (the
    /// daily reports, the metrics) count every run whatever the policy; the rows a policy
    /// drops are folded into `run_counts` when they are dropped. Every run has its row
    /// while it is under way, so the monitors (lost runs, retries, alarms, children,
    /// FIX_DELAY) work the same under every policy. See `docs/src/decisions/run-history-policy.md`.
    #[derive(Default)]
    HistoryPolicy, "history policy", {
        /// Every run (XXL-JOB's behaviour; the default).
        #[default]
        All => "ALL",
        /// Failed runs only: a success is counted and its row and log lines dropped.
        Failures => "FAILURES",
        /// None: every finished run is counted and dropped once followed up, except a
        /// failed attempt that was retried (its retries link to it).
        CountsOnly => "NONE",
    }
);

/// An executor app (XXL-JOB's executor group): one trigger topic with a fixed partition count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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
    /// Which finished runs keep their rows.
    pub history: HistoryPolicy,
}

impl NewJob {
    /// A job of `app` running `handler` on `schedule`, everything else at XXL-JOB's defaults:
    /// UTC, misfire DO_NOTHING, route FIRST, SERIAL_EXECUTION, no params, no timeout, no
    /// retries, no alarms, no children, a registered (BEAN) handler, every run kept.
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
            history: HistoryPolicy::All,
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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
