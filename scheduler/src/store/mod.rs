//! Persistence behind one trait, [`Store`], with three backends: SQLite (the embedded
//! default: one file, no server), PostgreSQL and MySQL/MariaDB (for several schedulers on one
//! database).
//!
//! The backends share their SQL (`sql/`): one macro-generated implementation serves all
//! three, written in two dialects (`sql/dialect.rs`): `ansi` for SQLite and PostgreSQL, which
//! read the same statements, and `mysql`, which has no `RETURNING`, `ON CONFLICT` or
//! `UPDATE … FROM`; where they differ, both versions stand side by side in the one function.
//! Every integer column is a 64-bit integer on all three. What differs otherwise lives in
//! each backend's file: the migrations (`migrations/{sqlite,postgres,mysql}`), how a write
//! transaction begins (SQLite `BEGIN IMMEDIATE`), how job-log ids are reserved, and how rows
//! are locked: PostgreSQL and MySQL lock the schedule shards a scan covers (`FOR UPDATE`, in
//! shard order) and claim expired pending fires and free shards with `SKIP LOCKED`; on SQLite
//! one writer at a time makes both unnecessary. There is no global schedule lock: see
//! [`ScheduleShards`].
//!
//! Times are stored as UTC milliseconds since the epoch (`BIGINT`): the same on both
//! backends, exact, and free of time-zone conversions in SQL.

mod accounts;
mod audit;
mod batches;
mod console;
mod error;
mod executor_keys;
mod filters;
pub mod fire_batch;
mod fire_cancellation;
mod imports;
mod mysql;
mod password_resets;
mod pool_settings;
mod postgres;
mod replays;
mod rows;
mod run_logs;
mod shards;
mod signing;
mod sql;
mod sqlite;

use kadence_schemas::{AppName, JobId};

use crate::domain::model::{
    App, Completion, CompletionOutcome, ExecutorEntry, GlueVersion, Job, JobStatus, NewJob,
    PendingFire, Run,
};

pub use accounts::{
    Accounts, NewToken, NewUser, UserChange, UserChangeOutcome, UserCredentials, UserStanding,
};
pub use audit::{AuditFilter, AuditTrail};
pub use batches::{
    BatchProgress, DispatchMarks, FireBatches, NewFireBatch, ScanBatch, StoredBatch,
};
pub use console::{Console, JobCounts, JobRemoval, RunCounts, RunSummary};
pub use error::{StoreError, recent_storage_failure};
pub use executor_keys::{ExecutorKeyInfo, ExecutorKeys, NewExecutorKey, StoredExecutorKey};
pub use filters::{AppScope, JobFilter, PageRequest, RunFilter};
pub use fire_cancellation::{CANCELLATION_MEMORY_MS, FireCancellation};
pub use imports::{
    ImportIds, ImportWrite, ImportedApp, ImportedId, ImportedJob, ImportedKind, ImportedUser,
    Imports, NewResetToken,
};
pub use mysql::MySqlStore;
pub use password_resets::PasswordResets;
pub use pool_settings::PoolSettings;
pub use postgres::PostgresStore;
pub use replays::{
    FireMaker, FireOwner, NewOperation, Operation, OperationKind, Replays, RunOutcome, ShadowPair,
    ShadowResult,
};
pub use run_logs::{LogLines, RunLogLines};
pub use shards::{
    AcquiredShard, Acquisition, OwnedShard, ScheduleShards, ShardLease, ShardLeaseRequest,
    ShardOwner,
};
pub use signing::{NewSigningKey, RetireOutcome, SigningKeyInfo, SigningKeys, StoredSigningKey};
pub use sqlite::SqliteStore;

