//! Statements written once for every backend, as ordinary functions generic over the backend
//! ([`SqlBackend`]): a [`Statement`] holds its text, written with `$1`, `$2`, … placeholders,
//! and the values it binds, and runs on any backend's connection.
//!
//! Why not sqlx's `query(…).bind(…)` in generic code: each bind, each row type and each
//! executor needs its own sqlx bound (`i64: Encode<'q, DB> + Type<DB>`, `JobRow: for<'r>
//! FromRow<'r, DB::Row>`, `for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>`),
//! and Rust repeats such bounds on every function that uses them rather than implying them.
//! Here the bounds are stated once, as supertraits of [`SqlBackend`], which are implied:
//! - a statement binds a few kinds of value ([`SqlValue`]: integers, text and bytes, each
//!   nullable; every integer column is a 64-bit integer on all three backends), each bound
//!   through [`Binds`](super::backend::Binds);
//! - a row is read as a type the backend [`Reads`](super::backend::Reads);
//! - a backend's connection executes statements ([`Executes`](super::backend::Executes)).
//!
//! What runs is sqlx's own `query_with` on the backend's own connection: a statement is
//! prepared once per connection and cached, as before, and the values are bound as they
//! were, the text borrowed rather than copied.
//!
//! A batch of rows on the fire path (run rows, job advances, completions) is written with
//! [`Statement::push_rows`] or [`Statement::insert_batch`]: on PostgreSQL one array per
//! column (`UNNEST`), whose text is the same whatever the batch's size, so each connection
//! prepares it once; elsewhere a `VALUES` row per row.

use std::borrow::Cow;

use sqlx::{Database, IntoArguments};

use kadence_schemas::AppName;

use super::UPDATE_CHUNK;
use super::backend::{Executes as _, Reads, SqlBackend};
use super::dialect::Dialect;
use crate::store::AppScope;
pub(crate) use crate::store::values::{IntoSqlValue, SqlValue};

/// A backend's arguments as sqlx's queries take them. Each backend's own arguments type is
/// that already, but generic code cannot say so: `Database` does not promise it for
/// `Database::Arguments`, whose implementations come one backend at a time.
struct BoundValues<'q, B: Database>(B::Arguments<'q>);

impl<'q, B: Database> IntoArguments<'q, B> for BoundValues<'q, B> {
    fn into_arguments(self) -> B::Arguments<'q> {
        self.0
    }
}

/// A statement and the values it binds (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Statement<'a> {
    /// The text, with `$1`, `$2`, … placeholders, each used once and in order (SQLite and
    /// MySQL bind by position: see [`Placeholders`](super::dialect::Placeholders)).
    text: Cow<'a, str>,
    values: Vec<SqlValue<'a>>,
}

