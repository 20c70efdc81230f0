//! The record types, one per `.avsc` file in `schemas/avro/`. Field names and enum symbols
//! are identical to the schemas'; the codec checks every record against its schema.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ids::{AppName, JobId, TriggerId};

/// A value outside an enumeration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?}: expected one of {expected}")]
pub struct UnknownEnumValue {
    /// Which enumeration.
    pub kind: &'static str,
    /// The rejected input.
    pub value: String,
    /// The accepted values, comma separated.
    pub expected: &'static str,
}

/// An Avro enum: SCREAMING_SNAKE_CASE symbols on the wire and in text.
macro_rules! avro_enum {
    ($(#[$meta:meta])* $name:ident, $kind:literal, { $($(#[$vmeta:meta])* $variant:ident => $symbol:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $symbol)] $variant),+
        }

        impl $name {
            /// Every symbol, in schema order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The symbol.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $symbol),+ }
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($symbol),+]))
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {}

        impl FromStr for $name {
            type Err = UnknownEnumValue;
            /// Parses a symbol, case-insensitively.
            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text.trim().to_ascii_uppercase().as_str() {
                    $($symbol => Ok($name::$variant),)+
                    _ => Err(UnknownEnumValue {
                        kind: $kind,
                        value: text.to_owned(),
                        expected: concat!($($symbol, ", "),+).trim_end_matches(", "),
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

avro_enum!(
    /// Why a run was triggered.
    TriggerType, "trigger type", {
        /// A cron schedule.
        Cron => "CRON",
        /// A fixed-rate schedule.
        FixRate => "FIX_RATE",
        /// A fixed-delay schedule.
        FixDelay => "FIX_DELAY",
        /// A person, from the console or CLI.
        Manual => "MANUAL",
        /// A program, through the API.
        Api => "API",
        /// A retry of a failed run.
        Retry => "RETRY",
        /// A parent job succeeded.
        Parent => "PARENT",
        /// A fire missed while the scheduler was down (misfire strategy FIRE_ONCE_NOW).
        Misfire => "MISFIRE",
        /// An operator replayed a trigger.
        Replay => "REPLAY",
        /// A fire of the job's schedule that never fired (an outage), filled in by an
        /// operator's backfill. Only `TriggerRecord` v2 (schema id 1002) carries it.
        Backfill => "BACKFILL",
    }
);

avro_enum!(
    /// What an executor does with a trigger while the same job is running (XXL-JOB's block
    /// strategies, plus CONCURRENT). Default: SERIAL_EXECUTION, as in XXL-JOB.
    #[derive(Default)]
    BlockStrategy, "block strategy", {
        /// Queue it and run in order.
        #[default]
        SerialExecution => "SERIAL_EXECUTION",
        /// Refuse it while the job runs or has a queue.
        DiscardLater => "DISCARD_LATER",
        /// Cancel the running and queued runs; run this one.
        CoverEarly => "COVER_EARLY",
        /// Run it in parallel.
        Concurrent => "CONCURRENT",
    }
);

avro_enum!(
    /// How a handler is provided. Default: BEAN.
    #[derive(Default)]
    GlueType, "glue type", {
        /// A handler registered in the executor.
        #[default]
        Bean => "BEAN",
        /// A shell script carried in the trigger.
        GlueShell => "GLUE_SHELL",
        /// A Python script carried in the trigger.
        GluePython => "GLUE_PYTHON",
        /// A Node.js script carried in the trigger.
        GlueNodejs => "GLUE_NODEJS",
        /// A PHP script carried in the trigger.
        GluePhp => "GLUE_PHP",
        /// A PowerShell script carried in the trigger.
        GluePowershell => "GLUE_POWERSHELL",
    }
);

avro_enum!(
    /// A command on the control topic.
    ControlCommand, "control command", {
        /// Cancel running and queued runs.
        Kill => "KILL",
    }
);

avro_enum!(
    /// An executor's lifecycle state, as announced in its beats.
    ExecutorState, "executor state", {
        /// Taking triggers.
        Running => "RUNNING",
        /// Shutting down gracefully; about to leave.
        Stopping => "STOPPING",
    }
);

/// XXL-JOB's result codes.
pub mod result_code {
    /// The run succeeded.
    pub const SUCCESS: i32 = 200;
    /// The run failed.
    pub const FAILURE: i32 = 500;
    /// The run timed out and was cancelled.
    pub const TIMEOUT: i32 = 502;
}

/// One run of a job, for the executors of its app (`trigger_record.avsc`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TriggerRecord {
    /// Deterministic id of the run.
    pub trigger_id: TriggerId,
    /// The scheduler's job-log row id.
    pub log_id: i64,
    /// The job.
    pub job_id: JobId,
    /// The executor app.
    pub app: AppName,
    /// Handler name.
    pub handler: String,
    /// Handler parameters.
    pub params: String,
    /// Shard index (0 unless broadcast).
    pub shard_index: i32,
    /// Shard total (1 unless broadcast).
    pub shard_total: i32,
    /// Block strategy.
    pub block_strategy: BlockStrategy,
    /// Timeout in ms, 0 for none.
    pub timeout_ms: i64,
    /// Why it was triggered.
    pub trigger_type: TriggerType,
    /// Scheduled time, ms since the epoch.
    pub scheduled_at_ms: i64,
    /// Emission time, ms since the epoch.
    pub emitted_at_ms: i64,
    /// 0 for the first attempt.
    pub attempt: i32,
    /// Handler kind.
    pub glue_type: GlueType,
    /// Script source for GLUE_* handlers.
    pub glue_source: Option<String>,
    /// Script version (update time), ms since the epoch.
    pub glue_updated_at_ms: Option<i64>,
    /// The trigger a REPLAY replays.
    pub replay_of: Option<TriggerId>,
    /// The end of the trigger's validity, ms since the epoch: an executor receiving it later
    /// refuses it as expired, so a captured copy cannot run again after it. `None` writes the
    /// record as v1 (v2 for a backfill), which executors that predate v3 read.
    #[serde(default)]
    pub expires_at_ms: Option<i64>,
}

/// Written by hand for one reason: a trigger without a validity window must not mention
/// `expires_at_ms` at all, because it is written with v1 or v2, which have no such field, and
/// apache-avro's schema-aware writer refuses even a *skipped* field its schema lacks (serde's
/// `skip_serializing_if` reports a skip). The fields go in schema order, as the codec's direct
/// writer requires; the codec tests hold every version's bytes to the generic encoder's.
impl Serialize for TriggerRecord {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let fields = 18 + usize::from(self.expires_at_ms.is_some());
        let mut record = serializer.serialize_struct("TriggerRecord", fields)?;
        record.serialize_field("trigger_id", &self.trigger_id)?;
        record.serialize_field("log_id", &self.log_id)?;
        record.serialize_field("job_id", &self.job_id)?;
        record.serialize_field("app", &self.app)?;
        record.serialize_field("handler", &self.handler)?;
        record.serialize_field("params", &self.params)?;
        record.serialize_field("shard_index", &self.shard_index)?;
        record.serialize_field("shard_total", &self.shard_total)?;
        record.serialize_field("block_strategy", &self.block_strategy)?;
        record.serialize_field("timeout_ms", &self.timeout_ms)?;
        record.serialize_field("trigger_type", &self.trigger_type)?;
        record.serialize_field("scheduled_at_ms", &self.scheduled_at_ms)?;
        record.serialize_field("emitted_at_ms", &self.emitted_at_ms)?;
        record.serialize_field("attempt", &self.attempt)?;
        record.serialize_field("glue_type", &self.glue_type)?;
        record.serialize_field("glue_source", &self.glue_source)?;
        record.serialize_field("glue_updated_at_ms", &self.glue_updated_at_ms)?;
        record.serialize_field("replay_of", &self.replay_of)?;
        if self.expires_at_ms.is_some() {
            record.serialize_field("expires_at_ms", &self.expires_at_ms)?;
        }
        record.end()
    }
}

impl TriggerRecord {
    /// Whether the trigger's validity has ended at `now_ms` (never, without a window).
    pub fn expired_at(&self, now_ms: i64) -> bool {
        self.expires_at_ms.is_some_and(|expires| now_ms > expires)
    }
}

/// The outcome of one run (`result_record.avsc`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    /// The run.
    pub trigger_id: TriggerId,
    /// The scheduler's job-log row id.
    pub log_id: i64,
    /// The job.
    pub job_id: JobId,
    /// The executor app.
    pub app: AppName,
    /// The executor that ran it.
    pub executor_id: String,
    /// 200 success, 500 failure, 502 timeout.
    pub code: i32,
    /// Failure message or note.
    pub message: Option<String>,
    /// Handler start, ms since the epoch.
    pub started_at_ms: i64,
    /// Handler end, ms since the epoch.
    pub finished_at_ms: i64,
    /// The attempt this result is for.
    pub attempt: i32,
    /// Retry hint in ms.
    pub retry_after_ms: Option<i64>,
}

/// A command for an app's executors (`control_record.avsc`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlRecord {
    /// The command.
    pub command: ControlCommand,
    /// The app it is for.
    pub app: AppName,
    /// The job it applies to.
    pub job_id: Option<JobId>,
    /// The single run it applies to.
    pub trigger_id: Option<TriggerId>,
    /// Why.
    pub reason: Option<String>,
    /// When it was issued, ms since the epoch.
    pub requested_at_ms: i64,
}

