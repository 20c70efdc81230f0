//! Replays, backfills and the shadow diff report (see [`crate::operations::replay`]).
//!
//! A dry run needs VIEW on the app (it reads and counts); a replay or backfill needs OPERATE
//! on the app it reads and on the app its triggers go to. Each is recorded with its caller,
//! and the audit trail has the request too.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kadence_schemas::{AppName, JobId, TriggerType};
use serde::{Deserialize, Serialize};

use super::audit::AuditNote;
use super::body::{ApiJson, ApiPath, ApiQuery};
use super::caller::Caller;
use super::error::{ApiError, ErrorBody};
use super::pages::{Page, page_request};
use super::{ApiState, bad_request, load_job_for, parse_app_filter, require_script_runner};
use crate::domain::model::Access;
use crate::domain::model::limits::{
    REPLAY_JOB_IDS, REPLAY_OFFSETS, REPLAY_OUTCOMES, REPLAY_TRIGGER_TYPES,
};
use crate::operations::replay::backfill::BackfillRequest;
use crate::operations::replay::shadow::{ShadowReport, diff_report};
use crate::operations::replay::topic_range::{PartitionOffsets, RangeError, TopicRange};
use crate::operations::replay::{OperationSummary, ReplayError, ReplayFilter, ReplayRequest};
use crate::store::{Operation, RunOutcome};

/// Body of `POST /api/replays`: the app, a range (`offsets`, or `from_ms` and `to_ms`),
/// filters, and how to emit.
#[derive(Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayBody {
    /// The app whose trigger topic is read.
    pub app: String,
    /// Offsets `[from, to)` per partition; or give `from_ms` and `to_ms`.
    #[serde(default)]
    #[schema(max_items = 1024)]
    pub offsets: Option<Vec<PartitionOffsets>>,
    /// Start of a time range (triggers scheduled at or after), ms.
    #[serde(default)]
    pub from_ms: Option<i64>,
    /// End of a time range (scheduled before), ms.
    #[serde(default)]
    pub to_ms: Option<i64>,
    /// Only these jobs' triggers (at most 1 000 jobs).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub job_ids: Vec<JobId>,
    /// Only triggers of these types (default: every type but REPLAY).
    #[serde(default)]
    #[schema(max_items = 16)]
    pub trigger_types: Vec<TriggerType>,
    /// Only triggers whose runs went so: SUCCEEDED, FAILED, UNFINISHED, UNKNOWN.
    #[serde(default)]
    #[schema(max_items = 8)]
    pub outcomes: Vec<RunOutcome>,
    /// Send the replayed triggers to this app's executors instead (a staging group).
    #[serde(default)]
    pub target_app: Option<String>,
    /// Triggers per second (default `replay.rate_per_second`, 100).
    #[serde(default)]
    pub rate_per_second: Option<u32>,
    /// Replay triggers that an earlier replay replayed.
    #[serde(default)]
    pub force: bool,
    /// Count what would be replayed; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// Body of `POST /api/backfills`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillBody {
    /// The job.
    pub job_id: JobId,
    /// Start of the range (fires at or after), ms.
    pub from_ms: i64,
    /// End of the range (fires before), ms.
    pub to_ms: i64,
    /// Triggers per second (default `replay.rate_per_second`, 100).
    #[serde(default)]
    pub rate_per_second: Option<u32>,
    /// Count what would be backfilled; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// Query of `GET /api/replays`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ReplayQuery {
    /// Only replays and backfills that read or ran in this app.
    pub app: Option<String>,
    /// The `next` of the previous page.
    pub after: Option<String>,
    /// Entries at most (default 100, at most 1 000).
    pub limit: Option<u32>,
}

/// Query of `GET /api/shadow/report`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ShadowReportQuery {
    /// The app.
    pub app: String,
    /// Shadow runs started at or after, ms.
    pub from_ms: i64,
    /// Shadow runs started before, ms.
    pub to_ms: i64,
    /// Rows at most (default 1 000, at most 10 000).
    pub limit: Option<u32>,
}