impl<'a> Statement<'a> {
    /// The statement `text`, binding nothing yet.
    pub(crate) fn new(text: impl Into<Cow<'a, str>>) -> Statement<'a> {
        Statement {
            text: text.into(),
            values: Vec::new(),
        }
    }

    /// The same text binding `values` instead: one statement for each row of a batch, its
    /// text built once.
    pub(crate) fn rebound<'b>(
        &'b self,
        values: impl IntoIterator<Item = SqlValue<'b>>,
    ) -> Statement<'b> {
        Statement {
            text: Cow::Borrowed(&self.text),
            values: values.into_iter().collect(),
        }
    }

    /// Binds `value` to the next placeholder.
    pub(crate) fn bind(mut self, value: impl IntoSqlValue<'a>) -> Statement<'a> {
        self.values.push(value.into_sql_value());
        self
    }

    /// Appends `text` (a statement built as it goes, like sqlx's `QueryBuilder`).
    pub(crate) fn push(&mut self, text: &str) -> &mut Statement<'a> {
        self.text.to_mut().push_str(text);
        self
    }

    /// Appends the next placeholder, binding `value` to it.
    pub(crate) fn push_bind(&mut self, value: impl IntoSqlValue<'a>) -> &mut Statement<'a> {
        self.values.push(value.into_sql_value());
        // Written in place, without `fmt`: a batch's statement has thousands of placeholders,
        // and formatting them was a measurable part of a trigger's cost.
        let text = self.text.to_mut();
        text.push('$');
        text.push_str(itoa::Buffer::new().format(self.values.len()));
        self
    }

    /// Appends `VALUES ($n, …), (…)`, a row of placeholders for each of `rows`.
    pub(crate) fn push_values<R: IntoIterator<Item = SqlValue<'a>>>(
        &mut self,
        rows: impl IntoIterator<Item = R>,
    ) -> &mut Statement<'a> {
        self.push("VALUES ");
        for (index, row) in rows.into_iter().enumerate() {
            self.push(if index == 0 { "(" } else { ", (" });
            self.push_separated(row);
            self.push(")");
        }
        self
    }

    /// Appends a batch of rows as the rows of a query: on a backend that binds arrays
    /// (PostgreSQL, [`SqlBackend::ARRAYS`]) `SELECT * FROM UNNEST($1::int8[], $2::text[], …)`,
    /// one array per column; elsewhere `VALUES (…), (…)` ([`push_values`](Self::push_values)).
    /// Either serves as the rows of an `INSERT INTO t (…)` or a `WITH v(…) AS (…)`.
    ///
    /// Why arrays: a `VALUES` list has a text of its own for each count of rows, so nearly
    /// every batch of a steady load was a statement the connection had not prepared yet
    /// (PostgreSQL parsing and planning thousands of placeholders, the scheduler building and
    /// hashing their text), and the batches churned the statement cache. The `UNNEST` form's
    /// text depends on the columns only: each connection prepares it once. Every row must
    /// hold the same kinds of value in the same order, as rows built by one function do.
    pub(crate) fn push_rows<B: SqlBackend>(
        &mut self,
        rows: impl IntoIterator<Item = impl IntoIterator<Item = SqlValue<'a>>>,
    ) -> &mut Statement<'a> {
        if !B::ARRAYS {
            return self.push_values(rows);
        }
        let columns = gather_columns(rows.into_iter().map(|row| {
            let unnamed: fn(SqlValue<'a>) -> (&'static str, SqlValue<'a>) = |value| ("", value);
            row.into_iter().map(unnamed)
        }));
        self.push_unnest(columns.into_iter().map(|(_, column)| column))
    }

    /// `INSERT INTO {table} (columns…)` of `rows` (each pairing every column with its value,
    /// as [`insert_rows`](Self::insert_rows) takes them) as [`push_rows`](Self::push_rows)
    /// writes them: one array per column on PostgreSQL, a `VALUES` row per row elsewhere.
    /// The caller keeps a batch within the backend's bind limit (`INSERT_CHUNK` rows) on
    /// the backends without arrays.
    pub(crate) fn insert_batch<B: SqlBackend>(
        table: &str,
        rows: impl IntoIterator<Item = impl IntoIterator<Item = (&'static str, SqlValue<'a>)>>,
    ) -> Statement<'a> {
        if !B::ARRAYS {
            return Statement::insert_rows(table, rows);
        }
        let columns = gather_columns(rows);
        let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
        let mut insert = Statement::new(format!("INSERT INTO {table} ({}) ", names.join(", ")));
        insert.push_unnest(columns.into_iter().map(|(_, column)| column));
        insert
    }

    /// Appends `SELECT * FROM UNNEST(…)` of `columns`, each bound as one array.
    fn push_unnest(
        &mut self,
        columns: impl IntoIterator<Item = SqlValue<'a>>,
    ) -> &mut Statement<'a> {
        self.push("SELECT * FROM UNNEST(");
        for (position, column) in columns.into_iter().enumerate() {
            if position > 0 {
                self.push(", ");
            }
            let array_type = column.array_type();
            self.push_bind(column);
            self.push("::");
            self.push(array_type);
        }
        self.push(")")
    }

    /// Appends a batch of rows as a derived table `v` with `columns`, for MySQL's
    /// `UPDATE (…) AS v STRAIGHT_JOIN t ON t.key = v.key SET …` (the ANSI backends'
    /// `WITH v(…) AS (VALUES …)`). The join order matters: the other way round InnoDB may
    /// scan `t` and probe `v` (it does on small tables), locking, and waiting on, every row
    /// it scans rather than the batch's, and two nodes' batches deadlock.
    ///
    /// MariaDB cannot name the columns of a `VALUES` list, so the table is a `UNION ALL` of
    /// `SELECT`s: a first, empty one names the columns, and the types of each column are those
    /// of all the rows together.
    pub(crate) fn push_mysql_rows<R: IntoIterator<Item = SqlValue<'a>>>(
        &mut self,
        columns: &[&str],
        rows: impl IntoIterator<Item = R>,
    ) -> &mut Statement<'a> {
        let names: Vec<String> = (columns.iter())
            .map(|column| format!("NULL AS {column}"))
            .collect();
        self.push(&format!(
            "(SELECT {} FROM DUAL WHERE 1 = 0",
            names.join(", ")
        ));
        for row in rows {
            self.push(" UNION ALL SELECT ");
            self.push_separated(row);
        }
        self.push(") AS v")
    }

    /// Appends a placeholder for each of `values`, separated by commas.
    fn push_separated(&mut self, values: impl IntoIterator<Item = SqlValue<'a>>) {
        for (index, value) in values.into_iter().enumerate() {
            if index > 0 {
                self.push(", ");
            }
            self.push_bind(value);
        }
    }

    /// Appends ` IN ($n, …)` of `values`, or a condition no row meets when there are none.
    pub(crate) fn push_in_list<V: IntoSqlValue<'a>>(
        &mut self,
        values: impl IntoIterator<Item = V>,
    ) -> &mut Statement<'a> {
        let mut values = values.into_iter().peekable();
        if values.peek().is_none() {
            return self.push(" IN (NULL)");
        }
        self.push(" IN (");
        let mut first = true;
        for value in values {
            if !first {
                self.push(", ");
            }
            first = false;
            self.push_bind(value);
        }
        self.push(")")
    }

    /// `INSERT INTO {table} (columns…) VALUES ($1, …)` of `values`, each column with its value.
    pub(crate) fn insert_into(
        table: &str,
        values: impl IntoIterator<Item = (&'static str, SqlValue<'a>)>,
    ) -> Statement<'a> {
        Statement::insert_rows(table, [values])
    }

    /// `INSERT INTO {table} (columns…) VALUES (…), (…)`, a row of placeholders for each of
    /// `rows`. Each row pairs every column with its value, the same columns in the same order
    /// in every row; the first row names them. `rows` is never empty.
    pub(crate) fn insert_rows<R>(table: &str, rows: impl IntoIterator<Item = R>) -> Statement<'a>
    where
        R: IntoIterator<Item = (&'static str, SqlValue<'a>)>,
    {
        let mut columns = Vec::new();
        let mut values = Statement::new("");
        for (index, row) in rows.into_iter().enumerate() {
            values.push(if index == 0 { "VALUES (" } else { ", (" });
            for (position, (column, value)) in row.into_iter().enumerate() {
                if index == 0 {
                    columns.push(column);
                } else {
                    debug_assert_eq!(columns.get(position), Some(&column), "a row of {table}");
                }
                if position > 0 {
                    values.push(", ");
                }
                values.push_bind(value);
            }
            values.push(")");
        }
        debug_assert!(!columns.is_empty(), "an insert into {table} writes no row");
        Statement {
            text: Cow::Owned(format!(
                "INSERT INTO {table} ({}) {}",
                columns.join(", "),
                values.text
            )),
            values: values.values,
        }
    }

    /// MySQL's `INSERT IGNORE` of an insert built by [`insert_rows`](Statement::insert_rows):
    /// a row whose key exists already is dropped, and not counted as changed.
    pub(crate) fn ignoring_duplicates(&mut self) -> &mut Statement<'a> {
        const INSERT: &str = "INSERT ";
        debug_assert!(
            self.text.starts_with(INSERT),
            "not an insert: {}",
            self.text
        );
        self.text
            .to_mut()
            .replace_range(..INSERT.len(), "INSERT IGNORE ");
        self
    }

    /// ` AND {column} IN (…apps)` when a listing is limited to some apps (`Some`, see
    /// [`AppScope`]); ` AND false` when that is none at all.
    pub(crate) fn push_app_scope(
        &mut self,
        column: &str,
        apps: AppScope<'a>,
    ) -> &mut Statement<'a> {
        match apps {
            None => self,
            Some([]) => self.push(" AND false"),
            Some(apps) => {
                self.push(&format!(" AND {column}"));
                self.push_in_list(apps.iter().map(AppName::as_str))
            }
        }
    }

    /// The text as backend `B` reads it.
    fn text_for<B: SqlBackend>(&self) -> Cow<'_, str> {
        B::PLACEHOLDERS.text(&self.text)
    }

    /// The values as backend `B`'s arguments, borrowing their text and bytes.
    fn arguments<'s, B: SqlBackend>(&'s self) -> Result<B::Arguments<'s>, sqlx::Error> {
        let mut arguments = B::Arguments::<'s>::default();
        for value in &self.values {
            let added = match value {
                SqlValue::Int(value) => B::add_to(&mut arguments, *value),
                SqlValue::Text(value) => B::add_to(&mut arguments, value.as_deref()),
                SqlValue::Bytes(value) => B::add_to(&mut arguments, value.as_deref()),
                SqlValue::IntColumn(_) | SqlValue::TextColumn(_) | SqlValue::BytesColumn(_) => {
                    B::add_column(&mut arguments, value)
                }
            };
            added.map_err(sqlx::Error::Encode)?;
        }
        Ok(arguments)
    }

    /// The query sqlx runs: `text` (the statement's, as the backend reads it) with the
    /// values bound, both borrowed for as long as the query lives.
    fn query<'s, B: SqlBackend>(
        &'s self,
        text: &'s str,
    ) -> Result<sqlx::query::Query<'s, B, BoundValues<'s, B>>, sqlx::Error> {
        Ok(sqlx::query_with(text, BoundValues(self.arguments::<B>()?)))
    }

    /// Runs the statement on `connection`; returns the rows it changed.
    pub(crate) async fn execute<B: SqlBackend>(
        &self,
        connection: &mut B::Connection,
    ) -> Result<u64, sqlx::Error> {
        let text = self.text_for::<B>();
        let done = self
            .query::<B>(&text)?
            .execute(connection.executor())
            .await?;
        Ok(B::rows_affected(&done))
    }

    /// Runs an `INSERT` of one row into a table with a generated `id`; returns the id: ANSI
    /// backends return it (`RETURNING id`), MySQL tells it after the statement
    /// (`LAST_INSERT_ID()`).
    pub(crate) async fn insert_returning_id<B: SqlBackend>(
        mut self,
        connection: &mut B::Connection,
    ) -> Result<i64, sqlx::Error> {
        match B::DIALECT {
            Dialect::Ansi => {
                self.push(" RETURNING id");
                let (id,): (i64,) = self.fetch_one::<B, _>(connection).await?;
                Ok(id)
            }
            Dialect::MySql => {
                let text = self.text_for::<B>();
                let done = self
                    .query::<B>(&text)?
                    .execute(connection.executor())
                    .await?;
                B::last_insert_id(&done)
            }
        }
    }

    /// Every row `select` reads for `items`, as `R`s: `select` ends in the column a list
    /// ` IN (…)` of `value(item)` follows, run once per chunk of [`UPDATE_CHUNK`] items, which
    /// keeps each statement far below the bind limits.
    pub(crate) async fn fetch_in_chunks<B: SqlBackend + Reads<R>, R, T, V: IntoSqlValue<'a>>(
        connection: &mut B::Connection,
        select: &'a str,
        items: &'a [T],
        value: impl Fn(&'a T) -> V,
    ) -> Result<Vec<R>, sqlx::Error> {
        let mut rows = Vec::new();
        for chunk in items.chunks(UPDATE_CHUNK) {
            let mut query = Statement::new(select);
            query.push_in_list(chunk.iter().map(&value));
            rows.extend(query.fetch_all::<B, R>(&mut *connection).await?);
        }
        Ok(rows)
    }

    /// Every row the statement reads, as `R`s.
    pub(crate) async fn fetch_all<B: SqlBackend + Reads<R>, R>(
        &self,
        connection: &mut B::Connection,
    ) -> Result<Vec<R>, sqlx::Error> {
        let text = self.text_for::<B>();
        let rows = self
            .query::<B>(&text)?
            .fetch_all(connection.executor())
            .await?;
        rows.iter().map(B::read).collect()
    }

    /// The one row the statement reads, if there is one, as an `R`.
    pub(crate) async fn fetch_optional<B: SqlBackend + Reads<R>, R>(
        &self,
        connection: &mut B::Connection,
    ) -> Result<Option<R>, sqlx::Error> {
        let text = self.text_for::<B>();
        let row = self
            .query::<B>(&text)?
            .fetch_optional(connection.executor())
            .await?;
        row.as_ref().map(B::read).transpose()
    }

    /// The one row the statement reads, as an `R`; `RowNotFound` when there is none.
    pub(crate) async fn fetch_one<B: SqlBackend + Reads<R>, R>(
        &self,
        connection: &mut B::Connection,
    ) -> Result<R, sqlx::Error> {
        (self.fetch_optional::<B, R>(connection).await?).ok_or(sqlx::Error::RowNotFound)
    }
}

