//! The MySQL backend (MySQL 8, MariaDB 10.11+), for teams whose databases are MySQL: any
//! number of schedulers on one database, as on PostgreSQL. The statements are the shared
//! ones of [`sql`](super::sql) in the `mysql` dialect (see [`dialect`](super::sql::dialect)):
//! where PostgreSQL returns what an update changed, MySQL locks the rows it reads
//! (`FOR UPDATE`, `SKIP LOCKED` for claims), decides, and updates those rows in the same
//! transaction, which gives the same compare-and-set outcomes.
//!
//! Every session runs with:
//! - `READ COMMITTED`, PostgreSQL's level: InnoDB's default `REPEATABLE READ` takes gap locks
//!   on range reads, which makes concurrent inserts of fires wait on each other;
//! - `NO_BACKSLASH_ESCAPES` and `STRICT_ALL_TABLES` (beside the `PIPES_AS_CONCAT` sqlx sets):
//!   a backslash in a literal is a backslash (the `LIKE … ESCAPE '\'` of the filters), and a
//!   value that does not fit is an error rather than silently cut;
//! - an idle-in-transaction limit, the pool's
//!   [`idle_in_transaction`](PoolSettings::idle_in_transaction) (a node's shard lease):
//!   MariaDB's `idle_transaction_timeout`; MySQL has none, so there its `wait_timeout` ends
//!   any idle session, and the pool drops idle connections at half that. A node stopped in
//!   the middle of a transaction (SIGSTOP, a frozen VM) would otherwise hold its shards' row
//!   locks for as long as its connection lives, and no other node could take them over
//!   when its lease ends. Which server it is, is asked once on a connection of its own
//!   before the pools open.
//!
//! Job-log ids come from the counter row `id_counters.job_logs`, moved on a connection of
//! its own outside the caller's transaction (as PostgreSQL's sequence is outside
//! transactions): reserving ids never waits for another node's scan to commit, and
//! `last_log_id_in` (`sql/batches.rs`) sees every id given out so far.

use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions, MySqlQueryResult};
use sqlx::{
    ConnectOptions as _, Connection as _, Executor as _, MySql, MySqlConnection, MySqlPool,
    Transaction,
};

use super::sql::backend::{SqlBackend, SqlStore};
use super::sql::dialect::{Dialect, Placeholders};
use super::{PoolSettings, StoreError};

/// The MySQL store.
pub type MySqlStore = SqlStore<MySql>;

impl SqlBackend for MySql {
    type Parts = MySqlParts;
    const NAME: &'static str = "mysql";
    const PLACEHOLDERS: Placeholders = Placeholders::InOrder;
    const DIALECT: Dialect = Dialect::MySql;
    /// Locks the rows a statement selects until the transaction ends.
    const ROW_LOCK: &'static str = " FOR UPDATE";
    /// Locks the rows a statement selects, passing over rows other transactions hold.
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    /// Taken first by a transaction that records a replay or backfill: one at a time, so the
    /// double-replay guard of the second sees the first's runs.
    const OPERATIONS_LOCK: &'static str =
        "SELECT name FROM schedule_lock WHERE name = 'replays' FOR UPDATE";
    const INSERTS_IN_WITH: bool = false;
    const LAST_LOG_ID: &'static str = "SELECT last_id FROM id_counters WHERE name = 'job_logs'";

    /// InnoDB probes the primary key for each row of a keyed batch already.
    const KEYED_JOINS: &'static str = "";

    async fn migrate(store: &MySqlStore) -> Result<(), StoreError> {
        store.choose_collation().await?;
        // The migrator serialises concurrent schedulers with a named lock (GET_LOCK).
        sqlx::migrate!("migrations/mysql")
            .run(&store.pool)
            .await
            .map_err(|source| StoreError::Migrate {
                backend: <MySql as SqlBackend>::NAME,
                source,
            })
    }

    /// Reserves ids by moving the counter on the id connection, committed at once (see the
    /// module docs): `tx` is not used, and other nodes reserving at once wait only for that
    /// one statement.
    async fn reserve_log_ids(
        parts: &MySqlParts,
        _tx: &mut MySqlConnection,
        count: usize,
    ) -> Result<Vec<i64>, StoreError> {
        const OPERATION: &str = "reserve job-log ids";
        // LAST_INSERT_ID(expr) hands the new value back with the statement's answer.
        let moved = sqlx::query(
            "UPDATE id_counters SET last_id = LAST_INSERT_ID(last_id + ?) WHERE name = 'job_logs'",
        )
        .bind(count as i64)
        .execute(&parts.id_pool)
        .await
        .map_err(StoreError::query(OPERATION))?;
        let last = i64::try_from(moved.last_insert_id()).map_err(|_| StoreError::CorruptRow {
            what: "the job-log id counter".to_owned(),
            reason: format!("{} is out of range", moved.last_insert_id()),
        })?;
        Ok((last - count as i64 + 1..=last).collect())
    }

