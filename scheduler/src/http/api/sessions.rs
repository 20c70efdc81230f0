//! Logging in and out: `POST /api/auth/login` trades a user name and password for a session
//! token (expiring after `auth.session_ttl`), `POST /api/auth/session` does the same for a
//! browser, putting the token in the console's `HttpOnly` cookie instead of the answer,
//! `POST /api/auth/logout` revokes the token the request came with (and clears the cookie),
//! `GET /api/auth/me` says who the token belongs to and `PUT /api/auth/me/locale` sets the
//! language the console speaks to them.
//!
//! A wrong name and a wrong password get the same answer, after the same work (an unknown
//! name is checked against a dummy hash), so the login cannot be used to find user names.
//! Each failure makes its client address wait before it tries that name again, and an
//! address failing for many names waits for all ([`super::throttle`]); a failed or throttled
//! login is in the audit trail, a flood of them as one entry with its count
//! ([`super::refusals`]). The cookie is `Secure` when the browser came over HTTPS, which only
//! a trusted proxy can say ([`CameOverHttps`]).
//! A disabled user's right password gets a wrong one's answer too, and counts as a failure,
//! so that neither tells a guesser the password was right; only the audit trail says why
//! ([`refuse_disabled`]).

use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use cookie::{Cookie, SameSite};
use serde::{Deserialize, Serialize};

use super::audit::record;
use super::body::ApiJson;
use super::caller::{Caller, ConsoleLogin, SESSION_COOKIE};
use super::client::{CameOverHttps, ClientAddress};
use super::error::ApiError;
use super::error::ErrorBody;
use super::refusals::{Refusal, record_refusal};
use super::tokens::{IssuedToken, issue_token};
use super::users::password_matches;
use super::{ApiState, millis_from_now};
use crate::domain::model::{NewAuditEntry, TokenKind, User};
use crate::operations::auth::hash_password;
use crate::store::UserCredentials;

/// Body of `POST /api/auth/login`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    /// Login name.
    pub name: String,
    /// Password.
    pub password: String,
}

/// What an unknown name's password is checked against, so that it costs what a known
/// name's does.
static DUMMY_HASH: LazyLock<String> =
    LazyLock::new(|| hash_password("not a password anyone has").unwrap_or_default());

/// Trades a user name and password for a session token.
///
/// Anyone may call it. The token is shown this once and lasts `auth.session_ttl`; send it
/// as `Authorization: Bearer <token>` and end it with `POST /api/auth/logout`. A wrong
/// name, a wrong password and a disabled user's right password all get the same 401, after
/// the same work, so that the answer tells a guesser nothing. Each failure makes the
/// client's address wait before it tries that name again, longer with each one (429 with
/// `Retry-After` meanwhile), and an address failing for many names waits for all; the user
/// is never locked out. Logins, failed and throttled ones included, are in the audit trail.
#[utoipa::path(
    post, path = "/api/auth/login", tag = "auth", request_body = LoginRequest,
    responses(
        (status = 201, description = "A session token, shown once", body = IssuedToken),
        (status = 401, description = "Wrong user name or password", body = ErrorBody),
        (status = 429, description = "Too many failed logins: retry after Retry-After seconds", body = ErrorBody),
    ),
)]
pub(super) async fn login(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
    ClientAddress(address): ClientAddress,
    ApiJson(request): ApiJson<LoginRequest>,
) -> Result<(StatusCode, Json<IssuedToken>), ApiError> {
    let issued = check_login(&state, &headers, address, request).await?;
    Ok((StatusCode::CREATED, Json(issued)))
}

/// Answer of `POST /api/auth/session`: the session's token is in the cookie, not here.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ConsoleSession {
    /// The session token's id.
    pub token_id: i64,
    /// The session ends at this instant, ms since the epoch.
    pub expires_at_ms: i64,
    /// Who logged in.
    pub user: User,
}

