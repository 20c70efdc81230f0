//! The `replays` and `shadow_results` tables, read as tuples: their conversion into the
//! model is [`replays`](crate::store::sql::replays)'s.

use crate::store::NewOperation;
use crate::store::values::{IntoSqlValue as _, SqlValue};

/// What a new replay or backfill fills of its `replays` row, each column with its value
/// (`selection`: its selection as JSON text); it has fired no trigger yet.
pub(crate) fn operation_values<'a>(
    operation: &'a NewOperation,
    selection: &'a str,
) -> [(&'static str, SqlValue<'a>); 12] {
    [
        ("kind", operation.kind.as_str().into_sql_value()),
        ("app", operation.app.as_str().into_sql_value()),
        ("target_app", operation.target_app.as_str().into_sql_value()),
        (
            "job_id",
            operation.job_id.map(|job| job.get()).into_sql_value(),
        ),
        ("selection", selection.into_sql_value()),
        ("from_ms", operation.from_ms.into_sql_value()),
        ("to_ms", operation.to_ms.into_sql_value()),
        (
            "rate_per_second",
            i64::from(operation.rate_per_second).into_sql_value(),
        ),
        ("forced", i64::from(operation.forced).into_sql_value()),
        ("triggers", 0_i64.into_sql_value()),
        (
            "requested_by",
            operation.requested_by.as_str().into_sql_value(),
        ),
        (
            "requested_at_ms",
            operation.requested_at_ms.into_sql_value(),
        ),
    ]
}

/// A row of `replays`, its columns in `OPERATION_COLUMNS` order.
pub type OperationRow = (
    i64,
    String,
    String,
    String,
    Option<i64>,
    String,
    Option<i64>,
    Option<i64>,
    i64,
    i64,
    i64,
    String,
    i64,
);

/// A shadow result beside its production run's result, as [`Replays::shadow_pairs`](crate::store::Replays::shadow_pairs) reads
/// them.
pub type PairRow = (
    String,
    String,
    i64,
    String,
    i64,
    Option<String>,
    i64,
    i64,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<i64>,
);
