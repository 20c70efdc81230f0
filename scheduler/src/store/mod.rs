//! Persistence behind one trait, [`Store`], with a SQLite backend (the embedded default: one
//! file, no server) and a PostgreSQL backend (for several schedulers on one database).
//!
//! Both backends share their SQL (`sql.rs`): sqlx accepts `$N` placeholders on both, and every
//! integer column is a 64-bit integer on both, so one macro-generated implementation serves
//! both. What differs lives in each backend's file: the migrations (`migrations/{sqlite,
//! postgres}`), how the schedule lock is taken (SQLite `BEGIN IMMEDIATE`, PostgreSQL
//! `SELECT … FOR UPDATE` on the lock row) and how expired pending fires are claimed
//! (PostgreSQL adds `SKIP LOCKED`).
//!
//! Times are stored as UTC milliseconds since the epoch (`BIGINT`): the same on both
//! backends, exact, and free of time-zone conversions in SQL.

mod postgres;
mod rows;
mod sql;
mod sqlite;

use kadence_schemas::{AppName, JobId};

use crate::model::{
    App, Completion, CompletionOutcome, GlueVersion, Job, JobStatus, NewJob, PendingFire, Run,
};

pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// A failed store operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened or reached.
    #[error("cannot connect to the {backend} database: {source}")]
    Connect {
        /// "sqlite" or "postgres".
        backend: &'static str,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// Applying the schema migrations failed.
    #[error("cannot apply the {backend} schema migrations: {source}")]
    Migrate {
        /// "sqlite" or "postgres".
        backend: &'static str,
        /// The migrator's error.
        source: sqlx::migrate::MigrateError,
    },
    /// A query failed; `operation` names what was being done.
    #[error("database error while trying to {operation}: {source}")]
    Query {
        /// What the store was doing, e.g. "create a job".
        operation: &'static str,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// An app with this name exists already.
    #[error("app {0} exists already")]
    AppExists(AppName),
    /// No app has this name.
    #[error("unknown app {0}: create it first (kadence app add {0} --partitions N)")]
    UnknownApp(AppName),
    /// No job has this id.
    #[error("job {0} does not exist")]
    JobNotFound(JobId),
    /// A stored row holds a value the scheduler cannot read (edited by hand, or written by a
    /// newer version).
    #[error("stored {what} cannot be read: {reason}")]
    CorruptRow {
        /// Which row, e.g. "job 12".
        what: String,
        /// Why.
        reason: String,
    },
}

impl StoreError {
    pub(crate) fn query(operation: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
        move |source| StoreError::Query { operation, source }
    }
}

/// Parameters of one pre-read scan (see [`crate::preread`]).
#[derive(Debug, Clone)]
pub struct PreReadRequest {
    /// The scan's notion of now, ms.
    pub now_ms: i64,
    /// The pre-read window, ms.
    pub window_ms: i64,
    /// Maximum jobs read.
    pub batch_size: u32,
    /// The node writing the fires (their owner).
    pub node_id: String,
    /// A fire's lease runs until its fire time plus this, ms.
    pub lease_ms: i64,
}

/// What a pre-read scan wrote.
#[derive(Debug, Clone, Default)]
pub struct PreReadOutcome {
    /// Due jobs read.
    pub jobs_read: usize,
    /// Fires written, in time order per job.
    pub fires: Vec<PendingFire>,
}

/// A fire to write outside the pre-read scan (manual and API triggers).
#[derive(Debug, Clone)]
pub struct NewFire {
    /// Trigger id (fresh for manual triggers).
    pub trigger_id: kadence_schemas::TriggerId,
    /// Why it fires.
    pub trigger_type: kadence_schemas::TriggerType,
    /// Parameters for this run (may override the job's).
    pub params: String,
    /// Scheduled time, ms.
    pub scheduled_at_ms: i64,
    /// The node that will emit it.
    pub node_id: String,
    /// Lease end, ms.
    pub lease_until_ms: i64,
}

/// The broker acknowledged a trigger: mark its run dispatched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchAck {
    /// Job-log row id.
    pub log_id: i64,
    /// Partition the record landed in.
    pub partition: i32,
    /// Acknowledgement time, ms.
    pub dispatched_at_ms: i64,
}

/// The scheduler's persistence. All methods are safe to call from several scheduler
/// processes on one database.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// "sqlite" or "postgres".
    fn backend(&self) -> &'static str;

    /// Brings the schema up to date.
    async fn migrate(&self) -> Result<(), StoreError>;

    /// Creates an app; [`StoreError::AppExists`] if the name is taken.
    async fn create_app(&self, app: &App) -> Result<(), StoreError>;

    /// One app by name.
    async fn get_app(&self, name: &AppName) -> Result<Option<App>, StoreError>;

    /// Every app, by name.
    async fn list_apps(&self) -> Result<Vec<App>, StoreError>;

    /// Creates a stopped job; [`StoreError::UnknownApp`] if its app does not exist.
    async fn create_job(&self, job: &NewJob, now_ms: i64) -> Result<Job, StoreError>;

    /// Replaces a job's definition, status and next fire (the API computes them with
    /// XXL-JOB's edit rules). A changed script is saved as a new glue version; the newest 30
    /// are kept.
    async fn update_job(
        &self,
        id: JobId,
        job: &NewJob,
        status: JobStatus,
        next_fire_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<Job, StoreError>;

    /// A job's saved script versions, newest first.
    async fn glue_versions(&self, id: JobId) -> Result<Vec<GlueVersion>, StoreError>;

    /// One job by id.
    async fn get_job(&self, id: JobId) -> Result<Option<Job>, StoreError>;

    /// Every job, optionally of one app, by id.
    async fn list_jobs(&self, app: Option<&AppName>) -> Result<Vec<Job>, StoreError>;

    /// Sets a job's status and next fire (start computes it, stop clears it).
    async fn set_job_status(
        &self,
        id: JobId,
        status: JobStatus,
        next_fire_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<Job, StoreError>;

    /// Writes one pending fire of `job` outside the pre-read scan (manual and API triggers).
    async fn insert_fire(&self, job: &Job, fire: &NewFire) -> Result<PendingFire, StoreError>;

    /// One pre-read scan under the schedule lock (see [`crate::preread`]).
    async fn pre_read(&self, request: &PreReadRequest) -> Result<PreReadOutcome, StoreError>;

    /// Takes over up to `limit` pending fires whose lease expired before `now_ms` (their node
    /// died or could not reach the broker), giving them to `node_id` until `lease_until_ms`.
    async fn claim_expired_fires(
        &self,
        node_id: &str,
        now_ms: i64,
        lease_until_ms: i64,
        limit: u32,
    ) -> Result<Vec<PendingFire>, StoreError>;

    /// Marks acknowledged triggers dispatched, in one transaction. A run that already has its
    /// result keeps state FINISHED.
    async fn mark_dispatched(&self, acks: &[DispatchAck]) -> Result<(), StoreError>;

    /// Records results, first result wins (compare-and-set on an unfinished row), in one
    /// transaction; returns what happened to each, in order.
    async fn complete_runs(
        &self,
        completions: &[Completion],
    ) -> Result<Vec<CompletionOutcome>, StoreError>;

    /// The newest `limit` runs of a job, newest first.
    async fn list_runs(&self, job: JobId, limit: u32) -> Result<Vec<Run>, StoreError>;
}
