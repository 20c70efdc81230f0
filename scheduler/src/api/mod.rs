//! The HTTP API: what the `kadence` CLI (and later the console) talks to.
//!
//! | method | path | does |
//! |---|---|---|
//! | GET | `/health` | liveness |
//! | GET, POST | `/api/apps` | list / create apps (creates `{prefix}.triggers.{app}`) |
//! | GET, POST | `/api/jobs` (`?app=&status=`) | list / create jobs |
//! | GET, PATCH | `/api/jobs/{id}` | one job / edit it (fields not given stay as they are) |
//! | GET | `/api/jobs/{id}/glue` | the job's saved script versions, newest first |
//! | POST | `/api/jobs/{id}/start`, `/stop` | schedule or unschedule a job (a stop cancels its planned fires) |
//! | POST | `/api/jobs/{id}/trigger` | fire once now, optionally with other params and only among named `partitions` |
//! | POST | `/api/jobs/{id}/kill` | stop the job's running and queued runs on every executor |
//! | GET | `/api/jobs/{id}/runs` | newest runs with codes and messages |
//! | GET | `/api/schedules/preview` | next fire times of a schedule, before saving it |
//! | GET | `/api/runs/{log_id}/log` (`?from_line=&limit=`) | a run's log lines from a line on |
//! | GET | `/api/executors` (`?app=`) | the registry: partitions, handlers, running jobs, liveness |
//! | GET | `/api/reports` (`?from=&to=&app=`) | daily running / succeeded / failed counts per job |
//!
//! Every `GET` list answers a page, `{"items": [...], "next": …}`, of at most `limit` items
//! (default 100, at most 1 000); pass `next` as `after` for the following page
//! ([`pages`]).
//!
//! Bad input gets a 4xx with `{"error": "…"}` saying what to fix: 400 for an invalid value
//! (including a NUL character in any text), 413 for a body over 512 KiB ([`body`]). A busy
//! node answers 503 with `Retry-After` — too many requests at once, a request past its
//! timeout, no database connection free in time ([`limits`]); the scheduling loops have their
//! own connections, so API load never delays a fire. An internal failure is logged with its
//! cause and answered with a bare 500.

mod body;
mod limits;
mod pages;

pub use limits::{ApiLimits, BODY_LIMIT_BYTES};
pub use pages::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Page};

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kadence_schemas::{
    AppName, BlockStrategy, ControlCommand, ControlRecord, GlueType, JobId, Topics, TriggerId,
    TriggerType,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, mpsc};

use self::body::{ApiJson, OptionalJson};
use self::pages::{join_key, page_request, split_key};
use crate::cancellations::CancelledFires;
use crate::clock::Clock;
use crate::dispatch::PartitionDirectory;
use crate::kafka::{ControlChannel, TopicAdmin, TopicError};
use crate::model::{
    App, ChildTriggerMode, ExecutorEntry, Glue, GlueVersion, Job, JobStatus, NewJob, PendingFire,
    RetryBackoff, RetryPolicy, RouteStrategy, Run,
};
use crate::registry::Registry;
use crate::schedule::{MisfireStrategy, ScheduleSpec, parse_time_zone};
use crate::store::{JobChange, JobFilter, NewFire, Store, StoreError};

/// Largest `params` accepted, in bytes: params travel in every trigger record.
pub const MAX_PARAMS_BYTES: usize = 64 * 1024;
/// Most partitions an app may have.
pub const MAX_PARTITIONS: i32 = 1024;

/// What the handlers share.
pub struct ApiState {
    /// Persistence.
    pub store: Arc<dyn Store>,
    /// Creates trigger topics for new apps.
    pub admin: Arc<TopicAdmin>,
    /// Topic names.
    pub topics: Topics,
    /// Partition counts, updated when an app is created.
    pub partitions: Arc<PartitionDirectory>,
    /// Where manual fires go to be emitted.
    pub wheel: mpsc::Sender<PendingFire>,
    /// Fires this node must not emit; a stop or an edit served here records its
    /// cancellation at once (other nodes read it from the store).
    pub cancelled: Arc<CancelledFires>,
    /// Wakes this node's pre-read loop (after an edit gave a job a new schedule).
    pub pre_read_waker: Arc<Notify>,
    /// Commands to executors (kill).
    pub control: ControlChannel,
    /// Live executors (for listing).
    pub registry: Arc<Registry>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// This node (owner of manual fires).
    pub node_id: String,
    /// Lease of manual fires, ms.
    pub lease_ms: i64,
    /// Pre-read window, ms: a started job's first fire is computed from now + window.
    pub pre_read_window_ms: i64,
    /// How long after a stop or a schedule edit it takes effect, ms: `emit_lead +
    /// cancel_poll_interval` (see [`crate::cancellations`]).
    pub change_settle_ms: i64,
}

