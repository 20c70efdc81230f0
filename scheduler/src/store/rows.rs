//! Row shapes shared by both backends and their conversion into model types. Every integer is
//! read as `i64` (both backends store `BIGINT`/`INTEGER`) and every enumeration as text, parsed
//! here so a corrupt value is a [`StoreError::CorruptRow`], never a silent default.

use std::str::FromStr;

use kadence_schemas::{AppName, BlockStrategy, GlueType, JobId, TriggerId, TriggerType};

use super::StoreError;
use crate::domain::model::{
    AlarmStatus, App, ChildTriggerMode, ExecutorEntry, ExecutorStatus, Glue, GlueVersion,
    HistoryPolicy, Job, JobStatus, NewJob, PendingFire, RetryBackoff, RetryPolicy, RouteStrategy,
    Run, RunState,
};
use crate::domain::schedule::{MisfireStrategy, ScheduleSpec, parse_time_zone};

/// Columns of `apps`.
pub(crate) const APP_COLUMNS: &str = "name, title, partitions, created_at_ms";

/// Columns of `jobs`.
pub(crate) const JOB_COLUMNS: &str = "id, app, name, schedule_type, schedule_conf, time_zone, \
     misfire_strategy, route_strategy, handler, params, block_strategy, timeout_ms, status, \
     last_fire_ms, next_fire_ms, created_at_ms, updated_at_ms, author, alarm_emails, alarm_webhook, \
     retry_count, retry_backoff, retry_backoff_ms, retry_backoff_cap_ms, glue_type, glue_source, \
     glue_remark, glue_updated_at_ms, child_job_ids, child_trigger_mode, history";

/// Columns of `jobs` that hold a job's definition, in the order [`bind_job_spec`] binds
/// them (see `sql.rs`).
pub(crate) const JOB_SPEC_COLUMNS: [&str; 24] = [
    "app",
    "name",
    "schedule_type",
    "schedule_conf",
    "time_zone",
    "misfire_strategy",
    "route_strategy",
    "handler",
    "params",
    "block_strategy",
    "timeout_ms",
    "author",
    "alarm_emails",
    "alarm_webhook",
    "retry_count",
    "retry_backoff",
    "retry_backoff_ms",
    "retry_backoff_cap_ms",
    "glue_type",
    "glue_source",
    "glue_remark",
    "child_job_ids",
    "child_trigger_mode",
    "history",
];

/// Columns of `job_logs` that make a pending fire.
pub(crate) const FIRE_COLUMNS: &str = "id, trigger_id, job_id, app, handler, params, trigger_type, \
     shard_index, shard_total, attempt, scheduled_at_ms, fire_at_ms, route_strategy, \
     block_strategy, timeout_ms, glue_type, glue_source, glue_updated_at_ms, route_partitions, \
     replay_of, operation_id";

/// Columns of `executors`, in [`ExecutorRow`]'s order.
pub(crate) const EXECUTOR_COLUMNS: &str = "executor_id, app, host, version, handlers, \
     owned_partitions, running_jobs, queued_jobs, state, first_seen_at_ms, last_beat_at_ms";

/// Columns of `job_logs` shown as a run.
pub(crate) const RUN_COLUMNS: &str = "id, trigger_id, job_id, trigger_type, params, attempt, \
     shard_index, shard_total, scheduled_at_ms, state, partition_no, dispatched_at_ms, executor_id, handle_code, \
     handle_msg, handle_at_ms, handle_started_at_ms, first_log_id, alarm_status, replay_of, operation_id";

/// Claims up to `$5` pending fires whose lease ended before `$3` (and `$4`, the same time)
/// for node `$1` until `$2`.
/// `lock_clause` lets PostgreSQL add `FOR UPDATE SKIP LOCKED`; SQLite needs none (a single
/// `UPDATE` holds the write lock).
pub(crate) fn claim_expired_sql(lock_clause: &str) -> String {
    format!(
        "UPDATE job_logs SET owner_node = $1, lease_until_ms = $2 \
         WHERE state = 'SCHEDULED' AND lease_until_ms < $3 AND id IN ( \
             SELECT id FROM job_logs WHERE state = 'SCHEDULED' AND lease_until_ms < $4 \
             ORDER BY lease_until_ms LIMIT $5{lock_clause}) \
         RETURNING {FIRE_COLUMNS}"
    )
}

