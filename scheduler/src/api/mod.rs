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
//! (`pages`).
//!
//! Bad input gets a 4xx with `{"error": "…"}` saying what to fix: 400 for an invalid value
//! (including a NUL character in any text), 413 for a body over 512 KiB (`body`). A busy
//! node answers 503 with `Retry-After` — too many requests at once, a request past its
//! timeout, no database connection free in time (`limits`); the scheduling loops have their
//! own connections, so API load never delays a fire. An internal failure is logged with its
//! cause and answered with a bare 500.
//!
//! One file per resource: `apps`, `jobs` (with the definition a request carries and a
//! view shows in `job_spec`), `runs` (trigger, kill, list, log), `executors`,
//! `reports`, `schedules`; the plumbing every route shares: `error`, `body`,
//! `pages`, `limits`. This file holds the state, the router and the small parsers the
//! resources share.

mod apps;
mod body;
mod error;
mod executors;
mod job_spec;
mod jobs;
mod limits;
mod pages;
mod reports;
mod runs;
mod schedules;

pub use apps::NewAppRequest;
pub use error::ApiError;
pub use executors::{ExecutorQuery, ExecutorView};
pub use job_spec::{JobView, MAX_GLUE_SOURCE_BYTES, NewJobRequest};
pub use jobs::JobQuery;
pub use limits::{ApiLimits, BODY_LIMIT_BYTES};
pub use pages::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Page, PageQuery};
pub use reports::{ReportQuery, ReportView};
pub use runs::{
    KillRequest, KillResponse, RunLogQuery, RunLogView, TriggerRequest, TriggerResponse,
    TriggeredRun,
};
pub use schedules::PreviewResponse;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use kadence_schemas::{AppName, JobId, Topics};
use tokio::sync::Notify;

use self::apps::{create_app, list_apps};
use self::executors::list_executors;
use self::jobs::{
    create_job, get_job, list_glue_versions, list_jobs, start_job, stop_job, update_job,
};
use self::reports::list_reports;
use self::runs::{kill_job, list_runs, read_run_log, trigger_job};
use self::schedules::preview_schedule;
use crate::cancellations::CancelledFires;
use crate::clock::Clock;
use crate::dispatch::PartitionDirectory;
use crate::intake::FireIntake;
use crate::kafka::{ControlChannel, TopicAdmin};
use crate::model::Job;
use crate::registry::Registry;
use crate::store::Store;

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
    /// Writes manual fires (through the API's pool) and hands them to the wheel.
    pub intake: FireIntake,
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

/// An optional `?app=` filter.
fn parse_app_filter(app: Option<&str>) -> Result<Option<AppName>, ApiError> {
    app.map(AppName::parse)
        .transpose()
        .map_err(|error| ApiError::BadRequest(error.to_string()))
}
