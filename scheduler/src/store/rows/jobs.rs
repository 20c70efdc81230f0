//! The `apps`, `jobs` and `job_glue_versions` tables.

use kadence_schemas::{AppName, BlockStrategy, GlueType, JobId};

use super::{corrupt, join_list, narrow, parse, parse_list, split_list};
use crate::domain::model::{
    App, ChildTriggerMode, Glue, GlueVersion, HistoryPolicy, Job, JobStatus, NewJob, RetryBackoff,
    RetryPolicy, RouteStrategy,
};
use crate::domain::schedule::{MisfireStrategy, ScheduleSpec, parse_time_zone};
use crate::store::StoreError;
use crate::store::values::{IntoSqlValue as _, SqlValue};

/// Columns of `apps`.
pub(crate) const APP_COLUMNS: &str = "name, title, partitions, created_at_ms";

/// Columns of `jobs`.
pub(crate) const JOB_COLUMNS: &str = "id, app, name, schedule_type, schedule_conf, time_zone, \
     misfire_strategy, route_strategy, handler, params, block_strategy, timeout_ms, status, \
     last_fire_ms, next_fire_ms, created_at_ms, updated_at_ms, author, alarm_emails, alarm_webhook, \
     retry_count, retry_backoff, retry_backoff_ms, retry_backoff_cap_ms, glue_type, glue_source, \
     glue_remark, glue_updated_at_ms, child_job_ids, child_trigger_mode, history";

/// The columns of `jobs` that hold a job's definition, each with the value `job` writes to
/// it: the one place where a column and its value meet, for an insert and an edit alike, so
/// that no list of columns and list of binds can drift apart. (Rows are read by column name,
/// into [`JobRow`].)
pub(crate) fn job_values(job: &NewJob) -> [(&'static str, SqlValue<'_>); 24] {
    let (backoff_ms, backoff_cap_ms) = job.retry.backoff.parts();
    [
        ("app", job.app.as_str().into_sql_value()),
        ("name", job.name.as_str().into_sql_value()),
        (
            "schedule_type",
            job.schedule.schedule_type().as_str().into_sql_value(),
        ),
        ("schedule_conf", job.schedule.conf().into_sql_value()),
        ("time_zone", job.time_zone.name().into_sql_value()),
        (
            "misfire_strategy",
            job.misfire_strategy.as_str().into_sql_value(),
        ),
        (
            "route_strategy",
            job.route_strategy.as_str().into_sql_value(),
        ),
        ("handler", job.handler.as_str().into_sql_value()),
        ("params", job.params.as_str().into_sql_value()),
        (
            "block_strategy",
            job.block_strategy.as_str().into_sql_value(),
        ),
        ("timeout_ms", job.timeout_ms.into_sql_value()),
        ("author", job.author.as_str().into_sql_value()),
        ("alarm_emails", job.alarm_emails.join(",").into_sql_value()),
        (
            "alarm_webhook",
            job.alarm_webhook.as_deref().into_sql_value(),
        ),
        ("retry_count", i64::from(job.retry.count).into_sql_value()),
        ("retry_backoff", job.retry.backoff.kind().into_sql_value()),
        ("retry_backoff_ms", backoff_ms.into_sql_value()),
        ("retry_backoff_cap_ms", backoff_cap_ms.into_sql_value()),
        ("glue_type", job.glue.glue_type.as_str().into_sql_value()),
        ("glue_source", job.glue.source.as_deref().into_sql_value()),
        ("glue_remark", job.glue.remark.as_str().into_sql_value()),
        (
            "child_job_ids",
            join_list(&job.child_job_ids).into_sql_value(),
        ),
        (
            "child_trigger_mode",
            job.child_trigger_mode.as_str().into_sql_value(),
        ),
        ("history", job.history.as_str().into_sql_value()),
    ]
}

#[derive(sqlx::FromRow)]
pub struct AppRow {
    name: String,
    title: String,
    partitions: i64,
    created_at_ms: i64,
}

#[derive(sqlx::FromRow)]
pub struct JobRow {
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
pub struct GlueVersionRow {
    glue_type: String,
    glue_source: String,
    glue_remark: String,
    created_at_ms: i64,
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