/// The API's routes over `state`, within `limits`.
pub fn router(state: Arc<ApiState>, limits: ApiLimits) -> Router {
    let api = Router::new()
        .route("/api/apps", get(list_apps).post(create_app))
        .route("/api/jobs", get(list_jobs).post(create_job))
        .route("/api/jobs/{id}", get(get_job).patch(update_job))
        .route("/api/jobs/{id}/glue", get(list_glue_versions))
        .route("/api/jobs/{id}/start", post(start_job))
        .route("/api/jobs/{id}/stop", post(stop_job))
        .route("/api/jobs/{id}/trigger", post(trigger_job))
        .route("/api/jobs/{id}/kill", post(kill_job))
        .route("/api/jobs/{id}/runs", get(list_runs))
        .route("/api/schedules/preview", get(preview_schedule))
        .route("/api/executors", get(list_executors))
        .route("/api/runs/{log_id}/log", get(read_run_log))
        .route("/api/reports", get(list_reports))
        .layer(DefaultBodyLimit::max(limits.body_limit));
    limits::with_load_limits(api, limits)
        .route("/health", get(|| async { "ok" }))
        .with_state(state)
}

/// An API failure.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request is invalid; the message says how.
    #[error("{0}")]
    BadRequest(String),
    /// The thing asked for does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with what exists.
    #[error("{0}")]
    Conflict(String),
    /// The request body is over the limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The node is too busy for this request now; the client should retry after a moment.
    #[error("service busy: {0}; retry in a moment")]
    Unavailable(String),
    /// Something failed inside; logged, not echoed.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

#[derive(Serialize, Deserialize)]
struct ErrorBody {
    error: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unavailable(reason) => {
                tracing::debug!(%reason, "API request shed");
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal(cause) => {
                tracing::error!(error = format!("{cause:#}"), "API request failed");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let mut response = (
            status,
            Json(ErrorBody {
                error: self.to_string(),
            }),
        )
            .into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::UnknownApp(_) => ApiError::BadRequest(error.to_string()),
            StoreError::JobNotFound(_) => ApiError::NotFound(error.to_string()),
            StoreError::AppExists(_) => ApiError::Conflict(error.to_string()),
            busy if busy.is_busy() => ApiError::Unavailable("the database is busy".to_owned()),
            other => ApiError::Internal(other.into()),
        }
    }
}

fn bad_request(error: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(error.to_string())
}

fn parse_job_id(raw: &str) -> Result<JobId, ApiError> {
    raw.parse::<JobId>()
        .map_err(|_| bad_request(format!("invalid job id {raw:?}: use a positive integer")))
}

async fn load_job(state: &ApiState, id: JobId) -> Result<Job, ApiError> {
    state
        .store
        .get_job(id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("job {id} does not exist")))
}

/// Body of `POST /api/apps`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewAppRequest {
    /// App name: 1–64 of `A-Z a-z 0-9 _ -`.
    pub name: String,
    /// Partitions of its trigger topic, 1–1024: the most executors that share its triggers.
    pub partitions: i32,
    /// Human-readable title.
    #[serde(default)]
    pub title: String,
}

async fn create_app(
    State(state): State<Arc<ApiState>>,
    ApiJson(request): ApiJson<NewAppRequest>,
) -> Result<(StatusCode, Json<App>), ApiError> {
    let name = AppName::parse(&request.name).map_err(bad_request)?;
    if !(1..=MAX_PARTITIONS).contains(&request.partitions) {
        return Err(bad_request(format!(
            "partitions must be between 1 and {MAX_PARTITIONS}, not {}",
            request.partitions
        )));
    }
    if state.store.get_app(&name).await?.is_some() {
        return Err(ApiError::Conflict(format!("app {name} exists already")));
    }
    // Topic first: an app must never exist without its topic.
    state
        .admin
        .ensure_topic(&state.topics.triggers(&name), request.partitions, &[])
        .await
        .map_err(|error| match error {
            TopicError::PartitionMismatch { .. } => ApiError::Conflict(error.to_string()),
            other => ApiError::Internal(other.into()),
        })?;
    let app = App {
        name: name.clone(),
        title: request.title,
        partitions: request.partitions,
        created_at_ms: state.clock.now_ms(),
    };
    state.store.create_app(&app).await?;
    state.partitions.remember(name, app.partitions);
    Ok((StatusCode::CREATED, Json(app)))
}