/// Logs a browser in: the session token goes into the console's `HttpOnly` cookie.
///
/// Anyone may call it: it is the web console's login. It checks the name and password as
/// `POST /api/auth/login` does, with the same answers, throttling and audit, but sets the
/// token as the cookie `kadence_session` (`HttpOnly`, `SameSite=Strict`, `Secure` when the
/// browser came over HTTPS) and answers only its id and expiry, so that no script can read
/// it. It takes only a JSON body (415 otherwise) with an `X-Requested-With` header (403
/// otherwise), which no form another site posts can send: such a form would sign the
/// browser in as the attacker (login CSRF). A write authenticated by the cookie needs the
/// same header.
#[utoipa::path(
    post, path = "/api/auth/session", tag = "auth", request_body = LoginRequest,
    responses(
        (status = 201, description = "Logged in: the session token is set as the `kadence_session` cookie (HttpOnly, SameSite=Strict)", body = ConsoleSession),
        (status = 401, description = "Wrong user name or password", body = ErrorBody),
        (status = 403, description = "No X-Requested-With header: a login another site made the browser send", body = ErrorBody),
        (status = 415, description = "The body is not sent as JSON (Content-Type: application/json)", body = ErrorBody),
        (status = 429, description = "Too many failed logins: retry after Retry-After seconds", body = ErrorBody),
    ),
)]
pub(super) async fn open_session(
    State(state): State<Arc<ApiState>>,
    _: ConsoleLogin,
    headers: HeaderMap,
    ClientAddress(address): ClientAddress,
    CameOverHttps(https): CameOverHttps,
    ApiJson(request): ApiJson<LoginRequest>,
) -> Result<(StatusCode, [(HeaderName, String); 1], Json<ConsoleSession>), ApiError> {
    let issued = check_login(&state, &headers, address, request).await?;
    let cookie = Cookie::build((SESSION_COOKIE, issued.token))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path("/")
        .secure(https)
        .max_age(cookie::time::Duration::seconds(
            i64::try_from(state.credentials.session_ttl.as_secs()).unwrap_or(i64::MAX),
        ));
    let session = ConsoleSession {
        token_id: issued.token_id,
        expires_at_ms: issued.expires_at_ms,
        user: issued.user,
    };
    Ok((
        StatusCode::CREATED,
        [(header::SET_COOKIE, cookie.to_string())],
        Json(session),
    ))
}

/// A session token for a right name and password: throttled, audited, the same work for an
/// unknown name as for a wrong password.
async fn check_login(
    state: &ApiState,
    headers: &HeaderMap,
    address: Option<IpAddr>,
    request: LoginRequest,
) -> Result<IssuedToken, ApiError> {
    let now = state.clock.now_ms();
    if let Err(retry_after_secs) =
        state
            .credentials
            .login_throttle
            .check(&request.name, address, now)
    {
        let message = format!(
            "too many failed logins for this user from this address, or from this address: \
             try again in {retry_after_secs} s"
        );
        let refusal = Refusal::login(
            &request.name,
            address,
            StatusCode::TOO_MANY_REQUESTS,
            &message,
        );
        record_refusal(state, refusal).await;
        return Err(ApiError::TooManyRequests {
            message,
            retry_after_secs,
        });
    }
    // Exactly the name typed: a database whose collation ignores case or trailing spaces
    // (MariaDB's) must not let `admin ` in as `admin`, past the count kept for `admin`.
    let found = (state.store.user_credentials(&request.name).await?)
        .filter(|found| found.user.name == request.name);
    let hash = found
        .as_ref()
        .map_or_else(|| DUMMY_HASH.clone(), |found| found.password_hash.clone());
    let matches = password_matches(request.password, hash).await?;
    if let Some(disabled) = found
        .as_ref()
        .filter(|found| matches && found.user.disabled_at_ms.is_some())
    {
        return Err(refuse_disabled(state, disabled, address, now).await);
    }
    let Some(found) = found.filter(|_| matches) else {
        state
            .credentials
            .login_throttle
            .failed(&request.name, address, now);
        // Debug-quoted: a name with a newline in it must not forge a line of the log.
        tracing::info!(user = ?request.name, ?address, "failed login");
        let message = "wrong user name or password";
        let refusal = Refusal::login(&request.name, address, StatusCode::UNAUTHORIZED, message);
        record_refusal(state, refusal).await;
        return Err(ApiError::Unauthorized(message.to_owned()));
    };
    state
        .credentials
        .login_throttle
        .succeeded(&request.name, address);
    record_login(state, &found.user, address).await;
    let client = client_name(headers, address);
    let expires_at_ms = millis_from_now(now, state.credentials.session_ttl);
    issue_token(state, found.user, TokenKind::Session, client, expires_at_ms).await
}

