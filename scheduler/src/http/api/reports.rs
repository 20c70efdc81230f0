//! Daily run counts per app and job (XXL-JOB's dashboard report).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::body::ApiQuery;
use super::caller::Caller;
use super::error::ApiError;
use super::pages::{Page, join_key, page_request, split_key};
use super::{ApiState, parse_app_filter};

/// Query of `GET /api/reports`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ReportQuery {
    /// First day, `YYYY-MM-DD` (UTC). Default: 7 days ago.
    pub from: Option<String>,
    /// Last day, inclusive. Default: today.
    pub to: Option<String>,
    /// Only this app's jobs.
    pub app: Option<String>,
    /// The `next` of the previous page.
    pub after: Option<String>,
    /// Rows at most (default 100, at most 1 000).
    pub limit: Option<u32>,
}

/// One day of one job, as listed.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReportView {
    /// `YYYY-MM-DD` (UTC).
    pub day: String,
    /// The app.
    pub app: String,
    /// The job.
    pub job_id: i64,
    /// Runs not finished yet.
    pub running: i64,
    /// Runs that succeeded.
    pub succeeded: i64,
    /// Runs that failed.
    pub failed: i64,
}

/// Lists daily run counts per job (XXL-JOB's dashboard report), a page at a time.
///
/// Any signed-in caller, over the apps they may see (`app` naming another is a 403). Days
/// are UTC days, `YYYY-MM-DD` (400 otherwise), from `from` to `to`, both included; by day,
/// then app and job. The rows are rewritten every `monitors.report_interval` from the runs,
/// each counted once as it settles, so today's may trail the runs a little (`GET /api/overview` counts today at the
/// request), and they go with the runs after `retention.days`.
#[utoipa::path(
    get, path = "/api/reports", tag = "reports", params(ReportQuery),
    responses((status = 200, description = "A page of daily counts per job", body = Page<ReportView>)),
)]
pub(super) async fn list_reports(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ReportQuery>,
) -> Result<Json<Page<ReportView>>, ApiError> {
    use crate::monitors::reports::{DAY_MS, day_of};
    let parse_day = |text: &str| {
        chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .map(|day| {
                day.and_hms_opt(0, 0, 0)
                    .expect("midnight exists")
                    .and_utc()
                    .timestamp_millis()
            })
            .map_err(|_| ApiError::BadRequest(format!("day {text:?} is not YYYY-MM-DD")))
    };
    let today = day_of(state.clock.now_ms());
    let from = query
        .from
        .as_deref()
        .map(parse_day)
        .transpose()?
        .unwrap_or(today - 7 * DAY_MS);
    let to = query
        .to
        .as_deref()
        .map(parse_day)
        .transpose()?
        .unwrap_or(today);
    let apps = caller.visible_apps(parse_app_filter(query.app.as_deref())?)?;
    let page = page_request(query.after.as_deref(), query.limit, |text| {
        let parts = split_key(text, 3)?;
        Some((
            parts[0].parse().ok()?,
            parts[1].to_owned(),
            parts[2].parse().ok()?,
        ))
    })?;
    let reports = state
        .store
        .list_reports(from, to + DAY_MS, apps.as_deref(), &page)
        .await?;
    let page = Page::new(reports, page.limit, |last| {
        join_key(&[
            &last.day_ms.to_string(),
            &last.app,
            &last.job_id.to_string(),
        ])
    });
    Ok(Json(page.map(|report| {
        ReportView {
            day: chrono::DateTime::from_timestamp_millis(report.day_ms)
                .map(|day| day.format("%Y-%m-%d").to_string())
                .unwrap_or_default(),
            app: report.app,
            job_id: report.job_id,
            running: report.running,
            succeeded: report.succeeded,
            failed: report.failed,
        }
    })))
}
