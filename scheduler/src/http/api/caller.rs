//! Who is calling: every route but `/health` and the login runs behind [`authenticate`],
//! which turns the request's bearer token, or the web console's session cookie, into a
//! [`Caller`] (401 without one), and every
//! handler asks the [`Caller`] whether it may do what it is about to do on the app concerned
//! (403 if not). A handler cannot forget the first step (the layer wraps the whole router);
//! the route-enumeration test catches one that forgets the second.
//!
//! Nothing here is cached, on purpose: every request reads its token, and the token's user
//! with their role, status and grants, from the database, so a revoked token, a disabled or
//! deleted user and a demotion all count from the very next request (see `users`). A cache
//! in front of [`Accounts::authenticate_token`](crate::store::Accounts::authenticate_token)
//! would have to be emptied by every one of those changes, on every node.
//!
//! The console's session travels in an `HttpOnly`, `SameSite=Strict` cookie
//! ([`SESSION_COOKIE`], set by `POST /api/auth/session`) so that no script can read it. A
//! browser sends a cookie with requests other sites make it send, so a write that comes with
//! the cookie must also carry [`CONSOLE_HEADER`]: a plain cross-site form cannot set a header,
//! and a cross-site script that could would first need a CORS grant Kadence never gives.
//! `SameSite=Strict` already keeps the cookie off cross-site requests in current browsers;
//! the header is the second lock for the rest. A request with an `Authorization` header is
//! judged by that header alone.
//!
//! The console's login needs the same lock the other way round ([`ConsoleLogin`]): a form
//! another site posts to `POST /api/auth/session` with the attacker's name and password
//! would sign the browser in as the attacker (login CSRF), and what the user then types
//! would land in the attacker's account. So that login takes only a JSON body with
//! [`CONSOLE_HEADER`], neither of which a cross-site form can send.
//!
//! An admin-only route whose body is large checks the role in [`admins_only`], in front of
//! the handler, so that a member's request is refused before its body is read.
//!
//! A write refused here (401: credentials missing or bad; 403: the cookie without the
//! header) and a console login refused for lacking the console's marks are recorded in the
//! audit trail, floods as one entry with their count ([`super::refusals`]); reads are not,
//! as no read is.

use std::sync::Arc;

use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use kadence_schemas::AppName;

use super::ApiState;
use super::body::require_json_content;
use super::client::ClientAddress;
use super::error::ApiError;
use super::refusals::{Refusal, record_refusal};
use crate::domain::model::{Access, Role, TokenInfo, User};
use crate::operations::auth::{TOKEN_PREFIX, token_hash};

/// The cookie the web console's session token travels in.
pub const SESSION_COOKIE: &str = "kadence_session";

/// The header a write authenticated by [`SESSION_COOKIE`] must carry (any value; the console
/// sends `kadence-console`).
pub const CONSOLE_HEADER: &str = "x-requested-with";

/// The authenticated user of a request, and the token they came with.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The user, with their grants as they were when the request arrived.
    pub user: User,
    /// The token the request carried (a logout revokes it).
    pub token: TokenInfo,
}

impl Caller {
    /// Ok if the caller may do what `needed` allows on `app`; a 403 saying what is missing
    /// otherwise.
    pub fn require(&self, app: &AppName, needed: Access) -> Result<(), ApiError> {
        if self.user.may(app, needed) {
            return Ok(());
        }
        Err(ApiError::Forbidden(format!(
            "user {} has no {} grant on app {app}: ask an admin for one",
            self.user.name,
            needed.as_str()
        )))
    }

    /// [`require`](Self::require) for something that belongs to `app` (a job, a run, a
    /// replay): a caller who may not even view `app` gets `hidden()`, the answer for
    /// something that does not exist, so that what exists in apps they cannot see is not
    /// revealed; one who may view it but not do what `needed` allows gets the 403 naming the
    /// grant to ask for.
    pub fn require_visible(
        &self,
        app: &AppName,
        needed: Access,
        hidden: impl FnOnce() -> ApiError,
    ) -> Result<(), ApiError> {
        if !self.user.may(app, Access::View) {
            return Err(hidden());
        }
        self.require(app, needed)
    }

    /// Ok for an admin; a 403 for anyone else.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.user.role == Role::Admin {
            return Ok(());
        }
        Err(ApiError::Forbidden(format!(
            "only an admin may do this, and user {} is a member",
            self.user.name
        )))
    }

    /// The apps a listing may show: `None` for every app (an admin without a filter), else
    /// the requested app (if the caller may view it) or every app the caller may view.
    pub fn visible_apps(
        &self,
        requested: Option<AppName>,
    ) -> Result<Option<Vec<AppName>>, ApiError> {
        match (requested, self.user.role) {
            (Some(app), _) => {
                self.require(&app, Access::View)?;
                Ok(Some(vec![app]))
            }
            (None, Role::Admin) => Ok(None),
            (None, Role::Member) => Ok(Some(
                self.user
                    .grants
                    .iter()
                    .map(|grant| grant.app.clone())
                    .collect(),
            )),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        // Put there by `authenticate`; missing only on a route outside its layer, which is a
        // wiring mistake and must not pass as anonymous.
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("route outside the auth layer")))
    }
}

/// The layer in front of every authenticated route: a valid, unexpired, unrevoked
/// `Authorization: Bearer kdn_…` token of an enabled user, or 401. A refused write is
/// recorded.
pub(super) async fn authenticate(
    State(state): State<Arc<ApiState>>,
    mut request: Request,
    next: Next,
) -> Response {
    match identify(&state, request.method(), request.headers()).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(error) => {
            if let Some(refusal) = refused_write(&request, &error) {
                record_refusal(&state, refusal).await;
            }
            error.into_response()
        }
    }
}

