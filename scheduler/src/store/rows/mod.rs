//! The tables' row shapes and their conversion into model types, a module per table: what
//! a table's rows hold, read by column name, beside what is written to it. Every integer is
//! read as `i64` (all three backends store `BIGINT`/`INTEGER`) and every enumeration as text,
//! parsed here so a corrupt value is a [`StoreError::CorruptRow`], never a silent default.

use std::str::FromStr;

use super::StoreError;

mod accounts;
mod executors;
mod jobs;
mod replays;
mod runs;

pub(crate) use accounts::{AUDIT_COLUMNS, KEY_INFO_COLUMNS, TOKEN_COLUMNS, USER_COLUMNS};
pub use accounts::{AuditRow, KeyInfoRow, TokenRow, UserRow};
pub use executors::ExecutorRow;
pub(crate) use executors::{EXECUTOR_COLUMNS, executor_values};
pub(crate) use jobs::{APP_COLUMNS, JOB_COLUMNS, job_values};
pub use jobs::{AppRow, GlueVersionRow, JobRow};
pub(crate) use replays::operation_values;
pub use replays::{OperationRow, PairRow};
pub use runs::{CompletedRunRow, FinishedRunRow, FireRow, RunRow, SummaryRow};
pub(crate) use runs::{FIRE_COLUMNS, RUN_COLUMNS, claim_expired_sql, fire_values};

pub(super) fn corrupt(what: impl Into<String>) -> impl FnOnce(String) -> StoreError {
    let what = what.into();
    move |reason| StoreError::CorruptRow { what, reason }
}

pub(super) fn parse<T>(value: &str) -> Result<T, String>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    value.parse::<T>().map_err(|error| error.to_string())
}

pub(super) fn narrow(value: i64) -> Result<i32, String> {
    i32::try_from(value).map_err(|_| format!("{value} does not fit a 32-bit integer"))
}

/// The items of a comma-separated column.
pub(super) fn split_list(text: &str) -> impl Iterator<Item = &str> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
}

/// The items of a comma-separated column, parsed.
pub(crate) fn parse_list<T>(text: &str) -> Result<Vec<T>, String>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    split_list(text).map(parse::<T>).collect()
}

/// A list as a comma-separated column.
pub(crate) fn join_list<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Converts every row, failing on the first corrupt one.
pub(crate) fn convert_all<R, T>(rows: Vec<R>) -> Result<Vec<T>, StoreError>
where
    T: TryFrom<R, Error = StoreError>,
{
    rows.into_iter().map(T::try_from).collect()
}
