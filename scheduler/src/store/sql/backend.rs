//! What the store needs of a database backend, stated once: [`SqlBackend`], which SQLite,
//! PostgreSQL and MySQL implement, and [`SqlStore`], the store over a pool of one of them.
//!
//! Code written once for every backend is generic over `B: SqlBackend` and runs
//! [`Statement`](super::statement::Statement)s on `B`'s connections; what differs between
//! the backends is here, in each backend's implementation of the trait (`sqlite.rs`,
//! `postgres.rs`, `mysql.rs`), or in a `match B::DIALECT` where a statement is written once
//! per dialect.

use std::future::Future;

use sqlx::error::BoxDynError;
use sqlx::pool::PoolConnection;
use sqlx::{Arguments as _, Database, Encode, Executor, FromRow, Pool, Transaction, Type};

use super::dialect::{Dialect, Placeholders};
use crate::domain::model::DailyReport;
use crate::store::StoreError;
use crate::store::rows::{
    AppRow, AuditRow, CompletedRunRow, ExecutorRow, FinishedRunRow, FireRow, GlueVersionRow,
    JobRow, KeyInfoRow, OperationRow, PairRow, RunRow, SummaryRow, TokenRow, UserRow,
};
use crate::store::values::SqlValue;

/// A backend that binds a `T` (every sqlx backend does for the types [`SqlValue`] holds).
pub trait Binds<'q, T>: Database {
    fn add_to(arguments: &mut Self::Arguments<'q>, value: T) -> Result<(), BoxDynError>;
}

impl<'q, D: Database, T> Binds<'q, T> for D
where
    T: 'q + Encode<'q, D> + Type<D>,
{
    fn add_to(arguments: &mut D::Arguments<'q>, value: T) -> Result<(), BoxDynError> {
        arguments.add(value)
    }
}

/// A backend whose rows read as an `R` (a `#[derive(sqlx::FromRow)]` row, a tuple).
pub trait Reads<R>: Database {
    fn read(row: &Self::Row) -> Result<R, sqlx::Error>;
}

impl<D: Database, R> Reads<R> for D
where
    R: for<'r> FromRow<'r, D::Row>,
{
    fn read(row: &D::Row) -> Result<R, sqlx::Error> {
        R::from_row(row)
    }
}

/// A backend's connection, which executes its statements.
pub trait Executes<D: Database> {
    fn executor(&mut self) -> impl Executor<'_, Database = D>;
}

impl<D: Database, C> Executes<D> for C
where
    for<'c> &'c mut C: Executor<'c, Database = D>,
{
    fn executor(&mut self) -> impl Executor<'_, Database = D> {
        self
    }
}