/// The answer to a disabled user's right password: a wrong password's, counted by the
/// throttle as one is, and recorded in the audit trail with the reason.
async fn refuse_disabled(
    state: &ApiState,
    found: &UserCredentials,
    address: Option<IpAddr>,
    now: i64,
) -> ApiError {
    let name = &found.user.name;
    state.credentials.login_throttle.failed(name, address, now);
    tracing::info!(user = ?name, ?address, "login of a disabled user refused");
    let entry = NewAuditEntry {
        at_ms: now,
        user_id: Some(found.user.id),
        user_name: name.clone(),
        action: "POST /api/auth/login".to_owned(),
        target: "/api/auth/login".to_owned(),
        app: None,
        status: StatusCode::UNAUTHORIZED.as_u16(),
        details: Some(serde_json::json!({ "address": address, "reason": "user disabled" })),
    };
    record(state, entry).await;
    ApiError::Unauthorized("wrong user name or password".to_owned())
}

/// A successful login in the audit trail (the layer that records other writes is not in
/// front of it; refused ones are [`Refusal`]s).
async fn record_login(state: &ApiState, user: &User, address: Option<IpAddr>) {
    let entry = NewAuditEntry {
        at_ms: state.clock.now_ms(),
        user_id: Some(user.id),
        user_name: user.name.clone(),
        action: "POST /api/auth/login".to_owned(),
        target: "/api/auth/login".to_owned(),
        app: None,
        status: StatusCode::CREATED.as_u16(),
        details: address.map(|address| serde_json::json!({ "address": address })),
    };
    record(state, entry).await;
}

/// What a session is named after: the client's address and its `User-Agent`.
fn client_name(headers: &HeaderMap, address: Option<IpAddr>) -> String {
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|agent| agent.to_str().ok())
        .unwrap_or("unknown client");
    let name = match address {
        Some(address) => format!("{agent} from {address}"),
        None => agent.to_owned(),
    };
    name.chars().take(200).collect()
}

/// Revokes the token the request came with, and clears the console's cookie.
///
/// Any signed-in caller. The token is refused from the next request on, whatever its kind:
/// called with an API token, it revokes that API token, so automation that keeps its token
/// must not call it. The caller's other tokens stay; `DELETE /api/tokens/{id}` revokes them
/// one by one.
#[utoipa::path(
    post, path = "/api/auth/logout", tag = "auth",
    responses((status = 204, description = "The token the request came with is revoked, and the console's cookie cleared")),
)]
pub(super) async fn logout(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
) -> Result<(StatusCode, [(HeaderName, String); 1]), ApiError> {
    state
        .store
        .revoke_token(caller.user.id, caller.token.id, state.clock.now_ms())
        .await?;
    let mut cleared = Cookie::build((SESSION_COOKIE, "")).path("/").build();
    cleared.make_removal();
    Ok((
        StatusCode::NO_CONTENT,
        [(header::SET_COOKIE, cleared.to_string())],
    ))
}

/// Says who the caller is: their user, role, grants and console language.
///
/// Any signed-in caller. It answers what the request was judged by: the role, status and
/// grants as the database holds them now (nothing is cached), so a change an admin made
/// shows from the next request.
#[utoipa::path(
    get, path = "/api/auth/me", tag = "auth",
    responses((status = 200, description = "The caller, with their grants", body = User)),
)]
pub(super) async fn who_am_i(caller: Caller) -> Json<User> {
    Json(caller.user)
}

/// Body of `PUT /api/auth/me/locale`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LocaleRequest {
    /// `en` or `zh-CN`; null to follow the browser's language again.
    pub locale: Option<String>,
}

/// Sets the language the web console speaks to the caller.
///
/// Any signed-in caller, for themselves. `en` or `zh-CN`, or null to follow the browser's
/// language again; any other value is a 400 naming the languages the console speaks. It
/// changes nothing but the console's language.
#[utoipa::path(
    put, path = "/api/auth/me/locale", tag = "auth", request_body = LocaleRequest,
    responses(
        (status = 200, description = "The caller, speaking the new language", body = User),
        (status = 400, description = "A language the console does not speak", body = ErrorBody),
    ),
)]
pub(super) async fn set_locale(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiJson(request): ApiJson<LocaleRequest>,
) -> Result<Json<User>, ApiError> {
    if let Some(locale) = &request.locale
        && !crate::http::console::LOCALES.contains(&locale.as_str())
    {
        return Err(ApiError::BadRequest(format!(
            "the console speaks {}, not {locale:?}",
            crate::http::console::LOCALES.join(", ")
        )));
    }
    let now = state.clock.now_ms();
    let locale = request.locale.as_deref();
    if !state.store.set_locale(caller.user.id, locale, now).await? {
        return Err(ApiError::NotFound(format!(
            "user {} no longer exists",
            caller.user.name
        )));
    }
    let mut user = caller.user;
    user.locale = request.locale;
    Ok(Json(user))
}
