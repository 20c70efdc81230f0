//! The values a statement binds ([`SqlValue`]): integers, text and bytes, each nullable.
//! Every integer column is a 64-bit integer on all three backends. A table's module of
//! [`rows`](super::rows) pairs each column with the value written to it; the statements of
//! `sql/` bind them.

use std::borrow::Cow;

/// One value a statement binds.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue<'a> {
    /// A 64-bit integer, or NULL.
    Int(Option<i64>),
    /// Text, or NULL.
    Text(Option<Cow<'a, str>>),
    /// Bytes, or NULL.
    Bytes(Option<Cow<'a, [u8]>>),
    /// A column of a batch of rows, bound as one array of integers (PostgreSQL's `UNNEST`:
    /// see [`Statement::push_rows`](super::sql::statement::Statement::push_rows)).
    IntColumn(Vec<Option<i64>>),
    /// A column of a batch of rows, bound as one array of text.
    TextColumn(Vec<Option<Cow<'a, str>>>),
    /// A column of a batch of rows, bound as one array of bytes.
    BytesColumn(Vec<Option<Cow<'a, [u8]>>>),
}

impl<'a> SqlValue<'a> {
    /// An empty column of this value's kind, to gather a batch's values of one column into.
    pub(crate) fn empty_column(&self, rows: usize) -> SqlValue<'a> {
        match self {
            SqlValue::Int(_) | SqlValue::IntColumn(_) => {
                SqlValue::IntColumn(Vec::with_capacity(rows))
            }
            SqlValue::Text(_) | SqlValue::TextColumn(_) => {
                SqlValue::TextColumn(Vec::with_capacity(rows))
            }
            SqlValue::Bytes(_) | SqlValue::BytesColumn(_) => {
                SqlValue::BytesColumn(Vec::with_capacity(rows))
            }
        }
    }

    /// Adds `value` to this column; `false` when it is not a value of the column's kind.
    pub(crate) fn push_to_column(&mut self, value: SqlValue<'a>) -> bool {
        match (self, value) {
            (SqlValue::IntColumn(column), SqlValue::Int(value)) => column.push(value),
            (SqlValue::TextColumn(column), SqlValue::Text(value)) => column.push(value),
            (SqlValue::BytesColumn(column), SqlValue::Bytes(value)) => column.push(value),
            _ => return false,
        }
        true
    }

    /// PostgreSQL's name for the array type of a column of this value's kind.
    pub(crate) fn array_type(&self) -> &'static str {
        match self {
            SqlValue::Int(_) | SqlValue::IntColumn(_) => "int8[]",
            SqlValue::Text(_) | SqlValue::TextColumn(_) => "text[]",
            SqlValue::Bytes(_) | SqlValue::BytesColumn(_) => "bytea[]",
        }
    }
}

/// What a statement can bind: integers, text and bytes, and their options.
pub(crate) trait IntoSqlValue<'a> {
    fn into_sql_value(self) -> SqlValue<'a>;
}

impl<'a> IntoSqlValue<'a> for SqlValue<'a> {
    fn into_sql_value(self) -> SqlValue<'a> {
        self
    }
}

impl<'a> IntoSqlValue<'a> for i64 {
    fn into_sql_value(self) -> SqlValue<'a> {
        SqlValue::Int(Some(self))
    }
}

impl<'a> IntoSqlValue<'a> for i32 {
    fn into_sql_value(self) -> SqlValue<'a> {
        SqlValue::Int(Some(i64::from(self)))
    }
}

impl<'a> IntoSqlValue<'a> for Option<i64> {
    fn into_sql_value(self) -> SqlValue<'a> {
        SqlValue::Int(self)
    }
}

impl<'a> IntoSqlValue<'a> for &'a str {
    fn into_sql_value(self) -> SqlValue<'a> {
        SqlValue::Text(Some(Cow::Borrowed(self)))
    }
}

impl<'a> IntoSqlValue<'a> for &'a String {
    fn into_sql_value(self) -> SqlValue<'a> {
        SqlValue::Text(Some(Cow::Borrowed(self)))
    }
}

impl<'a> IntoSqlValue<'a> for String {
    fn into_sql_value(self) -> SqlValue<'a> {
        SqlValue::Text(Some(Cow::Owned(self)))
    }
}

impl<'a> IntoSqlValue<'a> for Option<&'a str> {
    fn into_sql_value(self) -> SqlValue<'a> {
        SqlValue::Text(self.map(Cow::Borrowed))
    }
}

impl<'a> IntoSqlValue<'a> for Option<String> {
    fn into_sql_value(self) -> SqlValue<'a> {
        SqlValue::Text(self.map(Cow::Owned))
    }
}

impl<'a> IntoSqlValue<'a> for &i64 {
    fn into_sql_value(self) -> SqlValue<'a> {
        SqlValue::Int(Some(*self))
    }
}

impl<'a> IntoSqlValue<'a> for &'a [u8] {
    fn into_sql_value(self) -> SqlValue<'a> {
        SqlValue::Bytes(Some(Cow::Borrowed(self)))
    }
}

impl<'a> IntoSqlValue<'a> for Vec<u8> {
    fn into_sql_value(self) -> SqlValue<'a> {
        SqlValue::Bytes(Some(Cow::Owned(self)))
    }
}
