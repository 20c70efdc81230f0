//! The `job_logs` table: a fire while it is pending, a run once dispatched and finished.

use kadence_schemas::{AppName, BlockStrategy, GlueType, JobId, TriggerId, TriggerType};

use super::{corrupt, join_list, narrow, parse, parse_list};
use crate::domain::model::{AlarmStatus, PendingFire, RouteStrategy, Run, RunState};
use crate::store::values::{IntoSqlValue as _, SqlValue};
use crate::store::{RunSummary, StoreError};

/// Columns of `job_logs` that make a pending fire.
pub(crate) const FIRE_COLUMNS: &str = "id, trigger_id, job_id, app, handler, params, trigger_type, \
     shard_index, shard_total, attempt, scheduled_at_ms, fire_at_ms, route_strategy, \
     block_strategy, timeout_ms, glue_type, glue_source, glue_updated_at_ms, route_partitions, \
     replay_of, operation_id";

/// Columns of `job_logs` shown as a run.
pub(crate) const RUN_COLUMNS: &str = "id, trigger_id, job_id, trigger_type, params, attempt, \
     shard_index, shard_total, scheduled_at_ms, state, partition_no, dispatched_at_ms, executor_id, handle_code, \
     handle_msg, handle_at_ms, handle_started_at_ms, first_log_id, alarm_status, replay_of, operation_id";

/// What a fire fills of its `job_logs` row, each column with its value (the columns of
/// [`FIRE_COLUMNS`] but the id, which the database or a reservation gives).
pub(crate) fn fire_values(fire: &PendingFire) -> [(&'static str, SqlValue<'_>); 20] {
    [
        ("trigger_id", fire.trigger_id.as_str().into_sql_value()),
        ("job_id", fire.job_id.get().into_sql_value()),
        ("app", fire.app.as_str().into_sql_value()),
        ("handler", fire.handler.as_str().into_sql_value()),
        ("params", fire.params.as_str().into_sql_value()),
        ("trigger_type", fire.trigger_type.as_str().into_sql_value()),
        ("shard_index", fire.shard_index.into_sql_value()),
        ("shard_total", fire.shard_total.into_sql_value()),
        ("attempt", fire.attempt.into_sql_value()),
        ("scheduled_at_ms", fire.scheduled_at_ms.into_sql_value()),
        ("fire_at_ms", fire.fire_at_ms.into_sql_value()),
        (
            "route_strategy",
            fire.route_strategy.as_str().into_sql_value(),
        ),
        (
            "block_strategy",
            fire.block_strategy.as_str().into_sql_value(),
        ),
        ("timeout_ms", fire.timeout_ms.into_sql_value()),
        ("glue_type", fire.glue_type.as_str().into_sql_value()),
        ("glue_source", fire.glue_source.as_deref().into_sql_value()),
        (
            "glue_updated_at_ms",
            fire.glue_updated_at_ms.into_sql_value(),
        ),
        (
            "route_partitions",
            (fire.route_partitions.as_deref().map(join_list)).into_sql_value(),
        ),
        (
            "replay_of",
            fire.replay_of
                .as_ref()
                .map(TriggerId::as_str)
                .into_sql_value(),
        ),
        ("operation_id", fire.operation_id.into_sql_value()),
    ]
}

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
pub struct FireRow {
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
pub struct FinishedRunRow {
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
pub struct RunRow {
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

/// A run the results writer completed, as its `UPDATE … RETURNING` gives it.
#[derive(Debug, sqlx::FromRow)]
pub struct CompletedRunRow {
    pub(crate) trigger_id: String,
    pub(crate) job_id: i64,
    /// The first attempt's trigger type (a retry's own is RETRY).
    pub(crate) run_trigger_type: String,
    pub(crate) attempt: i64,
    pub(crate) handle_code: i64,
    pub(crate) handle_at_ms: i64,
}

/// A run row with its app and handler, and its job's description.
#[derive(sqlx::FromRow)]
pub struct SummaryRow {
    #[sqlx(flatten)]
    run: RunRow,
    app: String,
    handler: String,
    job_name: Option<String>,
}

impl TryFrom<SummaryRow> for RunSummary {
    type Error = StoreError;
    fn try_from(row: SummaryRow) -> Result<RunSummary, StoreError> {
        let run = Run::try_from(row.run)?;
        let app = AppName::parse(&row.app).map_err(|error| StoreError::CorruptRow {
            what: format!("run {}", run.trigger_id),
            reason: error.to_string(),
        })?;
        Ok(RunSummary {
            run,
            app,
            handler: row.handler,
            job_description: row.job_name,
        })
    }
}
