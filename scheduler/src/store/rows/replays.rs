//! The `replays` and `shadow_results` tables, read as tuples: their conversion into the
//! model is [`replays`](crate::store::sql::replays)'s.

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