#[derive(sqlx::FromRow)]
pub struct ExecutorRow {
    executor_id: String,
    app: String,
    host: String,
    version: String,
    handlers: String,
    owned_partitions: String,
    running_jobs: String,
    queued_jobs: String,
    state: String,
    first_seen_at_ms: i64,
    last_beat_at_ms: i64,
}

#[derive(sqlx::FromRow)]
pub(crate) struct AppRow {
    name: String,
    title: String,
    partitions: i64,
    created_at_ms: i64,
}

#[derive(sqlx::FromRow)]
pub(crate) struct JobRow {
    id: i64,
    /// Its schedule shard: read by the pre-read scan only (`0` where not selected).
    #[sqlx(default)]
    shard: i64,
    app: String,
    name: String,
    schedule_type: String,
    schedule_conf: String,
    time_zone: String,
    misfire_strategy: String,
    route_strategy: String,
    handler: String,
    params: String,
    block_strategy: String,
    timeout_ms: i64,
    status: String,
    last_fire_ms: Option<i64>,
    next_fire_ms: Option<i64>,
    created_at_ms: i64,
    updated_at_ms: i64,
    author: String,
    alarm_emails: String,
    alarm_webhook: Option<String>,
    retry_count: i64,
    retry_backoff: String,
    retry_backoff_ms: i64,
    retry_backoff_cap_ms: i64,
    glue_type: String,
    glue_source: Option<String>,
    glue_remark: String,
    glue_updated_at_ms: Option<i64>,
    child_job_ids: String,
    child_trigger_mode: String,
    history: String,
}

impl JobRow {
    /// The raw id, for reporting a row that cannot be converted.
    pub(crate) fn id(&self) -> i64 {
        self.id
    }

    /// The stored next fire, for compare-and-set updates.
    pub(crate) fn next_fire_ms(&self) -> Option<i64> {
        self.next_fire_ms
    }

