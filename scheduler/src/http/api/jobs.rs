//! Jobs: create, read, edit, list (filtered by app, status, handler, author or text), start,
//! stop and delete. Each handler checks what the caller may do, then leaves what the change
//! means for the job's fires to the job operations ([`crate::operations::jobs`]).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kadence_schemas::JobId;
use serde::Deserialize;

use super::audit::AuditNote;
use super::body::{ApiJson, ApiPath, ApiQuery};
use super::caller::Caller;
use super::error::ApiError;
use super::error::ErrorBody;
use super::job_grants::{check_child_apps, require_script_grant};
use super::job_view::JobView;
use super::pages::{Page, page_request};
use super::{ApiState, bad_request, load_job_for, parse_app_filter};
use crate::domain::model::{Access, GlueVersion, JobStatus};
use crate::operations::jobs::{NewJobRequest, parse_new_job};
use crate::store::JobFilter;

/// Creates a job, STOPPED unless `start` is true.
///
/// Needs OPERATE on the job's app. A script job (`GLUE_*`) needs SCRIPTS there, since its
/// source runs on the app's executors; each child job named needs OPERATE in its own app,
/// and SCRIPTS for a script child, which then runs whenever this job succeeds. Optional
/// fields take XXL-JOB's defaults.
///
/// Refused with 400, naming the field: an app or a child job that does not exist, a field
/// over its limit, an alarm webhook to an internal address not in
/// `alarm.webhook_allowed_networks`, a cron expression that never fires again (30 February,
/// only past years: the job would wait for ever with nothing saying why). `start` schedules
/// the job as `POST /api/jobs/{id}/start` does.
#[utoipa::path(
    post, path = "/api/jobs", tag = "jobs", request_body = NewJobRequest,
    responses(
        (status = 201, description = "The new job", body = JobView),
    ),
)]
pub(super) async fn create_job(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiJson(request): ApiJson<NewJobRequest>,
) -> Result<(StatusCode, AuditNote, Json<JobView>), ApiError> {
    let start = request.start;
    let spec = parse_new_job(request)?;
    caller.require(&spec.app, Access::Operate)?;
    require_script_grant(&caller, &spec, None)?;
    check_child_apps(&state, &caller, &spec, None).await?;
    let job = state.jobs.create(&spec, start).await?;
    let view = JobView::from(&job);
    let shown = view.clone().redacted();
    let note = AuditNote::app(&job.spec.app).with(serde_json::json!({ "after": shown }));
    Ok((StatusCode::CREATED, note, Json(view)))
}

/// Shows one job: its definition, status and next fire.
///
/// Needs VIEW on the job's app. A job in an app the caller may not view answers 404, as one
/// that does not exist, so that what exists there is not revealed. To a caller who may only
/// view the app, the alarm webhook shows as its scheme, host and port only
/// (`https://hooks.slack.com/REDACTED`): receivers put their credential in the rest.
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

/// Edits a job: the fields given replace the job's, the others stay as they are.
///
/// Needs OPERATE on the job's app, and on the app it moves to. Changing a script job's type
/// or source, or moving it, needs SCRIPTS; a child job newly named needs what
/// `POST /api/jobs` asks of a child. The body has the shape of `POST /api/jobs`, every
/// field optional and checked as there; `id`, `status`, `last_fire_ms`, `next_fire_ms` and
/// `glue_updated_at_ms` cannot be set (400). Child jobs that would lead back to the job are
/// a 400 naming the cycle; so is a changed schedule that never fires again, and schedule
/// type NONE for a RUNNING job (stop it first).
///
/// A running job whose schedule changes has the fires planned under the old schedule
/// cancelled and replaced from `emit_lead + cancel_poll_interval` after now on (fires due
/// sooner may be on their way already, see [`crate::engine::cancellations`]): its next fire is the
/// new schedule's first after that, and the pre-read loop is woken to plan it. (XXL-JOB
/// counts from now + 5 s because its ring may still hold old fires; cancelling them makes
/// most of that gap unnecessary.)
#[utoipa::path(
    patch, path = "/api/jobs/{id}", tag = "jobs", params(("id" = JobId, Path, description = "The job's id")),
    request_body(content = Object, description = "The fields of a job definition to change (those of `NewJobRequest` but `start`); the others stay as they are"),
    responses(
        (status = 200, description = "The job as edited", body = JobView),
        (status = 404, description = "No such job", body = ErrorBody),
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
    require_script_grant(&caller, &spec, Some(&current.spec))?;
    check_child_apps(&state, &caller, &spec, Some(&current.spec)).await?;
    let edited = state.jobs.edit(&current, &spec).await?;
    let after = JobView::from(&edited);
    let before = JobView::from(&current).redacted();
    let note = AuditNote::app(&current.spec.app)
        .with(serde_json::json!({ "before": before, "after": after.clone().redacted() }));
    Ok((note, Json(after)))
}

/// Deletes a stopped job with everything kept about it (XXL-JOB's remove).
///
/// Needs OPERATE on the job's app. In one transaction: the job, its runs and their log
/// lines, script versions, daily report rows, counts of dropped runs and shadow results
/// (see [`Console::remove_job`](crate::store::Console::remove_job)). Refused with 409 while
/// the job is RUNNING (stop it first: a scheduled job would fire during the removal) and
/// while another job names it as a child (the parents are named: edit them first). Job ids
/// are never given out again (`AUTOINCREMENT` on SQLite, a sequence on PostgreSQL), so
/// links to the old id — audit entries, replay records — never point at another job.
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
    let runs = state.jobs.delete(&job).await?;
    let note = AuditNote::app(&job.spec.app).with(
        serde_json::json!({ "before": JobView::from(&job).redacted(), "runs_deleted": runs }),
    );
    Ok((note, StatusCode::NO_CONTENT))
}

/// Lists a job's saved script versions, newest first.
///
/// Needs VIEW on the job's app (404 for a job in an app the caller may not view). Each save
/// that changes a script job's source keeps a version with its remark, the newest 30
/// (XXL-JOB's count); a BEAN job has none. The whole list, not a page.
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

/// Lists the jobs the caller may see, a page at a time, narrowed by filters.
///
/// Any signed-in caller: an admin sees every app's jobs, a member those of the apps granted
/// to them (`app` naming another is a 403). By id; `next` is the last job's id. To a caller
/// who may only view an app, a job's alarm webhook shows as its scheme, host and port only.
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

/// Schedules a job: it fires on its schedule from now on.
///
/// Needs OPERATE on the job's app. As XXL-JOB's start, the first fire is the schedule's
/// first after now plus the pre-read window (`schedule.pre_read_window`, 5 s), so that the
/// scheduler never finds a brand-new job late. Starting a RUNNING job changes nothing. A
/// job of schedule type NONE runs only when triggered, and cannot be started (400); nor can
/// one whose schedule has no future fire.
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
    Ok((note, Json(JobView::from(&state.jobs.start(job).await?))))
}

/// Unschedules a job and cancels its planned fires.
///
/// Needs OPERATE on the job's app. The fires due from `emit_lead + cancel_poll_interval`
/// after now on are cancelled, on every node (sooner ones may be on their way to the broker
/// already); stopping a STOPPED job changes nothing. Runs already sent go on: kill them
/// with `POST /api/jobs/{id}/kill`. A stopped job can still be triggered by hand, and still
/// fires as another job's child.
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
    let note = AuditNote::app(&job.spec.app);
    Ok((note, Json(JobView::from(&state.jobs.stop(&job).await?))))
}