/// Query of the list endpoints without filters: a page.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// The `next` of the previous page.
    pub after: Option<String>,
    /// Items at most (default 100, at most 1 000).
    pub limit: Option<u32>,
}

async fn list_apps(
    State(state): State<Arc<ApiState>>,
    Query(query): Query<PageQuery>,
) -> Result<Json<Page<App>>, ApiError> {
    let page = page_request(query.after.as_deref(), query.limit, |text| {
        Some(text.to_owned())
    })?;
    let apps = state.store.list_apps_page(&page).await?;
    Ok(Json(Page::new(apps, page.limit, |app| {
        app.name.to_string()
    })))
}

/// Body of `POST /api/jobs`. Optional fields take XXL-JOB's defaults.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewJobRequest {
    /// The executor app.
    pub app: String,
    /// Display name; defaults to the handler name.
    #[serde(default)]
    pub name: Option<String>,
    /// CRON (default), FIX_RATE, FIX_DELAY or NONE.
    #[serde(default)]
    pub schedule_type: Option<String>,
    /// Cron expression, or seconds for FIX_RATE and FIX_DELAY.
    #[serde(default)]
    pub schedule_conf: Option<String>,
    /// IANA time zone; default UTC.
    #[serde(default)]
    pub time_zone: Option<String>,
    /// DO_NOTHING (default) or FIRE_ONCE_NOW.
    #[serde(default)]
    pub misfire_strategy: Option<String>,
    /// FIRST (default), LAST or RANDOM.
    #[serde(default)]
    pub route_strategy: Option<String>,
    /// Handler name on the executors.
    pub handler: String,
    /// Parameters for the handler, at most 64 KiB.
    #[serde(default)]
    pub params: Option<String>,
    /// SERIAL_EXECUTION (default), DISCARD_LATER, COVER_EARLY or CONCURRENT.
    #[serde(default)]
    pub block_strategy: Option<String>,
    /// Run timeout in seconds; 0 or absent for none.
    #[serde(default)]
    pub timeout_seconds: Option<u32>,
    /// Owner, for people.
    #[serde(default)]
    pub author: Option<String>,
    /// Where failure alarms are e-mailed.
    #[serde(default)]
    pub alarm_emails: Option<Vec<String>>,
    /// Where failure alarms are POSTed (http or https URL).
    #[serde(default)]
    pub alarm_webhook: Option<String>,
    /// Retries of a failed run; default 0.
    #[serde(default)]
    pub retry_count: Option<u32>,
    /// NONE (default), FIXED or EXPONENTIAL.
    #[serde(default)]
    pub retry_backoff: Option<String>,
    /// FIXED: the delay; EXPONENTIAL: the first delay. Seconds.
    #[serde(default)]
    pub retry_backoff_seconds: Option<u32>,
    /// EXPONENTIAL: the largest delay, seconds.
    #[serde(default)]
    pub retry_backoff_cap_seconds: Option<u32>,
    /// BEAN (default) or GLUE_SHELL, GLUE_PYTHON, GLUE_NODEJS, GLUE_PHP, GLUE_POWERSHELL.
    #[serde(default)]
    pub glue_type: Option<String>,
    /// The script, for GLUE_* types (at most 256 KiB).
    #[serde(default)]
    pub glue_source: Option<String>,
    /// Note on this version of the script.
    #[serde(default)]
    pub glue_remark: Option<String>,
    /// Jobs fired when this one succeeds.
    #[serde(default)]
    pub child_job_ids: Option<Vec<i64>>,
    /// For a sharded job: EACH_SHARD (default, XXL-JOB) fires the children once per succeeded
    /// shard; ALL_SHARDS once per fire, when every shard succeeded.
    #[serde(default)]
    pub child_trigger_mode: Option<String>,
    /// Start the job right away.
    #[serde(default)]
    pub start: bool,
}

/// Largest script accepted, in bytes: scripts travel in every trigger record.
pub const MAX_GLUE_SOURCE_BYTES: usize = 256 * 1024;

fn parse_or<T: std::str::FromStr>(value: Option<&str>, default: T) -> Result<T, ApiError>
where
    T::Err: std::fmt::Display,
{
    value.map_or(Ok(default), |raw| raw.parse::<T>().map_err(bad_request))
}

