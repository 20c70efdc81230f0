//! How the CLI shows times, lists and a job's status.

use chrono::{DateTime, SecondsFormat, Utc};

use crate::api::JobView;

pub(super) fn describe_status(job: &JobView) -> String {
    match job.next_fire_ms {
        Some(next) => format!("{}, next fire {}", job.status, format_ms(Some(next))),
        None => job.status.clone(),
    }
}

pub(super) fn format_ms(ms: Option<i64>) -> String {
    ms.and_then(DateTime::<Utc>::from_timestamp_millis)
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|| "-".to_owned())
}

/// Items joined with commas, or "-" for none.
pub(super) fn join_or_dash<T: std::fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "-".to_owned();
    }
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