/// The rows of a batch gathered column by column: each column's name (as the first row names
/// it) and its values as one column value ([`SqlValue::IntColumn`] and the like).
///
/// # Panics
/// When a row holds a different kind of value than the first row in the same place, or more
/// values: rows built by one function never do.
fn gather_columns<'a, R>(rows: impl IntoIterator<Item = R>) -> Vec<(&'static str, SqlValue<'a>)>
where
    R: IntoIterator<Item = (&'static str, SqlValue<'a>)>,
{
    let rows = rows.into_iter();
    let capacity = rows.size_hint().0;
    let mut columns: Vec<(&'static str, SqlValue<'a>)> = Vec::new();
    for (index, row) in rows.enumerate() {
        for (position, (name, value)) in row.into_iter().enumerate() {
            if index == 0 {
                columns.push((name, value.empty_column(capacity)));
            }
            let gathered =
                (columns.get_mut(position)).is_some_and(|(_, column)| column.push_to_column(value));
            assert!(
                gathered,
                "row {index} of a batch does not match the first row's columns at {position}"
            );
        }
    }
    columns
}

#[cfg(test)]
mod tests {
    use sqlx::{Postgres, Sqlite};

    use super::*;

    fn rows(count: i64) -> Vec<[(&'static str, SqlValue<'static>); 3]> {
        (1..=count)
            .map(|id| {
                [
                    ("id", id.into_sql_value()),
                    ("name", format!("run {id}").into_sql_value()),
                    ("note", None::<String>.into_sql_value()),
                ]
            })
            .collect()
    }