fn parse_new_job(request: NewJobRequest) -> Result<NewJob, ApiError> {
    let app = AppName::parse(&request.app).map_err(bad_request)?;
    let handler = request.handler.trim().to_owned();
    if handler.is_empty() || handler.len() > 200 {
        return Err(bad_request("handler must be 1 to 200 characters"));
    }
    let params = request.params.unwrap_or_default();
    check_params(&params)?;
    let name = request.name.unwrap_or_else(|| handler.clone());
    if name.len() > 255 {
        return Err(bad_request("name must be at most 255 characters"));
    }
    let schedule = ScheduleSpec::parse(
        request.schedule_type.as_deref().unwrap_or("CRON"),
        request.schedule_conf.as_deref().unwrap_or(""),
    )
    .map_err(bad_request)?;
    Ok(NewJob {
        app,
        name,
        schedule,
        time_zone: parse_time_zone(request.time_zone.as_deref().unwrap_or("UTC"))
            .map_err(bad_request)?,
        misfire_strategy: parse_or(
            request.misfire_strategy.as_deref(),
            MisfireStrategy::DoNothing,
        )?,
        route_strategy: parse_or(request.route_strategy.as_deref(), RouteStrategy::First)?,
        handler,
        params,
        block_strategy: parse_or(request.block_strategy.as_deref(), BlockStrategy::default())?,
        timeout_ms: i64::from(request.timeout_seconds.unwrap_or(0)) * 1000,
        author: request.author.unwrap_or_default(),
        alarm_emails: parse_emails(request.alarm_emails.unwrap_or_default())?,
        alarm_webhook: request.alarm_webhook.map(parse_webhook).transpose()?,
        retry: RetryPolicy {
            count: request.retry_count.unwrap_or(0),
            backoff: RetryBackoff::from_parts(
                request.retry_backoff.as_deref().unwrap_or("NONE"),
                i64::from(request.retry_backoff_seconds.unwrap_or(0)) * 1000,
                i64::from(request.retry_backoff_cap_seconds.unwrap_or(0)) * 1000,
            )
            .map_err(bad_request)?,
        },
        glue: parse_glue(
            request.glue_type.as_deref(),
            request.glue_source,
            request.glue_remark.unwrap_or_default(),
        )?,
        child_job_ids: request
            .child_job_ids
            .unwrap_or_default()
            .into_iter()
            .map(|id| JobId::new(id).map_err(bad_request))
            .collect::<Result<_, _>>()?,
        child_trigger_mode: parse_or(
            request.child_trigger_mode.as_deref(),
            ChildTriggerMode::EachShard,
        )?,
    })
}

fn parse_emails(emails: Vec<String>) -> Result<Vec<String>, ApiError> {
    emails
        .into_iter()
        .map(|email| {
            let email = email.trim().to_owned();
            let valid = email.len() <= 254
                && email
                    .split_once('@')
                    .is_some_and(|(user, domain)| !user.is_empty() && domain.contains('.'))
                && !email.contains(|c: char| c.is_whitespace() || c == ',');
            if valid {
                Ok(email)
            } else {
                Err(bad_request(format!(
                    "invalid alarm e-mail address {email:?}"
                )))
            }
        })
        .collect()
}

fn parse_webhook(url: String) -> Result<String, ApiError> {
    let url = url.trim().to_owned();
    if (url.starts_with("http://") || url.starts_with("https://"))
        && url.len() <= 2048
        && !url.contains(char::is_whitespace)
    {
        Ok(url)
    } else {
        Err(bad_request(format!(
            "invalid alarm webhook {url:?}: give an http:// or https:// URL"
        )))
    }
}

fn parse_glue(
    glue_type: Option<&str>,
    source: Option<String>,
    remark: String,
) -> Result<Glue, ApiError> {
    let glue_type: GlueType = parse_or(glue_type, GlueType::Bean)?;
    let source = source.filter(|source| !source.trim().is_empty());
    match (glue_type, &source) {
        (GlueType::Bean, Some(_)) => {
            return Err(bad_request(
                "glue_source is only for GLUE_* types; BEAN runs the named handler",
            ));
        }
        (GlueType::Bean, None) => {}
        (_, None) => {
            return Err(bad_request(format!(
                "glue type {glue_type} needs a glue_source (the script)"
            )));
        }
        (_, Some(script)) if script.len() > MAX_GLUE_SOURCE_BYTES => {
            return Err(bad_request(format!(
                "glue_source is {} bytes; the limit is {MAX_GLUE_SOURCE_BYTES} bytes",
                script.len()
            )));
        }
        _ => {}
    }
    Ok(Glue {
        glue_type,
        source,
        remark,
    })
}

