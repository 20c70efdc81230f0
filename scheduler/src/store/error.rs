//! Why a store operation failed: [`StoreError`], one enum for both backends.

use kadence_schemas::{AppName, JobId, TriggerId};

/// A failed store operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened or reached.
    #[error("cannot connect to the {backend} database: {source}")]
    Connect {
        /// "sqlite", "postgres" or "mysql".
        backend: &'static str,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// Applying the schema migrations failed.
    #[error("cannot apply the {backend} schema migrations: {source}")]
    Migrate {
        /// "sqlite", "postgres" or "mysql".
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
    /// A user with this name exists.
    #[error("user {0} exists already")]
    UserExists(String),
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
    /// A replay selected triggers that earlier replays replayed already.
    #[error(
        "{count} of the selected triggers were replayed before (e.g. {example} by replay \
         {replay_id}; replays {replay_ids:?}): replaying them again runs them again; narrow the \
         selection or ask again with force"
    )]
    ReplayedBefore {
        /// How many of the selected triggers.
        count: usize,
        /// One of them.
        example: TriggerId,
        /// The replay that replayed it.
        replay_id: i64,
        /// Every earlier replay concerned, ascending.
        replay_ids: Vec<i64>,
    },
}

impl StoreError {
    /// Wraps a driver error of `operation`, counting it in
    /// `kadence_scheduler_store_errors_total` (every failed query passes here, so the count
    /// needs no help from the callers).
    pub(crate) fn query(operation: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
        move |source| {
            crate::metrics::STORE_ERRORS
                .with_label_values(&[operation])
                .inc();
            StoreError::Query { operation, source }
        }
    }

    /// Whether the operation failed only because no connection of its pool became free in
    /// time (the database is busy or out of reach): worth retrying later, not a bug.
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            StoreError::Query {
                source: sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_),
                ..
            }
        )
    }
}
