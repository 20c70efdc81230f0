//! One-time password reset tokens: how a user without a password (one an import created)
//! sets one, and how an admin lets a user who forgot theirs back in.
//!
//! - `POST /api/users/{name}/password-reset` (admin; `{hours}`, default 168 = a week, at most
//!   720): a new token for the user, shown once; the user's earlier unused tokens stop working.
//! - `POST /api/auth/password-reset` (no credentials: the token is the credential;
//!   `{token, password}`): sets the password under the same rules as every other password
//!   (at least [`MIN_PASSWORD_CHARS`](super::MIN_PASSWORD_CHARS) characters), uses the token
//!   up and ends every session of the user. An unknown, used or expired token is 400;
//!   failures are throttled per client address as logins are (429 with `Retry-After`), and
//!   every redemption, failed ones included, is in the audit trail.
//!
//! Tokens are `kdr_` and 256 random bits, kept as their SHA-256 (as API tokens are: see
//! `crate::operations::auth`), so a copy of the table lets nobody in.

use std::net::IpAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::audit::{AuditNote, record};
use super::body::{ApiJson, ApiPath, OptionalJson};
use super::caller::Caller;
use super::client::ClientAddress;
use super::error::{ApiError, ErrorBody};
use super::users::{find_user, hashed};
use super::{ApiState, bad_request, millis_from_now};
use crate::domain::model::NewAuditEntry;
use crate::operations::auth::{mint_token, token_hash};
use crate::operations::import::IssuedResetToken;
use crate::store::NewResetToken;

/// How long a reset token works unless asked otherwise: a week, time enough to hand it over.
pub const DEFAULT_RESET_TOKEN_HOURS: u32 = crate::operations::import::DEFAULT_RESET_TOKEN_HOURS;
/// The longest a reset token may work: 30 days.
const MAX_RESET_TOKEN_HOURS: u32 = 720;
/// What every reset token starts with (API and session tokens start with `kdn_`).
const RESET_TOKEN_PREFIX: &str = "kdr_";

/// Body of `POST /api/users/{name}/password-reset`.
#[derive(Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetTokenRequest {
    /// Hours the token works, 1–720; default 168 (a week).
    #[serde(default)]
    pub hours: Option<u32>,
}

/// Body of `POST /api/auth/password-reset`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordResetRequest {
    /// The reset token, as it was handed out.
    pub token: String,
    /// The new password, at least 10 characters.
    pub password: String,
}

/// A new reset token and what the store keeps of it.
pub(super) fn new_reset_token(issued_by: &str, now_ms: i64, hours: u32) -> (String, NewResetToken) {
    let token = mint_token().replacen(crate::operations::auth::TOKEN_PREFIX, RESET_TOKEN_PREFIX, 1);
    let ttl = std::time::Duration::from_secs(u64::from(hours) * 3600);
    let stored = NewResetToken {
        token_hash: token_hash(&token),
        expires_at_ms: millis_from_now(now_ms, ttl),
        issued_by: issued_by.to_owned(),
    };
    (token, stored)
}

/// `hours`, checked: 1 to 720.
pub(super) fn check_hours(hours: u32) -> Result<u32, ApiError> {
    if (1..=MAX_RESET_TOKEN_HOURS).contains(&hours) {
        Ok(hours)
    } else {
        Err(bad_request(format!(
            "hours must be between 1 and {MAX_RESET_TOKEN_HOURS}, not {hours}"
        )))
    }
}