/// Parameters of one pre-read scan (see [`crate::engine::preread`]).
#[derive(Debug, Clone)]
pub struct PreReadRequest {
    /// The scan's notion of now, ms.
    pub now_ms: i64,
    /// The pre-read window, ms: each job read is planned through `now_ms + window_ms`.
    pub window_ms: i64,
    /// Jobs whose next fire is within this of `now_ms` are read (at most `window_ms`).
    pub read_ahead_ms: i64,
    /// Maximum jobs read.
    pub batch_size: u32,
    /// The node writing the fires (their owner).
    pub node_id: String,
    /// A fire's lease runs until its fire time plus this, ms.
    pub lease_ms: i64,
    /// The schedule shards the node holds, with their fences: the scan reads only their
    /// jobs, and only those whose fence still matches in the scan's own transaction.
    pub shards: Vec<OwnedShard>,
}

/// What a pre-read scan wrote.
#[derive(Debug, Clone, Default)]
pub struct PreReadOutcome {
    /// Due jobs read.
    pub jobs_read: usize,
    /// Fires planned, with their reserved log ids, grouped by batch, in time order per job.
    pub fires: Vec<PendingFire>,
    /// The batches they were written in, one per schedule shard.
    pub batches: Vec<ScanBatch>,
    /// Jobs whose fire was missed by more than the window (the misfire strategy applied).
    pub misfires: Vec<Misfire>,
    /// How long the scan waited for its shards' rows (and a connection).
    pub lock_wait: std::time::Duration,
    /// Shards of the request whose fence no longer matched: another node took them, and
    /// nothing was written for them.
    pub fenced_out: Vec<u32>,
}

/// A job whose fire a scan found missed by more than the pre-read window.
#[derive(Debug, Clone)]
pub struct Misfire {
    /// The job.
    pub job_id: kadence_schemas::JobId,
    /// Its app.
    pub app: kadence_schemas::AppName,
    /// What was done: skipped (DO_NOTHING) or fired once now (FIRE_ONCE_NOW).
    pub strategy: crate::domain::schedule::MisfireStrategy,
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
    /// The partitions to route among instead of all of the app's (XXL-JOB's address
    /// override); the caller checks they exist.
    pub partitions: Option<Vec<i32>>,
}

/// A job as a status change or an edit left it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobChange {
    /// The job.
    pub job: Job,
    /// Its planned fires the change cancelled, if any.
    pub cancelled: Option<FireCancellation>,
}

/// The broker acknowledged a trigger: mark its run dispatched.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchAck {
    /// Job-log row id.
    pub log_id: i64,
    /// Partition the record landed in.
    pub partition: i32,
    /// Acknowledgement time, ms.
    pub dispatched_at_ms: i64,
    /// The live executor that owned that partition, per the registry (none when no live
    /// executor owns it: the trigger waits there). The run's result later names the executor
    /// that actually ran it; until then the lost-run monitor watches this one.
    pub executor_id: Option<String>,
    /// The fire, when its run row is still to be written (a fire of a batch: inserted
    /// DISPATCHED); `None` when the row exists (manual, retry, child), which is updated.
    pub fire: Option<Box<PendingFire>>,
}

/// A finished run claimed for its follow-up (retry, alarm, child jobs).
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedRun {
    /// The run as it was fired (copied into a retry).
    pub fire: PendingFire,
    /// Its result code.
    pub code: i32,
    /// Its result message.
    pub message: Option<String>,
    /// The executor that reported it.
    pub executor_id: Option<String>,
    /// When the result came, ms.
    pub finished_at_ms: Option<i64>,
    /// The first attempt's log id, for a retry.
    pub first_log_id: Option<i64>,
    /// The handler's "retry after" hint, ms.
    pub retry_after_ms: Option<i64>,
}

/// An unfinished run the lost-run monitor looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfinishedRun {
    /// Its trigger id.
    pub trigger_id: kadence_schemas::TriggerId,
    /// Its job.
    pub job_id: JobId,
    /// Its app.
    pub app: AppName,
    /// The executor expected to run it.
    pub executor_id: String,
    /// When the broker acknowledged its trigger, ms.
    pub dispatched_at_ms: i64,
}

