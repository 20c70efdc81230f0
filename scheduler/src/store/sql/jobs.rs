//! The `apps` and `jobs` tables: create, edit, list, start and stop jobs (a stop or a
//! schedule edit cancels the planned fires and records the cancellation), script versions and
//! child links. Written once for every backend ([`SqlBackend`]).

use kadence_schemas::{AppName, JobId};

use super::backend::{SqlBackend, SqlStore};
use super::statement::{IntoSqlValue as _, Statement};
use super::{GLUE_VERSIONS_KEPT, UPDATE_CHUNK};
use crate::domain::model::{App, Glue, GlueVersion, Job, JobStatus, NewJob};
use crate::store::rows::{
    APP_COLUMNS, AppRow, GlueVersionRow, JOB_COLUMNS, JobRow, convert_all, job_values, parse_list,
};
use crate::store::{
    AppScope, CANCELLATION_MEMORY_MS, FireCancellation, JobChange, JobFilter, Jobs, PageRequest,
    StoreError,
};

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

/// Cancels the fires of `job` that its schedule planned, due after `from_ms`, that no node has
/// emitted yet, and returns the cancellation. Those fires are in batches (see
/// [`crate::store::fire_batch`]), which are not rewritten: the cancellation covers every log
/// id given out so far, and the dispatch of every node and every claim drop the fires it
/// covers. Pending rows of such fires (written by versions before batches) become CANCELLED
/// with `reason`. Manual, API, retry and child fires are kept: someone asked for those.
pub(crate) async fn cancel_planned_fires<B: SqlBackend>(
    tx: &mut B::Connection,
    job: JobId,
    reason: &str,
    from_ms: i64,
    now_ms: i64,
) -> Result<Option<FireCancellation>, StoreError> {
    const OPERATION: &str = "cancel planned fires";
    (Statement::new(
        "UPDATE job_logs SET state = 'CANCELLED', handle_msg = $1, handle_at_ms = $2, \
         owner_node = NULL WHERE job_id = $3 AND state = 'SCHEDULED' \
         AND trigger_type IN ('CRON', 'FIX_RATE', 'FIX_DELAY', 'MISFIRE') \
         AND fire_at_ms > $4",
    )
    .bind(format!("cancelled: {reason} before this fire was emitted"))
    .bind(now_ms)
    .bind(job.get())
    .bind(from_ms)
    .execute::<B>(&mut *tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    let cancellation = FireCancellation {
        job_id: job,
        up_to_log_id: super::history::last_log_id_in::<B>(&mut *tx).await?,
        from_ms,
        until_ms: now_ms + CANCELLATION_MEMORY_MS,
    };
    // Cancellations an hour past their leases are of no use to any node: cleared here rather
    // than by a loop of their own.
    (Statement::new("DELETE FROM fire_cancellations WHERE until_ms < $1")
        .bind(now_ms - 3_600_000)
        .execute::<B>(&mut *tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    (Statement::insert_into(
        "fire_cancellations",
        [
            ("job_id", job.get().into_sql_value()),
            ("up_to_log_id", cancellation.up_to_log_id.into_sql_value()),
            ("from_ms", cancellation.from_ms.into_sql_value()),
            ("until_ms", cancellation.until_ms.into_sql_value()),
            ("created_at_ms", now_ms.into_sql_value()),
        ],
    )
    .execute::<B>(tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    Ok(Some(cancellation))
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

/// Job `id` as `tx` sees it (just written by it: no backend returns the row of an update in
/// one statement on all three, MySQL having no RETURNING).
async fn read_job_in<B: SqlBackend>(
    tx: &mut B::Connection,
    id: i64,
    operation: &'static str,
) -> Result<Job, StoreError> {
    let row: JobRow = (Statement::new(format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1"))
        .bind(id)
        .fetch_one::<B, _>(tx))
    .await
    .map_err(StoreError::query(operation))?;
    Job::try_from(row)
}

/// Cancellations whose fires some node may still hold (see
/// [`crate::store::Fires::recent_cancellations`]).
pub(crate) async fn recent_cancellations<B: SqlBackend>(
    store: &SqlStore<B>,
    now_ms: i64,
) -> Result<Vec<FireCancellation>, StoreError> {
    const OPERATION: &str = "read recent cancellations";
    let rows: Vec<(i64, i64, i64, i64)> = (Statement::new(
        "SELECT job_id, up_to_log_id, from_ms, until_ms FROM fire_cancellations \
         WHERE until_ms > $1",
    )
    .bind(now_ms)
    .fetch_all::<B, _>(&mut *store.connection(OPERATION).await?))
    .await
    .map_err(StoreError::query(OPERATION))?;
    rows.into_iter()
        .map(|(job_id, up_to_log_id, from_ms, until_ms)| {
            Ok(FireCancellation {
                job_id: JobId::new(job_id).map_err(|error| StoreError::CorruptRow {
                    what: format!("cancellation of job {job_id}"),
                    reason: error.to_string(),
                })?,
                up_to_log_id,
                from_ms,
                until_ms,
            })
        })
        .collect()
}

#[async_trait::async_trait]
impl<B: SqlBackend> Jobs for SqlStore<B> {
    async fn create_app(&self, app: &App) -> Result<(), StoreError> {
        const OPERATION: &str = "create an app";
        insert_app::<B>(&mut *self.connection(OPERATION).await?, app, OPERATION).await
    }

    async fn get_app(&self, name: &AppName) -> Result<Option<App>, StoreError> {
        const OPERATION: &str = "read an app";
        let row: Option<AppRow> =
            (Statement::new(format!("SELECT {APP_COLUMNS} FROM apps WHERE name = $1"))
                .bind(name.as_str())
                .fetch_optional::<B, _>(&mut *self.connection(OPERATION).await?))
            .await
            .map_err(StoreError::query(OPERATION))?;
        row.map(App::try_from).transpose()
    }

    async fn list_apps(&self) -> Result<Vec<App>, StoreError> {
        const OPERATION: &str = "list apps";
        let rows: Vec<AppRow> =
            (Statement::new(format!("SELECT {APP_COLUMNS} FROM apps ORDER BY name"))
                .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
            .await
            .map_err(StoreError::query(OPERATION))?;
        convert_all(rows)
    }

    async fn list_apps_page(
        &self,
        apps: AppScope<'_>,
        page: &PageRequest<String>,
    ) -> Result<Vec<App>, StoreError> {
        const OPERATION: &str = "list apps";
        let mut query = Statement::new(format!("SELECT {APP_COLUMNS} FROM apps WHERE true"));
        query.push_app_scope("name", apps);
        if let Some(after) = &page.after {
            query.push(" AND name > ").push_bind(after);
        }
        query
            .push(" ORDER BY name LIMIT ")
            .push_bind(i64::from(page.limit));
        let rows: Vec<AppRow> = (query.fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
            .await
            .map_err(StoreError::query(OPERATION))?;
        convert_all(rows)
    }

    async fn create_job(&self, job: &NewJob, now_ms: i64) -> Result<Job, StoreError> {
        const OPERATION: &str = "create a job";
        let mut tx = self.begin_write(OPERATION).await?;
        let glue_version = job.glue.source.is_some().then_some(now_ms);
        let state = JobRowState {
            status: JobStatus::Stopped,
            next_fire_ms: None,
            glue_updated_at_ms: glue_version,
        };
        let id = insert_job_row::<B>(&mut tx, job, state, now_ms, OPERATION).await?;
        let created = read_job_in::<B>(&mut tx, id, OPERATION).await?;
        if glue_version.is_some() {
            save_glue_version::<B>(&mut tx, created.id, &job.glue, now_ms).await?;
        }
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(created)
    }

    async fn update_job(
        &self,
        id: JobId,
        job: &NewJob,
        status: JobStatus,
        next_fire_ms: Option<i64>,
        replan: Option<i64>,
        now_ms: i64,
    ) -> Result<JobChange, StoreError> {
        const OPERATION: &str = "update a job";
        let mut tx = self.begin_write(OPERATION).await?;
        ensure_app_exists::<B>(&mut tx, &job.app, OPERATION).await?;
        let current: Option<(String, Option<String>, Option<i64>)> = (Statement::new(
            "SELECT glue_type, glue_source, glue_updated_at_ms FROM jobs WHERE id = $1",
        )
        .bind(id.get())
        .fetch_optional::<B, _>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        let Some((glue_type, glue_source, glue_updated_at_ms)) = current else {
            return Err(StoreError::JobNotFound(id));
        };
        let glue_changed =
            glue_type != job.glue.glue_type.as_str() || glue_source != job.glue.source;
        let glue_version = if glue_changed {
            Some(now_ms)
        } else {
            glue_updated_at_ms
        };
        let mut update = Statement::new("UPDATE jobs SET ");
        let row_state = [
            ("status", status.as_str().into_sql_value()),
            ("next_fire_ms", next_fire_ms.into_sql_value()),
            ("updated_at_ms", now_ms.into_sql_value()),
            ("glue_updated_at_ms", glue_version.into_sql_value()),
        ];
        for (index, (column, value)) in job_values(job).into_iter().chain(row_state).enumerate() {
            update.push(if index == 0 { "" } else { ", " });
            update.push(column).push(" = ").push_bind(value);
        }
        update.push(" WHERE id = ").push_bind(id.get());
        (update.execute::<B>(&mut tx).await).map_err(StoreError::query(OPERATION))?;
        let updated = read_job_in::<B>(&mut tx, id.get(), OPERATION).await?;
        if glue_changed && job.glue.source.is_some() {
            save_glue_version::<B>(&mut tx, id, &job.glue, now_ms).await?;
        }
        let cancelled = match replan {
            Some(from_ms) => {
                let reason = "the job's schedule changed";
                cancel_planned_fires::<B>(&mut tx, id, reason, from_ms, now_ms).await?
            }
            None => None,
        };
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(JobChange {
            job: updated,
            cancelled,
        })
    }

    async fn glue_versions(&self, id: JobId) -> Result<Vec<GlueVersion>, StoreError> {
        const OPERATION: &str = "list glue versions";
        let rows: Vec<GlueVersionRow> = (Statement::new(
            "SELECT glue_type, glue_source, glue_remark, created_at_ms FROM job_glue_versions \
             WHERE job_id = $1 ORDER BY id DESC",
        )
        .bind(id.get())
        .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        convert_all(rows)
    }

    async fn get_job(&self, id: JobId) -> Result<Option<Job>, StoreError> {
        const OPERATION: &str = "read a job";
        let row: Option<JobRow> =
            (Statement::new(format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1"))
                .bind(id.get())
                .fetch_optional::<B, _>(&mut *self.connection(OPERATION).await?))
            .await
            .map_err(StoreError::query(OPERATION))?;
        row.map(Job::try_from).transpose()
    }

    async fn list_jobs(
        &self,
        filter: &JobFilter,
        page: &PageRequest<JobId>,
    ) -> Result<Vec<Job>, StoreError> {
        const OPERATION: &str = "list jobs";
        // Only the filters given become conditions, so each shape of the query has a plan
        // that uses its index (jobs_app_id for the app, the primary key for the page) rather
        // than one generic plan for every combination.
        let mut query = Statement::new(format!("SELECT {JOB_COLUMNS} FROM jobs WHERE true"));
        query.push_app_scope("app", filter.apps.as_deref());
        if let Some(status) = filter.status {
            query.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(handler) = &filter.handler {
            query.push(" AND handler = ").push_bind(handler);
        }
        if let Some(author) = &filter.author {
            query.push(" AND author = ").push_bind(author);
        }
        if let Some(text) = &filter.text {
            // Every backend takes LOWER(…) LIKE LOWER(…) with an explicit escape (SQLite has
            // no default one); SQLite's LOWER folds ASCII letters only.
            let pattern = crate::store::filters::contains_pattern(text);
            query
                .push(" AND (LOWER(name) LIKE LOWER(")
                .push_bind(pattern.clone());
            query
                .push(r") ESCAPE '\' OR LOWER(handler) LIKE LOWER(")
                .push_bind(pattern);
            query.push(r") ESCAPE '\'");
            if let Ok(id) = text.trim().parse::<JobId>() {
                query.push(" OR id = ").push_bind(id.get());
            }
            query.push(")");
        }
        if let Some(after) = page.after {
            query.push(" AND id > ").push_bind(after.get());
        }
        query
            .push(" ORDER BY id LIMIT ")
            .push_bind(i64::from(page.limit));
        let rows: Vec<JobRow> = (query.fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
            .await
            .map_err(StoreError::query(OPERATION))?;
        convert_all(rows)
    }

    async fn child_links(&self, ids: &[JobId]) -> Result<Vec<(JobId, Vec<JobId>)>, StoreError> {
        const OPERATION: &str = "read child job links";
        let mut connection = self.connection(OPERATION).await?;
        let mut links = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(UPDATE_CHUNK) {
            let mut query = Statement::new("SELECT id, child_job_ids FROM jobs WHERE id");
            query.push_in_list(chunk.iter().map(|id| id.get()));
            let rows: Vec<(i64, String)> = (query.fetch_all::<B, _>(&mut connection).await)
                .map_err(StoreError::query(OPERATION))?;
            for (id, children) in rows {
                let corrupt = |reason: String| StoreError::CorruptRow {
                    what: format!("job {id}"),
                    reason,
                };
                let id = JobId::new(id).map_err(|error| corrupt(error.to_string()))?;
                let children = parse_list::<JobId>(&children).map_err(corrupt)?;
                links.push((id, children));
            }
        }
        Ok(links)
    }

    async fn set_job_status(
        &self,
        id: JobId,
        status: JobStatus,
        next_fire_ms: Option<i64>,
        cancel_from_ms: i64,
        now_ms: i64,
    ) -> Result<JobChange, StoreError> {
        const OPERATION: &str = "change a job's status";
        let mut tx = self.begin_write(OPERATION).await?;
        let changed = (Statement::new(
            "UPDATE jobs SET status = $1, next_fire_ms = $2, updated_at_ms = $3 WHERE id = $4",
        )
        .bind(status.as_str())
        .bind(next_fire_ms)
        .bind(now_ms)
        .bind(id.get())
        .execute::<B>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        if changed == 0 {
            return Err(StoreError::JobNotFound(id));
        }
        let job = read_job_in::<B>(&mut tx, id.get(), OPERATION).await?;
        let cancelled = if status == JobStatus::Stopped {
            let reason = "the job was stopped";
            cancel_planned_fires::<B>(&mut tx, id, reason, cancel_from_ms, now_ms).await?
        } else {
            None
        };
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(JobChange { job, cancelled })
    }
}