impl From<ReplayError> for ApiError {
    fn from(error: ReplayError) -> Self {
        match error {
            ReplayError::Invalid(message) => ApiError::BadRequest(message),
            ReplayError::NotFound(message) => ApiError::NotFound(message),
            ReplayError::Forbidden(message) => ApiError::Forbidden(message),
            ReplayError::Conflict(message) => ApiError::Conflict(message),
            ReplayError::Range(RangeError::Invalid(message)) => ApiError::BadRequest(message),
            ReplayError::Range(retention @ RangeError::Retention { .. }) => {
                ApiError::Conflict(retention.to_string())
            }
            ReplayError::Range(broker @ RangeError::Broker { .. }) => {
                ApiError::Unavailable(broker.to_string())
            }
            ReplayError::Store(store) => store.into(),
        }
    }
}

/// Replays an app's past triggers, chosen by offsets or time and filters, or counts them.
///
/// Needs OPERATE on the app read and on `target_app` (VIEW on both for a dry run). Script
/// triggers need SCRIPTS on the app they go to, and are replayed with their job's current
/// script (409 when it is gone). The range is offsets per partition, or `from_ms` and
/// `to_ms`: one of them (400 otherwise); a range older than the topic's retention is a 409.
/// Records are verified against the cluster's signing keys first: one someone else produced
/// to the topic is never signed again by a replay.
///
/// Each trigger that passes the filters is emitted again as a new run: trigger type REPLAY,
/// id `{original}-p{replay id}`, `replay_of` naming the original, with the original's
/// params, shard and scheduled time, to the original's partition, at most `rate_per_second`
/// a second. Replayed runs are ordinary runs: retries, alarms and children apply. Triggers
/// an earlier replay replayed are a 409 unless `force`; more than `replay.max_triggers` is
/// a 400. The replay is recorded with its runs (`GET /api/replays/{id}`) and audited under
/// both apps; a dry run reads and counts the same, writes and emits nothing, and answers
/// 200.
#[utoipa::path(
    post, path = "/api/replays", tag = "replays", request_body = ReplayBody,
    responses(
        (status = 200, description = "A dry run: what would be replayed", body = OperationSummary),
        (status = 201, description = "The replay, recorded; its triggers are on their way", body = OperationSummary),
        (status = 403, description = "No OPERATE grant on the app or the target app, or script triggers selected without a SCRIPTS grant on the target app", body = ErrorBody),
        (status = 404, description = "The app or the target app does not exist", body = ErrorBody),
        (status = 409, description = "Triggers replayed before (ask again with force), a range older than the topic's retention, or script triggers of jobs whose script is gone", body = ErrorBody),
    ),
)]
pub(super) async fn replay(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiJson(body): ApiJson<ReplayBody>,
) -> Result<(StatusCode, AuditNote, Json<OperationSummary>), ApiError> {
    let app = AppName::parse(&body.app).map_err(bad_request)?;
    // The selection is recorded with the replay and listed with it: bounded, as every list.
    REPLAY_JOB_IDS.check_count(body.job_ids.len())?;
    REPLAY_TRIGGER_TYPES.check_count(body.trigger_types.len())?;
    REPLAY_OUTCOMES.check_count(body.outcomes.len())?;
    REPLAY_OFFSETS.check_count(body.offsets.as_ref().map_or(0, Vec::len))?;
    let target_app = body
        .target_app
        .as_deref()
        .map(AppName::parse)
        .transpose()
        .map_err(bad_request)?;
    let needed = if body.dry_run {
        Access::View
    } else {
        Access::Operate
    };
    caller.require(&app, needed)?;
    if let Some(target) = &target_app {
        caller.require(target, needed)?;
    }
    let destination = target_app.as_ref().unwrap_or(&app);
    let may_write_scripts = caller.user.may(destination, Access::Scripts);
    let range = match (body.offsets, body.from_ms, body.to_ms) {
        (Some(offsets), None, None) => TopicRange::Offsets(checked_offsets(offsets)?),
        (None, Some(from_ms), Some(to_ms)) => {
            checked_range(from_ms, to_ms)?;
            TopicRange::Time { from_ms, to_ms }
        }
        _ => {
            return Err(bad_request(
                "choose the range by offsets (offsets: [{partition, from, to}]) or by time (from_ms and to_ms), one of them",
            ));
        }
    };
    let summary = state
        .replayer
        .replay(ReplayRequest {
            app: app.clone(),
            range,
            filter: ReplayFilter {
                job_ids: body.job_ids,
                trigger_types: body.trigger_types,
                outcomes: body.outcomes,
            },
            target_app: target_app.clone(),
            rate_per_second: body.rate_per_second,
            force: body.force,
            dry_run: body.dry_run,
            requested_by: caller.user.name.clone(),
            may_write_scripts,
        })
        .await?;
    let (status, note, summary) = answer(&app, summary);
    // Filed under both apps: the target's trail shows what was run there, and from where.
    let note = match target_app.filter(|target| *target != app) {
        Some(target) => note.also_for(target),
        None => note,
    };
    Ok((status, note, summary))
}

