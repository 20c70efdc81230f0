//! Load limits of the API: a busy API answers 503 with `Retry-After`, never 500, and never
//! takes what the scheduling loops need; and no client, signed in or not, can hold on to it.
//!
//! - At most `max_concurrent_requests` requests of the authenticated routes are handled at
//!   once; one more is shed at once with 503 (tower's load shedding over a concurrency limit
//!   shared by those routes). Queueing it instead would only turn overload into timeouts.
//! - The routes anyone may call (logins, password reset, schema registry) have a budget of
//!   their own, `public_max_concurrent_requests`, shed the same way, so that strangers
//!   cannot starve signed-in users; and within it one client address may have only
//!   `public_requests_per_address` requests at once (429 beyond; see [`super::client`]).
//! - A request's body must have arrived within `body_read_timeout` of its head, or it is
//!   answered 408 and its connection closed ([`BodyDeadline`], kept by [`super::body`]): a
//!   client sending a byte at a time cannot hold its place for long. The head has its own
//!   deadline in the server ([`super::serve`]).
//! - A request that takes longer than `request_timeout` is abandoned with 503 (its database
//!   work is rolled back when its transaction is dropped).
//! - A request whose store operation could not get an API connection in time is 503 too (see
//!   [`ApiError::Unavailable`](super::ApiError)); the scheduling loops have pools of their own.
//! - Bodies larger than `body_limit` are 413 ([`super::body`]); the XXL-JOB import takes up to
//!   64 MiB, only from an admin (checked before the body is read) and only
//!   `max_concurrent_imports` at once (503 beyond, before the body is read), so that large
//!   bodies in memory stay few.
//!
//! - The book under `/docs/` has a budget of its own, as large as the authenticated routes'
//!   (503 beyond), and the request timeout: a page loads a dozen files at once, which a
//!   share of the public budget would refuse (see `crate::http::book`).
//!
//! `/health` stays outside the limits, so a saturated node is not mistaken for a dead one.

use std::sync::Arc;
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use axum::{BoxError, Router};
use tokio::time::Instant;
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::error::Overloaded;
use tower::timeout::error::Elapsed;

use super::ApiError;
use super::body::BodyDeadline;
use super::client::{AddressSlots, identify, within_address_share};
use crate::config::{ApiConfig, TrustedProxies};

/// Largest request body accepted: room for the largest script (256 KiB) and params (64 KiB)
/// with the other fields.
pub const BODY_LIMIT_BYTES: usize = 512 * 1024;

/// How the API protects itself (see the module docs).
#[derive(Debug, Clone)]
pub struct ApiLimits {
    /// Requests of the authenticated routes handled at once at most.
    pub max_concurrent_requests: usize,
    /// How long a request may take.
    pub request_timeout: Duration,
    /// Largest request body, bytes.
    pub body_limit: usize,
    /// How long after its head a request's body must have arrived.
    pub body_read_timeout: Duration,
    /// Requests of the public routes handled at once at most.
    pub public_max_concurrent_requests: usize,
    /// Requests of the public routes from one client address at once at most.
    pub public_requests_per_address: usize,
    /// XXL-JOB imports handled at once at most.
    pub max_concurrent_imports: usize,
    /// The proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Arc<TrustedProxies>,
}

impl From<&ApiConfig> for ApiLimits {
    fn from(config: &ApiConfig) -> Self {
        ApiLimits {
            max_concurrent_requests: config.max_concurrent_requests.max(1),
            request_timeout: config.request_timeout,
            body_limit: BODY_LIMIT_BYTES,
            body_read_timeout: config.body_read_timeout,
            public_max_concurrent_requests: config.public_max_concurrent_requests.max(1),
            public_requests_per_address: config.public_requests_per_address.max(1),
            max_concurrent_imports: config.max_concurrent_imports.max(1),
            trusted_proxies: Arc::new(config.trusted_proxies.clone()),
        }
    }
}

/// `router` with load shedding over a budget of `max_concurrent_requests` of its own and a
/// request timeout, both answered 503, a shed request saying `why`: the authenticated
/// routes have one such budget, the book's files another.
pub(crate) fn with_load_limits<S>(
    router: Router<S>,
    limits: &ApiLimits,
    why: &'static str,
) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    shed_beyond(
        router,
        limits.max_concurrent_requests,
        limits.request_timeout,
        why,
    )
}

/// `router` (the routes anyone may call) with a budget of its own, shed with 503, a request
/// timeout, and each client address held to its share (429).
pub(crate) fn with_public_limits<S>(router: Router<S>, limits: &ApiLimits) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let slots = Arc::new(AddressSlots::new(limits.public_requests_per_address));
    // The budget is taken first, then the address's share: an address over its share gives
    // its place back at once, and the addresses tracked are never more than the budget.
    let router = router.layer(from_fn_with_state(slots, within_address_share));
    let why = "too many requests without credentials at once";
    let budget = limits.public_max_concurrent_requests;
    shed_beyond(router, budget, limits.request_timeout, why)
}

/// `router` (the XXL-JOB import) taking at most `max_concurrent_imports` requests at once; one
/// more is answered 503 before its body is read.
pub(crate) fn with_import_limits<S>(router: Router<S>, limits: &ApiLimits) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let why = "another XXL-JOB import is under way";
    shed_beyond(
        router,
        limits.max_concurrent_imports,
        limits.request_timeout,
        why,
    )
}

/// `router` (every API route) with what each request gets first: its client's address
/// (`client`), its body's deadline and the body limit.
pub(crate) fn with_request_guards<S>(router: Router<S>, limits: &ApiLimits) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    router
        .layer(DefaultBodyLimit::max(limits.body_limit))
        .layer(from_fn_with_state(
            limits.body_read_timeout,
            set_body_deadline,
        ))
        .layer(from_fn_with_state(
            Arc::clone(&limits.trusted_proxies),
            identify,
        ))
}

/// `router` with load shedding over a concurrency limit of `budget` shared by all its routes,
/// and a `timeout`; both answered 503, a shed request saying `why`.
fn shed_beyond<S>(
    router: Router<S>,
    budget: usize,
    timeout: Duration,
    why: &'static str,
) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    router.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(move |error: BoxError| async move {
                overloaded(error, why)
            }))
            .load_shed()
            .layer(GlobalConcurrencyLimitLayer::new(budget))
            .timeout(timeout),
    )
}

/// Notes when the request's body must have arrived, counted from now: its head has just been
/// read.
async fn set_body_deadline(
    State(timeout): State<Duration>,
    mut request: Request,
    next: Next,
) -> Response {
    let deadline = Instant::now() + timeout;
    request.extensions_mut().insert(BodyDeadline(deadline));
    next.run(request).await
}

fn overloaded(error: BoxError, why: &str) -> ApiError {
    if error.is::<Overloaded>() {
        ApiError::Unavailable(why.to_owned())
    } else if error.is::<Elapsed>() {
        ApiError::Unavailable("the request took too long".to_owned())
    } else {
        ApiError::Internal(anyhow::anyhow!(error))
    }
}
