//! The `apps` and `jobs` tables: create, edit, list, start and stop jobs (a stop or a
//! schedule edit cancels the planned fires and records the cancellation), script versions and
//! child links. Written once for every backend ([`SqlBackend`]).

use kadence_schemas::{AppName, JobId};

use super::UPDATE_CHUNK;
use super::backend::{SqlBackend, SqlStore};
use super::cancellations::cancel_planned_fires;
use super::job_writes::{
    JobRowState, ensure_app_exists, insert_app, insert_job_row, save_glue_version,
};
use super::statement::{IntoSqlValue as _, Statement};
use crate::domain::model::{App, GlueVersion, Job, JobStatus, NewJob};
use crate::store::rows::{
    APP_COLUMNS, AppRow, GlueVersionRow, JOB_COLUMNS, JobRow, convert_all, job_values, parse_list,
};
use crate::store::{AppScope, JobChange, JobFilter, Jobs, PageRequest, StoreError};

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