/// Emits the fires a job's schedule had in a past range that never fired, or counts them.
///
/// Needs OPERATE on the job's app (VIEW for a dry run; 404 for a job in an app the caller
/// may not view), and SCRIPTS for a script job: the caller chooses when its script runs.
/// The fires of the job's schedule, as it is defined now, in `[from_ms, to_ms)` are listed;
/// those whose trigger id is in the trigger topic or has a run are left out, and the others
/// are emitted under the trigger id the schedule gives them, with trigger type BACKFILL and
/// their original scheduled time, at most `rate_per_second` a second. Their ids being the
/// schedule's, no fire can run twice however often a range is backfilled.
///
/// Refused with 400: a range that does not end a while before now (fires due just before
/// may still be on their way to the broker), a FIX_DELAY or NONE schedule (no fire times of
/// its own), more fires than `replay.max_triggers`. The backfill is recorded with its runs
/// (`GET /api/replays`); a dry run reads and counts the same, writes and emits nothing, and
/// answers 200.
#[utoipa::path(
    post, path = "/api/backfills", tag = "replays", request_body = BackfillBody,
    responses(
        (status = 200, description = "A dry run: the fires that would be backfilled", body = OperationSummary),
        (status = 201, description = "The backfill, recorded; its fires are on their way", body = OperationSummary),
        (status = 404, description = "The job does not exist", body = ErrorBody),
        (status = 409, description = "The range is older than the trigger topic's retention", body = ErrorBody),
    ),
)]
pub(super) async fn backfill(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiJson(body): ApiJson<BackfillBody>,
) -> Result<(StatusCode, AuditNote, Json<OperationSummary>), ApiError> {
    checked_range(body.from_ms, body.to_ms)?;
    let needed = if body.dry_run {
        Access::View
    } else {
        Access::Operate
    };
    let job = load_job_for(&state, &caller, &body.job_id.to_string(), needed).await?;
    if !body.dry_run {
        require_script_runner(&caller, &job)?;
    }
    let summary = state
        .replayer
        .backfill(BackfillRequest {
            job_id: job.id,
            from_ms: body.from_ms,
            to_ms: body.to_ms,
            rate_per_second: body.rate_per_second,
            dry_run: body.dry_run,
            requested_by: caller.user.name.clone(),
        })
        .await?;
    Ok(answer(&job.spec.app, summary))
}