/// Child jobs must exist, and following child links from `job` must never lead back to it.
async fn check_children(
    state: &ApiState,
    job: Option<JobId>,
    children: &[JobId],
) -> Result<(), ApiError> {
    if children.is_empty() {
        return Ok(());
    }
    // Only the jobs reachable from the children are read, level by level.
    let mut links: std::collections::HashMap<JobId, Vec<JobId>> = std::collections::HashMap::new();
    let mut asked: std::collections::HashSet<JobId> = children.iter().copied().collect();
    let mut frontier: Vec<JobId> = asked.iter().copied().collect();
    while !frontier.is_empty() {
        let found = state.store.child_links(&frontier).await?;
        frontier = found
            .iter()
            .flat_map(|(_, next)| next.iter().copied())
            .filter(|id| asked.insert(*id))
            .collect();
        links.extend(found);
    }
    for child in children {
        if !links.contains_key(child) {
            return Err(bad_request(format!("child job {child} does not exist")));
        }
    }
    let Some(job) = job else {
        return Ok(()); // a new job has no parents yet, so its children cannot reach it
    };
    // Depth-first from each child; the path is reported when it returns to `job`.
    let mut stack: Vec<Vec<JobId>> = children.iter().map(|child| vec![job, *child]).collect();
    let mut seen = std::collections::HashSet::new();
    while let Some(path) = stack.pop() {
        let last = *path.last().expect("paths are never empty");
        if last == job {
            let shown: Vec<String> = path.iter().map(ToString::to_string).collect();
            return Err(bad_request(format!(
                "child jobs would form a cycle: {}",
                shown.join(" → ")
            )));
        }
        if !seen.insert(last) {
            continue;
        }
        for next in links.get(&last).map(Vec::as_slice).unwrap_or_default() {
            let mut longer = path.clone();
            longer.push(*next);
            stack.push(longer);
        }
    }
    Ok(())
}

fn check_params(params: &str) -> Result<(), ApiError> {
    if params.len() > MAX_PARAMS_BYTES {
        return Err(bad_request(format!(
            "params are {} bytes; the limit is {MAX_PARAMS_BYTES} bytes (they travel in every \
             trigger record: pass a reference to large data instead)",
            params.len()
        )));
    }
    Ok(())
}

async fn create_job(
    State(state): State<Arc<ApiState>>,
    ApiJson(request): ApiJson<NewJobRequest>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    let start = request.start;
    let spec = parse_new_job(request)?;
    check_children(&state, None, &spec.child_job_ids).await?;
    let mut job = state.store.create_job(&spec, state.clock.now_ms()).await?;
    if start {
        job = start_job_now(&state, job).await?;
    }
    Ok((StatusCode::CREATED, Json(JobView::from(&job))))
}

async fn get_job(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    let job = load_job(&state, parse_job_id(&id)?).await?;
    Ok(Json(JobView::from(&job)))
}

/// `PATCH /api/jobs/{id}`: the fields given replace the job's (the body has the shape of
/// `POST /api/jobs`, every field optional). A running job whose schedule changes has the
/// fires planned under the old schedule cancelled and replaced from `emit_lead +
/// cancel_poll_interval` after now on (fires due sooner may be on their way already, see
/// [`crate::cancellations`]): its next fire is the new schedule's first after that, and the
/// pre-read loop is woken to plan it. (XXL-JOB counts from now + 5 s because its ring may
/// still hold old fires; cancelling them makes most of that gap unnecessary.)
async fn update_job(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    ApiJson(patch): ApiJson<serde_json::Map<String, serde_json::Value>>,
) -> Result<Json<JobView>, ApiError> {
    let current = load_job(&state, parse_job_id(&id)?).await?;
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
    check_children(&state, Some(current.id), &spec.child_job_ids).await?;
    let schedule_changed =
        spec.schedule != current.spec.schedule || spec.time_zone != current.spec.time_zone;
    let now = state.clock.now_ms();
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
    let change = state
        .store
        .update_job(current.id, &spec, status, next_fire_ms, replan, now)
        .await?;
    if replan.is_some() {
        state.pre_read_waker.notify_one();
    }
    Ok(Json(JobView::from(&apply_change(&state, change))))
}

async fn list_glue_versions(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<Json<Vec<GlueVersion>>, ApiError> {
    let job = load_job(&state, parse_job_id(&id)?).await?;
    Ok(Json(state.store.glue_versions(job.id).await?))
}

/// Query of `GET /api/jobs`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobQuery {
    /// Only this app's jobs.
    pub app: Option<String>,
    /// Only RUNNING or only STOPPED jobs.
    pub status: Option<String>,
    /// The `next` of the previous page.
    pub after: Option<String>,
    /// Jobs at most (default 100, at most 1 000).
    pub limit: Option<u32>,
}