    /// Its schedule shard, where the query selected it.
    pub(crate) fn shard(&self) -> u32 {
        u32::try_from(self.shard).unwrap_or(0)
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct FireRow {
    id: i64,
    trigger_id: String,
    job_id: i64,
    app: String,
    handler: String,
    params: String,
    trigger_type: String,
    shard_index: i64,
    shard_total: i64,
    attempt: i64,
    scheduled_at_ms: i64,
    fire_at_ms: i64,
    route_strategy: String,
    block_strategy: String,
    timeout_ms: i64,
    glue_type: String,
    glue_source: Option<String>,
    glue_updated_at_ms: Option<i64>,
    route_partitions: Option<String>,
    replay_of: Option<String>,
    operation_id: Option<i64>,
}

#[derive(sqlx::FromRow)]
pub(crate) struct FinishedRunRow {
    #[sqlx(flatten)]
    fire: FireRow,
    handle_code: Option<i64>,
    handle_msg: Option<String>,
    executor_id: Option<String>,
    handle_at_ms: Option<i64>,
    first_log_id: Option<i64>,
    retry_after_ms: Option<i64>,
}

impl TryFrom<FinishedRunRow> for crate::store::FinishedRun {
    type Error = StoreError;
    fn try_from(row: FinishedRunRow) -> Result<Self, StoreError> {
        let what = format!("finished run {}", row.fire.trigger_id);
        let code = row
            .handle_code
            .map(narrow)
            .transpose()
            .map_err(corrupt(what.clone()))?
            .ok_or_else(|| corrupt(what)("a finished run has no result code".to_owned()))?;
        Ok(crate::store::FinishedRun {
            fire: PendingFire::try_from(row.fire)?,
            code,
            message: row.handle_msg,
            executor_id: row.executor_id,
            finished_at_ms: row.handle_at_ms,
            first_log_id: row.first_log_id,
            retry_after_ms: row.retry_after_ms,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct GlueVersionRow {
    glue_type: String,
    glue_source: String,
    glue_remark: String,
    created_at_ms: i64,
}

#[derive(sqlx::FromRow)]
pub(crate) struct RunRow {
    id: i64,
    trigger_id: String,
    job_id: i64,
    trigger_type: String,
    params: String,
    attempt: i64,
    shard_index: i64,
    shard_total: i64,
    scheduled_at_ms: i64,
    state: String,
    partition_no: Option<i64>,
    dispatched_at_ms: Option<i64>,
    executor_id: Option<String>,
    handle_code: Option<i64>,
    handle_msg: Option<String>,
    handle_at_ms: Option<i64>,
    handle_started_at_ms: Option<i64>,
    first_log_id: Option<i64>,
    alarm_status: String,
    replay_of: Option<String>,
    operation_id: Option<i64>,
}

fn corrupt(what: impl Into<String>) -> impl FnOnce(String) -> StoreError {
    let what = what.into();
    move |reason| StoreError::CorruptRow { what, reason }
}

fn parse<T>(value: &str) -> Result<T, String>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    value.parse::<T>().map_err(|error| error.to_string())
}

fn narrow(value: i64) -> Result<i32, String> {
    i32::try_from(value).map_err(|_| format!("{value} does not fit a 32-bit integer"))
}

impl TryFrom<ExecutorRow> for ExecutorEntry {
    type Error = StoreError;
    fn try_from(row: ExecutorRow) -> Result<ExecutorEntry, StoreError> {
        let what = format!("executor {}", row.executor_id);
        (|| {
            Ok(ExecutorEntry {
                app: parse::<AppName>(&row.app)?,
                host: row.host,
                version: row.version,
                handlers: split_list(&row.handlers).map(str::to_owned).collect(),
                owned_partitions: parse_list(&row.owned_partitions)?,
                running_jobs: parse_list(&row.running_jobs)?,
                queued_jobs: parse_list(&row.queued_jobs)?,
                state: parse::<ExecutorStatus>(&row.state)?,
                first_seen_at_ms: row.first_seen_at_ms,
                last_beat_at_ms: row.last_beat_at_ms,
                executor_id: row.executor_id,
            })
        })()
        .map_err(corrupt(what))
    }
}

impl TryFrom<AppRow> for App {
    type Error = StoreError;
    fn try_from(row: AppRow) -> Result<App, StoreError> {
        let what = format!("app {}", row.name);
        (|| {
            Ok(App {
                name: parse::<AppName>(&row.name)?,
                title: row.title,
                partitions: narrow(row.partitions)?,
                created_at_ms: row.created_at_ms,
            })
        })()
        .map_err(corrupt(what))
    }
}

impl TryFrom<JobRow> for Job {
    type Error = StoreError;
    fn try_from(row: JobRow) -> Result<Job, StoreError> {
        let what = format!("job {}", row.id);
        (|| {
            Ok(Job {
                id: JobId::new(row.id).map_err(|e| e.to_string())?,
                spec: NewJob {
                    app: parse::<AppName>(&row.app)?,
                    name: row.name,
                    schedule: ScheduleSpec::parse(&row.schedule_type, &row.schedule_conf)
                        .map_err(|e| e.to_string())?,
                    time_zone: parse_time_zone(&row.time_zone).map_err(|e| e.to_string())?,
                    misfire_strategy: parse::<MisfireStrategy>(&row.misfire_strategy)?,
                    route_strategy: parse::<RouteStrategy>(&row.route_strategy)?,
                    handler: row.handler,
                    params: row.params,
                    block_strategy: parse::<BlockStrategy>(&row.block_strategy)?,
                    timeout_ms: row.timeout_ms,
                    author: row.author,
                    alarm_emails: split_list(&row.alarm_emails).map(str::to_owned).collect(),
                    alarm_webhook: row.alarm_webhook,
                    retry: RetryPolicy {
                        count: u32::try_from(row.retry_count).map_err(|e| e.to_string())?,
                        backoff: RetryBackoff::from_parts(
                            &row.retry_backoff,
                            row.retry_backoff_ms,
                            row.retry_backoff_cap_ms,
                        )
                        .map_err(|e| e.to_string())?,
                    },
                    glue: Glue {
                        glue_type: parse::<GlueType>(&row.glue_type)?,
                        source: row.glue_source,
                        remark: row.glue_remark,
                    },
                    child_job_ids: parse_list::<JobId>(&row.child_job_ids)?,
                    child_trigger_mode: parse::<ChildTriggerMode>(&row.child_trigger_mode)?,
                    history: parse::<HistoryPolicy>(&row.history)?,
                },
                status: parse::<JobStatus>(&row.status)?,
                last_fire_ms: row.last_fire_ms,
                next_fire_ms: row.next_fire_ms,
                created_at_ms: row.created_at_ms,
                updated_at_ms: row.updated_at_ms,
                glue_updated_at_ms: row.glue_updated_at_ms,
            })
        })()
        .map_err(corrupt(what))
    }
}

impl TryFrom<FireRow> for PendingFire {
    type Error = StoreError;
    fn try_from(row: FireRow) -> Result<PendingFire, StoreError> {
        let what = format!("pending fire {}", row.trigger_id);
        (|| {
            Ok(PendingFire {
                log_id: row.id,
                trigger_id: parse::<TriggerId>(&row.trigger_id)?,
                job_id: JobId::new(row.job_id).map_err(|e| e.to_string())?,
                app: parse::<AppName>(&row.app)?,
                handler: row.handler,
                params: row.params,
                trigger_type: parse::<TriggerType>(&row.trigger_type)?,
                shard_index: narrow(row.shard_index)?,
                shard_total: narrow(row.shard_total)?,
                attempt: narrow(row.attempt)?,
                scheduled_at_ms: row.scheduled_at_ms,
                fire_at_ms: row.fire_at_ms,
                route_strategy: parse::<RouteStrategy>(&row.route_strategy)?,
                block_strategy: parse::<BlockStrategy>(&row.block_strategy)?,
                timeout_ms: row.timeout_ms,
                glue_type: parse::<GlueType>(&row.glue_type)?,
                glue_source: row.glue_source,
                glue_updated_at_ms: row.glue_updated_at_ms,
                route_partitions: row
                    .route_partitions
                    .as_deref()
                    .map(parse_list::<i32>)
                    .transpose()?,
                replay_of: row
                    .replay_of
                    .as_deref()
                    .map(parse::<TriggerId>)
                    .transpose()?,
                operation_id: row.operation_id,
            })
        })()
        .map_err(corrupt(what))
    }
}

impl TryFrom<GlueVersionRow> for GlueVersion {
    type Error = StoreError;
    fn try_from(row: GlueVersionRow) -> Result<GlueVersion, StoreError> {
        Ok(GlueVersion {
            glue_type: parse::<GlueType>(&row.glue_type).map_err(corrupt("glue version"))?,
            source: row.glue_source,
            remark: row.glue_remark,
            created_at_ms: row.created_at_ms,
        })
    }
}

/// The items of a comma-separated column.
fn split_list(text: &str) -> impl Iterator<Item = &str> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
}

/// The items of a comma-separated column, parsed.
pub(crate) fn parse_list<T>(text: &str) -> Result<Vec<T>, String>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    split_list(text).map(parse::<T>).collect()
}

/// A list as a comma-separated column.
pub(crate) fn join_list<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl TryFrom<RunRow> for Run {
    type Error = StoreError;
    fn try_from(row: RunRow) -> Result<Run, StoreError> {
        let what = format!("run {}", row.trigger_id);
        (|| {
            Ok(Run {
                log_id: row.id,
                trigger_id: parse::<TriggerId>(&row.trigger_id)?,
                job_id: JobId::new(row.job_id).map_err(|e| e.to_string())?,
                trigger_type: parse::<TriggerType>(&row.trigger_type)?,
                params: row.params,
                attempt: narrow(row.attempt)?,
                shard_index: narrow(row.shard_index)?,
                shard_total: narrow(row.shard_total)?,
                scheduled_at_ms: row.scheduled_at_ms,
                state: parse::<RunState>(&row.state)?,
                partition: row.partition_no.map(narrow).transpose()?,
                dispatched_at_ms: row.dispatched_at_ms,
                executor_id: row.executor_id,
                started_at_ms: row.handle_started_at_ms,
                handle_code: row.handle_code.map(narrow).transpose()?,
                handle_msg: row.handle_msg,
                handle_at_ms: row.handle_at_ms,
                first_log_id: row.first_log_id,
                alarm_status: parse::<AlarmStatus>(&row.alarm_status)?,
                replay_of: row
                    .replay_of
                    .as_deref()
                    .map(parse::<TriggerId>)
                    .transpose()?,
                operation_id: row.operation_id,
            })
        })()
        .map_err(corrupt(what))
    }
}

/// Converts every row, failing on the first corrupt one.
pub(crate) fn convert_all<R, T>(rows: Vec<R>) -> Result<Vec<T>, StoreError>
where
    T: TryFrom<R, Error = StoreError>,
{
    rows.into_iter().map(T::try_from).collect()
}

/// A run the results writer completed, as its `UPDATE … RETURNING` gives it.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct CompletedRunRow {
    pub(crate) trigger_id: String,
    pub(crate) job_id: i64,
    /// The first attempt's trigger type (a retry's own is RETRY).
    pub(crate) run_trigger_type: String,
    pub(crate) attempt: i64,
    pub(crate) handle_code: i64,
    pub(crate) handle_at_ms: i64,
}