/// An executor's heartbeat (`executor_beat.avsc`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ExecutorBeat {
    /// The executor.
    pub executor_id: String,
    /// Its app.
    pub app: AppName,
    /// Its host.
    pub host: String,
    /// SDK version.
    pub version: String,
    /// Handler names.
    pub handlers: Vec<String>,
    /// Assigned partitions.
    pub owned_partitions: Vec<i32>,
    /// Jobs with a run in progress.
    pub running_jobs: Vec<i64>,
    /// Jobs with queued runs.
    pub queued_jobs: Vec<i64>,
    /// Lifecycle state.
    pub state: ExecutorState,
    /// Send time, ms since the epoch.
    pub sent_at_ms: i64,
    /// Protocol features the executor supports, ascending (PROTOCOL.md section 9); empty in
    /// beats written as v1 (4001). Names a reader does not know mean nothing to it.
    #[serde(default)]
    pub features: Vec<String>,
}

/// Written by hand for the reason [`TriggerRecord`]'s is: a beat that lists no features is
/// written as v1, which has no `features` field, so it must not mention it at all.
impl Serialize for ExecutorBeat {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let fields = 10 + usize::from(!self.features.is_empty());
        let mut record = serializer.serialize_struct("ExecutorBeat", fields)?;
        record.serialize_field("executor_id", &self.executor_id)?;
        record.serialize_field("app", &self.app)?;
        record.serialize_field("host", &self.host)?;
        record.serialize_field("version", &self.version)?;
        record.serialize_field("handlers", &self.handlers)?;
        record.serialize_field("owned_partitions", &self.owned_partitions)?;
        record.serialize_field("running_jobs", &self.running_jobs)?;
        record.serialize_field("queued_jobs", &self.queued_jobs)?;
        record.serialize_field("state", &self.state)?;
        record.serialize_field("sent_at_ms", &self.sent_at_ms)?;
        if !self.features.is_empty() {
            record.serialize_field("features", &self.features)?;
        }
        record.end()
    }
}

