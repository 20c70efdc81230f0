//! The HTTP API: what the `kadence` CLI (and later the console) talks to.
//!
//! | method | path | does |
//! |---|---|---|
//! | GET | `/health` | liveness (no credentials needed) |
//! | POST | `/api/auth/login` | a session token for a user name and password (no credentials needed) |
//! | POST | `/api/auth/logout` | revoke the token the request came with |
//! | GET | `/api/auth/me` | the caller, with their grants |
//! | GET, POST | `/api/tokens` | the caller's tokens / a new named API token, shown once |
//! | DELETE | `/api/tokens/{id}` | revoke one of the caller's tokens |
//! | GET, POST | `/api/users` | list / create users (admin) |
//! | PUT | `/api/users/{name}/password` | set a password (admin, or the user with the present one) |
//! | PUT, DELETE | `/api/users/{name}/grants/{app}` | grant VIEW, OPERATE or SCRIPTS on an app / take it back (admin) |
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
//! | GET | `/api/audit` (`?app=&user=&target=&from_ms=&to_ms=`) | the audit trail, newest first |
//! | GET | `/api/signing-keys` | the keys triggers are signed with: public halves, which one signs now |
//! | POST | `/api/signing-keys/rotate` | a new signing key, used by every node within `signing.key_refresh_interval` (admin) |
//! | POST | `/api/signing-keys/{id}/retire` | stop a key being used; never the only active one (admin) |
//!
//! Every route but `/health` and the login needs `Authorization: Bearer <token>` (401
//! without; `caller`), and checks the caller's role and grants on the app concerned (403
//! when missing): an admin may do everything; a member sees only the apps granted to them,
//! reads them with VIEW, changes their jobs with OPERATE, and writes script source with
//! SCRIPTS. Failed logins are throttled per user name and client address (`throttle`).
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
//! `reports`, `schedules`, `sessions` (login, logout), `tokens`, `users`, `audit`,
//! `signing_keys`; the plumbing every route shares: `caller`, `throttle`, `error`, `body`,
//! `pages`, `limits`. This file holds the state, the router and the small parsers the
//! resources share.

mod apps;
mod audit;
mod body;
mod caller;
mod error;
mod executors;
mod job_spec;
mod jobs;
mod limits;
mod pages;
mod reports;
mod runs;
mod schedules;
mod sessions;
mod signing_keys;
mod throttle;
mod tokens;
mod users;

pub use apps::NewAppRequest;
pub use audit::{AuditNote, AuditQuery};
pub use caller::Caller;
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
pub use sessions::LoginRequest;
pub use signing_keys::SigningKeyView;
pub use throttle::LoginThrottle;
pub use tokens::{IssuedToken, NewTokenRequest};
pub use users::{GrantRequest, MIN_PASSWORD_CHARS, NewUserRequest, PasswordRequest};

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post, put};
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
use self::sessions::{login, logout, who_am_i};
use self::signing_keys::{list_signing_keys, retire_signing_key, rotate_signing_key};
use self::tokens::{create_token, list_tokens, revoke_token};
use self::users::{create_user, grant, list_users, revoke_grant, set_password};
use crate::cancellations::CancelledFires;
use crate::clock::Clock;
use crate::dispatch::PartitionDirectory;
use crate::intake::FireIntake;
use crate::kafka::{ControlChannel, TopicAdmin};
use crate::model::{Access, Job};
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
    /// Failed logins per user name and client address.
    pub login_throttle: LoginThrottle,
    /// How long a login's session token lasts.
    pub session_ttl: Duration,
    /// Longest life of an API token.
    pub api_token_max_ttl: Duration,
}

/// The API's routes over `state`, within `limits`.
pub fn router(state: Arc<ApiState>, limits: ApiLimits) -> Router {
    let authenticated = Router::new()
        .route("/api/auth/logout", post(logout))
        .route("/api/auth/me", get(who_am_i))
        .route("/api/tokens", get(list_tokens).post(create_token))
        .route("/api/tokens/{id}", axum::routing::delete(revoke_token))
        .route("/api/users", get(list_users).post(create_user))
        .route("/api/users/{name}/password", put(set_password))
        .route(
            "/api/users/{name}/grants/{app}",
            put(grant).delete(revoke_grant),
        )
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
        .route("/api/audit", get(audit::list_audit))
        .route("/api/signing-keys", get(list_signing_keys))
        .route("/api/signing-keys/rotate", post(rotate_signing_key))
        .route("/api/signing-keys/{id}/retire", post(retire_signing_key))
        // `route_layer`: only matched routes; an unknown path stays a 404. The last added
        // runs first: the caller is known before the write is recorded.
        .route_layer(from_fn_with_state(Arc::clone(&state), audit::record_writes))
        .route_layer(from_fn_with_state(Arc::clone(&state), caller::authenticate));
    let api = authenticated
        .route("/api/auth/login", post(login))
        .layer(DefaultBodyLimit::max(limits.body_limit));
    limits::with_load_limits(api, limits)
        .route("/health", get(|| async { "ok" }))
        .with_state(state)
}

/// `now_ms` plus `ttl`, saturating.
fn millis_from_now(now_ms: i64, ttl: Duration) -> i64 {
    now_ms.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
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

/// Job `raw_id`, if the caller may do what `needed` allows in its app (403 otherwise).
async fn load_job_for(
    state: &ApiState,
    caller: &Caller,
    raw_id: &str,
    needed: Access,
) -> Result<Job, ApiError> {
    let job = load_job(state, parse_job_id(raw_id)?).await?;
    caller.require(&job.spec.app, needed)?;
    Ok(job)
}

/// An optional `?app=` filter.
fn parse_app_filter(app: Option<&str>) -> Result<Option<AppName>, ApiError> {
    app.map(AppName::parse)
        .transpose()
        .map_err(|error| ApiError::BadRequest(error.to_string()))
}
