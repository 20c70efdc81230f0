//! Runs: fire a job once now, kill its runs (all of a job's, or one), list them, and read a
//! run's log.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kadence_schemas::{AppName, ControlCommand, ControlRecord, JobId, TriggerId, TriggerType};
use serde::{Deserialize, Serialize};

use super::audit::AuditNote;
use super::body::{ApiPath, ApiQuery, OptionalJson};
use super::caller::Caller;
use super::error::ApiError;
use super::error::ErrorBody;
use super::pages::{Page, PageQuery, page_request};
use super::{ApiState, load_job_for, require_script_runner};
use crate::domain::model::Access;
use crate::domain::model::limits::KILL_REASON;
use crate::engine::intake::{FireNow, FireSource};
use crate::operations::jobs::check_params;
use crate::store::{RunFilter, RunSummary};

/// Body of `POST /api/jobs/{id}/trigger`.
#[derive(Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerRequest {
    /// Parameters for this run only; the job's own when absent.
    #[serde(default)]
    pub params: Option<String>,
    /// Partitions to route among instead of all of the app's (XXL-JOB's address list): the
    /// job's strategy chooses among these, and a SHARDING_BROADCAST job sends one shard to
    /// each. Each must exist.
    #[serde(default)]
    pub partitions: Option<Vec<i32>>,
}

/// Answer of `POST /api/jobs/{id}/trigger`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TriggerResponse {
    /// The new run's trigger id (the first shard's for a broadcast).
    pub trigger_id: TriggerId,
    /// The new run's log id (the first shard's for a broadcast).
    pub log_id: i64,
    /// Every run the trigger created: one, or one per shard for a broadcast.
    pub runs: Vec<TriggeredRun>,
}

/// One run created by a manual trigger.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TriggeredRun {
    /// Its trigger id.
    pub trigger_id: TriggerId,
    /// Its log id.
    pub log_id: i64,
    /// Shard index (0 unless broadcast).
    pub shard_index: i32,
    /// Shard total (1 unless broadcast).
    pub shard_total: i32,
}

/// Checks a trigger's partition override against the app's partition count.
pub(super) fn check_partitions(
    named: &[i32],
    app: &AppName,
    partitions: i32,
) -> Result<(), ApiError> {
    if named.is_empty() {
        return Err(ApiError::BadRequest(
            "partitions is empty: name at least one partition, or leave it out to use all"
                .to_owned(),
        ));
    }
    for (position, &partition) in named.iter().enumerate() {
        if !(0..partitions).contains(&partition) {
            return Err(ApiError::BadRequest(format!(
                "partition {partition} does not exist: app {app} has {partitions} partitions \
                 (0 to {})",
                partitions - 1
            )));
        }
        if named[..position].contains(&partition) {
            return Err(ApiError::BadRequest(format!(
                "partition {partition} is named twice"
            )));
        }
    }
    Ok(())
}

