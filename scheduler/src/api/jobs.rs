//! Jobs: create, read, edit, list (filtered by app, status, handler, author or text), start,
//! stop (a stop or a schedule edit cancels the planned fires, see [`crate::cancellations`])
//! and delete.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kadence_schemas::{GlueType, JobId};
use serde::Deserialize;

use super::audit::AuditNote;
use super::body::{ApiJson, ApiPath, ApiQuery};
use super::caller::Caller;
use super::error::ApiError;
use super::error::ErrorBody;
use super::job_spec::{NewJobRequest, check_children, check_webhook_target, parse_new_job};
use super::job_view::JobView;
use super::pages::{Page, page_request};
use super::{ApiState, bad_request, load_job_for, parse_app_filter, require_script_runner};
use crate::model::{Access, GlueVersion, Job, JobStatus, NewJob};
use crate::schedule::{ScheduleSpec, preview_shortfall};
use crate::store::{JobChange, JobFilter, JobRemoval};

/// `POST /api/jobs`. A cron expression that never fires again (30 February, only past
/// years) is refused with 400: the job would wait for ever with nothing saying why.
#[utoipa::path(
    post, path = "/api/jobs", tag = "jobs", request_body = NewJobRequest,
    responses(
        (status = 201, description = "The new job", body = JobView),
        (status = 404, description = "Its app or a child job does not exist", body = ErrorBody),
    ),
)]
pub(super) async fn create_job(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiJson(request): ApiJson<NewJobRequest>,
) -> Result<(StatusCode, AuditNote, Json<JobView>), ApiError> {
    let start = request.start;
    let spec = parse_new_job(request)?;
    require_a_fire(&spec, state.clock.now_ms())?;
    caller.require(&spec.app, Access::Operate)?;
    check_webhook_target(&state, &spec)?;
    require_script_grant(&caller, &spec, None)?;
    check_child_apps(&state, &caller, &spec, None).await?;
    check_children(&state, None, &spec.child_job_ids).await?;
    let mut job = state.store.create_job(&spec, state.clock.now_ms()).await?;
    if start {
        job = start_job_now(&state, job).await?;
    }
    let view = JobView::from(&job);
    let shown = view.clone().redacted();
    let note = AuditNote::app(&job.spec.app).with(serde_json::json!({ "after": shown }));
    Ok((StatusCode::CREATED, note, Json(view)))
}

