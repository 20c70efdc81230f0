//! The `executors` table: the latest beat of each executor.

use kadence_schemas::AppName;

use super::{corrupt, join_list, parse, parse_list, split_list};
use crate::domain::model::{ExecutorEntry, ExecutorStatus};
use crate::store::StoreError;
use crate::store::values::{IntoSqlValue as _, SqlValue};

/// Columns of `executors`, in [`ExecutorRow`]'s order.
pub(crate) const EXECUTOR_COLUMNS: &str = "executor_id, app, host, version, handlers, \
     owned_partitions, running_jobs, queued_jobs, state, first_seen_at_ms, last_beat_at_ms, features";

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
    features: String,
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
                features: split_list(&row.features).map(str::to_owned).collect(),
                executor_id: row.executor_id,
            })
        })()
        .map_err(corrupt(what))
    }
}

/// The `executors` table's columns, each with the value `entry` writes to it: the one place
/// where a column and its value meet, so that no list of columns and list of binds can
/// drift apart. (Rows are read by column name, into [`ExecutorRow`].)
pub(crate) fn executor_values(entry: &ExecutorEntry) -> [(&'static str, SqlValue<'_>); 12] {
    [
        ("executor_id", entry.executor_id.as_str().into_sql_value()),
        ("app", entry.app.as_str().into_sql_value()),
        ("host", entry.host.as_str().into_sql_value()),
        ("version", entry.version.as_str().into_sql_value()),
        ("handlers", join_list(&entry.handlers).into_sql_value()),
        (
            "owned_partitions",
            join_list(&entry.owned_partitions).into_sql_value(),
        ),
        (
            "running_jobs",
            join_list(&entry.running_jobs).into_sql_value(),
        ),
        (
            "queued_jobs",
            join_list(&entry.queued_jobs).into_sql_value(),
        ),
        ("state", entry.state.as_str().into_sql_value()),
        ("first_seen_at_ms", entry.last_beat_at_ms.into_sql_value()),
        ("last_beat_at_ms", entry.last_beat_at_ms.into_sql_value()),
        ("features", join_list(&entry.features).into_sql_value()),
    ]
}