/// Fires a job once now, optionally with other params or only among some partitions.
///
/// Needs OPERATE on the job's app, and SCRIPTS for a script job (`GLUE_*`): the caller
/// chooses when its script runs and with what params. A STOPPED job may be triggered too;
/// the schedule is untouched. The run is written durably before the answer, with a fresh
/// trigger id and trigger type MANUAL, and goes out at once; a SHARDING_BROADCAST job makes
/// one run per partition, all in the answer. `partitions` replaces the app's partitions as
/// those the job's route strategy chooses among (XXL-JOB's address list): each must exist
/// and be named once (400). A trigger for an app with no live executor waits in its
/// partition until one comes.
#[utoipa::path(
    post, path = "/api/jobs/{id}/trigger", tag = "runs", params(("id" = JobId, Path, description = "The job's id")),
    request_body(content = Option<TriggerRequest>, description = "Optional: other params, or only some partitions"),
    responses(
        (status = 202, description = "Written durably; the trigger goes out at once", body = TriggerResponse),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
)]
pub(super) async fn trigger_job(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    // An empty body triggers with the job's own params.
    OptionalJson(request): OptionalJson<TriggerRequest>,
) -> Result<(StatusCode, AuditNote, Json<TriggerResponse>), ApiError> {
    let job = load_job_for(&state, &caller, &id, Access::Operate).await?;
    require_script_runner(&caller, &job)?;
    let params = request.params.unwrap_or_else(|| job.spec.params.clone());
    check_params(&params)?;
    if let Some(named) = &request.partitions {
        let partitions = state
            .partitions
            .partitions(&job.spec.app)
            .await
            .map_err(|reason| ApiError::Internal(anyhow::anyhow!(reason)))?;
        check_partitions(named, &job.spec.app, partitions)?;
    }
    let now = state.clock.now_ms();
    let manual = FireNow {
        trigger_id: TriggerId::fresh(job.id),
        trigger_type: TriggerType::Manual,
        params,
        partitions: request.partitions,
    };
    // Durable before the answer; if the wheel is gone (shutdown) a claim emits them later.
    let fires = state
        .intake
        .fire_now(FireSource::Manual, &job, manual, now)
        .await?;
    if fires.is_empty() {
        return Err(ApiError::Conflict(
            "a run with this trigger id exists already; trigger again".to_owned(),
        ));
    }
    let runs: Vec<TriggeredRun> = fires
        .iter()
        .map(|fire| TriggeredRun {
            trigger_id: fire.trigger_id.clone(),
            log_id: fire.log_id,
            shard_index: fire.shard_index,
            shard_total: fire.shard_total,
        })
        .collect();
    let response = TriggerResponse {
        trigger_id: runs[0].trigger_id.clone(),
        log_id: runs[0].log_id,
        runs,
    };
    let note = AuditNote::app(&job.spec.app).with(serde_json::json!({
        "trigger_id": &response.trigger_id,
        "log_id": response.log_id,
    }));
    Ok((StatusCode::ACCEPTED, note, Json(response)))
}

/// Body of `POST /api/jobs/{id}/kill`.
#[derive(Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KillRequest {
    /// Why; shown on the killed runs. At most 255 characters.
    #[serde(default)]
    #[schema(max_length = 255)]
    pub reason: Option<String>,
}

/// Stops a job's running and queued runs on every executor of its app.
///
/// Needs OPERATE on the job's app. A kill command goes on the control topic, and the answer
/// comes once it is there (202). Every run of the job an executor is running or holds
/// queued ends with a failure result saying it was killed, with `reason` if given. Triggers
/// of the job emitted before the kill that have not reached an executor yet are refused as
/// killed when they arrive (within the executor's `kill_memory`, 24 h by default). The
/// schedule is untouched: later fires run as usual (`POST /api/jobs/{id}/stop` ends them).
/// To kill one run, use `POST /api/runs/{log_id}/kill`.
#[utoipa::path(
    post, path = "/api/jobs/{id}/kill", tag = "runs", params(("id" = JobId, Path, description = "The job's id")),
    request_body(content = Option<KillRequest>, description = "Optional: a reason"),
    responses(
        (status = 202, description = "The kill command is on the control topic", body = KillResponse),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
)]
pub(super) async fn kill_job(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    OptionalJson(request): OptionalJson<KillRequest>,
) -> Result<(StatusCode, AuditNote, Json<KillResponse>), ApiError> {
    let job = load_job_for(&state, &caller, &id, Access::Operate).await?;
    KILL_REASON.check(request.reason.as_deref().unwrap_or_default())?;
    let command = ControlRecord {
        command: ControlCommand::Kill,
        app: job.spec.app.clone(),
        job_id: Some(job.id),
        trigger_id: None,
        reason: request.reason,
        requested_at_ms: state.clock.now_ms(),
    };
    state.control.send(&command).await.map_err(|error| {
        ApiError::Internal(anyhow::Error::new(error).context("publishing the kill command"))
    })?;
    let note = AuditNote::app(&job.spec.app).with(serde_json::json!({ "reason": &command.reason }));
    Ok((
        StatusCode::ACCEPTED,
        note,
        Json(KillResponse {
            job_id: job.id.get(),
            requested_at_ms: command.requested_at_ms,
        }),
    ))
}

/// Answer of `POST /api/jobs/{id}/kill`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct KillResponse {
    /// The job.
    pub job_id: i64,
    /// When the command was published, ms.
    pub requested_at_ms: i64,
}

