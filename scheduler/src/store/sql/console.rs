//! The [`Console`](crate::store::Console) implementation: runs across jobs with their job's
//! description, attempts and child runs, the dashboard's counts, and the removal of a job;
//! the same SQL on both backends.
//!
//! The outcome of a run is spelled here as the daily reports spell it
//! ([`refresh_reports`](super::history)): succeeded is result 200, failed is finished with
//! any other result, running is planned or dispatched. The conditions are literals, not
//! binds, so that both planners can use the partial index of failures (migration 0014).

use super::backend::{SqlBackend, SqlStore};
use super::run_counts;
use super::statement::Statement;
use crate::domain::model::{JobStatus, Run};
use crate::store::rows::{RUN_COLUMNS, RunRow, SummaryRow, convert_all};
use crate::store::{PageRequest, StoreError};
use kadence_schemas::{JobId, TriggerId};

use crate::store::{
    AppScope, Console, JobCounts, JobRemoval, RunCounts, RunFilter, RunOutcome, RunSummary,
};

/// A query of run summaries: the caller adds ` AND …` conditions on `job_logs`,
/// then [`finish_summaries`] orders, limits and joins the job.
fn summaries_where() -> Statement<'static> {
    Statement::new(format!(
        "SELECT r.*, j.name AS job_name FROM (SELECT {RUN_COLUMNS}, app, handler \
         FROM job_logs WHERE true"
    ))
}

/// Ends a [`summaries_where`] query: the newest `limit` rows (the job is joined
/// to those only).
fn finish_summaries(query: &mut Statement<'_>, limit: u32) {
    query
        .push(" ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(limit))
        .push(") r LEFT JOIN jobs j ON j.id = r.job_id ORDER BY r.id DESC");
}

/// The condition on `job_logs` of a run outcome (see the module docs).
fn outcome_condition(outcome: RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Succeeded => " AND handle_code = 200",
        RunOutcome::Failed => " AND state = 'FINISHED' AND handle_code <> 200",
        RunOutcome::Unfinished => " AND state IN ('SCHEDULED', 'DISPATCHED')",
        // Triggers without a row: no row is one.
        RunOutcome::Unknown => " AND false",
    }
}

async fn fetch_summaries<B: SqlBackend>(
    store: &SqlStore<B>,
    query: Statement<'_>,
    operation: &'static str,
) -> Result<Vec<RunSummary>, StoreError> {
    let rows: Vec<SummaryRow> = query
        .fetch_all::<B, _>(&mut *store.connection(operation).await?)
        .await
        .map_err(StoreError::query(operation))?;
    convert_all(rows)
}

/// The jobs other than `id` that name it as a child.
async fn parents_of<B: SqlBackend>(
    tx: &mut B::Connection,
    id: JobId,
) -> Result<Vec<JobId>, StoreError> {
    // The text match finds candidates (any list holding the digits); parsing
    // each list keeps only the exact ones.
    let rows: Vec<(i64, String)> = Statement::new(
        "SELECT id, child_job_ids FROM jobs WHERE id <> $1 AND child_job_ids LIKE $2 ORDER BY id",
    )
    .bind(id.get())
    .bind(format!("%{id}%"))
    .fetch_all::<B, _>(&mut *tx)
    .await
    .map_err(StoreError::query("find a job's parents"))?;
    let mut parents = Vec::new();
    for (parent, children) in rows {
        let corrupt = |reason: String| StoreError::CorruptRow {
            what: format!("job {parent}"),
            reason,
        };
        let children = crate::store::rows::parse_list::<JobId>(&children).map_err(corrupt)?;
        if children.contains(&id) {
            parents.push(JobId::new(parent).map_err(|error| corrupt(error.to_string()))?);
        }
    }
    Ok(parents)
}