async fn list_jobs(
    State(state): State<Arc<ApiState>>,
    Query(query): Query<JobQuery>,
) -> Result<Json<Page<JobView>>, ApiError> {
    let filter = JobFilter {
        app: parse_app_filter(query.app.as_deref())?,
        status: query
            .status
            .as_deref()
            .map(str::parse::<JobStatus>)
            .transpose()
            .map_err(bad_request)?,
    };
    let page = page_request(query.after.as_deref(), query.limit, |text| {
        text.parse::<JobId>().ok()
    })?;
    let jobs = state.store.list_jobs(&filter, &page).await?;
    let views = jobs.iter().map(JobView::from).collect();
    Ok(Json(Page::new(views, page.limit, |job: &JobView| {
        job.id.to_string()
    })))
}

/// Makes a stop's or an edit's cancellation known to this node's dispatch at once (other
/// nodes read it from the store within `schedule.cancel_poll_interval`).
fn apply_change(state: &ApiState, change: JobChange) -> Job {
    if let Some(cancelled) = change.cancelled {
        state.cancelled.record(cancelled);
    }
    change.job
}

/// XXL-JOB's start: the first fire is the first one after now + the pre-read window, so the
/// pre-read loop never sees a brand-new job as already late.
async fn start_job_now(state: &ApiState, job: Job) -> Result<Job, ApiError> {
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

async fn start_job(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    let job = load_job(&state, parse_job_id(&id)?).await?;
    if job.status == JobStatus::Running {
        return Ok(Json(JobView::from(&job)));
    }
    Ok(Json(JobView::from(&start_job_now(&state, job).await?)))
}

async fn stop_job(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    let id = parse_job_id(&id)?;
    let now = state.clock.now_ms();
    let change = state
        .store
        .set_job_status(
            id,
            JobStatus::Stopped,
            None,
            now + state.change_settle_ms,
            now,
        )
        .await?;
    Ok(Json(JobView::from(&apply_change(&state, change))))
}

/// Body of `POST /api/jobs/{id}/trigger`.
#[derive(Debug, Default, Serialize, Deserialize)]
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
#[derive(Debug, Serialize, Deserialize)]
pub struct TriggerResponse {
    /// The new run's trigger id (the first shard's for a broadcast).
    pub trigger_id: TriggerId,
    /// The new run's log id (the first shard's for a broadcast).
    pub log_id: i64,
    /// Every run the trigger created: one, or one per shard for a broadcast.
    pub runs: Vec<TriggeredRun>,
}

/// One run created by a manual trigger.
#[derive(Debug, Serialize, Deserialize)]
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
fn check_partitions(named: &[i32], app: &AppName, partitions: i32) -> Result<(), ApiError> {
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

async fn trigger_job(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    // An empty body triggers with the job's own params.
    OptionalJson(request): OptionalJson<TriggerRequest>,
) -> Result<(StatusCode, Json<TriggerResponse>), ApiError> {
    let job = load_job(&state, parse_job_id(&id)?).await?;
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
    let fires = state
        .store
        .insert_fire(
            &job,
            &NewFire {
                trigger_id: TriggerId::fresh(job.id),
                trigger_type: TriggerType::Manual,
                params,
                scheduled_at_ms: now,
                node_id: state.node_id.clone(),
                lease_until_ms: now + state.lease_ms,
                partitions: request.partitions,
            },
        )
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
    // The fires are durable now; if the wheel is gone (shutdown) a claim emits them later.
    for fire in fires {
        let _ = state.wheel.send(fire).await;
    }
    Ok((StatusCode::ACCEPTED, Json(response)))
}

/// Query of `GET /api/runs/{log_id}/log`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunLogQuery {
    /// First line wanted (1-based). Default 1.
    pub from_line: Option<i64>,
    /// Lines at most. Default and maximum 1000.
    pub limit: Option<u32>,
}

/// A stretch of a run's log (XXL-JOB's `LogResult`).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
}

/// Lines of a run's log from `from_line` on, while it runs and after.
async fn read_run_log(
    State(state): State<Arc<ApiState>>,
    Path(log_id): Path<String>,
    Query(query): Query<RunLogQuery>,
) -> Result<Json<RunLogView>, ApiError> {
    let log_id: i64 = log_id
        .parse()
        .map_err(|_| ApiError::BadRequest(format!("log id {log_id:?} is not a number")))?;
    let from_line = query.from_line.unwrap_or(1);
    if from_line < 1 {
        return Err(ApiError::BadRequest(
            "from_line starts at 1 (lines are numbered from 1)".to_owned(),
        ));
    }
    let limit = query.limit.unwrap_or(1_000).clamp(1, 1_000);
    let run = state
        .store
        .get_run(log_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("run {log_id} does not exist")))?;
    let finished = matches!(
        run.state,
        crate::model::RunState::Finished | crate::model::RunState::Cancelled
    );
    let lines = state.store.read_log_lines(log_id, from_line, limit).await?;
    // Lines arrive in order per run, so what is stored is a prefix: no gaps to skip.
    let next_line = lines.last().map_or(from_line, |(number, _)| number + 1);
    Ok(Json(RunLogView {
        log_id,
        from_line,
        lines: lines.into_iter().map(|(_, line)| line).collect(),
        next_line,
        finished,
    }))
}

