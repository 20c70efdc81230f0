//! The HTTP API: what the `kadence` CLI (and later the console) talks to.
//!
//! | method | path | does |
//! |---|---|---|
//! | GET | `/health` | liveness |
//! | GET, POST | `/api/apps` | list / create apps (creates `{prefix}.triggers.{app}`) |
//! | GET, POST | `/api/jobs` (`?app=`) | list / create jobs |
//! | GET | `/api/jobs/{id}` | one job |
//! | POST | `/api/jobs/{id}/start`, `/stop` | schedule or unschedule a job |
//! | POST | `/api/jobs/{id}/trigger` | fire once now, optionally with other params |
//! | GET | `/api/jobs/{id}/runs` (`?limit=`) | newest runs with codes and messages |
//! | GET | `/api/schedules/preview` | next fire times of a schedule, before saving it |
//!
//! Bad input gets a 4xx with `{"error": "…"}` saying what to fix; an internal failure is
//! logged with its cause and answered with a bare 500.

use std::sync::Arc;

use axum::extract::{FromRequest, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kadence_schemas::{AppName, BlockStrategy, JobId, Topics, TriggerId, TriggerType};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::clock::Clock;
use crate::dispatch::PartitionDirectory;
use crate::kafka::{TopicAdmin, TopicError};
use crate::model::{App, Job, JobStatus, NewJob, PendingFire, RouteStrategy, Run};
use crate::schedule::{MisfireStrategy, ScheduleSpec, parse_time_zone};
use crate::store::{NewFire, Store, StoreError};

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
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// This node (owner of manual fires).
    pub node_id: String,
    /// Lease of manual fires, ms.
    pub lease_ms: i64,
    /// Pre-read window, ms: a started job's first fire is computed from now + window.
    pub pre_read_window_ms: i64,
}

/// The API's routes over `state`.
pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/api/apps", get(list_apps).post(create_app))
        .route("/api/jobs", get(list_jobs).post(create_job))
        .route("/api/jobs/{id}", get(get_job))
        .route("/api/jobs/{id}/start", post(start_job))
        .route("/api/jobs/{id}/stop", post(stop_job))
        .route("/api/jobs/{id}/trigger", post(trigger_job))
        .route("/api/jobs/{id}/runs", get(list_runs))
        .route("/api/schedules/preview", get(preview_schedule))
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
            ApiError::Internal(cause) => {
                tracing::error!(error = format!("{cause:#}"), "API request failed");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        (
            status,
            Json(ErrorBody {
                error: self.to_string(),
            }),
        )
            .into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::UnknownApp(_) => ApiError::BadRequest(error.to_string()),
            StoreError::JobNotFound(_) => ApiError::NotFound(error.to_string()),
            StoreError::AppExists(_) => ApiError::Conflict(error.to_string()),
            other => ApiError::Internal(other.into()),
        }
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> Self {
        ApiError::BadRequest(format!("invalid request body: {}", rejection.body_text()))
    }
}

/// `Json` whose rejections are [`ApiError`]s, so every 4xx has the same body shape.
#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
struct ApiJson<T>(T);

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

async fn list_apps(State(state): State<Arc<ApiState>>) -> Result<Json<Vec<App>>, ApiError> {
    Ok(Json(state.store.list_apps().await?))
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
    /// Start the job right away.
    #[serde(default)]
    pub start: bool,
}

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
    })
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

/// Query of `GET /api/jobs`.
#[derive(Debug, Deserialize)]
struct JobFilter {
    app: Option<String>,
}

async fn list_jobs(
    State(state): State<Arc<ApiState>>,
    Query(filter): Query<JobFilter>,
) -> Result<Json<Vec<JobView>>, ApiError> {
    let app = filter
        .app
        .as_deref()
        .map(AppName::parse)
        .transpose()
        .map_err(bad_request)?;
    let jobs = state.store.list_jobs(app.as_ref()).await?;
    Ok(Json(jobs.iter().map(JobView::from).collect()))
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
    Ok(state
        .store
        .set_job_status(job.id, JobStatus::Running, Some(next), now)
        .await?)
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
    let job = state
        .store
        .set_job_status(id, JobStatus::Stopped, None, state.clock.now_ms())
        .await?;
    Ok(Json(JobView::from(&job)))
}

/// Body of `POST /api/jobs/{id}/trigger`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerRequest {
    /// Parameters for this run only; the job's own when absent.
    #[serde(default)]
    pub params: Option<String>,
}

/// Answer of `POST /api/jobs/{id}/trigger`.
#[derive(Debug, Serialize, Deserialize)]
pub struct TriggerResponse {
    /// The new run's trigger id.
    pub trigger_id: TriggerId,
    /// The new run's log id.
    pub log_id: i64,
}

async fn trigger_job(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<TriggerResponse>), ApiError> {
    let job = load_job(&state, parse_job_id(&id)?).await?;
    // The body is optional: an empty one triggers with the job's own params.
    let request: TriggerRequest = if body.iter().all(u8::is_ascii_whitespace) {
        TriggerRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|error| bad_request(format!("invalid request body: {error}")))?
    };
    let params = request.params.unwrap_or_else(|| job.spec.params.clone());
    check_params(&params)?;
    let now = state.clock.now_ms();
    let fire = state
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
            },
        )
        .await?;
    let response = TriggerResponse {
        trigger_id: fire.trigger_id.clone(),
        log_id: fire.log_id,
    };
    // The fire is durable now; if the wheel is gone (shutdown) a claim emits it later.
    let _ = state.wheel.send(fire).await;
    Ok((StatusCode::ACCEPTED, Json(response)))
}

/// Query of `GET /api/jobs/{id}/runs`.
#[derive(Debug, Deserialize)]
struct RunsQuery {
    limit: Option<u32>,
}

async fn list_runs(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    Query(query): Query<RunsQuery>,
) -> Result<Json<Vec<Run>>, ApiError> {
    let job = load_job(&state, parse_job_id(&id)?).await?;
    let limit = query.limit.unwrap_or(20).clamp(1, 1000);
    Ok(Json(state.store.list_runs(job.id, limit).await?))
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
            status: job.status.to_string(),
            last_fire_ms: job.last_fire_ms,
            next_fire_ms: job.next_fire_ms,
        }
    }
}