/// Issues a one-time password reset token for a user, shown this once (admin).
///
/// Admin only: how a user who forgot their password gets back in. Hand the token over; its
/// holder sets a password with `POST /api/auth/password-reset`, without logging in. It
/// works once, for `hours` (default 168, a week; 1 to 720); a new token voids the user's
/// earlier unused ones, and disabling the user voids them all. Nothing else changes: the
/// present password works until the token is redeemed.
#[utoipa::path(
    post, path = "/api/users/{name}/password-reset", tag = "users",
    request_body(content = Option<ResetTokenRequest>, description = "How long the token works; the body may be left out"),
    params(("name" = String, Path, description = "The user's name")),
    responses(
        (status = 201, description = "The token, shown once; the user's earlier unused tokens stop working", body = IssuedResetToken),
        (status = 404, description = "No such user", body = ErrorBody),
    ),
)]
pub(super) async fn issue_reset_token(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    OptionalJson(request): OptionalJson<ResetTokenRequest>,
) -> Result<(StatusCode, AuditNote, Json<IssuedResetToken>), ApiError> {
    caller.require_admin()?;
    let hours = check_hours(request.hours.unwrap_or(DEFAULT_RESET_TOKEN_HOURS))?;
    let user = find_user(&state, &name).await?;
    let now = state.clock.now_ms();
    let (token, stored) = new_reset_token(&caller.user.name, now, hours);
    if !state.store.issue_reset_token(user.id, &stored, now).await? {
        return Err(ApiError::NotFound(format!("user {name} no longer exists")));
    }
    let note = AuditNote::default().with(serde_json::json!({ "user": name, "hours": hours }));
    let issued = IssuedResetToken {
        user: user.name,
        token,
        expires_at_ms: stored.expires_at_ms,
    };
    Ok((StatusCode::CREATED, note, Json(issued)))
}

/// Sets a user's password with a one-time reset token.
///
/// Anyone may call it: the token, from an admin (`POST /api/users/{name}/password-reset`)
/// or from an XXL-JOB import, is the credential. The password follows the rules of every
/// password (at least 10 characters), and one refused leaves the token usable. A token that
/// is unknown, used or expired is a 400; such failures make the client's address wait as
/// failed logins do (429 with `Retry-After`). Redeemed, the token is used up and every
/// session of the user ends; their API tokens keep working. Every redemption, failed ones
/// included, is in the audit trail.
#[utoipa::path(
    post, path = "/api/auth/password-reset", tag = "auth", request_body = PasswordResetRequest,
    responses(
        (status = 204, description = "The password is set, the token used up, the user's sessions ended"),
        (status = 429, description = "Too many failed attempts from this address: retry after Retry-After seconds", body = ErrorBody),
    ),
)]
pub(super) async fn redeem_reset_token(
    State(state): State<Arc<ApiState>>,
    ClientAddress(address): ClientAddress,
    ApiJson(request): ApiJson<PasswordResetRequest>,
) -> Result<StatusCode, ApiError> {
    let now = state.clock.now_ms();
    let hash = token_hash(request.token.trim());
    // Keyed by the token, so that only the per-address limit (not one shared name) counts
    // the guesses of one client.
    let key = format!("password-reset:{}", &hash[..16]);
    if let Err(retry_after_secs) = state.credentials.login_throttle.check(&key, address, now) {
        return Err(ApiError::TooManyRequests {
            message: format!(
                "too many failed password resets from this address: try again in \
                 {retry_after_secs} s"
            ),
            retry_after_secs,
        });
    }
    // The password's rules first: a password refused leaves the token usable.
    let password_hash = hashed(request.password).await?;
    let Some(user) = state
        .store
        .redeem_reset_token(&hash, &password_hash, now)
        .await?
    else {
        state.credentials.login_throttle.failed(&key, address, now);
        record_reset(&state, None, address, StatusCode::BAD_REQUEST).await;
        return Err(ApiError::BadRequest(
            "this reset token is unknown, used or expired: ask an admin for a new one \
             (kadence user reset-token NAME)"
                .to_owned(),
        ));
    };
    state.credentials.login_throttle.succeeded(&key, address);
    record_reset(
        &state,
        Some((user.id, &user.name)),
        address,
        StatusCode::NO_CONTENT,
    )
    .await;
    Ok(StatusCode::NO_CONTENT)
}

/// A redemption in the audit trail (the layer that records writes is not in front of it).
async fn record_reset(
    state: &ApiState,
    user: Option<(i64, &str)>,
    address: Option<IpAddr>,
    status: StatusCode,
) {
    let entry = NewAuditEntry {
        at_ms: state.clock.now_ms(),
        user_id: user.map(|(id, _)| id),
        user_name: user
            .map_or("(unknown reset token)", |(_, name)| name)
            .to_owned(),
        action: "POST /api/auth/password-reset".to_owned(),
        target: "/api/auth/password-reset".to_owned(),
        app: None,
        status: status.as_u16(),
        details: address.map(|address| serde_json::json!({ "address": address })),
    };
    record(state, entry).await;
}
