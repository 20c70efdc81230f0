//! Persistence behind one trait, [`Store`], with three backends: SQLite (the embedded
//! default: one file, no server), PostgreSQL and MySQL/MariaDB (for several schedulers on one
//! database).
//!
//! The backends share their SQL (`sql/`): one implementation serves all three (the
//! `SqlStore` in `sql/backend.rs` over a pool of the backend's connections), written in
//! two dialects (`sql/dialect.rs`): `ansi` for SQLite and PostgreSQL, which
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
mod executors;
mod filters;
pub mod fire_batch;
mod fire_cancellation;
mod fires;
mod history;
mod imports;
mod jobs;
mod mysql;
mod password_resets;
mod pool_settings;
mod postgres;
mod replays;
mod rows;
mod run_logs;
mod runs;
mod shards;
mod signing;
mod sql;
mod sqlite;
pub mod unkept_run_set;
mod values;

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
pub use executors::ExecutorRegistry;
pub use filters::{AppScope, JobFilter, PageRequest, RunFilter};
pub use fire_cancellation::{CANCELLATION_MEMORY_MS, FireCancellation};
pub use fires::{DispatchAck, Fires, Misfire, NewFire, PreReadOutcome, PreReadRequest};
pub use history::{CountedSets, FOLD_GRACE_MS, History};
pub use imports::{
    ImportIds, ImportWrite, ImportedApp, ImportedId, ImportedJob, ImportedKind, ImportedUser,
    Imports, NewResetToken,
};
pub use jobs::{JobChange, Jobs};
pub use mysql::MySqlStore;
pub use password_resets::PasswordResets;
pub use pool_settings::PoolSettings;
pub use postgres::PostgresStore;
pub use replays::{
    FireMaker, FireOwner, NewOperation, Operation, OperationKind, Replays, RunOutcome, ShadowPair,
    ShadowResult,
};
pub use run_logs::{LogChunk, LogLines, RunLogLines};
pub use runs::{FinishedRun, Runs, UnfinishedRun};
pub use shards::{
    AcquiredShard, Acquisition, OwnedShard, ScheduleShards, ShardLease, ShardLeaseRequest,
    ShardOwner,
};
pub use signing::{NewSigningKey, RetireOutcome, SigningKeyInfo, SigningKeys, StoredSigningKey};
pub use sqlite::SqliteStore;

/// The scheduler's persistence, in halves by concern; callers take the half they use. All
/// methods are safe to call from several scheduler processes on one database.
/// - [`Jobs`]: apps and jobs; [`Fires`]: pending fires and their cancellations; [`Runs`]:
///   results, logs and the follow-up of finished runs; [`History`]: reports and retention;
///   [`ExecutorRegistry`]: the executor rows;
/// - [`Accounts`]: users, grants and tokens; [`AuditTrail`]: the audit trail;
///   [`SigningKeys`]: the keys triggers are signed with; [`ExecutorKeys`]: the keys executors
///   sign what they write with;
/// - [`ScheduleShards`] and [`FireBatches`]: schedule shards and fire batches; [`Replays`]:
///   replays, backfills and shadow results; [`Console`]: what the console's pages read (runs
///   across jobs, dashboard counts) and the removal of a job; [`Imports`]: what imports from
///   XXL-JOB write; [`PasswordResets`]: password reset tokens.
#[async_trait::async_trait]
pub trait Store:
    Jobs
    + Fires
    + Runs
    + History
    + ExecutorRegistry
    + Accounts
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
}