/// 200 for a dry run, 201 for a recorded operation, with an audit note naming it.
fn answer(
    app: &AppName,
    summary: OperationSummary,
) -> (StatusCode, AuditNote, Json<OperationSummary>) {
    let status = if summary.dry_run {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let note = AuditNote::app(app).with(serde_json::json!({
        "dry_run": summary.dry_run,
        "operation": summary.operation.as_ref().map(|operation| operation.id),
        "triggers": summary.triggers,
    }));
    (status, note, Json(summary))
}

/// Latest instant a range may name: the end of year 9999, UTC.
const MAX_TIME_MS: i64 = 253_402_300_799_999;

/// A time range `[from_ms, to_ms)` that is not empty and lies between the epoch and
/// [`MAX_TIME_MS`].
fn checked_range(from_ms: i64, to_ms: i64) -> Result<(), ApiError> {
    if !(0..=MAX_TIME_MS).contains(&from_ms) || !(0..=MAX_TIME_MS).contains(&to_ms) {
        return Err(bad_request(format!(
            "from_ms {from_ms} and to_ms {to_ms} must lie between 0 (1970) and {MAX_TIME_MS} \
             (9999), in ms since the epoch"
        )));
    }
    if from_ms >= to_ms {
        return Err(bad_request(format!(
            "from_ms {from_ms} must be before to_ms {to_ms}"
        )));
    }
    Ok(())
}

/// Offsets with a partition at most once and `from` not after `to`.
fn checked_offsets(offsets: Vec<PartitionOffsets>) -> Result<Vec<PartitionOffsets>, ApiError> {
    if offsets.is_empty() {
        return Err(bad_request(
            "offsets is empty: name at least one partition's offsets",
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for bound in &offsets {
        if bound.from < 0 || bound.from > bound.to {
            return Err(bad_request(format!(
                "offsets of partition {}: from {} to {} is not a range (0 <= from <= to; to is exclusive)",
                bound.partition, bound.from, bound.to
            )));
        }
        if !seen.insert(bound.partition) {
            return Err(bad_request(format!(
                "partition {} is named twice",
                bound.partition
            )));
        }
    }
    Ok(offsets)
}

/// Lists replays and backfills, newest first, a page at a time.
///
/// Any signed-in caller: an operation shows to a member who may view the app it read or the
/// app its triggers went to (`app` naming an app they may not view is a 403). Each says who
/// asked, for what range and filters, and how many triggers it emitted.
#[utoipa::path(
    get, path = "/api/replays", tag = "replays", params(ReplayQuery),
    responses((status = 200, description = "A page of replays and backfills, newest first", body = Page<Operation>)),
)]
pub(super) async fn list_replays(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ReplayQuery>,
) -> Result<Json<Page<Operation>>, ApiError> {
    let apps = caller.visible_apps(parse_app_filter(query.app.as_deref())?)?;
    let page = page_request(query.after.as_deref(), query.limit, |text| {
        text.parse::<i64>().ok()
    })?;
    let operations = state.store.list_operations(apps.as_deref(), &page).await?;
    Ok(Json(Page::new(operations, page.limit, |operation| {
        operation.id.to_string()
    })))
}

/// Shows one replay or backfill: who asked, for what range and filters, how many triggers.
///
/// Needs VIEW on the app it read or the app its triggers went to; otherwise 404, as for one
/// that does not exist. A replay's runs carry its id: their trigger ids end in `-p{id}`.
#[utoipa::path(
    get, path = "/api/replays/{id}", tag = "replays", params(("id" = i64, Path, description = "The replay's or backfill's id")),
    responses(
        (status = 200, description = "The replay or backfill", body = Operation),
        (status = 404, description = "No such replay", body = ErrorBody),
    ),
)]
pub(super) async fn get_replay(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Operation>, ApiError> {
    let not_found = || ApiError::NotFound(format!("replay {id} does not exist"));
    let number: i64 = id
        .parse()
        .map_err(|_| bad_request(format!("invalid replay id {id:?}: use a number")))?;
    let operation = state
        .store
        .get_operation(number)
        .await?
        .ok_or_else(not_found)?;
    // Hidden, not forbidden, from who may see neither app.
    let visible = caller.require(&operation.request.app, Access::View).is_ok()
        || caller
            .require(&operation.request.target_app, Access::View)
            .is_ok();
    if !visible {
        return Err(not_found());
    }
    Ok(Json(operation))
}

/// Compares an app's shadow runs with production's results, disagreements first.
///
/// Needs VIEW on the app. Shadow executors run a candidate handler on a copy of the app's
/// triggers, in a group of their own, and publish to `{prefix}.shadow-results`; their
/// results complete, retry and alarm nothing. The report compares the shadow runs started
/// in `[from_ms, to_ms)` with production's results for the same trigger ids, at most
/// `limit` rows (default 1 000, at most 10 000).
#[utoipa::path(
    get, path = "/api/shadow/report", tag = "replays", params(ShadowReportQuery),
    responses((status = 200, description = "Shadow runs beside production's results by trigger id, disagreements first", body = ShadowReport)),
)]
pub(super) async fn shadow_report(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ShadowReportQuery>,
) -> Result<Json<ShadowReport>, ApiError> {
    let app = AppName::parse(&query.app).map_err(bad_request)?;
    caller.require(&app, Access::View)?;
    checked_range(query.from_ms, query.to_ms)?;
    let limit = match query.limit {
        None => 1_000,
        Some(limit @ 1..=10_000) => limit,
        Some(limit) => {
            return Err(bad_request(format!(
                "limit must be between 1 and 10000, not {limit}"
            )));
        }
    };
    let report = diff_report(
        state.store.as_ref(),
        &app,
        (query.from_ms, query.to_ms),
        limit,
    )
    .await?;
    Ok(Json(report))
}
