//! The audit trail: every write through the API (any method but GET), who made it, when,
//! on what and with what answer, recorded by [`record_writes`], a layer around every
//! authenticated route, so a new route is audited without anyone remembering to. A handler
//! adds what only it knows, the app concerned and what changed (a job edit: the definition
//! before and after), as an [`AuditNote`] on its answer. Logins, outside that layer, are
//! recorded by the login itself. What is refused before a caller is known (a failed or
//! throttled login, a write without valid credentials or without the console's header) is
//! recorded by `refusals`, a flood of the same refusal as one entry with its count, so that
//! it cannot fill the table. Passwords and tokens are never in an entry: the layer does not
//! read bodies, no note carries them, and a refused token is known only by a fingerprint.
//!
//! `GET /api/audit` lists entries newest first (`?app=&user=&target=&from_ms=&to_ms=`): an
//! admin sees all, a member the entries of the apps they may view. Entries are deleted with
//! the runs, after `retention.days`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponseParts, Response, ResponseParts};
use kadence_schemas::AppName;
use serde::Deserialize;

use super::body::ApiQuery;
use super::caller::Caller;
use super::error::ApiError;
use super::pages::{Page, page_request};
use super::{ApiState, parse_app_filter};
use crate::domain::model::{AuditEntry, NewAuditEntry};
use crate::store::AuditFilter;

/// What a handler adds to the audit entry of its request.
#[derive(Debug, Clone, Default)]
pub struct AuditNote {
    /// The app the write concerned.
    pub app: Option<AppName>,
    /// What changed.
    pub details: Option<serde_json::Value>,
    /// Another app the write reached (a replay into another app), whose trail gets the same
    /// entry.
    pub also_app: Option<AppName>,
}

impl AuditNote {
    /// A note naming the app.
    pub fn app(app: &AppName) -> Self {
        AuditNote {
            app: Some(app.clone()),
            details: None,
            also_app: None,
        }
    }

    /// The note, filed under `app` as well.
    pub fn also_for(mut self, app: AppName) -> Self {
        self.also_app = Some(app);
        self
    }

    /// The note with `details`.
    pub fn with(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details);
        self
    }
}

impl IntoResponseParts for AuditNote {
    type Error = std::convert::Infallible;

    fn into_response_parts(self, mut parts: ResponseParts) -> Result<ResponseParts, Self::Error> {
        parts.extensions_mut().insert(self);
        Ok(parts)
    }
}

/// The layer that records every write of an authenticated caller, whatever its answer.
pub(super) async fn record_writes(
    State(state): State<Arc<ApiState>>,
    request: Request,
    next: Next,
) -> Response {
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return next.run(request).await;
    }
    let caller = request.extensions().get::<Caller>().cloned();
    let action = match request.extensions().get::<MatchedPath>() {
        Some(path) => format!("{} {}", request.method(), path.as_str()),
        None => request.method().to_string(),
    };
    let target = request.uri().path().to_owned();
    let mut response = next.run(request).await;
    let note = response
        .extensions_mut()
        .remove::<AuditNote>()
        .unwrap_or_default();
    let entry = NewAuditEntry {
        at_ms: state.clock.now_ms(),
        user_id: caller.as_ref().map(|caller| caller.user.id),
        user_name: caller.map(|caller| caller.user.name).unwrap_or_default(),
        action,
        target,
        app: note.app,
        status: response.status().as_u16(),
        details: note.details,
    };
    if let Some(also_app) = note.also_app {
        record(
            &state,
            NewAuditEntry {
                app: Some(also_app),
                ..entry.clone()
            },
        )
        .await;
    }
    record(&state, entry).await;
    response
}

/// Records `entry`. A failure to record does not undo the write it describes (that is
/// committed already): it is logged with the whole entry, so the record survives there.
pub(super) async fn record(state: &ApiState, entry: NewAuditEntry) {
    if let Err(error) = state.store.record_audit(&entry).await {
        tracing::error!(%error, ?entry, "audit entry not recorded");
    }
}

/// Query of `GET /api/audit`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Only this app's entries.
    pub app: Option<String>,
    /// Only this user's entries.
    pub user: Option<String>,
    /// Only entries on this path or below it, e.g. `/api/jobs/12`.
    pub target: Option<String>,
    /// Only entries at or after this instant, ms since the epoch.
    pub from_ms: Option<i64>,
    /// Only entries before this instant, ms since the epoch.
    pub to_ms: Option<i64>,
    /// The `next` of the previous page.
    pub after: Option<String>,
    /// Entries at most (default 100, at most 1 000).
    pub limit: Option<u32>,
}

/// Lists the audit trail, who changed what and when, newest first, a page at a time.
///
/// Any signed-in caller: an admin sees every entry, a member the entries of the apps they
/// may view (not those concerning no app: users, tokens, keys, logins). Every write through
/// the API is recorded whatever its answer, with its caller, route, target and status, and
/// where the handler adds them, the app and what changed (a job edit: the definition before
/// and after). So are logins, password resets and writes refused for their credentials, a
/// flood of one refusal as one entry with its count. Passwords and tokens never appear.
/// `target` matches a path and everything below it. Entries go after `retention.days`.
#[utoipa::path(
    get, path = "/api/audit", tag = "audit", params(AuditQuery),
    responses((status = 200, description = "A page of the audit trail, newest first", body = Page<AuditEntry>)),
)]
pub(super) async fn list_audit(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> Result<Json<Page<AuditEntry>>, ApiError> {
    let filter = AuditFilter {
        apps: caller.visible_apps(parse_app_filter(query.app.as_deref())?)?,
        user_name: query.user,
        target: query.target,
        from_ms: query.from_ms,
        to_ms: query.to_ms,
    };
    let page = page_request(query.after.as_deref(), query.limit, |text| {
        text.parse::<i64>().ok()
    })?;
    let entries = state.store.list_audit(&filter, &page).await?;
    Ok(Json(Page::new(entries, page.limit, |entry| {
        entry.id.to_string()
    })))
}