#[utoipa::path(
    get, path = "/api/jobs/{id}", tag = "jobs", params(("id" = JobId, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The job", body = JobView),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
)]
pub(super) async fn get_job(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<JobView>, ApiError> {
    let job = load_job_for(&state, &caller, &id, Access::View).await?;
    Ok(Json(JobView::shown_to(&job, &caller)))
}

/// `PATCH /api/jobs/{id}`: the fields given replace the job's (the body has the shape of
/// `POST /api/jobs`, every field optional). A running job whose schedule changes has the
/// fires planned under the old schedule cancelled and replaced from `emit_lead +
/// cancel_poll_interval` after now on (fires due sooner may be on their way already, see
/// [`crate::cancellations`]): its next fire is the new schedule's first after that, and the
/// pre-read loop is woken to plan it. (XXL-JOB counts from now + 5 s because its ring may
/// still hold old fires; cancelling them makes most of that gap unnecessary.)
#[utoipa::path(
    patch, path = "/api/jobs/{id}", tag = "jobs", params(("id" = JobId, Path, description = "The job's id")),
    request_body(content = Object, description = "The fields of a job definition to change (those of `NewJobRequest` but `start`); the others stay as they are"),
    responses(
        (status = 200, description = "The job as edited", body = JobView),
        (status = 404, description = "No such job, or a child job named does not exist", body = ErrorBody),
    ),
)]
pub(super) async fn update_job(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(patch): ApiJson<serde_json::Map<String, serde_json::Value>>,
) -> Result<(AuditNote, Json<JobView>), ApiError> {
    let current = load_job_for(&state, &caller, &id, Access::Operate).await?;
    let mut merged = match serde_json::to_value(JobView::from(&current)) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => {
            return Err(ApiError::Internal(anyhow::anyhow!(
                "job view is not an object"
            )));
        }
    };
    for read_only in [
        "id",
        "status",
        "last_fire_ms",
        "next_fire_ms",
        "glue_updated_at_ms",
    ] {
        if patch.contains_key(read_only) {
            return Err(bad_request(format!(
                "{read_only} cannot be set; use start and stop"
            )));
        }
        merged.remove(read_only);
    }
    merged.extend(patch);
    let request: NewJobRequest = serde_json::from_value(serde_json::Value::Object(merged))
        .map_err(|error| bad_request(format!("invalid request body: {error}")))?;
    let spec = parse_new_job(request)?;
    // Moving a job to another app needs OPERATE there too.
    caller.require(&spec.app, Access::Operate)?;
    check_webhook_target(&state, &spec)?;
    require_script_grant(&caller, &spec, Some(&current.spec))?;
    check_child_apps(&state, &caller, &spec, Some(&current.spec)).await?;
    check_children(&state, Some(current.id), &spec.child_job_ids).await?;
    let schedule_changed =
        spec.schedule != current.spec.schedule || spec.time_zone != current.spec.time_zone;
    let now = state.clock.now_ms();
    if schedule_changed {
        require_a_fire(&spec, now)?;
    }
    let (status, next_fire_ms) = match (current.status, schedule_changed) {
        (JobStatus::Running, true) => {
            if spec.schedule == ScheduleSpec::None {
                return Err(bad_request(
                    "a running job cannot get schedule type NONE; stop it first",
                ));
            }
            let next = spec
                .schedule
                .next_after(now + state.change_settle_ms, spec.time_zone)
                .ok_or_else(|| bad_request("the new schedule has no future fire"))?;
            (JobStatus::Running, Some(next))
        }
        (status, _) => (status, current.next_fire_ms),
    };
    let replan = (schedule_changed && current.status == JobStatus::Running)
        .then_some(now + state.change_settle_ms);
    let _in_flight = replan.map(|from_ms| state.cancelled.provisional(current.id, from_ms));
    let change = state
        .store
        .update_job(current.id, &spec, status, next_fire_ms, replan, now)
        .await?;
    if replan.is_some() {
        state.pre_read_waker.notify_one();
    }
    let after = JobView::from(&apply_change(&state, change));
    let before = JobView::from(&current).redacted();
    let note = AuditNote::app(&current.spec.app)
        .with(serde_json::json!({ "before": before, "after": after.clone().redacted() }));
    Ok((note, Json(after)))
}

