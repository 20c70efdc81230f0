//! The store's apps and jobs: their definitions, saved script versions, child links and
//! status. The rules of a job's life (what an edit or a stop means for its planned fires) are
//! [`crate::operations::jobs`]'s; this half writes what they decide, in one transaction each.

use kadence_schemas::{AppName, JobId};

use crate::domain::model::{App, GlueVersion, Job, JobStatus, NewJob};
use crate::store::{AppScope, FireCancellation, JobFilter, PageRequest, StoreError};

/// A job as a status change or an edit left it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobChange {
    /// The job.
    pub job: Job,
    /// Its planned fires the change cancelled, if any.
    pub cancelled: Option<FireCancellation>,
}

/// Apps and jobs (see the module docs).
#[async_trait::async_trait]
pub trait Jobs: Send + Sync {
    /// Creates an app; [`StoreError::AppExists`] if the name is taken.
    async fn create_app(&self, app: &App) -> Result<(), StoreError>;

    /// One app by name.
    async fn get_app(&self, name: &AppName) -> Result<Option<App>, StoreError>;

    /// Every app, by name.
    async fn list_apps(&self) -> Result<Vec<App>, StoreError>;

    /// A page of the apps in `apps`, by name.
    async fn list_apps_page(
        &self,
        apps: AppScope<'_>,
        page: &PageRequest<String>,
    ) -> Result<Vec<App>, StoreError>;

    /// Creates a stopped job; [`StoreError::UnknownApp`] if its app does not exist.
    async fn create_job(&self, job: &NewJob, now_ms: i64) -> Result<Job, StoreError>;

    /// Replaces a job's definition, status and next fire (the API computes them with
    /// XXL-JOB's edit rules). A changed script is saved as a new glue version; the newest 30
    /// are kept. With `replan: Some(from_ms)` (the schedule changed) the fires planned under
    /// the old schedule and due after `from_ms` are cancelled in the same transaction.
    async fn update_job(
        &self,
        id: JobId,
        job: &NewJob,
        status: JobStatus,
        next_fire_ms: Option<i64>,
        replan: Option<i64>,
        now_ms: i64,
    ) -> Result<JobChange, StoreError>;

    /// A job's saved script versions, newest first.
    async fn glue_versions(&self, id: JobId) -> Result<Vec<GlueVersion>, StoreError>;

    /// One job by id.
    async fn get_job(&self, id: JobId) -> Result<Option<Job>, StoreError>;

    /// A page of jobs matching `filter`, by id.
    async fn list_jobs(
        &self,
        filter: &JobFilter,
        page: &PageRequest<JobId>,
    ) -> Result<Vec<Job>, StoreError>;

    /// The child links of the given jobs: (job, its children), for the jobs that exist.
    async fn child_links(&self, ids: &[JobId]) -> Result<Vec<(JobId, Vec<JobId>)>, StoreError>;

    /// Sets a job's status and next fire (start computes it, stop clears it). Stopping
    /// cancels the job's planned fires due after `cancel_from_ms`, in the same transaction
    /// (fires due sooner may be on their way to the broker already; see
    /// [`crate::engine::cancellations`]).
    async fn set_job_status(
        &self,
        id: JobId,
        status: JobStatus,
        next_fire_ms: Option<i64>,
        cancel_from_ms: i64,
        now_ms: i64,
    ) -> Result<JobChange, StoreError>;
}
