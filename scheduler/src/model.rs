//! The scheduler's domain nouns: apps, jobs, runs (job-log rows) and pending fires.
//!
//! Enumerations that users type (strategies, statuses) are parsed here, at the boundary: an
//! unknown value is a [`ModelError`] that lists the accepted values, never a silent default.

use kadence_schemas::{AppName, BlockStrategy, GlueType, JobId, TriggerId, TriggerType};
use serde::{Deserialize, Serialize};

use crate::schedule::{MisfireStrategy, ScheduleSpec};

/// A value a user supplied that the model cannot accept.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ModelError {
    /// An enumeration received a value outside its set.
    #[error("unknown {kind} {value:?}: expected one of {expected}")]
    UnknownValue {
        /// What was being parsed, e.g. "route strategy".
        kind: &'static str,
        /// The rejected input.
        value: String,
        /// The accepted spellings, comma separated.
        expected: &'static str,
    },
}

/// Implements `FromStr`, `Display`, `as_str` and string serde for a plain enumeration whose
/// spelling is its SCREAMING_SNAKE_CASE name.
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident, $kind:literal, { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every accepted spelling, comma separated (used in error messages).
            pub const EXPECTED: &'static str = concat!($($text, ", "),+);

            /// The canonical spelling, as stored and as shown.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::model::ModelError;
            fn from_str(value: &str) -> Result<Self, Self::Err> {
                match value.trim().to_ascii_uppercase().as_str() {
                    $($text => Ok(Self::$variant),)+
                    _ => Err($crate::model::ModelError::UnknownValue {
                        kind: $kind,
                        value: value.to_owned(),
                        expected: Self::EXPECTED.trim_end_matches(", "),
                    }),
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::model::ModelError;
            fn try_from(value: String) -> Result<Self, Self::Error> { value.parse() }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String { value.as_str().to_owned() }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str(self.as_str()) }
        }
    };
}
pub(crate) use string_enum;

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
    /// [`crate::routing`]). FAILOVER, BUSYOVER and SHARDING_BROADCAST need the executor
    /// registry and broadcast fires; they are not accepted yet.
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
    }
);

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
             CONSISTENT_HASH, LEAST_FREQUENTLY_USED, LEAST_RECENTLY_USED"
        );
        assert_eq!("stopped".parse::<JobStatus>(), Ok(JobStatus::Stopped));
        assert!("paused".parse::<JobStatus>().is_err());
        assert_eq!(RunState::Dispatched.to_string(), "DISPATCHED");
    }
}
