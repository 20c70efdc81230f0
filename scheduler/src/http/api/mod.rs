//! The HTTP API: what the `kadence` CLI (and later the console) talks to.
//!
//! | method | path | does |
//! |---|---|---|
//! | GET | `/health` | liveness (no credentials needed) |
//! | GET | `/health/ready` | readiness: 200 while the node's database answers, 503 during an outage, with since when and why (no credentials needed; see `crate::monitors::database_watch`) |
//! | GET | `/metrics` | Prometheus metrics (no credentials unless `metrics.token` is set; on `metrics.listen` instead when that is set; see `metrics_endpoint`) |
//! | GET | `/api/openapi.json`, `/api/docs` | the OpenAPI document and its browsable page (no credentials needed) |
//! | GET, POST | `/registry/…` | the schema catalog in the Confluent Schema Registry's read API shape (no credentials needed) |
//! | GET | `/`, `/console/…` | the web console and its files (no credentials needed; its data comes from this API; see `crate::http::console`) |
//! | GET | `/docs`, `/docs/…` | the Kadence book from `api.book_dir` (`/docs` redirects to `/docs/`), or 404 saying how to serve it when unset (no credentials needed; a budget of its own; see `crate::http::book`) |
//! | POST | `/api/auth/login` | a session token for a user name and password (no credentials needed) |
//! | POST | `/api/auth/session` | the same for a browser: the token goes into the `HttpOnly` cookie `kadence_session` (no credentials needed) |
//! | POST | `/api/auth/logout` | revoke the token the request came with |
//! | GET | `/api/auth/me` | the caller, with their grants |
//! | PUT | `/api/auth/me/locale` | the language the console speaks to the caller (`en`, `zh-CN`, or null: the browser's) |
//! | GET, POST | `/api/tokens` | the caller's tokens / a new named API token, shown once |
//! | DELETE | `/api/tokens/{id}` | revoke one of the caller's tokens |
//! | GET | `/api/users/{name}/tokens` | a user's tokens (admin) |
//! | DELETE | `/api/users/{name}/tokens/{id}` | revoke one of a user's tokens (admin) |
//! | GET, POST | `/api/users` | list / create users (admin) |
//! | PUT | `/api/users/{name}/password` | set a password (admin, or the user with the present one); ends the user's other sessions |
//! | PUT, DELETE | `/api/users/{name}/grants/{app}` | grant VIEW, OPERATE or SCRIPTS on an app / take it back (admin) |
//! | PUT | `/api/users/{name}/role` | make a user an ADMIN or a MEMBER, from their next request (admin; never oneself, nor the last enabled admin) |
//! | PUT | `/api/users/{name}/status` | ENABLED or DISABLED: disabling refuses the user's logins and revokes their tokens at once (admin; never oneself, nor the last enabled admin) |
//! | DELETE | `/api/users/{name}` | delete a user with their grants and tokens; the audit trail keeps their entries (admin; never oneself, nor the last enabled admin) |
//! | GET, POST | `/api/apps` | list / create apps (creates `{prefix}.triggers.{app}`) |
//! | GET, POST | `/api/jobs` (`?app=&status=&handler=&author=&q=`) | list / create jobs |
//! | GET, PATCH, DELETE | `/api/jobs/{id}` | one job / edit it (fields not given stay as they are) / delete a stopped job with its runs |
//! | GET | `/api/jobs/{id}/glue` | the job's saved script versions, newest first |
//! | POST | `/api/jobs/{id}/start`, `/stop` | schedule or unschedule a job (a stop cancels its planned fires) |
//! | POST | `/api/jobs/{id}/trigger` | fire once now, optionally with other params and only among named `partitions` |
//! | POST | `/api/jobs/{id}/kill` | stop the job's running and queued runs on every executor |
//! | GET | `/api/jobs/{id}/runs` | newest runs with codes and messages |
//! | GET | `/api/schedules/preview` | next fire times of a schedule, before saving it |
//! | GET | `/api/runs` (`?app=&job=&outcome=&from_ms=&to_ms=`) | runs across jobs, newest first, with their app, handler and job description |
//! | GET | `/api/runs/{log_id}` | one run: its attempts, the child runs it fired |
//! | GET | `/api/runs/{log_id}/log` (`?from_line=&limit=`) | a run's log lines from a line on |
//! | POST | `/api/runs/{log_id}/kill` | stop one run: running, queued, or not yet at an executor |
//! | GET | `/api/executors` (`?app=`) | the registry: partitions, handlers, running jobs, liveness |
//! | GET | `/api/reports` (`?from=&to=&app=`) | daily running / succeeded / failed counts per job |
//! | GET | `/api/overview` (`?days=`) | the dashboard: jobs, live executors, runs today and per day, latest failures |
//! | GET | `/api/audit` (`?app=&user=&target=&from_ms=&to_ms=`) | the audit trail, newest first |
//! | GET | `/api/signing-keys` | the keys triggers are signed with: public halves, which one signs now |
//! | POST | `/api/signing-keys/rotate` | a new signing key, used by every node within `signing.key_refresh_interval` (admin) |
//! | POST | `/api/signing-keys/{id}/retire` | stop a key being used; never the only active one (admin) |
//! | GET, POST | `/api/apps/{app}/executor-keys` | the keys an app's executors sign what they write with / make one, its text shown once (admin) |
//! | DELETE | `/api/apps/{app}/executor-keys/{key_id}` | revoke one: every node refuses it within `executor_auth.key_refresh_interval` (admin) |
//! | GET, POST | `/api/replays` (`?app=`) | replays and backfills, newest first / replay triggers by offsets or time, filtered, optionally dry (see `crate::operations::replay`) |
//! | GET | `/api/replays/{id}` | one replay or backfill: who, what range, how many |
//! | POST | `/api/backfills` | emit the fires a job's schedule had in a past range that never fired (or a dry run) |
//! | GET | `/api/shadow/report` (`?app=&from_ms=&to_ms=`) | shadow runs beside production's results by trigger id, disagreements first |
//! | POST | `/api/imports/xxl-job` | map an XXL-JOB snapshot onto apps, jobs and users and create them in one transaction, or a dry run (admin; see `crate::operations::import`) |
//! | POST | `/api/imports/xxl-job/undo` | remove what the import of a source created (admin) |
//! | POST | `/api/users/{name}/password-reset` | a one-time password reset token for a user, shown once (admin) |
//! | POST | `/api/auth/password-reset` | set a password with a reset token (no credentials needed; throttled like logins) |
//!
//! Every route the table does not mark "no credentials needed" (and `/metrics`, see above)
//! needs `Authorization: Bearer <token>`, or the console's session cookie with an
//! `X-Requested-With` header on writes (401 without; `caller`), and checks the caller's role
//! and grants on the app concerned (403 when missing): an admin may do everything; a member
//! sees only the apps granted to them, reads them with VIEW, changes their jobs with
//! OPERATE, and writes script source with SCRIPTS. A failed login makes its client address
//! wait before it tries that user again, longer with each failure (429 with `Retry-After`
//! meanwhile), never locking the user out (`throttle`); refused logins and writes refused
//! for their credentials are in the audit trail, a flood as one entry with its count
//! (`refusals`).
//!
//! The `GET` lists of apps, jobs, runs, executors, reports, the audit trail and replays
//! answer a page, `{"items": [...], "next": …}`, of at most `limit` items
//! (default 100, at most 1 000); pass `next` as `after` for the following page (`pages`).
//! The other lists (users, a user's tokens, script versions, signing and executor keys)
//! answer whole.
//!
//! Bad input gets a 4xx with `{"error": "…"}` saying what to fix: 400 for an invalid value
//! (including a NUL character in any text, and a text or list over its limit, named with
//! the limit: see `crate::domain::model::limits`), 408 for a body that did not arrive in time, 413
//! for a body over 512 KiB (`body`). A busy node answers 503 with `Retry-After` — too many
//! requests at once, a request past its timeout, no database connection free in time
//! (`limits`); the scheduling loops have their own connections, so API load never delays a
//! fire. The routes anyone may call have a budget of their own, and one client address a
//! share of it (429 beyond), so that strangers cannot crowd out signed-in users. An
//! internal failure is logged with its cause and answered with a bare 500.
//!
//! One file per resource: `apps`, `jobs` (with the view of a job in `job_view`, and the
//! grants writing one needs in `job_grants`; the definition a request carries and what a
//! change means for the fires are the job operations', [`crate::operations::jobs`]), `runs`
//! (trigger, kill, list, log),
//! `run_search` (runs across jobs, one run in detail), `executors`, `reports`, `overview`
//! (the dashboard), `schedules`, `sessions` (login, logout, language), `tokens`, `users`,
//! `audit`, `signing_keys`, `replays` (with backfills and the shadow report), `imports` and
//! `import_undo` (XXL-JOB), `password_resets`; the plumbing every route shares: `caller`,
//! `client` (who the client is, by address), `throttle`, `refusals`, `error`, `body`, `pages`, `limits`
//! (the API's load limits; the limits of each field are `crate::domain::model::limits`); and
//! `serve`, the HTTP server the router runs in. This file holds the state, the router and
//! the small parsers the resources share.

