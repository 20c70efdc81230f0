//! The console's dashboard in one request (`GET /api/overview?days=N`): the jobs the caller
//! may see by status, the live executors of their apps, today's runs by outcome, the runs of
//! each of the last N days, and the latest failures.
//!
//! Days are UTC days, as the daily reports count them (`/api/reports`): a day's counts can
//! only come from those rows, so a time-zone offset would give days the reports cannot
//! answer. The days before today are read from the report rows (summed over the caller's
//! apps; rewritten every `monitors.report_interval`); today is counted at the request, the
//! same way (the runs counted as they settled, plus the runs of the last minute or two), so
//! it is current and equals the last day of `days`. Every number is a `COUNT`/`SUM` in the
//! database over what a report row adds up, or the registry's memory for executors: the cost
//! does not grow with the day's runs. A member sees only the apps
//! granted to them; an admin sees every app.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::body::ApiQuery;
use super::caller::Caller;
use super::error::ApiError;
use super::{ApiState, bad_request};
use crate::clock::{DAY_MS, day_of};
use crate::domain::model::Access;
use crate::store::{JobCounts, PageRequest, RunCounts, RunFilter, RunOutcome, RunSummary};

/// Days of `days` when the request names none.
pub const DEFAULT_OVERVIEW_DAYS: u32 = 7;
/// Most days of `days`: the reports are kept `retention.days` (default 30) anyway.
pub const MAX_OVERVIEW_DAYS: u32 = 90;
/// Failures listed in `recent_failures`.
pub const RECENT_FAILURES: u32 = 10;

/// Query of `GET /api/overview`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct OverviewQuery {
    /// Days in `days`, today included: 1 to 90, default 7.
    pub days: Option<String>,
}

/// The dashboard's numbers, over the apps the caller may view.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Overview {
    /// The jobs, by status.
    pub jobs: JobCounts,
    /// The live executors (RUNNING, beating within the dead timeout), per the registry.
    pub executors: ExecutorCounts,
    /// The runs scheduled today (UTC), by outcome, counted now.
    pub today: DayCounts,
    /// The runs of each of the last `days` UTC days, oldest first; the last is today.
    pub days: Vec<DayCounts>,
    /// The latest failed runs (at most 10), newest first.
    pub recent_failures: Vec<RunSummary>,
}

/// Live executors.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExecutorCounts {
    /// Live executors in all.
    pub live: u64,
    /// Per app the registry knows (from beats), by name: its live executors (0 when every
    /// one left).
    pub apps: Vec<AppExecutors>,
}

/// One app's live executors.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AppExecutors {
    /// The app.
    pub app: String,
    /// Its live executors.
    pub live: u64,
}

/// One UTC day's runs by outcome.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DayCounts {
    /// The day, `YYYY-MM-DD` (UTC).
    pub day: String,
    /// Its midnight (UTC), ms since the epoch.
    pub day_ms: i64,
    /// Its runs, by outcome.
    #[serde(flatten)]
    pub runs: RunCounts,
}

impl DayCounts {
    fn new(day_ms: i64, runs: RunCounts) -> DayCounts {
        DayCounts {
            day: chrono::DateTime::from_timestamp_millis(day_ms)
                .map(|day| day.format("%Y-%m-%d").to_string())
                .unwrap_or_default(),
            day_ms,
            runs,
        }
    }
}

/// Sums up the caller's apps for the dashboard: jobs, executors, runs per day, failures.
///
/// Any signed-in caller, over the apps they may view (an admin: every app). The jobs by
/// status, the live executors per app, the runs of each of the last `days` UTC days (1 to
/// 90, default 7) by outcome, today last, and the 10 latest failed runs. The days before
/// today come from the daily report rows; today is counted from the runs at the request, so
/// it is current. Every number is a count in the database, or the registry's for executors:
/// the request costs the same however much there is to count.
#[utoipa::path(
    get, path = "/api/overview", tag = "overview", params(OverviewQuery),
    responses((status = 200, description = "Counts of jobs, executors and runs, and the latest failures", body = Overview)),
)]
pub(super) async fn overview(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<OverviewQuery>,
) -> Result<Json<Overview>, ApiError> {
    let days = parse_days(query.days.as_deref())?;
    let apps = caller.visible_apps(None)?;
    let scope = apps.as_deref();
    let now = state.clock.now_ms();
    let today_ms = day_of(now);
    let first_day = today_ms - i64::from(days - 1) * DAY_MS;
    let jobs = state.store.count_jobs(scope).await?;
    let today = state
        .store
        .count_runs(today_ms, today_ms + DAY_MS, scope)
        .await?;
    let reported = state.store.daily_totals(first_day, today_ms, scope).await?;
    let days = (0..i64::from(days))
        .map(|index| {
            let day = first_day + index * DAY_MS;
            let runs = if day == today_ms {
                today
            } else {
                reported
                    .iter()
                    .find(|(reported_day, _)| *reported_day == day)
                    .map(|(_, runs)| *runs)
                    .unwrap_or_default()
            };
            DayCounts::new(day, runs)
        })
        .collect();
    let failures = RunFilter {
        apps: apps.clone(),
        outcome: Some(RunOutcome::Failed),
        ..RunFilter::default()
    };
    let recent_failures = state
        .store
        .search_runs(&failures, &PageRequest::first(RECENT_FAILURES))
        .await?;
    Ok(Json(Overview {
        jobs,
        executors: executor_counts(&state, &caller, now),
        today: DayCounts::new(today_ms, today),
        days,
        recent_failures,
    }))
}

/// The registry's live executors of the apps the caller may view.
fn executor_counts(state: &ApiState, caller: &Caller, now_ms: i64) -> ExecutorCounts {
    let mut apps: Vec<AppExecutors> = state
        .registry
        .liveness(now_ms)
        .into_iter()
        .filter(|(app, _, _)| caller.user.may(app, Access::View))
        .map(|(app, live, _)| AppExecutors {
            app: app.as_str().to_owned(),
            live: live as u64,
        })
        .collect();
    apps.sort_by(|a, b| a.app.cmp(&b.app));
    ExecutorCounts {
        live: apps.iter().map(|app| app.live).sum(),
        apps,
    }
}

/// The `days` of the query: 1 to [`MAX_OVERVIEW_DAYS`], [`DEFAULT_OVERVIEW_DAYS`] when left out.
fn parse_days(text: Option<&str>) -> Result<u32, ApiError> {
    let Some(text) = text else {
        return Ok(DEFAULT_OVERVIEW_DAYS);
    };
    match text.trim().parse::<u32>() {
        Ok(days) if (1..=MAX_OVERVIEW_DAYS).contains(&days) => Ok(days),
        _ => Err(bad_request(format!(
            "days {text:?} is out of range: use a whole number from 1 to {MAX_OVERVIEW_DAYS}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_default_to_a_week_and_stay_in_range() {
        assert_eq!(parse_days(None).unwrap(), DEFAULT_OVERVIEW_DAYS);
        assert_eq!(parse_days(Some("90")).unwrap(), 90);
        for bad in ["0", "91", "-1", "week"] {
            let error = parse_days(Some(bad)).unwrap_err().to_string();
            assert!(error.starts_with("days "), "{error}");
        }
        let day = DayCounts::new(1_767_225_600_000, RunCounts::default());
        assert_eq!(day.day, "2026-01-01");
    }
}