/// `DELETE /api/jobs/{id}` (XXL-JOB's remove): deletes a stopped job with everything kept
/// about it, in one transaction — its runs and their log lines, script versions, daily
/// report rows, counts of dropped runs and shadow results (see
/// [`Console::remove_job`](crate::store::Console::remove_job)). Refused with 409 while the
/// job is RUNNING (stop it first: a scheduled job would fire during the removal) and while
/// another job names it as a child (the parents are named: edit them first). Job ids are
/// never given out again (`AUTOINCREMENT` on SQLite, a sequence on PostgreSQL), so links to
/// the old id — audit entries, replay records — never point at another job.
///
/// Runs not finished yet are deleted too: a result that still comes for one is
/// dead-lettered as a result for an unknown trigger id. Kill them first
/// (`POST /api/jobs/{id}/kill`) if they must not run.
#[utoipa::path(
    delete, path = "/api/jobs/{id}", tag = "jobs", params(("id" = JobId, Path, description = "The job's id")),
    responses(
        (status = 204, description = "The job and everything kept about it are deleted"),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job is RUNNING, or another job names it as a child", body = ErrorBody),
    ),
)]
pub(super) async fn delete_job(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<(AuditNote, StatusCode), ApiError> {
    let job = load_job_for(&state, &caller, &id, Access::Operate).await?;
    let stop_first = || {
        ApiError::Conflict(format!(
            "job {} is RUNNING: stop it first (POST /api/jobs/{}/stop), then delete it",
            job.id, job.id
        ))
    };
    if job.status == JobStatus::Running {
        return Err(stop_first());
    }
    match state.store.remove_job(job.id).await? {
        JobRemoval::Removed { runs } => {
            let note = AuditNote::app(&job.spec.app)
                .with(serde_json::json!({ "before": JobView::from(&job).redacted(), "runs_deleted": runs }));
            Ok((note, StatusCode::NO_CONTENT))
        }
        // Started since it was read.
        JobRemoval::Running => Err(stop_first()),
        JobRemoval::ChildOf(parents) => {
            let names: Vec<String> = parents.iter().map(ToString::to_string).collect();
            Err(ApiError::Conflict(format!(
                "job {} is a child of job{} {}: remove it from their child_job_ids first",
                job.id,
                if parents.len() == 1 { "" } else { "s" },
                names.join(", ")
            )))
        }
    }
}

#[utoipa::path(
    get, path = "/api/jobs/{id}/glue", tag = "jobs", params(("id" = JobId, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The saved script versions, newest first", body = Vec<GlueVersion>),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
)]
pub(super) async fn list_glue_versions(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Vec<GlueVersion>>, ApiError> {
    let job = load_job_for(&state, &caller, &id, Access::View).await?;
    Ok(Json(state.store.glue_versions(job.id).await?))
}

/// Query of `GET /api/jobs`. Every filter given narrows the list; an empty one is left out.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct JobQuery {
    /// Only this app's jobs.
    pub app: Option<String>,
    /// Only RUNNING or only STOPPED jobs.
    pub status: Option<String>,
    /// Only jobs with exactly this handler name.
    pub handler: Option<String>,
    /// Only jobs with exactly this author.
    pub author: Option<String>,
    /// Only jobs whose description (`name`) or handler contains this text, ignoring case
    /// (`%` and `_` are plain characters), or whose id it is.
    pub q: Option<String>,
    /// The `next` of the previous page.
    pub after: Option<String>,
    /// Jobs at most (default 100, at most 1 000).
    pub limit: Option<u32>,
}

#[utoipa::path(
    get, path = "/api/jobs", tag = "jobs", params(JobQuery),
    responses((status = 200, description = "A page of the jobs the caller may see", body = Page<JobView>)),
)]
pub(super) async fn list_jobs(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<JobQuery>,
) -> Result<Json<Page<JobView>>, ApiError> {
    let filter = JobFilter {
        apps: caller.visible_apps(parse_app_filter(query.app.as_deref())?)?,
        status: query
            .status
            .as_deref()
            .map(str::parse::<JobStatus>)
            .transpose()
            .map_err(bad_request)?,
        handler: text_filter("handler", query.handler)?,
        author: text_filter("author", query.author)?,
        text: text_filter("q", query.q)?,
    };
    let page = page_request(query.after.as_deref(), query.limit, |text| {
        text.parse::<JobId>().ok()
    })?;
    let jobs = state.store.list_jobs(&filter, &page).await?;
    let views = jobs
        .iter()
        .map(|job| JobView::shown_to(job, &caller))
        .collect();
    Ok(Json(Page::new(views, page.limit, |job: &JobView| {
        job.id.to_string()
    })))
}

/// A text filter of a query: `None` when absent or blank (a form's empty field), refused
/// naming `field` when it holds a NUL character (no stored text can, and PostgreSQL refuses
/// to compare with one).
fn text_filter(field: &str, value: Option<String>) -> Result<Option<String>, ApiError> {
    match value {
        Some(text) if text.contains('\0') => Err(bad_request(format!(
            "{field} contains a NUL character (\\u0000), which no stored text holds; remove it"
        ))),
        Some(text) if !text.trim().is_empty() => Ok(Some(text)),
        _ => Ok(None),
    }
}

/// Refuses a cron expression with no fire after `now_ms`. Checked when a schedule is saved,
/// not when it is read back, so a job whose last year has passed still loads and lists.
pub(super) fn require_a_fire(spec: &NewJob, now_ms: i64) -> Result<(), ApiError> {
    let ScheduleSpec::Cron(_) = spec.schedule else {
        return Ok(());
    };
    match spec.schedule.next_after(now_ms, spec.time_zone) {
        Some(_) => Ok(()),
        None => Err(ApiError::at("schedule_conf")(bad_request(
            preview_shortfall(&spec.schedule, spec.time_zone, now_ms, &[], 1)
                .unwrap_or_else(|| "the schedule never fires".to_owned()),
        ))),
    }
}

/// Makes a stop's or an edit's cancellation known to this node's dispatch at once (other
/// nodes read it from the store within `schedule.cancel_poll_interval`).
pub(super) fn apply_change(state: &ApiState, change: JobChange) -> Job {
    if let Some(cancelled) = change.cancelled {
        state.cancelled.record(cancelled);
    }
    change.job
}