mod apps;
mod audit;
mod body;
mod caller;
mod client;
mod error;
mod executor_keys;
mod executors;
mod import_undo;
mod imports;
mod job_grants;
mod job_view;
mod jobs;
mod limits;
mod metrics_endpoint;
mod openapi;
mod overview;
mod pages;
mod password_resets;
mod refusals;
mod registry;
mod replays;
mod reports;
mod run_search;
mod runs;
mod schedules;
mod serve;
mod sessions;
mod signing_keys;
mod throttle;
mod tokens;
mod users;

pub use crate::operations::jobs::NewJobRequest;
pub use apps::NewAppRequest;
pub use audit::{AuditNote, AuditQuery};
pub use caller::Caller;
pub use caller::{CONSOLE_HEADER, SESSION_COOKIE};
pub use error::ApiError;
pub use executor_keys::NewExecutorKeyView;
pub use executors::{ExecutorQuery, ExecutorView};
pub use import_undo::XxlUndoRequest;
pub use imports::{IMPORT_BODY_LIMIT_BYTES, XxlImportRequest};
pub use job_view::JobView;
pub use jobs::JobQuery;
pub use limits::{ApiLimits, BODY_LIMIT_BYTES};
pub use metrics_endpoint::{MetricsAccess, metrics_router};
pub use openapi::{DOCS_PATH, DOCUMENT_PATH};
pub use overview::{AppExecutors, DayCounts, ExecutorCounts, Overview, OverviewQuery};
pub use pages::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Page, PageQuery};
pub use password_resets::{DEFAULT_RESET_TOKEN_HOURS, PasswordResetRequest, ResetTokenRequest};
pub use refusals::RefusalTally;
pub use replays::{BackfillBody, ReplayBody, ReplayQuery, ShadowReportQuery};
pub use reports::{ReportQuery, ReportView};
pub use run_search::{RunDetail, RunQuery};
pub use runs::{
    KillRequest, KillResponse, RunKillResponse, RunLogQuery, RunLogView, TriggerRequest,
    TriggerResponse, TriggeredRun,
};
pub use schedules::PreviewResponse;
pub use serve::serve;
pub use sessions::{ConsoleSession, LocaleRequest, LoginRequest};
pub use signing_keys::SigningKeyView;
pub use throttle::LoginThrottle;
pub use tokens::{IssuedToken, NewTokenRequest};
pub use users::{
    GrantRequest, MIN_PASSWORD_CHARS, NewUserRequest, PasswordRequest, RoleRequest, StatusRequest,
};

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use kadence_schemas::{AppName, GlueType, JobId, Topics};

