//! `GET /metrics`: this node's Prometheus metrics (every name and label in `crate::metrics`),
//! for whoever the `[metrics]` section lets read them (`crate::config::MetricsConfig`).
//!
//! The route is in the API's document and router either way, outside the load limits (a busy
//! node must still be watched). With `metrics.listen` set, [`metrics_router`] serves it on that
//! address and the API's copy answers 404, so one scrape target never shows up twice. With
//! `metrics.token` set, a request must carry it as a bearer token (401 otherwise, with
//! `WWW-Authenticate: Bearer`, as Prometheus expects). The token is compared as a SHA-256
//! digest, so the comparison's time says nothing about how much of a guess was right.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};

use super::ApiState;
use crate::config::MetricsConfig;

/// Where `/metrics` is served and what it asks for, from the `[metrics]` section.
#[derive(Debug, Clone, Default)]
pub struct MetricsAccess {
    /// SHA-256 of the token a scrape must present, when one is configured.
    token_digest: Option<[u8; 32]>,
    /// Served on an address of its own: the API's copy answers 404.
    elsewhere: bool,
}

impl MetricsAccess {
    /// The access `config` describes.
    pub fn new(config: &MetricsConfig) -> MetricsAccess {
        MetricsAccess {
            token_digest: config
                .token
                .as_ref()
                .map(|token| digest(token.expose_secret())),
            elsewhere: config.listen.is_some(),
        }
    }

    /// Whether `headers` carry the configured token (true when none is configured).
    fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.token_digest else {
            return true;
        };
        headers
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .is_some_and(|given| digest(given.trim()) == *expected)
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Serves this node's Prometheus metrics.
///
/// Without credentials unless `metrics.token` is set, like `/health`, so that Prometheus
/// scrapes it as it is: it holds counts, app, handler and executor names, no job data. With
/// `metrics.token`, a scrape sends it as a bearer token (401 otherwise); with
/// `metrics.listen`, the metrics are served on that address and this answers 404. A busy
/// node answers it too: its metrics show why it is busy. See the book's production guide
/// (`docs/src/guides/production.md`) on closing it.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses(
        (status = 200, description = "The metrics in Prometheus's text format",
            body = String, content_type = "text/plain"),
        (status = 401, description = "`metrics.token` is set and the request does not carry it"),
        (status = 404, description = "`metrics.listen` is set: the metrics are served there")))]
pub(super) async fn metrics(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    if state.metrics_access.elsewhere {
        return (
            StatusCode::NOT_FOUND,
            "this node serves its metrics on the address metrics.listen names",
        )
            .into_response();
    }
    render(&state, &headers)
}

/// The metrics, or 401 without the token.
fn render(state: &ApiState, headers: &HeaderMap) -> Response {
    if !state.metrics_access.admits(headers) {
        return (
            StatusCode::UNAUTHORIZED,
            [(WWW_AUTHENTICATE, "Bearer")],
            "metrics need the bearer token metrics.token names",
        )
            .into_response();
    }
    let metrics = state.intake.metrics();
    // The registry's view at the scrape, so an app whose executors all left reads zero.
    metrics.live_executors.reset();
    metrics.owned_partitions.reset();
    for (app, live, owned) in state.registry.liveness(state.clock.now_ms()) {
        let app = [app.as_str()];
        metrics
            .live_executors
            .with_label_values(&app)
            .set(live as i64);
        metrics
            .owned_partitions
            .with_label_values(&app)
            .set(owned as i64);
    }
    (
        [(CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        metrics.render(),
    )
        .into_response()
}

/// `/metrics` alone, for the address `metrics.listen` names.
pub fn metrics_router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route(
            "/metrics",
            axum::routing::get(
                |State(state): State<Arc<ApiState>>, headers: HeaderMap| async move {
                    render(&state, &headers)
                },
            ),
        )
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use secrecy::SecretString;

    use super::*;

    fn with_authorization(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn without_a_token_anyone_may_read_and_with_one_only_its_bearer() {
        let open = MetricsAccess::new(&MetricsConfig::default());
        assert!(open.admits(&HeaderMap::new()));
        let closed = MetricsAccess::new(&MetricsConfig {
            listen: None,
            token: Some(SecretString::from("s3cret-scrape")),
        });
        assert!(!closed.admits(&HeaderMap::new()));
        assert!(!closed.admits(&with_authorization("Bearer s3cret")));
        assert!(!closed.admits(&with_authorization("Basic s3cret-scrape")));
        assert!(closed.admits(&with_authorization("Bearer s3cret-scrape")));
    }
}