impl ExecutorBeat {
    /// The feature of an executor that verifies round-signed triggers (PROTOCOL.md section 3):
    /// the scheduler signs an app's triggers by the round only once every executor of the app
    /// lists it.
    pub const ROUND_SIGNATURES: &'static str = "round-signatures";

    /// Whether the beat lists `feature`.
    pub fn has_feature(&self, feature: &str) -> bool {
        self.features.iter().any(|listed| listed == feature)
    }
}

/// Log lines of one run (`log_record.avsc`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogRecord {
    /// The run.
    pub trigger_id: TriggerId,
    /// The scheduler's job-log row id.
    pub log_id: i64,
    /// The job.
    pub job_id: JobId,
    /// The executor writing them.
    pub executor_id: String,
    /// Number of the first line (1-based).
    pub first_line: i64,
    /// The lines.
    pub lines: Vec<String>,
    /// Production time, ms since the epoch.
    pub emitted_at_ms: i64,
    /// When this run of the trigger started on its executor, ms since the epoch (the run's
    /// result's `started_at_ms`): with `executor_id` it names one run, so the lines of a
    /// trigger run twice stay apart. `None` only in records written as v1 (5001).
    #[serde(default)]
    pub run_started_at_ms: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_parse_their_symbols_and_list_them_on_error() {
        assert_eq!(
            "cover_early".parse::<BlockStrategy>(),
            Ok(BlockStrategy::CoverEarly)
        );
        assert_eq!(TriggerType::FixRate.to_string(), "FIX_RATE");
        let error = "SOMETIMES".parse::<BlockStrategy>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown block strategy \"SOMETIMES\": expected one of SERIAL_EXECUTION, DISCARD_LATER, COVER_EARLY, CONCURRENT"
        );
        assert_eq!(TriggerType::ALL.len(), 10);
    }

    fn symbols_round_trip<E>(all: &[E])
    where
        E: Copy + PartialEq + fmt::Debug + fmt::Display + FromStr<Err = UnknownEnumValue>,
    {
        for &value in all {
            assert_eq!(value.to_string().parse::<E>(), Ok(value));
        }
    }

    #[test]
    fn every_symbol_round_trips_through_text() {
        symbols_round_trip(TriggerType::ALL);
        symbols_round_trip(BlockStrategy::ALL);
        symbols_round_trip(GlueType::ALL);
        symbols_round_trip(ControlCommand::ALL);
        symbols_round_trip(ExecutorState::ALL);
        assert_eq!(BlockStrategy::default(), BlockStrategy::SerialExecution);
        assert_eq!(GlueType::default(), GlueType::Bean);
        assert_eq!(GlueType::GluePowershell.as_str(), "GLUE_POWERSHELL");
        assert_eq!(
            " glue_shell ".parse::<GlueType>(),
            Ok(GlueType::GlueShell),
            "input is trimmed and case-insensitive"
        );
        let error = "PAUSE".parse::<ControlCommand>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown control command \"PAUSE\": expected one of KILL"
        );
    }

    #[test]
    fn rust_symbols_match_the_avro_schemas() {
        let symbols = |record: &str, field: &str| -> Vec<String> {
            let Some(apache_avro::Schema::Record(schema)) = crate::catalog::current_schema(record)
            else {
                panic!("{record} is not a record")
            };
            let field = schema.fields.iter().find(|f| f.name == field).unwrap();
            match &field.schema {
                apache_avro::Schema::Enum(e) => e.symbols.clone(),
                other => panic!("{record}.{field:?} is {other:?}"),
            }
        };
        let check = |record: &str, field: &str, ours: Vec<&str>| {
            assert_eq!(symbols(record, field), ours, "{record}.{field}");
        };
        let strs = |all: &[&'static str]| all.to_vec();
        check(
            "TriggerRecord",
            "trigger_type",
            TriggerType::ALL.iter().map(|v| v.as_str()).collect(),
        );
        check(
            "TriggerRecord",
            "block_strategy",
            BlockStrategy::ALL.iter().map(|v| v.as_str()).collect(),
        );
        check(
            "TriggerRecord",
            "glue_type",
            GlueType::ALL.iter().map(|v| v.as_str()).collect(),
        );
        check("ControlRecord", "command", strs(&["KILL"]));
        check("ExecutorBeat", "state", strs(&["RUNNING", "STOPPING"]));
    }
}