use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::SwaggerUi;

use self::openapi::ApiDocument;
use crate::clock::Clock;
use crate::domain::model::{Access, Job};
use crate::engine::intake::FireIntake;
use crate::engine::kafka::{ControlChannel, TopicAdmin};
use crate::engine::partitions::PartitionDirectory;
use crate::engine::registry::Registry;
use crate::operations::jobs::JobOperations;
use crate::store::Store;

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
    /// Creating, editing, starting, stopping and deleting jobs, with what each means for
    /// their fires (through the API's pool).
    pub jobs: JobOperations,
    /// Commands to executors (kill).
    pub control: ControlChannel,
    /// Live executors (for listing).
    pub registry: Arc<Registry>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The throttle on failed logins, and how long sessions and API tokens last.
    pub credentials: CredentialPolicy,
    /// The audit entries of refused attempts still counting a flood.
    pub refusals: RefusalTally,
    /// Whether the node's database answers (for `/health/ready`).
    pub database: Arc<crate::monitors::database_watch::DatabaseHealth>,
    /// Replays and backfills (through the API's pool and intake).
    pub replayer: Arc<crate::operations::replay::Replayer>,
    /// Where `/metrics` is served and whether it asks for a token.
    pub metrics_access: MetricsAccess,
}

/// How the API gives out credentials (`[auth]`).
pub struct CredentialPolicy {
    /// Failed logins per user name and client address.
    pub login_throttle: LoginThrottle,
    /// How long a login's session token lasts.
    pub session_ttl: Duration,
    /// Longest life of an API token.
    pub api_token_max_ttl: Duration,
}

