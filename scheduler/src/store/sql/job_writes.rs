//! The writes of an app's and a job's rows that the [`Jobs`](crate::store::Jobs) half and
//! the import from XXL-JOB share: an app inserted, a job's row inserted with its schedule
//! shard, a script version saved. Written once for every backend ([`SqlBackend`]).

use kadence_schemas::{AppName, JobId};

use super::GLUE_VERSIONS_KEPT;
use super::backend::SqlBackend;
use super::statement::{IntoSqlValue as _, Statement};
use crate::domain::model::{App, Glue, JobStatus, NewJob};
use crate::store::StoreError;
use crate::store::rows::job_values;

/// Inserts `app`; [`StoreError::AppExists`] when its name is taken.
pub(crate) async fn insert_app<B: SqlBackend>(
    connection: &mut B::Connection,
    app: &App,
    operation: &'static str,
) -> Result<(), StoreError> {
    let inserted = Statement::insert_into(
        "apps",
        [
            ("name", app.name.as_str().into_sql_value()),
            ("title", app.title.as_str().into_sql_value()),
            ("partitions", i64::from(app.partitions).into_sql_value()),
            ("created_at_ms", app.created_at_ms.into_sql_value()),
        ],
    )
    .execute::<B>(connection)
    .await;
    match inserted {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(error)) if error.is_unique_violation() => {
            Err(StoreError::AppExists(app.name.clone()))
        }
        Err(source) => Err(StoreError::query(operation)(source)),
    }
}

/// Fails with [`StoreError::UnknownApp`] unless `app` exists.
pub(crate) async fn ensure_app_exists<B: SqlBackend>(
    connection: &mut B::Connection,
    app: &AppName,
    operation: &'static str,
) -> Result<(), StoreError> {
    let exists: Option<(String,)> = (Statement::new("SELECT name FROM apps WHERE name = $1")
        .bind(app.as_str())
        .fetch_optional::<B, _>(connection))
    .await
    .map_err(StoreError::query(operation))?;
    match exists {
        Some(_) => Ok(()),
        None => Err(StoreError::UnknownApp(app.clone())),
    }
}

/// The settings of a new job's row beside its definition.
pub(crate) struct JobRowState {
    pub(crate) status: JobStatus,
    pub(crate) next_fire_ms: Option<i64>,
    pub(crate) glue_updated_at_ms: Option<i64>,
}

/// Inserts the row of a new job and gives it its schedule shard (see
/// [`crate::engine::shards`]: the id modulo the shard count); returns its id.
pub(crate) async fn insert_job_row<B: SqlBackend>(
    tx: &mut B::Connection,
    job: &NewJob,
    state: JobRowState,
    now_ms: i64,
    operation: &'static str,
) -> Result<i64, StoreError> {
    ensure_app_exists::<B>(&mut *tx, &job.app, operation).await?;
    let row_state = [
        ("status", state.status.as_str().into_sql_value()),
        ("next_fire_ms", state.next_fire_ms.into_sql_value()),
        ("created_at_ms", now_ms.into_sql_value()),
        ("updated_at_ms", now_ms.into_sql_value()),
        (
            "glue_updated_at_ms",
            state.glue_updated_at_ms.into_sql_value(),
        ),
    ];
    let insert = Statement::insert_into("jobs", job_values(job).into_iter().chain(row_state));
    let id =
        (insert.insert_returning_id::<B>(&mut *tx).await).map_err(StoreError::query(operation))?;
    (Statement::new(
        "UPDATE jobs SET shard = COALESCE(id % NULLIF((SELECT COUNT(*) FROM schedule_shards), 0), 0) \
         WHERE id = $1",
    )
    .bind(id)
    .execute::<B>(tx))
    .await
    .map_err(StoreError::query(operation))?;
    Ok(id)
}

/// Saves a script version and keeps only the newest [`GLUE_VERSIONS_KEPT`].
pub(crate) async fn save_glue_version<B: SqlBackend>(
    tx: &mut B::Connection,
    job: JobId,
    glue: &Glue,
    now_ms: i64,
) -> Result<(), StoreError> {
    const OPERATION: &str = "save a glue version";
    (Statement::insert_into(
        "job_glue_versions",
        [
            ("job_id", job.get().into_sql_value()),
            ("glue_type", glue.glue_type.as_str().into_sql_value()),
            (
                "glue_source",
                glue.source.as_deref().unwrap_or_default().into_sql_value(),
            ),
            ("glue_remark", glue.remark.as_str().into_sql_value()),
            ("created_at_ms", now_ms.into_sql_value()),
        ],
    )
    .execute::<B>(&mut *tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    (Statement::new(
        "DELETE FROM job_glue_versions WHERE job_id = $1 AND id < \
         (SELECT MIN(id) FROM (SELECT id FROM job_glue_versions WHERE job_id = $2 \
         ORDER BY id DESC LIMIT $3) AS kept)",
    )
    .bind(job.get())
    .bind(job.get())
    .bind(GLUE_VERSIONS_KEPT)
    .execute::<B>(tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    Ok(())
}