/// An optional `?app=` filter.
fn parse_app_filter(app: Option<&str>) -> Result<Option<AppName>, ApiError> {
    app.map(AppName::parse)
        .transpose()
        .map_err(|error| ApiError::BadRequest(error.to_string()))
}

/// Query of `GET /api/reports`.
#[derive(Debug, Default, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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

/// Daily run counts per app and job (XXL-JOB's dashboard report).
async fn list_reports(
    State(state): State<Arc<ApiState>>,
    Query(query): Query<ReportQuery>,
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
    let app = parse_app_filter(query.app.as_deref())?;
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
        .list_reports(from, to + DAY_MS, app.as_ref(), &page)
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

/// Query of `GET /api/executors`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorQuery {
    /// Only this app's executors.
    pub app: Option<String>,
    /// The `next` of the previous page.
    pub after: Option<String>,
    /// Executors at most (default 100, at most 1 000).
    pub limit: Option<u32>,
}

/// An executor as listed: its latest beat, and whether it takes triggers now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecutorView {
    /// The registry entry.
    #[serde(flatten)]
    pub entry: ExecutorEntry,
    /// RUNNING with a beat younger than the dead timeout.
    pub live: bool,
}

/// The registry: every executor seen (dead ones until they are forgotten), with its
/// partitions, handlers and running jobs.
async fn list_executors(
    State(state): State<Arc<ApiState>>,
    Query(query): Query<ExecutorQuery>,
) -> Result<Json<Page<ExecutorView>>, ApiError> {
    let app = parse_app_filter(query.app.as_deref())?;
    let page = page_request(query.after.as_deref(), query.limit, |text| {
        split_key(text, 2).map(|parts| (parts[0].to_owned(), parts[1].to_owned()))
    })?;
    let now = state.clock.now_ms();
    let executors = state.store.list_executors_page(app.as_ref(), &page).await?;
    let views = executors
        .into_iter()
        .map(|entry| ExecutorView {
            live: state.registry.is_live(&entry, now),
            entry,
        })
        .collect();
    Ok(Json(Page::new(views, page.limit, |view: &ExecutorView| {
        join_key(&[view.entry.app.as_str(), &view.entry.executor_id])
    })))
}

/// Body of `POST /api/jobs/{id}/kill`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillRequest {
    /// Why; shown on the killed runs.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Asks every executor of the job's app to stop the job's running and queued runs (each ends
/// with a failure result saying it was killed). Answers once the command is on the topic.
async fn kill_job(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    OptionalJson(request): OptionalJson<KillRequest>,
) -> Result<(StatusCode, Json<KillResponse>), ApiError> {
    let job = load_job(&state, parse_job_id(&id)?).await?;
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
    Ok((
        StatusCode::ACCEPTED,
        Json(KillResponse {
            job_id: job.id.get(),
            requested_at_ms: command.requested_at_ms,
        }),
    ))
}

/// Answer of `POST /api/jobs/{id}/kill`.
#[derive(Debug, Serialize, Deserialize)]
pub struct KillResponse {
    /// The job.
    pub job_id: i64,
    /// When the command was published, ms.
    pub requested_at_ms: i64,
}

/// A job's runs, newest first, a page at a time (`next` is a log id: the runs after it are
/// older).
async fn list_runs(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    Query(query): Query<PageQuery>,
) -> Result<Json<Page<Run>>, ApiError> {
    let job = load_job(&state, parse_job_id(&id)?).await?;
    let page = page_request(query.after.as_deref(), query.limit, |text| {
        text.parse::<i64>().ok()
    })?;
    let runs = state.store.list_runs(job.id, &page).await?;
    Ok(Json(Page::new(runs, page.limit, |run| {
        run.log_id.to_string()
    })))
}

/// Query of `GET /api/schedules/preview`.
#[derive(Debug, Deserialize)]
struct PreviewQuery {
    schedule_type: Option<String>,
    schedule_conf: Option<String>,
    time_zone: Option<String>,
    /// Fires strictly after this instant, ms since the epoch; default now.
    after_ms: Option<i64>,
    /// How many, 1–100; default 5.
    count: Option<usize>,
}