impl CredentialPolicy {
    /// The policy `[auth]` sets.
    pub fn new(config: &crate::config::AuthConfig) -> CredentialPolicy {
        CredentialPolicy {
            login_throttle: LoginThrottle::new(config),
            session_ttl: config.session_ttl,
            api_token_max_ttl: config.api_token_max_ttl,
        }
    }
}

/// The API's routes over `state`, within `limits`, with the OpenAPI document and its page,
/// and `book` (`api.book_dir`, checked at start) under `/docs/`.
pub fn router(
    state: Arc<ApiState>,
    limits: ApiLimits,
    book: Option<crate::http::book::Book>,
) -> Router {
    // The import's role and its place among the few imports at once are settled before its
    // large body is read (`route_layer` and `layer` both run before the handler's extractors).
    let (imports, _) = import_routes().split_for_parts();
    let imports = limits::with_import_limits(imports, &limits)
        .route_layer(axum::middleware::from_fn(caller::admins_only));
    let (authenticated, _) = authenticated_routes().split_for_parts();
    // `route_layer`: only matched routes; an unknown path stays a 404. The last added runs
    // first: the caller is known before the write is recorded.
    let authenticated = authenticated
        .merge(imports)
        .route_layer(from_fn_with_state(Arc::clone(&state), audit::record_writes))
        .route_layer(from_fn_with_state(Arc::clone(&state), caller::authenticate));
    let (public, _) = public_routes().split_for_parts();
    let api = limits::with_load_limits(authenticated, &limits, "too many requests at once")
        .merge(limits::with_public_limits(public, &limits));
    // Liveness stays outside the load limits: a busy node is alive, and a liveness probe
    // answered 503 would have it restarted for being busy.
    let (health, _) = health_routes().split_for_parts();
    // The console's files are in memory and cheap: a busy node still shows its console,
    // which then says the node is busy. The book's are read from disk, under a budget of
    // their own (see `crate::http::book`).
    let book = crate::http::book::router(book);
    let book = limits::with_load_limits(book, &limits, "too many requests for the book at once");
    limits::with_request_guards(api, &limits)
        .merge(health)
        .merge(crate::http::console::router())
        .merge(book)
        .merge(SwaggerUi::new(openapi::DOCS_PATH).url(openapi::DOCUMENT_PATH, openapi_document()))
        .with_state(state)
}