/// Answer of `POST /api/runs/{log_id}/kill`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunKillResponse {
    /// The run.
    pub log_id: i64,
    /// Its trigger id, which the kill command names.
    pub trigger_id: TriggerId,
    /// When the command was published, ms.
    pub requested_at_ms: i64,
}

/// Stops one run: running, queued, or not yet at an executor.
///
/// Needs OPERATE on the app the run ran in (404 for a run in an app the caller may not
/// view). XXL-JOB's kill on a log row: a kill command naming the run's trigger id goes on
/// the control topic, and the answer comes once it is there (202). Running, the run is
/// cancelled; queued or held, it is dropped; not yet at an executor, it is refused when it
/// arrives. It ends with a failure result saying it was killed, with `reason` if given. A
/// run that has its result, or was cancelled, is a 409: there is nothing to kill.
#[utoipa::path(
    post, path = "/api/runs/{log_id}/kill", tag = "runs",
    params(("log_id" = i64, Path, description = "The run's log id")),
    request_body(content = Option<KillRequest>, description = "Optional: a reason"),
    responses(
        (status = 202, description = "The kill command is on the control topic", body = RunKillResponse),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run has finished", body = ErrorBody),
    ),
)]
pub(super) async fn kill_run(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(log_id): ApiPath<String>,
    OptionalJson(request): OptionalJson<KillRequest>,
) -> Result<(StatusCode, AuditNote, Json<RunKillResponse>), ApiError> {
    // A run is its app's, the app it ran in, which a replay or a job's move makes differ
    // from its job's app now.
    let RunSummary { run, app, .. } =
        load_run_for(&state, &caller, &log_id, Access::Operate).await?;
    KILL_REASON.check(request.reason.as_deref().unwrap_or_default())?;
    if matches!(
        run.state,
        crate::domain::model::RunState::Finished | crate::domain::model::RunState::Cancelled
    ) {
        return Err(ApiError::Conflict(format!(
            "run {} has finished: there is nothing to kill",
            run.log_id
        )));
    }
    let command = ControlRecord {
        command: ControlCommand::Kill,
        app: app.clone(),
        job_id: None,
        trigger_id: Some(run.trigger_id.clone()),
        reason: request.reason,
        requested_at_ms: state.clock.now_ms(),
    };
    state.control.send(&command).await.map_err(|error| {
        ApiError::Internal(anyhow::Error::new(error).context("publishing the kill command"))
    })?;
    let note = AuditNote::app(&app).with(serde_json::json!({
        "trigger_id": run.trigger_id.as_str(), "reason": &command.reason,
    }));
    Ok((
        StatusCode::ACCEPTED,
        note,
        Json(RunKillResponse {
            log_id: run.log_id,
            trigger_id: run.trigger_id,
            requested_at_ms: command.requested_at_ms,
        }),
    ))
}

/// The run whose log id is `log_id` (path text), with the app it ran in, if the caller may
/// do what `needed` allows there: 400 for a log id that is not a number, 404 for a run that
/// does not exist or is in an app the caller may not view, 403 for one they may view only.
pub(super) async fn load_run_for(
    state: &ApiState,
    caller: &Caller,
    log_id: &str,
    needed: Access,
) -> Result<RunSummary, ApiError> {
    let id: i64 = log_id
        .trim()
        .parse()
        .map_err(|_| ApiError::BadRequest(format!("log id {log_id:?} is not a number")))?;
    let not_found = || ApiError::NotFound(format!("run {id} does not exist"));
    let summary = state.store.run_summary(id).await?.ok_or_else(not_found)?;
    caller.require_visible(&summary.app, needed, not_found)?;
    Ok(summary)
}

