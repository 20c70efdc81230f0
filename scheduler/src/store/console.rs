//! The half of the store the web console's pages ask: [`Console`], which every
//! [`Store`](super::Store) also implements. Runs across jobs (a search, one run with its
//! attempts, the runs a run's success fired), the counts of the dashboard, and the removal
//! of a job with everything recorded about it.
//!
//! A run belongs to the app it ran in (`job_logs.app`, copied from its job when it was
//! fired), as the daily reports count it: a search scoped to some apps shows the runs that
//! ran there.

use kadence_schemas::{AppName, JobId, TriggerId};
use serde::{Deserialize, Serialize};

use super::{AppScope, PageRequest, RunFilter, StoreError};
use crate::domain::model::Run;

/// A run with what a list shows beside it, so that a list needs no request per row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunSummary {
    /// The run.
    #[serde(flatten)]
    pub run: Run,
    /// The app it ran in.
    pub app: AppName,
    /// The handler it ran.
    pub handler: String,
    /// Its job's description as the job stands now (`null` if the job is gone).
    pub job_description: Option<String>,
}

/// How many of the jobs in a scope there are, by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct JobCounts {
    /// Every job.
    pub total: i64,
    /// Jobs in status RUNNING (scheduled).
    pub running: i64,
    /// Jobs in status STOPPED.
    pub stopped: i64,
}

/// How many runs there were, by outcome, counted as the daily reports count them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunCounts {
    /// Runs that succeeded (result 200).
    pub succeeded: i64,
    /// Runs that finished with any other result.
    pub failed: i64,
    /// Runs planned or dispatched, without a result yet.
    pub running: i64,
}

/// What [`Console::remove_job`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobRemoval {
    /// The job and everything recorded about it are gone.
    Removed {
        /// Its runs deleted.
        runs: u64,
    },
    /// The job is RUNNING (scheduled): nothing was deleted.
    Running,
    /// These jobs name it as a child: nothing was deleted.
    ChildOf(Vec<JobId>),
}

/// What the console's pages read, and the removal of a job.
#[async_trait::async_trait]
pub trait Console: Send + Sync {
    /// A page of the runs matching `filter`, newest first: by log id, descending (the order
    /// their fires were planned in); `page.after` is the log id of the previous page's last.
    async fn search_runs(
        &self,
        filter: &RunFilter,
        page: &PageRequest<i64>,
    ) -> Result<Vec<RunSummary>, StoreError>;

    /// One run by its log id, with its app, handler and job description.
    async fn run_summary(&self, log_id: i64) -> Result<Option<RunSummary>, StoreError>;

    /// Every attempt of the run whose first attempt is `first_log_id`: that row and its
    /// retries (rows whose `first_log_id` it is), by attempt.
    async fn run_attempts(&self, first_log_id: i64) -> Result<Vec<Run>, StoreError>;

    /// The runs that have these trigger ids (those without a row are left out), by log id.
    async fn runs_by_trigger_ids(
        &self,
        trigger_ids: &[TriggerId],
    ) -> Result<Vec<RunSummary>, StoreError>;

    /// Deletes job `id` and, in the same transaction, everything kept about it: its runs
    /// with their log lines, its script versions, its daily report rows and counts of
    /// dropped runs, its shadow results. Refused (nothing deleted) while the job is RUNNING
    /// or another job names it as a child. Its fire cancellations stay until they expire,
    /// so that no node emits a fire the job's stop cancelled; the records of replays and
    /// backfills stay, like the audit trail. [`StoreError::JobNotFound`] if there is no such
    /// job.
    async fn remove_job(&self, id: JobId) -> Result<JobRemoval, StoreError>;

    /// How many jobs of `apps` there are, by status.
    async fn count_jobs(&self, apps: AppScope<'_>) -> Result<JobCounts, StoreError>;

    /// How many runs of `apps` were scheduled in `[from_ms, to_ms)`, by outcome, as a report
    /// refresh would count them now: the runs counted as they settled (and those a history
    /// policy dropped), plus the runs not counted yet (see [`crate::store::History::fold_runs`]).
    async fn count_runs(
        &self,
        from_ms: i64,
        to_ms: i64,
        apps: AppScope<'_>,
    ) -> Result<RunCounts, StoreError>;

    /// The daily report rows of `apps` for the days in `[from_ms, to_ms)`, summed per day:
    /// (the day's midnight UTC in ms, its counts), by day; days without rows are left out.
    async fn daily_totals(
        &self,
        from_ms: i64,
        to_ms: i64,
        apps: AppScope<'_>,
    ) -> Result<Vec<(i64, RunCounts)>, StoreError>;
}