/// The OpenAPI document of [`router`], as `/api/openapi.json` serves it.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    let (_, mut document) = OpenApiRouter::with_openapi(ApiDocument::openapi())
        .merge(authenticated_routes())
        .merge(import_routes())
        .merge(public_routes())
        .merge(health_routes())
        .split_for_parts();
    openapi::add_shared_answers(&mut document);
    document
}

/// Every route that needs a bearer token. Each handler's `#[utoipa::path]` gives its method
/// and path; `routes!` groups the handlers of one path.
fn authenticated_routes() -> OpenApiRouter<Arc<ApiState>> {
    OpenApiRouter::new()
        .routes(routes!(sessions::logout))
        .routes(routes!(sessions::who_am_i))
        .routes(routes!(sessions::set_locale))
        .routes(routes!(tokens::list_tokens, tokens::create_token))
        .routes(routes!(tokens::revoke_token))
        .routes(routes!(tokens::list_user_tokens))
        .routes(routes!(tokens::revoke_user_token))
        .routes(routes!(users::list_users, users::create_user))
        .routes(routes!(users::set_password))
        .routes(routes!(users::set_role))
        .routes(routes!(users::set_status))
        .routes(routes!(users::delete_user))
        .routes(routes!(users::grant, users::revoke_grant))
        .routes(routes!(apps::list_apps, apps::create_app))
        .routes(routes!(jobs::list_jobs, jobs::create_job))
        .routes(routes!(jobs::get_job, jobs::update_job, jobs::delete_job))
        .routes(routes!(jobs::list_glue_versions))
        .routes(routes!(jobs::start_job))
        .routes(routes!(jobs::stop_job))
        .routes(routes!(runs::trigger_job))
        .routes(routes!(runs::kill_job))
        .routes(routes!(runs::kill_run))
        .routes(routes!(runs::list_runs))
        .routes(routes!(schedules::preview_schedule))
        .routes(routes!(executors::list_executors))
        .routes(routes!(runs::read_run_log))
        .routes(routes!(run_search::search_runs))
        .routes(routes!(run_search::get_run))
        .routes(routes!(reports::list_reports))
        .routes(routes!(overview::overview))
        .routes(routes!(audit::list_audit))
        .routes(routes!(signing_keys::list_signing_keys))
        .routes(routes!(signing_keys::rotate_signing_key))
        .routes(routes!(signing_keys::retire_signing_key))
        .routes(routes!(
            executor_keys::list_executor_keys,
            executor_keys::create_executor_key
        ))
        .routes(routes!(executor_keys::revoke_executor_key))
        .routes(routes!(replays::list_replays, replays::replay))
        .routes(routes!(replays::get_replay))
        .routes(routes!(replays::backfill))
        .routes(routes!(replays::shadow_report))
        .routes(routes!(password_resets::issue_reset_token))
        .routes(routes!(import_undo::undo_xxl_import))
}

/// The XXL-JOB import, whose body may be as large as [`IMPORT_BODY_LIMIT_BYTES`] (this layer
/// is inside the router's, so it wins), authenticated as the routes above are.
fn import_routes() -> OpenApiRouter<Arc<ApiState>> {
    OpenApiRouter::new()
        .routes(routes!(imports::import_xxl_job))
        .layer(DefaultBodyLimit::max(IMPORT_BODY_LIMIT_BYTES))
}

/// The routes anyone may call (marked public in the document by `openapi`) but `/health`:
/// the logins, the password reset and the schema registry.
fn public_routes() -> OpenApiRouter<Arc<ApiState>> {
    OpenApiRouter::new()
        .routes(routes!(sessions::login))
        .routes(routes!(sessions::open_session))
        .routes(routes!(password_resets::redeem_reset_token))
        .routes(routes!(registry::schema_by_id))
        .routes(routes!(registry::versions_of_id))
        .routes(routes!(registry::list_subjects))
        .routes(routes!(registry::list_versions))
        .routes(routes!(registry::get_version))
        .routes(routes!(registry::look_up_schema))
        .routes(routes!(registry::registry_config))
}

/// `/health`, `/health/ready` and `/metrics`, the routes outside the load limits.
fn health_routes() -> OpenApiRouter<Arc<ApiState>> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(readiness))
        .routes(routes!(metrics_endpoint::metrics))
}