/// The refusal to record when `request` was refused with `error`: a write refused for its
/// credentials (401) or for lacking the console's header (403); none for a read, nor for a
/// node too busy to check (503).
fn refused_write(request: &Request, error: &ApiError) -> Option<Refusal> {
    let method = request.method();
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    let status = refusal_status(error)?;
    let path = request.uri().path();
    let route = (request.extensions().get::<MatchedPath>()).map_or(path, MatchedPath::as_str);
    Some(Refusal {
        action: format!("{method} {route}"),
        target: path.to_owned(),
        status,
        user_name: String::new(),
        token: presented_token(request.headers()),
        address: client_of(request.extensions()),
        reason: error.to_string(),
    })
}

/// The token a request presented, however malformed: the bearer token, or the cookie's
/// (only its fingerprint is recorded).
fn presented_token(headers: &HeaderMap) -> Option<String> {
    let bearer = (headers.get(header::AUTHORIZATION))
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim().to_owned());
    match bearer {
        Some(token) => Some(token),
        None if headers.contains_key(header::AUTHORIZATION) => None,
        None => session_cookie(headers),
    }
}

fn client_of(extensions: &axum::http::Extensions) -> Option<std::net::IpAddr> {
    (extensions.get::<ClientAddress>()).and_then(|ClientAddress(address)| *address)
}

async fn identify(
    state: &ApiState,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Caller, ApiError> {
    let token = match session_cookie(headers) {
        Some(token) if !headers.contains_key(header::AUTHORIZATION) => {
            require_console_header(method, headers)?;
            token
        }
        _ => bearer_token(headers)?.to_owned(),
    };
    let found = state
        .store
        .authenticate_token(&token_hash(&token), state.clock.now_ms())
        .await?;
    let (user, token) = found.ok_or_else(|| {
        ApiError::Unauthorized(
            "the token is unknown, expired or revoked: log in again (kadence login)".to_owned(),
        )
    })?;
    Ok(Caller { user, token })
}

/// The token of the console's session cookie, if the request has one.
pub(super) fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|cookie| cookie.name() == SESSION_COOKIE)
        .map(|cookie| cookie.value().to_owned())
}

/// A write with the session cookie needs [`CONSOLE_HEADER`] (see the module docs).
fn require_console_header(method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
    let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if safe || headers.contains_key(CONSOLE_HEADER) {
        return Ok(());
    }
    Err(ApiError::Forbidden(format!(
        "a write authenticated by the console's session cookie must carry the \
         {CONSOLE_HEADER} header: a request another site made the browser send is refused"
    )))
}

/// The marks of a login the console sends, checked before its body is read: a JSON body
/// (415 otherwise) and [`CONSOLE_HEADER`] (403 otherwise); see the module docs. A login
/// refused for lacking them is recorded.
pub(super) struct ConsoleLogin;

impl FromRequestParts<Arc<ApiState>> for ConsoleLogin {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ApiState>,
    ) -> Result<Self, Self::Rejection> {
        let marked = require_json_content(&parts.headers).and_then(|()| {
            if parts.headers.contains_key(CONSOLE_HEADER) {
                return Ok(ConsoleLogin);
            }
            Err(ApiError::Forbidden(format!(
                "a console login must carry the {CONSOLE_HEADER} header: a login another \
                 site made the browser send is refused"
            )))
        });
        if let Err(error) = &marked
            && let Some(status) = refusal_status(error)
        {
            let refusal = Refusal {
                action: "POST /api/auth/session".to_owned(),
                target: parts.uri.path().to_owned(),
                status,
                user_name: String::new(),
                token: None,
                address: client_of(&parts.extensions),
                reason: error.to_string(),
            };
            record_refusal(state, refusal).await;
        }
        marked
    }
}

/// The status of `error` if it refuses the request's credentials or marks (and is to be
/// recorded); none for anything else, such as a node too busy to check (503).
fn refusal_status(error: &ApiError) -> Option<StatusCode> {
    match error {
        ApiError::Unauthorized(_) => Some(StatusCode::UNAUTHORIZED),
        ApiError::Forbidden(_) => Some(StatusCode::FORBIDDEN),
        ApiError::UnsupportedMediaType(_) => Some(StatusCode::UNSUPPORTED_MEDIA_TYPE),
        _ => None,
    }
}

/// The layer of an admin-only route with a large body: anyone else is refused (403) before
/// the body is read. Behind [`authenticate`], which leaves the [`Caller`] in the request.
pub(super) async fn admins_only(request: Request, next: Next) -> Response {
    let refusal = match request.extensions().get::<Caller>() {
        Some(caller) => caller.require_admin().err(),
        None => Some(ApiError::Internal(anyhow::anyhow!(
            "admin-only route outside the auth layer"
        ))),
    };
    match refusal {
        Some(refusal) => refusal.into_response(),
        None => next.run(request).await,
    }
}

/// The token of an `Authorization: Bearer …` header.
fn bearer_token(headers: &HeaderMap) -> Result<&str, ApiError> {
    let missing = || {
        ApiError::Unauthorized(
            "credentials needed: send `Authorization: Bearer <token>` with a token from \
             POST /api/auth/login or an API token (kadence login)"
                .to_owned(),
        )
    };
    let value = headers.get(header::AUTHORIZATION).ok_or_else(missing)?;
    let value = value.to_str().map_err(|_| missing())?;
    let (scheme, token) = value.split_once(' ').ok_or_else(missing)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(missing());
    }
    let token = token.trim();
    if !token.starts_with(TOKEN_PREFIX) {
        return Err(ApiError::Unauthorized(format!(
            "not a Kadence token: tokens start with {TOKEN_PREFIX}"
        )));
    }
    Ok(token)
}