/// Deletes every row kept about job `id` and the job itself; returns its runs
/// deleted.
async fn delete_job_rows<B: SqlBackend>(
    tx: &mut B::Connection,
    id: JobId,
) -> Result<u64, StoreError> {
    const OPERATION: &str = "remove a job";
    // Its runs and their counts go together: no fold counts them in between.
    run_counts::lock_progress::<B>(&mut *tx).await?;
    let mut runs = 0;
    for statement in [
        "DELETE FROM run_log_chunks WHERE log_id IN (SELECT id FROM job_logs WHERE job_id = $1)",
        "DELETE FROM report_open_runs WHERE log_id IN (SELECT id FROM job_logs WHERE job_id = $1)",
        "DELETE FROM job_logs WHERE job_id = $1",
        "DELETE FROM job_glue_versions WHERE job_id = $1",
        "DELETE FROM job_reports WHERE job_id = $1",
        "DELETE FROM run_counts WHERE job_id = $1",
        "DELETE FROM shadow_results WHERE job_id = $1",
        "DELETE FROM jobs WHERE id = $1",
    ] {
        let done = Statement::new(statement)
            .bind(id.get())
            .execute::<B>(&mut *tx)
            .await
            .map_err(StoreError::query(OPERATION))?;
        if statement.starts_with("DELETE FROM job_logs") {
            runs = done;
        }
    }
    Ok(runs)
}

#[async_trait::async_trait]
impl<B: SqlBackend> Console for SqlStore<B> {
    async fn search_runs(
        &self,
        filter: &RunFilter,
        page: &PageRequest<i64>,
    ) -> Result<Vec<RunSummary>, StoreError> {
        // Only the filters given become conditions, so that each shape of the
        // query gets the plan of its index: job_logs_job for a job, job_logs_app_id
        // for apps, job_logs_failed for failures, the key otherwise.
        let mut query = summaries_where();
        query.push_app_scope("app", filter.apps.as_deref());
        if let Some(job) = filter.job {
            query.push(" AND job_id = ").push_bind(job.get());
        }
        if let Some(outcome) = filter.outcome {
            query.push(outcome_condition(outcome));
        }
        if let Some(from_ms) = filter.from_ms {
            query.push(" AND scheduled_at_ms >= ").push_bind(from_ms);
        }
        if let Some(to_ms) = filter.to_ms {
            query.push(" AND scheduled_at_ms < ").push_bind(to_ms);
        }
        if let Some(after) = page.after {
            query.push(" AND id < ").push_bind(after);
        }
        finish_summaries(&mut query, page.limit);
        fetch_summaries::<B>(self, query, "search runs").await
    }

    async fn run_summary(&self, log_id: i64) -> Result<Option<RunSummary>, StoreError> {
        let mut query = summaries_where();
        query.push(" AND id = ").push_bind(log_id);
        finish_summaries(&mut query, 1);
        Ok(fetch_summaries::<B>(self, query, "read a run").await?.pop())
    }

    async fn run_attempts(&self, first_log_id: i64) -> Result<Vec<Run>, StoreError> {
        // Two keyed reads rather than an OR, which neither planner splits well.
        let rows: Vec<RunRow> = Statement::new(format!(
            "SELECT {RUN_COLUMNS} FROM job_logs WHERE id = $1 UNION ALL \
             SELECT {RUN_COLUMNS} FROM job_logs WHERE first_log_id = $2 \
             ORDER BY attempt, id"
        ))
        .bind(first_log_id)
        .bind(first_log_id)
        .fetch_all::<B, _>(&mut *self.connection("read a run's attempts").await?)
        .await
        .map_err(StoreError::query("read a run's attempts"))?;
        convert_all(rows)
    }

    async fn runs_by_trigger_ids(
        &self,
        trigger_ids: &[TriggerId],
    ) -> Result<Vec<RunSummary>, StoreError> {
        let mut found = Vec::new();
        for chunk in trigger_ids.chunks(crate::store::sql::UPDATE_CHUNK) {
            let mut query = summaries_where();
            query.push(" AND trigger_id");
            query.push_in_list(chunk.iter().map(|id| id.as_str().to_owned()));
            finish_summaries(&mut query, chunk.len() as u32);
            found.extend(fetch_summaries::<B>(self, query, "read runs by trigger id").await?);
        }
        found.sort_by_key(|summary| summary.run.log_id);
        Ok(found)
    }

