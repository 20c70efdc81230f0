//! Load limits of the API: a busy API answers 503 with `Retry-After`, never 500, and never
//! takes what the scheduling loops need.
//!
//! - At most `max_concurrent_requests` requests are handled at once; one more is shed at once
//!   with 503 (tower's load shedding over a concurrency limit shared by every route). Queueing
//!   it instead would only turn overload into timeouts.
//! - A request that takes longer than `request_timeout` is abandoned with 503 (its database
//!   work is rolled back when its transaction is dropped).
//! - A request whose store operation could not get an API connection in time is 503 too (see
//!   [`ApiError::Unavailable`](super::ApiError)); the scheduling loops have pools of their own.
//! - Bodies larger than `body_limit` are 413 ([`super::body`]).
//!
//! `/health` stays outside the limits, so a saturated node is not mistaken for a dead one.

use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::{BoxError, Router};
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::error::Overloaded;
use tower::timeout::error::Elapsed;

use super::ApiError;
use crate::config::ApiConfig;

/// Largest request body accepted: room for the largest script (256 KiB) and params (64 KiB)
/// with the other fields.
pub const BODY_LIMIT_BYTES: usize = 512 * 1024;

/// How the API protects itself (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiLimits {
    /// Requests handled at once at most.
    pub max_concurrent_requests: usize,
    /// How long a request may take.
    pub request_timeout: Duration,
    /// Largest request body, bytes.
    pub body_limit: usize,
}

impl From<&ApiConfig> for ApiLimits {
    fn from(config: &ApiConfig) -> Self {
        ApiLimits {
            max_concurrent_requests: config.max_concurrent_requests.max(1),
            request_timeout: config.request_timeout,
            body_limit: BODY_LIMIT_BYTES,
        }
    }
}

/// `router` with load shedding and a request timeout, both answered 503.
pub(crate) fn with_load_limits<S>(router: Router<S>, limits: ApiLimits) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    router.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(overloaded))
            .load_shed()
            .layer(GlobalConcurrencyLimitLayer::new(
                limits.max_concurrent_requests,
            ))
            .timeout(limits.request_timeout),
    )
}

async fn overloaded(error: BoxError) -> ApiError {
    if error.is::<Overloaded>() {
        ApiError::Unavailable("too many requests at once".to_owned())
    } else if error.is::<Elapsed>() {
        ApiError::Unavailable("the request took too long".to_owned())
    } else {
        ApiError::Internal(anyhow::anyhow!(error))
    }
}
