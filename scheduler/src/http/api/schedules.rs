//! Next fire times of a schedule, before it is saved.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::body::ApiQuery;
use super::caller::Caller;
use super::error::ApiError;
use super::{ApiState, bad_request};
use crate::domain::model::limits::{SCHEDULE_CONF, TIME_ZONE};
use crate::domain::schedule::{
    ScheduleSpec, format_in_zone, parse_time_zone, preview, preview_shortfall,
};

/// Query of `GET /api/schedules/preview`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct PreviewQuery {
    /// CRON (default), FIX_RATE, FIX_DELAY or NONE, as a job's.
    schedule_type: Option<String>,
    /// At most 255 characters, as a job's.
    #[param(max_length = 255)]
    schedule_conf: Option<String>,
    /// At most 64 characters, as a job's.
    #[param(max_length = 64)]
    time_zone: Option<String>,
    /// Fires strictly after this instant, ms since the epoch; default now.
    after_ms: Option<i64>,
    /// How many, 1–100; default 5.
    count: Option<usize>,
}

/// Answer of `GET /api/schedules/preview`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PreviewResponse {
    /// Fire times, ms since the epoch: `count` of them, fewer when the schedule runs out.
    pub fires_ms: Vec<i64>,
    /// The same instants in RFC 3339, in the schedule's time zone.
    pub fires: Vec<String>,
    /// No fire at all after `after_ms` (`fires` is empty): a NONE schedule, or a cron
    /// expression that never fires, which a job cannot be saved with.
    pub never_fires: bool,
    /// Why there are fewer fires than `count`, e.g. `"0 0 0 30 2 ?" never fires after …`;
    /// null when there are `count`.
    pub message: Option<String>,
}

/// Previews the next fire times of a schedule, before a job is saved with it.
///
/// Any signed-in caller: a preview reads nothing of any app. It takes a job's schedule
/// fields, with their limits (`schedule_type`, default CRON; `schedule_conf`; `time_zone`,
/// default UTC), and answers `count` fires (1 to 100, default 5) after `after_ms` (default
/// now), in ms and in RFC 3339 in the schedule's zone. A schedule that never fires answers
/// 200 with no fires, `never_fires` and a message saying why; an invalid one is a 400, as
/// saving it would be.
#[utoipa::path(
    get, path = "/api/schedules/preview", tag = "schedules", params(PreviewQuery),
    responses((status = 200, description = "The next fire times, or why there are fewer", body = PreviewResponse)),
)]
pub(super) async fn preview_schedule(
    State(state): State<Arc<ApiState>>,
    // Any signed-in user: a preview reads nothing of any app.
    _caller: Caller,
    ApiQuery(query): ApiQuery<PreviewQuery>,
) -> Result<Json<PreviewResponse>, ApiError> {
    // The limits a job's schedule is saved with: a form previews what it can save.
    SCHEDULE_CONF.check(query.schedule_conf.as_deref().unwrap_or_default())?;
    TIME_ZONE.check(query.time_zone.as_deref().unwrap_or_default())?;
    let schedule = ScheduleSpec::parse(
        query.schedule_type.as_deref().unwrap_or("CRON"),
        query.schedule_conf.as_deref().unwrap_or(""),
    )
    .map_err(bad_request)?;
    let zone = parse_time_zone(query.time_zone.as_deref().unwrap_or("UTC")).map_err(bad_request)?;
    let count = query.count.unwrap_or(5);
    if !(1..=100).contains(&count) {
        return Err(bad_request("count must be between 1 and 100"));
    }
    let after = query.after_ms.unwrap_or_else(|| state.clock.now_ms());
    let fires_ms = preview(&schedule, zone, after, count);
    let fires = fires_ms
        .iter()
        .map(|&ms| format_in_zone(ms, zone))
        .collect();
    Ok(Json(PreviewResponse {
        never_fires: fires_ms.is_empty(),
        message: preview_shortfall(&schedule, zone, after, &fires_ms, count),
        fires_ms,
        fires,
    }))
}
