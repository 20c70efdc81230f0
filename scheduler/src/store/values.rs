//! The values a statement binds ([`SqlValue`]): integers, text and bytes, each nullable.
//! Every integer column is a 64-bit integer on all three backends. A table's module of
//! [`rows`](super::rows) pairs each column with the value written to it; the statements of
//! `sql/` bind them.

use std::borrow::Cow;

/// One value a statement binds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SqlValue<'a> {
    /// A 64-bit integer, or NULL.
    Int(Option<i64>),
    /// Text, or NULL.
    Text(Option<Cow<'a, str>>),
    /// Bytes, or NULL.
    Bytes(Option<Cow<'a, [u8]>>),
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