    #[test]
    fn a_batch_on_postgresql_binds_a_column_per_array_whatever_its_size() {
        let one = Statement::insert_batch::<Postgres>("runs", rows(1));
        let three = Statement::insert_batch::<Postgres>("runs", rows(3));
        assert_eq!(
            three.text,
            "INSERT INTO runs (id, name, note) \
             SELECT * FROM UNNEST($1::int8[], $2::text[], $3::text[])"
        );
        assert_eq!(
            one.text, three.text,
            "one prepared statement for every size"
        );
        assert_eq!(
            three.values,
            [
                SqlValue::IntColumn(vec![Some(1), Some(2), Some(3)]),
                SqlValue::TextColumn(
                    ["run 1", "run 2", "run 3"]
                        .map(|name| Some(name.into()))
                        .to_vec()
                ),
                SqlValue::TextColumn(vec![None, None, None]),
            ]
        );
    }

    #[test]
    fn a_batch_elsewhere_is_a_values_row_per_row() {
        let insert = Statement::insert_batch::<Sqlite>("runs", rows(2));
        assert_eq!(
            insert.text,
            "INSERT INTO runs (id, name, note) VALUES ($1, $2, $3), ($4, $5, $6)"
        );
        assert_eq!(insert.values.len(), 6);
        let mut with = Statement::new("WITH v(id, name, note) AS (");
        with.push_rows::<Sqlite>(rows(1).into_iter().map(|row| row.map(|(_, value)| value)));
        assert_eq!(with.text, "WITH v(id, name, note) AS (VALUES ($1, $2, $3)");
    }

    #[test]
    #[should_panic(expected = "does not match the first row's columns")]
    fn a_batch_whose_rows_differ_in_kind_is_refused() {
        let rows = [
            [1.into_sql_value(), "a".into_sql_value()],
            ["b".into_sql_value(), 2.into_sql_value()],
        ];
        Statement::new("").push_rows::<Postgres>(rows);
    }
}