/// Says the node is alive: its HTTP server answers.
///
/// Anyone may call it, and a busy node answers it too: a liveness probe answered 503 would
/// have the node restarted for being busy. It checks nothing else; `GET /health/ready` says
/// whether the node can do its work.
#[utoipa::path(get, path = "/health", tag = "health",
    responses((status = 200, description = "The node is up", body = String, example = "ok")))]
async fn health() -> &'static str {
    "ok"
}

/// The readiness answer: whether the node can do its work, i.e. reaches its database.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
struct Readiness {
    /// `ready`, or `unavailable` while the database is out of reach.
    status: &'static str,
    /// The database as the node's checks see it (every second).
    database: crate::monitors::database_watch::DatabaseState,
}

/// Says whether the node can do its work: 200 while its database answers, 503 while not.
///
/// Anyone may call it, and a busy node answers it too. During a database outage the node
/// keeps running, and catches up when the database is back (see `crate::monitors::database_watch`);
/// the answer says since when and why. The broker is not part of it: its clients buffer and
/// reconnect on their own, and the fires of a broker outage are emitted when it returns.
#[utoipa::path(get, path = "/health/ready", tag = "health",
    responses(
        (status = 200, description = "The database answers", body = Readiness),
        (status = 503, description = "The database is out of reach", body = Readiness)))]
async fn readiness(
    axum::extract::State(state): axum::extract::State<Arc<ApiState>>,
) -> (axum::http::StatusCode, axum::Json<Readiness>) {
    let database = state.database.state();
    let (code, status) = if database.reachable {
        (axum::http::StatusCode::OK, "ready")
    } else {
        (axum::http::StatusCode::SERVICE_UNAVAILABLE, "unavailable")
    };
    (code, axum::Json(Readiness { status, database }))
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
        .ok_or_else(|| job_not_found(id))
}

/// Job `raw_id`, if the caller may do what `needed` allows in its app: 403 for a caller who
/// may view the app but not do that, and for one who may not even view it the same 404 as
/// for a job that does not exist (see [`Caller::require_visible`]).
async fn load_job_for(
    state: &ApiState,
    caller: &Caller,
    raw_id: &str,
    needed: Access,
) -> Result<Job, ApiError> {
    let id = parse_job_id(raw_id)?;
    let job = load_job(state, id).await?;
    caller.require_visible(&job.spec.app, needed, || job_not_found(id))?;
    Ok(job)
}

/// What a caller hears of a job that does not exist, or that is in an app they may not view.
fn job_not_found(id: JobId) -> ApiError {
    ApiError::NotFound(format!("job {id} does not exist"))
}

/// Script source reaches an app's executors only as a job's current script, and a record
/// carrying it is made at a caller's request (a manual trigger, a backfill, a replay, naming
/// the job a child) only for a caller who may write scripts in the app it goes to (SCRIPTS):
/// such a caller chooses when the script runs and the params it gets. The scheduler's own
/// fires of a job (its schedule, retries, children fired by the follow-up) carry the job's
/// current script in its own app, with no caller to check. Ok for a BEAN job.
fn require_script_runner(caller: &Caller, job: &Job) -> Result<(), ApiError> {
    if job.spec.glue.glue_type == GlueType::Bean {
        return Ok(());
    }
    caller.require(&job.spec.app, Access::Scripts).map_err(|_| {
        ApiError::Forbidden(format!(
            "job {} is a {} script job: running it at a request sends its script to app \
                 {}'s executors, which needs a SCRIPTS grant on {}, and user {} has none",
            job.id, job.spec.glue.glue_type, job.spec.app, job.spec.app, caller.user.name
        ))
    })
}

/// An optional `?app=` filter.
fn parse_app_filter(app: Option<&str>) -> Result<Option<AppName>, ApiError> {
    app.map(AppName::parse)
        .transpose()
        .map_err(|error| ApiError::BadRequest(error.to_string()))
}