/// Answer of `GET /api/schedules/preview`.
#[derive(Debug, Serialize, Deserialize)]
pub struct PreviewResponse {
    /// Fire times, ms since the epoch.
    pub fires_ms: Vec<i64>,
    /// The same instants in RFC 3339, in the schedule's time zone.
    pub fires: Vec<String>,
}

async fn preview_schedule(
    State(state): State<Arc<ApiState>>,
    Query(query): Query<PreviewQuery>,
) -> Result<Json<PreviewResponse>, ApiError> {
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
    let fires_ms = crate::schedule::preview(&schedule, zone, after, count);
    let fires = fires_ms
        .iter()
        .map(|&ms| crate::schedule::format_in_zone(ms, zone))
        .collect();
    Ok(Json(PreviewResponse { fires_ms, fires }))
}

/// A job as the API shows it: enumerations as their names, times in ms since the epoch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobView {
    /// Id.
    pub id: i64,
    /// Executor app.
    pub app: String,
    /// Display name.
    pub name: String,
    /// CRON, FIX_RATE, FIX_DELAY or NONE.
    pub schedule_type: String,
    /// Cron expression or seconds.
    pub schedule_conf: String,
    /// IANA time zone.
    pub time_zone: String,
    /// Misfire strategy.
    pub misfire_strategy: String,
    /// Route strategy.
    pub route_strategy: String,
    /// Handler name.
    pub handler: String,
    /// Handler parameters.
    pub params: String,
    /// Block strategy.
    pub block_strategy: String,
    /// Timeout in seconds, 0 for none.
    pub timeout_seconds: i64,
    /// Owner.
    pub author: String,
    /// Alarm e-mail addresses.
    pub alarm_emails: Vec<String>,
    /// Alarm webhook URL.
    pub alarm_webhook: Option<String>,
    /// Retries of a failed run.
    pub retry_count: u32,
    /// NONE, FIXED or EXPONENTIAL.
    pub retry_backoff: String,
    /// Backoff delay (first delay for EXPONENTIAL), seconds.
    pub retry_backoff_seconds: i64,
    /// Largest EXPONENTIAL delay, seconds.
    pub retry_backoff_cap_seconds: i64,
    /// BEAN or a GLUE_* type.
    pub glue_type: String,
    /// The script, for GLUE_* types.
    pub glue_source: Option<String>,
    /// Note on the script's latest version.
    pub glue_remark: String,
    /// When the script last changed, ms.
    pub glue_updated_at_ms: Option<i64>,
    /// Jobs fired when this one succeeds.
    pub child_job_ids: Vec<i64>,
    /// EACH_SHARD or ALL_SHARDS.
    pub child_trigger_mode: String,
    /// RUNNING or STOPPED.
    pub status: String,
    /// Latest fire written, ms.
    pub last_fire_ms: Option<i64>,
    /// Next fire, ms.
    pub next_fire_ms: Option<i64>,
}

impl From<&Job> for JobView {
    fn from(job: &Job) -> Self {
        JobView {
            id: job.id.get(),
            app: job.spec.app.to_string(),
            name: job.spec.name.clone(),
            schedule_type: job.spec.schedule.schedule_type().to_string(),
            schedule_conf: job.spec.schedule.conf(),
            time_zone: job.spec.time_zone.name().to_owned(),
            misfire_strategy: job.spec.misfire_strategy.to_string(),
            route_strategy: job.spec.route_strategy.to_string(),
            handler: job.spec.handler.clone(),
            params: job.spec.params.clone(),
            block_strategy: job.spec.block_strategy.to_string(),
            timeout_seconds: job.spec.timeout_ms / 1000,
            author: job.spec.author.clone(),
            alarm_emails: job.spec.alarm_emails.clone(),
            alarm_webhook: job.spec.alarm_webhook.clone(),
            retry_count: job.spec.retry.count,
            retry_backoff: job.spec.retry.backoff.kind().to_owned(),
            retry_backoff_seconds: job.spec.retry.backoff.parts().0 / 1000,
            retry_backoff_cap_seconds: job.spec.retry.backoff.parts().1 / 1000,
            glue_type: job.spec.glue.glue_type.to_string(),
            glue_source: job.spec.glue.source.clone(),
            glue_remark: job.spec.glue.remark.clone(),
            glue_updated_at_ms: job.glue_updated_at_ms,
            child_job_ids: job.spec.child_job_ids.iter().map(|id| id.get()).collect(),
            child_trigger_mode: job.spec.child_trigger_mode.to_string(),
            status: job.status.to_string(),
            last_fire_ms: job.last_fire_ms,
            next_fire_ms: job.next_fire_ms,
        }
    }
}
