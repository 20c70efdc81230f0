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
            if let Some(why) = storage_failure(&source) {
                *LAST_STORAGE_FAILURE
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((std::time::Instant::now(), format!("{operation}: {why}")));
            }
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

/// The latest failure of this process's store that says the database cannot write (see
/// [`storage_failure`]): when, and the operation with the database's message.
static LAST_STORAGE_FAILURE: std::sync::Mutex<Option<(std::time::Instant, String)>> =
    std::sync::Mutex::new(None);

/// The database's message when `error` says it cannot write at all — its disk is full or
/// read-only, its file cannot be written — rather than that one statement failed: SQLite's
/// FULL, IOERR, READONLY and CANTOPEN results, PostgreSQL's disk_full, insufficient_resources
/// and read_only_sql_transaction, and MySQL's "table is full" and read-only answers.
fn storage_failure(error: &sqlx::Error) -> Option<String> {
    let sqlx::Error::Database(database) = error else {
        return None;
    };
    let code = database.code().unwrap_or_default();
    let message = database.message().to_owned();
    let sqlite_result = code.parse::<i64>().ok().map(|code| code & 0xff);
    let says = |needle: &str| message.to_ascii_lowercase().contains(needle);
    let cannot_write = matches!(sqlite_result, Some(8 | 10 | 13 | 14))
        || matches!(code.as_ref(), "53100" | "53000" | "25006")
        || says("is full")
        || says("read-only")
        || says("readonly");
    cannot_write.then_some(message)
}

/// The latest store failure of this process that says the database cannot write, if it came
/// within `recent` (the database watch reports the database out of reach while they come).
pub fn recent_storage_failure(recent: std::time::Duration) -> Option<String> {
    let latest = LAST_STORAGE_FAILURE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    latest
        .as_ref()
        .filter(|(at, _)| at.elapsed() <= recent)
        .map(|(_, why)| why.clone())
}