    fn rows_affected(done: &MySqlQueryResult) -> u64 {
        done.rows_affected()
    }

    fn last_insert_id(done: &MySqlQueryResult) -> Result<i64, sqlx::Error> {
        i64::try_from(done.last_insert_id()).map_err(|error| sqlx::Error::Decode(Box::new(error)))
    }

    /// InnoDB locks rows as the statements reach them.
    async fn begin_write(pool: &MySqlPool) -> Result<Transaction<'static, MySql>, sqlx::Error> {
        pool.begin().await
    }
}

/// What a MySQL store holds beside its pool.
#[derive(Clone)]
pub struct MySqlParts {
    /// One connection that moves the job-log id counter, outside every transaction.
    id_pool: MySqlPool,
    /// Which server this is.
    flavour: Flavour,
}

/// The two servers of the MySQL protocol, which differ in a setting and a collation's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavour {
    MySql,
    MariaDb,
}

impl Flavour {
    /// Asks the server its version on a connection of its own, closed after.
    async fn of_server(options: &MySqlConnectOptions) -> Result<Flavour, sqlx::Error> {
        let mut connection = options.connect().await?;
        let (version,): (String,) = sqlx::query_as("SELECT VERSION()")
            .fetch_one(&mut connection)
            .await?;
        connection.close().await?;
        Ok(if version.contains("MariaDB") {
            Flavour::MariaDb
        } else {
            Flavour::MySql
        })
    }
}

impl MySqlStore {
    /// Connects to `url`, e.g. `mysql://kadence:secret@db.internal:3306/kadence`.
    pub async fn connect(url: &str, pool: PoolSettings) -> Result<MySqlStore, StoreError> {
        let connect_error = |source| StoreError::Connect {
            backend: <MySql as SqlBackend>::NAME,
            source,
        };
        let options = url
            .parse::<MySqlConnectOptions>()
            .map_err(connect_error)?
            .charset("utf8mb4")
            .statement_cache_capacity(crate::store::sql::STATEMENT_CACHE);
        let flavour = Flavour::of_server(&options).await.map_err(connect_error)?;
        let id_pool_settings = PoolSettings {
            max_connections: 1,
            acquire_timeout: Duration::from_secs(30),
            ..pool
        };
        let id_pool = Self::pool_options(id_pool_settings, flavour)
            .connect_with(options.clone())
            .await
            .map_err(connect_error)?;
        let pool = Self::pool_options(pool, flavour)
            .connect_with(options)
            .await
            .map_err(connect_error)?;
        Ok(SqlStore {
            pool,
            parts: MySqlParts { id_pool, flavour },
        })
    }

    fn pool_options(settings: PoolSettings, flavour: Flavour) -> MySqlPoolOptions {
        let idle_limit_secs = settings.idle_in_transaction_secs();
        let (idle_limit, pool_options) = match flavour {
            Flavour::MariaDb => ("idle_transaction_timeout", MySqlPoolOptions::new()),
            // The server ends any session idle this long: the pool lets go of it first.
            Flavour::MySql => (
                "wait_timeout",
                MySqlPoolOptions::new()
                    .idle_timeout(Duration::from_millis(idle_limit_secs * 1000 / 2)),
            ),
        };
        pool_options
            .max_connections(settings.max_connections.max(1))
            .acquire_timeout(settings.acquire_timeout)
            .after_connect(move |connection, _| {
                Box::pin(async move {
                    connection
                        .execute(
                            "SET SESSION sql_mode = \
                             CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES,STRICT_ALL_TABLES')",
                        )
                        .await?;
                    connection
                        .execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .await?;
                    connection
                        .execute(format!("SET SESSION {idle_limit} = {idle_limit_secs}").as_str())
                        .await?;
                    Ok(())
                })
            })
    }

    /// Makes utf8mb4 with a case- and accent-sensitive collation the default of a database
    /// that has no tables yet, so the tables the migrations create compare text as the other
    /// backends do (see `migrations/mysql/0001_initial.sql`). A database that has tables
    /// keeps what it has: its tables were made with it.
    async fn choose_collation(&self) -> Result<(), StoreError> {
        const OPERATION: &str = "set the database's collation";
        let (tables,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(StoreError::query(OPERATION))?;
        if tables > 0 {
            return Ok(());
        }
        let collation = match self.parts.flavour {
            Flavour::MariaDb => "utf8mb4_uca1400_as_cs",
            Flavour::MySql => "utf8mb4_0900_as_cs",
        };
        self.pool
            .execute(format!("ALTER DATABASE CHARACTER SET utf8mb4 COLLATE {collation}").as_str())
            .await
            .map_err(StoreError::query(OPERATION))?;
        Ok(())
    }
}