/// A database the store runs on (see the module docs). Its supertraits say what generic code
/// may bind and read: a row type is read only once it is listed here.
pub trait SqlBackend:
    Database<Connection: Executes<Self>>
    + for<'q> Binds<'q, Option<i64>>
    + for<'q> Binds<'q, Option<&'q str>>
    + for<'q> Binds<'q, Option<&'q [u8]>>
    + Reads<(i64,)>
    + Reads<(String,)>
    + Reads<(i64, String)>
    + Reads<(i64, String, i64, Option<i64>)>
    + Reads<(i64, i64, String, i64, Option<i64>)>
    + Reads<(i64, i64, String, i64, String, Option<i64>)>
    + Reads<(i64, i64, i64, i64)>
    + Reads<(String, String, String, i64)>
    + Reads<(String, Option<String>, Option<i64>)>
    + Reads<AppRow>
    + Reads<AuditRow>
    + Reads<KeyInfoRow>
    + Reads<TokenRow>
    + Reads<UserRow>
    + Reads<SummaryRow>
    + Reads<RunRow>
    + Reads<(String, i64)>
    + Reads<(String, i64, String, String, i64)>
    + Reads<(i64, i64, i64)>
    + Reads<(i64, String, String)>
    + Reads<(String, Option<i64>)>
    + Reads<(String, String, String)>
    + Reads<DailyReport>
    + Reads<ExecutorRow>
    + Reads<GlueVersionRow>
    + Reads<JobRow>
    + Reads<FireRow>
    + Reads<FinishedRunRow>
    + Reads<CompletedRunRow>
    + Reads<(String, String)>
    + Reads<(String, i64, String, i64, String)>
    + Reads<(String, String, Option<i64>)>
    + Reads<(i64, String, Option<i64>)>
    + Reads<(i64, i64)>
    + Reads<(i64, i64, i64, Vec<u8>)>
    + Reads<(i64, Vec<u8>)>
    + Reads<(i64, i64, String)>
    + Reads<(i64, Option<String>, i64)>
    + Reads<(i64, Option<String>, i64, i64)>
    + Reads<(i64, Option<String>, i64, i64, i64)>
    + Reads<OperationRow>
    + Reads<PairRow>
{
    /// What a store of this backend holds beside its pool (MySQL: see `mysql.rs`).
    type Parts: Clone + Send + Sync + 'static;

    /// "sqlite", "postgres" or "mysql".
    const NAME: &'static str;
    /// The dialect its statements are written in.
    const DIALECT: Dialect;
    /// How it marks a statement's parameters.
    const PLACEHOLDERS: Placeholders;

    /// Locks the rows a statement selects until the transaction ends (` FOR UPDATE`; empty on
    /// SQLite, where one writer at a time holds them all).
    const ROW_LOCK: &'static str;
    /// Locks the rows a statement selects, passing over rows other transactions hold
    /// (` FOR UPDATE SKIP LOCKED`; empty on SQLite).
    const SKIP_LOCKED: &'static str;
    /// Taken first by a transaction that records a replay or backfill, so that they are
    /// recorded one at a time (empty on SQLite).
    const OPERATIONS_LOCK: &'static str;

    /// Reads the highest job-log id given out so far, rows and reserved ids alike.
    const LAST_LOG_ID: &'static str;

    /// Whether a statement's `WITH` may hold an `INSERT` (PostgreSQL's data-modifying CTEs):
    /// its parts then read one snapshot, as one statement does.
    const INSERTS_IN_WITH: bool;

    /// Run first in a transaction of keyed batches (`UPDATE … FROM (VALUES …)`, `INSERT …
    /// SELECT` joining `VALUES`) so that they probe the primary key rather than scan the
    /// table (PostgreSQL's plan hints; empty where the planner does so already).
    const KEYED_JOINS: &'static str;

    /// Whether it binds arrays, so that a batch of rows is bound one array per column
    /// ([`Statement::push_rows`](super::statement::Statement::push_rows)): PostgreSQL. The
    /// others (SQLite, MySQL) keep these defaults and bind a batch row by row.
    const ARRAYS: bool = false;

    /// Binds `column` ([`SqlValue::IntColumn`] and the like) as one array; by default an
    /// error, for a backend without arrays, which is never given one ([`SqlBackend::ARRAYS`]).
    fn add_column<'q>(
        _arguments: &mut Self::Arguments<'q>,
        _column: &'q SqlValue<'_>,
    ) -> Result<(), BoxDynError> {
        Err(format!(
            "{} binds no arrays: a batch is bound row by row there",
            <Self as SqlBackend>::NAME
        )
        .into())
    }

    /// Applies the migrations of this backend (`migrations/<backend>`) to `store`'s database.
    fn migrate(store: &SqlStore<Self>) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Reserves `count` job-log ids for rows written later (a scan's fires, written as
    /// batches, get their ids up front), in `tx` or beside it as the backend can.
    fn reserve_log_ids(
        parts: &Self::Parts,
        tx: &mut Self::Connection,
        count: usize,
    ) -> impl Future<Output = Result<Vec<i64>, StoreError>> + Send;

    /// How many rows a statement changed.
    fn rows_affected(done: &Self::QueryResult) -> u64;

    /// The id an `INSERT` of one row generated (read only on MySQL, which has no `RETURNING`).
    fn last_insert_id(done: &Self::QueryResult) -> Result<i64, sqlx::Error>;

    /// A transaction that will write (every transaction of the store does).
    fn begin_write(
        pool: &Pool<Self>,
    ) -> impl Future<Output = Result<Transaction<'static, Self>, sqlx::Error>> + Send;
}

/// The store on a pool of backend `B`'s connections: [`SqliteStore`](crate::store::SqliteStore),
/// [`PostgresStore`](crate::store::PostgresStore) or [`MySqlStore`](crate::store::MySqlStore).
pub struct SqlStore<B: SqlBackend> {
    pub(in crate::store) pool: Pool<B>,
    pub(in crate::store) parts: B::Parts,
}

impl<B: SqlBackend> Clone for SqlStore<B> {
    fn clone(&self) -> Self {
        SqlStore {
            pool: self.pool.clone(),
            parts: self.parts.clone(),
        }
    }
}

impl<B: SqlBackend> SqlStore<B> {
    /// A connection of the pool, for statements outside a transaction.
    pub(in crate::store) async fn connection(
        &self,
        operation: &'static str,
    ) -> Result<PoolConnection<B>, StoreError> {
        (self.pool.acquire().await).map_err(StoreError::query(operation))
    }

    /// A transaction that will write (see [`SqlBackend::begin_write`]).
    pub(in crate::store) async fn begin_write(
        &self,
        operation: &'static str,
    ) -> Result<Transaction<'static, B>, StoreError> {
        (B::begin_write(&self.pool).await).map_err(StoreError::query(operation))
    }

    /// `count` job-log ids for rows written later (see [`SqlBackend::reserve_log_ids`]).
    pub(in crate::store) async fn reserve_log_ids_in(
        &self,
        tx: &mut B::Connection,
        count: usize,
    ) -> Result<Vec<i64>, StoreError> {
        if count == 0 {
            return Ok(Vec::new());
        }
        B::reserve_log_ids(&self.parts, tx, count).await
    }
}