/// XXL-JOB's start: the first fire is the first one after now + the pre-read window, so the
/// pre-read loop never sees a brand-new job as already late.
pub(super) async fn start_job_now(state: &ApiState, job: Job) -> Result<Job, ApiError> {
    if job.spec.schedule == ScheduleSpec::None {
        return Err(bad_request(format!(
            "job {} has schedule type NONE: it runs only when triggered, so it cannot be started",
            job.id
        )));
    }
    let now = state.clock.now_ms();
    let next = job
        .spec
        .schedule
        .next_after(now + state.pre_read_window_ms, job.spec.time_zone)
        .ok_or_else(|| bad_request(format!("job {}'s schedule has no future fire", job.id)))?;
    let change = state
        .store
        .set_job_status(job.id, JobStatus::Running, Some(next), now, now)
        .await?;
    Ok(apply_change(state, change))
}

#[utoipa::path(
    post, path = "/api/jobs/{id}/start", tag = "jobs", params(("id" = JobId, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The job, scheduled", body = JobView),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
)]
pub(super) async fn start_job(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<(AuditNote, Json<JobView>), ApiError> {
    let job = load_job_for(&state, &caller, &id, Access::Operate).await?;
    let note = AuditNote::app(&job.spec.app);
    if job.status == JobStatus::Running {
        return Ok((note, Json(JobView::from(&job))));
    }
    Ok((
        note,
        Json(JobView::from(&start_job_now(&state, job).await?)),
    ))
}

#[utoipa::path(
    post, path = "/api/jobs/{id}/stop", tag = "jobs", params(("id" = JobId, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The job, unscheduled; its planned fires are cancelled", body = JobView),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
)]
pub(super) async fn stop_job(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<(AuditNote, Json<JobView>), ApiError> {
    let job = load_job_for(&state, &caller, &id, Access::Operate).await?;
    let (id, note) = (job.id, AuditNote::app(&job.spec.app));
    let now = state.clock.now_ms();
    let cancel_from = now + state.change_settle_ms;
    let _in_flight = state.cancelled.provisional(id, cancel_from);
    let change = state
        .store
        .set_job_status(id, JobStatus::Stopped, None, cancel_from, now)
        .await?;
    Ok((note, Json(JobView::from(&apply_change(&state, change)))))
}

/// Script source runs as shell (or Python, …) on every executor of the app, so writing it
/// needs the SCRIPTS grant (or admin): on a new script job, and on an edit that changes a
/// script job's type or source. Other edits of a script job need only OPERATE.
fn require_script_grant(
    caller: &Caller,
    spec: &NewJob,
    current: Option<&NewJob>,
) -> Result<(), ApiError> {
    if spec.glue.glue_type == GlueType::Bean {
        return Ok(());
    }
    let unchanged = current.is_some_and(|current| {
        current.glue.glue_type == spec.glue.glue_type
            && current.glue.source == spec.glue.source
            && current.app == spec.app
    });
    if unchanged {
        return Ok(());
    }
    caller.require(&spec.app, Access::Scripts)
}

/// A job may name only children the caller may operate: a child fires with the parent,
/// so naming one in another team's app would be a way to run their jobs. Naming a script
/// job a child runs its script whenever the parent succeeds, so it needs what a manual
/// trigger of it needs ([`require_script_runner`]). Children the job named before (`current`)
/// are not checked again: an edit of other fields keeps them.
async fn check_child_apps(
    state: &ApiState,
    caller: &Caller,
    spec: &NewJob,
    current: Option<&NewJob>,
) -> Result<(), ApiError> {
    let named_before =
        |child: &JobId| current.is_some_and(|current| current.child_job_ids.contains(child));
    for child in spec
        .child_job_ids
        .iter()
        .filter(|child| !named_before(child))
    {
        // A child that does not exist is refused by `check_children`, with the reason.
        if let Some(job) = state.store.get_job(*child).await? {
            caller
                .require(&job.spec.app, Access::Operate)
                .map_err(|_| {
                    ApiError::Forbidden(format!(
                        "child job {child} is in app {}, where user {} may not operate jobs",
                        job.spec.app, caller.user.name
                    ))
                })?;
            require_script_runner(caller, &job)?;
        }
    }
    Ok(())
}