/// The scheduler's persistence. All methods are safe to call from several scheduler
/// processes on one database. Users, grants and tokens are the [`Accounts`] half; the audit
/// trail the [`AuditTrail`] half; the keys triggers are signed with the [`SigningKeys`] half,
/// the keys executors sign what they write with the [`ExecutorKeys`] half;
/// schedule shards and fire batches are the [`ScheduleShards`] and [`FireBatches`] halves;
/// replays, backfills and shadow results the [`Replays`] half; what the console's pages read
/// (runs across jobs, dashboard counts) and the removal of a job the [`Console`] half; what
/// imports from XXL-JOB write the [`Imports`] half, password reset tokens [`PasswordResets`].
#[async_trait::async_trait]
pub trait Store:
    Accounts
    + AuditTrail
    + Console
    + ExecutorKeys
    + FireBatches
    + Imports
    + PasswordResets
    + Replays
    + ScheduleShards
    + SigningKeys
    + Send
    + Sync
    + 'static
{
    /// "sqlite", "postgres" or "mysql".
    fn backend(&self) -> &'static str;

    /// Brings the schema up to date.
    async fn migrate(&self) -> Result<(), StoreError>;

    /// Asks the database a trivial question (`SELECT 1`) on a connection of the pool: `Ok` when
    /// it answered (see [`crate::monitors::database_watch`]).
    async fn ping(&self) -> Result<(), StoreError>;

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

    /// Cancellations whose fires some node may still hold (their lease ends after `now_ms`).
    async fn recent_cancellations(&self, now_ms: i64) -> Result<Vec<FireCancellation>, StoreError>;

    /// Writes the pending fire of one trigger of `job` outside the pre-read scan (manual, API
    /// and child triggers): one row, or one per shard for a SHARDING_BROADCAST job. Returns
    /// nothing if a run with this trigger id exists already (each is written once).
    async fn insert_fire(&self, job: &Job, fire: &NewFire) -> Result<Vec<PendingFire>, StoreError>;

    /// One pre-read scan of the request's shards (see [`crate::engine::preread`]).
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

    /// Records acknowledged triggers and the progress of their batches, in one transaction:
    /// existing runs are marked DISPATCHED (one that already has its result keeps state
    /// FINISHED), the runs of batch fires are written DISPATCHED, the batches settled.
    async fn mark_dispatched(&self, marks: &DispatchMarks<'_>) -> Result<(), StoreError>;

    /// Records results, first result wins (compare-and-set on an unfinished row), in one
    /// transaction; returns what happened to each, in order.
    async fn complete_runs(
        &self,
        completions: &[Completion],
    ) -> Result<Vec<CompletionOutcome>, StoreError>;

    /// A page of a job's runs, newest first: `page.after` is the log id of the last run of
    /// the previous page (the runs listed next are older).
    async fn list_runs(&self, job: JobId, page: &PageRequest<i64>) -> Result<Vec<Run>, StoreError>;

    // --- Executor registry ---

    /// Records the latest beats of executors (a row per executor; an older beat than the one
    /// stored is ignored), in one transaction.
    async fn upsert_executors(&self, entries: &[ExecutorEntry]) -> Result<(), StoreError>;

    /// The registry's executors, optionally of one app, by app and id.
    async fn list_executors(&self, app: Option<&AppName>)
    -> Result<Vec<ExecutorEntry>, StoreError>;

    /// A page of the registry's executors of `apps`, by app and id; the key is (app,
    /// executor id).
    async fn list_executors_page(
        &self,
        apps: AppScope<'_>,
        page: &PageRequest<(String, String)>,
    ) -> Result<Vec<ExecutorEntry>, StoreError>;

    /// Marks DEAD every executor whose latest beat is older than `stale_before_ms`; returns the
    /// ids it marked (each is marked once, whichever node sweeps first).
    async fn mark_dead_executors(&self, stale_before_ms: i64) -> Result<Vec<String>, StoreError>;

    /// Deletes DEAD executors whose latest beat is older than `dead_before_ms`.
    async fn forget_executors(&self, dead_before_ms: i64) -> Result<u64, StoreError>;

    /// One run by its log id.
    async fn get_run(&self, log_id: i64) -> Result<Option<Run>, StoreError>;

    // --- Run logs ---

    /// The app of each run of `log_ids` that has a row (a run's lines may come before it:
    /// those have none yet).
    async fn run_apps(
        &self,
        log_ids: &[i64],
    ) -> Result<std::collections::HashMap<i64, String>, StoreError>;

    /// Stores log lines, each (log id, run start, line number) once, keeping at most
    /// `max_lines_per_run` lines per run of a trigger; lines of runs that do not exist are
    /// dropped. Returns the lines stored.
    async fn append_log_lines(
        &self,
        batches: &[LogLines],
        max_lines_per_run: i64,
    ) -> Result<u64, StoreError>;

    /// Up to `limit` lines of a run's log from line `from_line` on, of the run of its trigger
    /// that started last (see [`RunLogLines`]).
    async fn read_log_lines(
        &self,
        log_id: i64,
        from_line: i64,
        limit: u32,
    ) -> Result<RunLogLines, StoreError>;

    // --- Monitors ---

    /// Claims up to `limit` finished runs not yet followed up (or whose follow-up lock expired
    /// before `now_ms`) until `locked_until_ms`; each run is claimed by one caller. A failed
    /// run's alarm status becomes LOCKED, a succeeded one's NOT_NEEDED.
    async fn claim_finished_runs(
        &self,
        now_ms: i64,
        locked_until_ms: i64,
        limit: u32,
    ) -> Result<Vec<FinishedRun>, StoreError>;

    /// Marks a run's follow-up done with its final alarm status.
    async fn finish_follow_up(
        &self,
        log_id: i64,
        alarm_status: crate::domain::model::AlarmStatus,
    ) -> Result<(), StoreError>;

    /// Writes a retry fire linked to the run's first attempt; `None` if it exists already.
    async fn insert_retry(
        &self,
        fire: &PendingFire,
        first_log_id: i64,
        node_id: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Option<PendingFire>, StoreError>;

    /// How many distinct shards of `job`'s fire whose trigger ids start with `fire_prefix-`
    /// succeeded (any attempt).
    async fn succeeded_shards(&self, job: JobId, fire_prefix: &str) -> Result<i64, StoreError>;

    /// Recounts the daily report rows of runs scheduled in `[from_ms, to_ms)`; returns the rows
    /// written.
    async fn refresh_reports(&self, from_ms: i64, to_ms: i64) -> Result<u64, StoreError>;

    /// A page of report rows of days in `[from_ms, to_ms)` of `apps`, by day, app and job;
    /// the key is (day, app, job).
    async fn list_reports(
        &self,
        from_ms: i64,
        to_ms: i64,
        apps: AppScope<'_>,
        page: &PageRequest<(i64, String, i64)>,
    ) -> Result<Vec<crate::domain::model::DailyReport>, StoreError>;

    /// Deletes up to `limit` finished or cancelled runs scheduled before `before_ms`, with
    /// their log lines; returns the runs deleted.
    async fn delete_old_runs(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError>;

    /// Deletes up to `limit` report rows and up to `limit` `run_counts` rows of days before
    /// `before_ms`; returns how many.
    async fn delete_old_reports(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError>;

    /// Counts in `run_counts` and deletes, with their log lines, up to `limit` finished and
    /// followed-up runs that ended before `finished_before_ms` and that their job's history
    /// policy does not keep (see [`crate::domain::model::HistoryPolicy`]); returns the runs dropped.
    /// A run is counted by the node whose delete removed it, so concurrent nodes never count
    /// one twice.
    async fn drop_unkept_runs(
        &self,
        finished_before_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError>;

    // --- Executor registry (lost runs) ---

    /// Up to `limit` runs dispatched before `dispatched_before_ms` to a known executor and
    /// still without a result, oldest first.
    async fn unfinished_runs(
        &self,
        dispatched_before_ms: i64,
        limit: u32,
    ) -> Result<Vec<UnfinishedRun>, StoreError>;
}
