//! The SQLite backend: the embedded default, one file and no server. Write-ahead logging lets
//! readers (the API) run beside the writer; the schedule lock is SQLite's own write lock, taken
//! up front with `BEGIN IMMEDIATE` so a scan never fails half-way on a lock upgrade.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteQueryResult,
    SqliteSynchronous,
};
use sqlx::{Sqlite, SqliteConnection, SqlitePool, Transaction};

use super::sql::backend::{SqlBackend, SqlStore};
use super::sql::dialect::{Dialect, Placeholders};
use super::{PoolSettings, StoreError};

/// The SQLite store.
pub type SqliteStore = SqlStore<Sqlite>;

impl SqlBackend for Sqlite {
    type Parts = ();
    const NAME: &'static str = "sqlite";
    const PLACEHOLDERS: Placeholders = Placeholders::InOrder;
    const DIALECT: Dialect = Dialect::Ansi;
    /// Locks the rows a statement selects until the transaction ends (SQLite: one writer at a time already).
    const ROW_LOCK: &'static str = "";
    /// Locks the rows a statement selects, passing over rows other transactions hold (SQLite: one writer at a time already).
    const SKIP_LOCKED: &'static str = "";
    /// Taken first by a transaction that records a replay or backfill (SQLite: one writer at a time already).
    const OPERATIONS_LOCK: &'static str = "";
    const INSERTS_IN_WITH: bool = false;
    /// Rows and reserved ids alike: AUTOINCREMENT's counter, which reserving moves, and the
    /// rows themselves.
    const LAST_LOG_ID: &'static str = "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'job_logs'), 0), \
         COALESCE((SELECT MAX(id) FROM job_logs), 0))";

    /// SQLite's planner already probes the primary key for each row of a keyed batch.
    const KEYED_JOINS: &'static str = "";

    async fn migrate(store: &SqliteStore) -> Result<(), StoreError> {
        sqlx::migrate!("migrations/sqlite")
            .run(&store.pool)
            .await
            .map_err(|source| StoreError::Migrate {
                backend: <Sqlite as SqlBackend>::NAME,
                source,
            })
    }

    /// Reserves ids by moving the AUTOINCREMENT counter of `job_logs` past them (SQLite
    /// documents `sqlite_sequence` as writable), so rows inserted later without an id never
    /// take one of them. The write lock `tx` holds makes the move atomic.
    async fn reserve_log_ids(
        _: &(),
        tx: &mut SqliteConnection,
        count: usize,
    ) -> Result<Vec<i64>, StoreError> {
        const OPERATION: &str = "reserve job-log ids";
        sqlx::query(
            "INSERT INTO sqlite_sequence (name, seq) \
             SELECT 'job_logs', (SELECT COALESCE(MAX(id), 0) FROM job_logs) \
             WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'job_logs')",
        )
        .execute(&mut *tx)
        .await
        .map_err(StoreError::query(OPERATION))?;
        let (last,): (i64,) = sqlx::query_as(
            "UPDATE sqlite_sequence SET seq = seq + $1 WHERE name = 'job_logs' RETURNING seq",
        )
        .bind(count as i64)
        .fetch_one(&mut *tx)
        .await
        .map_err(StoreError::query(OPERATION))?;
        Ok((last - count as i64 + 1..=last).collect())
    }

    fn rows_affected(done: &SqliteQueryResult) -> u64 {
        done.rows_affected()
    }

    fn last_insert_id(done: &SqliteQueryResult) -> Result<i64, sqlx::Error> {
        Ok(done.last_insert_rowid())
    }

    /// `BEGIN IMMEDIATE` takes SQLite's write lock up front, waiting in the busy handler while
    /// another connection holds it.
    ///
    /// A deferred transaction that reads first and writes later cannot wait: if another
    /// connection committed meanwhile, its read snapshot is stale and the write fails at once
    /// with `SQLITE_BUSY`. That surfaced as a manual broadcast trigger (which reads the app's
    /// partition count, then writes its runs) failing with HTTP 500 while the scheduler marked
    /// triggers dispatched. Every transaction of the store writes, so each starts this way.
    async fn begin_write(pool: &SqlitePool) -> Result<Transaction<'static, Sqlite>, sqlx::Error> {
        pool.begin_with("BEGIN IMMEDIATE").await
    }
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `url`, e.g. `sqlite://kadence.db` or
    /// `sqlite:///var/lib/kadence/kadence.db`.
    pub async fn connect(url: &str, pool: PoolSettings) -> Result<SqliteStore, StoreError> {
        let connect = |source| StoreError::Connect {
            backend: <Sqlite as SqlBackend>::NAME,
            source,
        };
        let options = SqliteConnectOptions::from_str(url)
            .map_err(connect)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true)
            .statement_cache_capacity(crate::store::sql::STATEMENT_CACHE);
        let pool = SqlitePoolOptions::new()
            .max_connections(pool.max_connections.max(1))
            .acquire_timeout(pool.acquire_timeout)
            .before_acquire(|connection, _| Box::pin(async move { Ok(in_step(connection)) }))
            .connect_with(options)
            .await
            .map_err(connect)?;
        Ok(SqlStore { pool, parts: () })
    }
}

/// Whether a pooled connection's idea of its transaction agrees with SQLite's, checked before
/// the pool hands it out (after its ping, so a rollback queued when its last transaction was
/// dropped has run). A COMMIT that fails for a full disk or an I/O error makes SQLite roll the
/// transaction back itself; the rollback sqlx then sends fails for want of a transaction, and
/// sqlx goes on counting one open, refusing every later `BEGIN` on that connection ("non-zero
/// transaction depth") long after the disk has room again. Such a connection is closed (the
/// pool opens a fresh one) instead of being handed out.
fn in_step(connection: &mut sqlx::SqliteConnection) -> bool {
    use sqlx::TransactionManager as _;
    <sqlx::Sqlite as sqlx::Database>::TransactionManager::get_transaction_depth(connection) == 0
}