    async fn remove_job(&self, id: JobId) -> Result<JobRemoval, StoreError> {
        const OPERATION: &str = "remove a job";
        let mut tx = self.begin_write(OPERATION).await?;
        // Locked (PostgreSQL) so that a start waits for the removal, then finds
        // no job, instead of starting one being removed.
        let status: Option<(String,)> = Statement::new(format!(
            "SELECT status FROM jobs WHERE id = $1{}",
            B::ROW_LOCK
        ))
        .bind(id.get())
        .fetch_optional::<B, _>(&mut tx)
        .await
        .map_err(StoreError::query(OPERATION))?;
        match status {
            None => return Err(StoreError::JobNotFound(id)),
            Some((status,)) if status == JobStatus::Running.as_str() => {
                return Ok(JobRemoval::Running);
            }
            Some(_) => {}
        }
        let parents = parents_of::<B>(&mut tx, id).await?;
        if !parents.is_empty() {
            return Ok(JobRemoval::ChildOf(parents));
        }
        let runs = delete_job_rows::<B>(&mut tx, id).await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(JobRemoval::Removed { runs })
    }

    async fn count_jobs(&self, apps: AppScope<'_>) -> Result<JobCounts, StoreError> {
        let mut query = Statement::new("SELECT status, COUNT(*) FROM jobs WHERE true");
        query.push_app_scope("app", apps);
        query.push(" GROUP BY status");
        let rows: Vec<(String, i64)> = query
            .fetch_all::<B, _>(&mut *self.connection("count jobs").await?)
            .await
            .map_err(StoreError::query("count jobs"))?;
        let mut counts = JobCounts::default();
        for (status, count) in rows {
            counts.total += count;
            match status.parse::<JobStatus>() {
                Ok(JobStatus::Running) => counts.running += count,
                Ok(JobStatus::Stopped) => counts.stopped += count,
                Err(error) => {
                    return Err(StoreError::CorruptRow {
                        what: "a job's status".to_owned(),
                        reason: error.to_string(),
                    });
                }
            }
        }
        Ok(counts)
    }

    async fn count_runs(
        &self,
        from_ms: i64,
        to_ms: i64,
        apps: AppScope<'_>,
    ) -> Result<RunCounts, StoreError> {
        // As refresh_reports counts a day (see `run_counts`), under the progress's lock.
        // (PostgreSQL's SUM of BIGINT is NUMERIC, MySQL's DECIMAL: cast.)
        const OPERATION: &str = "count runs";
        let bigint = B::DIALECT.bigint();
        let mut tx = self.begin_write(OPERATION).await?;
        let progress = run_counts::lock_progress::<B>(&mut tx).await?;
        let mut query = Statement::new(format!(
            "SELECT CAST(COALESCE(SUM(succeeded), 0) AS {bigint}), \
             CAST(COALESCE(SUM(failed), 0) AS {bigint}), \
             CAST(COALESCE(SUM(running), 0) AS {bigint}) FROM ("
        ));
        run_counts::push_counted_runs(&mut query, (from_ms, to_ms), progress.folded_below, apps);
        query.push(") counted");
        let (succeeded, failed, running): (i64, i64, i64) = (query.fetch_one::<B, _>(&mut tx))
            .await
            .map_err(StoreError::query(OPERATION))?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(RunCounts {
            succeeded,
            failed,
            running,
        })
    }

    async fn daily_totals(
        &self,
        from_ms: i64,
        to_ms: i64,
        apps: AppScope<'_>,
    ) -> Result<Vec<(i64, RunCounts)>, StoreError> {
        let bigint = B::DIALECT.bigint();
        let mut query = Statement::new(format!(
            "SELECT day_ms, CAST(SUM(succeeded) AS {bigint}), CAST(SUM(failed) AS {bigint}), \
             CAST(SUM(running) AS {bigint}) FROM job_reports WHERE day_ms >= ",
        ));
        query
            .push_bind(from_ms)
            .push(" AND day_ms < ")
            .push_bind(to_ms);
        query.push_app_scope("app", apps);
        query.push(" GROUP BY day_ms ORDER BY day_ms");
        let rows: Vec<(i64, i64, i64, i64)> = query
            .fetch_all::<B, _>(&mut *self.connection("sum daily reports").await?)
            .await
            .map_err(StoreError::query("sum daily reports"))?;
        Ok(rows
            .into_iter()
            .map(|(day, succeeded, failed, running)| {
                (
                    day,
                    RunCounts {
                        succeeded,
                        failed,
                        running,
                    },
                )
            })
            .collect())
    }
}
