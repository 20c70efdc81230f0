//! The PostgreSQL backend, for any number of schedulers on one database. A pre-read scan locks
//! the rows of its own schedule shards (`FOR UPDATE`, in shard order) for one short
//! transaction, so nodes owning different shards scan at once; claims of expired pending
//! fires and of free shards use `SKIP LOCKED` so several nodes can claim at once without
//! waiting on each other or taking the same row twice.
//!
//! Every session runs with `idle_in_transaction_session_timeout` at the pool's
//! [`idle_in_transaction`](PoolSettings::idle_in_transaction) limit (a node's shard lease): a
//! node stopped in the middle of a transaction (a SIGSTOP, a frozen VM) would otherwise hold
//! its shards' row locks for as long as its connection lives, and no other node could take
//! them over when its lease ends.

use sqlx::Arguments as _;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArguments, PgConnectOptions, PgPoolOptions, PgQueryResult};
use sqlx::{PgConnection, PgPool, Postgres, Transaction};

use super::sql::backend::{SqlBackend, SqlStore};
use super::sql::dialect::{Dialect, Placeholders};
use super::values::SqlValue;
use super::{PoolSettings, StoreError};

/// The PostgreSQL store.
pub type PostgresStore = SqlStore<Postgres>;

impl SqlBackend for Postgres {
    type Parts = ();
    const NAME: &'static str = "postgres";
    const PLACEHOLDERS: Placeholders = Placeholders::Numbered;
    const DIALECT: Dialect = Dialect::Ansi;
    /// Locks the rows a statement selects until the transaction ends.
    const ROW_LOCK: &'static str = " FOR UPDATE";
    /// Locks the rows a statement selects, passing over rows other transactions hold.
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    /// Taken first by a transaction that records a replay or backfill: one at a time, so the
    /// double-replay guard of the second sees the first's runs (the mode conflicts with
    /// itself, not with readers).
    const OPERATIONS_LOCK: &'static str = "LOCK TABLE replays IN SHARE ROW EXCLUSIVE MODE";
    const INSERTS_IN_WITH: bool = true;
    const LAST_LOG_ID: &'static str =
        "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM job_logs_id_seq";

    /// Makes the keyed batches join by primary key.
    ///
    /// With a 2 000-row batch against a table of 100 000 jobs the planner prices a hash join
    /// over a sequential scan below 2 000 index probes, so every batch read the whole table
    /// (and its dead tuples: jobs are updated on every fire). Measured at 100 000 fires/s that
    /// made PostgreSQL the bottleneck. A batch is bounded and keyed, so index probes are always
    /// the right plan; `SET LOCAL` scope (`set_config(…, true)`) keeps the hint inside the
    /// transaction.
    const KEYED_JOINS: &'static str = "SELECT set_config('enable_hashjoin', 'off', true), \
         set_config('enable_mergejoin', 'off', true)";

    /// PostgreSQL binds arrays: a batch is bound one array per column.
    const ARRAYS: bool = true;

    fn add_column(arguments: &mut PgArguments, column: &SqlValue<'_>) -> Result<(), BoxDynError> {
        match column {
            SqlValue::IntColumn(values) => arguments.add(values.as_slice()),
            SqlValue::TextColumn(values) => {
                arguments.add(values.iter().map(Option::as_deref).collect::<Vec<_>>())
            }
            SqlValue::BytesColumn(values) => {
                arguments.add(values.iter().map(Option::as_deref).collect::<Vec<_>>())
            }
            SqlValue::Int(_) | SqlValue::Text(_) | SqlValue::Bytes(_) => {
                Err("a single value is not a column".into())
            }
        }
    }

    async fn migrate(store: &PostgresStore) -> Result<(), StoreError> {
        // The migrator serialises concurrent schedulers with an advisory lock.
        sqlx::migrate!("migrations/postgres")
            .run(&store.pool)
            .await
            .map_err(|source| StoreError::Migrate {
                backend: <Postgres as SqlBackend>::NAME,
                source,
            })
    }

    /// Reserves ids from the table's sequence: no row is written, and other nodes reserving
    /// at once wait for nothing (a sequence is outside transactions).
    async fn reserve_log_ids(
        _: &(),
        tx: &mut PgConnection,
        count: usize,
    ) -> Result<Vec<i64>, StoreError> {
        let ids: Vec<(i64,)> = sqlx::query_as(
            "SELECT nextval('job_logs_id_seq') AS id FROM generate_series(1, $1) ORDER BY id",
        )
        .bind(count as i64)
        .fetch_all(tx)
        .await
        .map_err(StoreError::query("reserve job-log ids"))?;
        Ok(ids.into_iter().map(|(id,)| id).collect())
    }

    fn rows_affected(done: &PgQueryResult) -> u64 {
        done.rows_affected()
    }

    /// PostgreSQL returns generated ids (`RETURNING id`): never asked.
    fn last_insert_id(_: &PgQueryResult) -> Result<i64, sqlx::Error> {
        Err(sqlx::Error::Protocol(
            "PostgreSQL returns generated ids with RETURNING".into(),
        ))
    }

    /// PostgreSQL locks rows as the statements reach them.
    async fn begin_write(pool: &PgPool) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        pool.begin().await
    }
}

impl PostgresStore {
    /// Connects to `url`, e.g. `postgres://kadence@db.internal/kadence`.
    pub async fn connect(url: &str, pool: PoolSettings) -> Result<PostgresStore, StoreError> {
        let connect_error = |source| StoreError::Connect {
            backend: <Postgres as SqlBackend>::NAME,
            source,
        };
        // Every transaction of the store is short and talks to nothing but the database.
        let options = url
            .parse::<PgConnectOptions>()
            .map_err(connect_error)?
            .options([(
                "idle_in_transaction_session_timeout",
                format!("{}ms", pool.idle_in_transaction.as_millis().max(1)),
            )])
            .statement_cache_capacity(crate::store::sql::STATEMENT_CACHE);
        let pool = PgPoolOptions::new()
            .max_connections(pool.max_connections.max(1))
            .acquire_timeout(pool.acquire_timeout)
            .connect_with(options)
            .await
            .map_err(connect_error)?;
        Ok(SqlStore { pool, parts: () })
    }
}