/// Lists a job's runs, newest first, a page at a time.
///
/// Needs VIEW on the job's app (404 for a job in an app the caller may not view). Only the
/// runs in apps the caller may view are listed: a run belongs to the app it ran in, which a
/// replay into another app or the job's move makes differ from the job's app now. `next` is
/// a log id: the runs after it are older.
#[utoipa::path(
    get, path = "/api/jobs/{id}/runs", tag = "runs", params(("id" = JobId, Path, description = "The job's id"), PageQuery),
    responses(
        (status = 200, description = "A page of the job's runs in the apps the caller may view, newest first", body = Page<RunSummary>),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
)]
pub(super) async fn list_runs(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<Page<RunSummary>>, ApiError> {
    let job = load_job_for(&state, &caller, &id, Access::View).await?;
    let page = page_request(query.after.as_deref(), query.limit, |text| {
        text.parse::<i64>().ok()
    })?;
    let filter = RunFilter {
        apps: caller.visible_apps(None)?,
        job: Some(job.id),
        ..RunFilter::default()
    };
    let runs = state.store.search_runs(&filter, &page).await?;
    Ok(Json(Page::new(runs, page.limit, |summary| {
        summary.run.log_id.to_string()
    })))
}

/// Query of `GET /api/runs/{log_id}/log`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RunLogQuery {
    /// First line wanted (1-based). Default 1.
    pub from_line: Option<i64>,
    /// Lines at most. Default and maximum 1000.
    pub limit: Option<u32>,
}

/// A stretch of a run's log (XXL-JOB's `LogResult`).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunLogView {
    /// The run.
    pub log_id: i64,
    /// Number of the first line returned.
    pub from_line: i64,
    /// The lines, in order.
    pub lines: Vec<String>,
    /// The line to ask for next.
    pub next_line: i64,
    /// Whether the run has its result. Executors ship every line before the result, but lines
    /// and results are stored by separate consumers: the last lines of a finished run may take
    /// a moment longer to show.
    pub finished: bool,
    /// Which run of the trigger the lines are of: when it started on its executor, ms since
    /// the epoch (0 for lines written by executors that do not say; null while no line is
    /// stored). A trigger runs again when its first run is handed back in a rebalance or its
    /// executor dies; the log then shows the later run, from line 1. A reader following the
    /// log who sees this change reads again from line 1.
    pub run_started_at_ms: Option<i64>,
    /// Earlier runs of the trigger whose lines are stored but replaced by the run shown.
    pub earlier_runs: u32,
}

/// Reads a run's log lines from a line on, while it runs and after.
///
/// Needs VIEW on the app the run ran in (404 otherwise). Lines are numbered from 1
/// (`from_line` below 1 is a 400) and come at most `limit` (1 000) at a time; ask again
/// from `next_line` for the rest. A run keeps at most `logs.max_lines_per_run` lines. Poll
/// until `finished` and no more lines come: executors ship every line before the result,
/// but lines and results are stored by separate consumers, so the last lines of a finished
/// run may take a moment longer. A trigger run twice (handed back in a rebalance, or its
/// executor died) shows the run that started last; `run_started_at_ms` names it and
/// `earlier_runs` counts the runs it replaced.
#[utoipa::path(
    get, path = "/api/runs/{log_id}/log", tag = "runs",
    params(("log_id" = i64, Path, description = "The run's log id"), RunLogQuery),
    responses(
        (status = 200, description = "The run's log lines from a line on", body = RunLogView),
        (status = 404, description = "No such run", body = ErrorBody),
    ),
)]
pub(super) async fn read_run_log(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(log_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<RunLogQuery>,
) -> Result<Json<RunLogView>, ApiError> {
    let RunSummary { run, .. } = load_run_for(&state, &caller, &log_id, Access::View).await?;
    let log_id = run.log_id;
    let from_line = query.from_line.unwrap_or(1);
    if from_line < 1 {
        return Err(ApiError::BadRequest(
            "from_line starts at 1 (lines are numbered from 1)".to_owned(),
        ));
    }
    let limit = query.limit.unwrap_or(1_000).clamp(1, 1_000);
    let finished = matches!(
        run.state,
        crate::domain::model::RunState::Finished | crate::domain::model::RunState::Cancelled
    );
    let stored = state.store.read_log_lines(log_id, from_line, limit).await?;
    // Lines arrive in order per run, so what is stored is a prefix: no gaps to skip.
    let next_line = (stored.lines.last()).map_or(from_line, |(number, _)| number + 1);
    Ok(Json(RunLogView {
        log_id,
        from_line,
        lines: stored.lines.into_iter().map(|(_, line)| line).collect(),
        next_line,
        finished,
        run_started_at_ms: stored.run_started_at_ms,
        earlier_runs: stored.earlier_runs,
    }))
}
