//! API tokens for automation: `GET /api/tokens` lists the caller's tokens (sessions too,
//! revoked and expired ones for the record), `POST /api/tokens` makes a named one with an
//! expiry (shown once), `DELETE /api/tokens/{id}` revokes one of the caller's.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::body::{ApiJson, ApiPath};
use super::caller::Caller;
use super::error::ApiError;
use super::error::ErrorBody;
use super::users::find_user;
use super::{ApiState, bad_request};
use crate::domain::model::{TokenInfo, TokenKind, User};
use crate::operations::auth::{mint_token, token_hash};
use crate::store::NewToken;

/// Longest token name, in characters.
const MAX_TOKEN_NAME_CHARS: usize = crate::domain::model::limits::TOKEN_NAME.max;
/// An API token's life when the request does not say.
const DEFAULT_TOKEN_DAYS: u32 = 90;
const DAY_MS: i64 = 24 * 3600 * 1000;

/// Answer of a login, or of making an API token: the token is shown this once.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IssuedToken {
    /// The token, for `Authorization: Bearer …`. Kadence keeps only its hash.
    pub token: String,
    /// Its id (for listing and revoking it).
    pub token_id: i64,
    /// Not accepted from this instant, ms since the epoch.
    pub expires_at_ms: i64,
    /// Whose it is.
    pub user: User,
}

/// Body of `POST /api/tokens`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTokenRequest {
    /// What the token is for (e.g. "deploy pipeline"), 1–100 characters.
    pub name: String,
    /// Days until it expires: default 90, at most `auth.api_token_max_ttl`.
    #[serde(default)]
    pub expires_in_days: Option<u32>,
}

/// Mints a token for `user`, records its hash, and answers the token itself (this once).
pub(super) async fn issue_token(
    state: &ApiState,
    user: User,
    kind: TokenKind,
    name: String,
    expires_at_ms: i64,
) -> Result<IssuedToken, ApiError> {
    let token = mint_token();
    let record = NewToken {
        user_id: user.id,
        kind,
        name,
        token_hash: token_hash(&token),
        expires_at_ms,
    };
    let info = state
        .store
        .insert_token(&record, state.clock.now_ms())
        .await?;
    Ok(IssuedToken {
        token,
        token_id: info.id,
        expires_at_ms: info.expires_at_ms,
        user,
    })
}

/// Makes a named API token for the caller, for automation; its text is shown this once.
///
/// Any signed-in caller, for themselves: the token acts as its owner, judged at each
/// request by their role and grants as they are then. `name` says what it is for (1 to 100
/// characters). It lasts `expires_in_days` (default 90; 1 to `auth.api_token_max_ttl`, 400
/// otherwise), and ends sooner when revoked, or when its owner is disabled or deleted; a
/// password change leaves it working. Kadence keeps only its hash: a lost token cannot be
/// shown again, make a new one.
#[utoipa::path(
    post, path = "/api/tokens", tag = "tokens", request_body = NewTokenRequest,
    responses((status = 201, description = "The new token, shown once", body = IssuedToken)),
)]
pub(super) async fn create_token(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiJson(request): ApiJson<NewTokenRequest>,
) -> Result<(StatusCode, Json<IssuedToken>), ApiError> {
    let name = request.name.trim().to_owned();
    if name.is_empty() || name.chars().count() > MAX_TOKEN_NAME_CHARS {
        return Err(bad_request(format!(
            "name must be 1 to {MAX_TOKEN_NAME_CHARS} characters: say what the token is for"
        )));
    }
    let max_days =
        u32::try_from(state.credentials.api_token_max_ttl.as_secs() / 86_400).unwrap_or(u32::MAX);
    let days = request
        .expires_in_days
        .unwrap_or(DEFAULT_TOKEN_DAYS.min(max_days));
    if !(1..=max_days).contains(&days) {
        return Err(bad_request(format!(
            "expires_in_days must be between 1 and {max_days} (auth.api_token_max_ttl), not {days}"
        )));
    }
    let expires_at_ms = state
        .clock
        .now_ms()
        .saturating_add(i64::from(days) * DAY_MS);
    let issued = issue_token(&state, caller.user, TokenKind::Api, name, expires_at_ms).await?;
    Ok((StatusCode::CREATED, Json(issued)))
}

/// Lists the caller's own tokens, API tokens and sessions alike, newest first.
///
/// Any signed-in caller, for themselves (an admin lists another user's with
/// `GET /api/users/{name}/tokens`). Revoked and expired tokens are listed too, for the
/// record; a token's text is never shown again after it was made. The whole list, not a
/// page.
#[utoipa::path(
    get, path = "/api/tokens", tag = "tokens",
    responses((status = 200, description = "The caller's tokens (never their secrets)", body = Vec<TokenInfo>)),
)]
pub(super) async fn list_tokens(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
) -> Result<Json<Vec<TokenInfo>>, ApiError> {
    Ok(Json(state.store.list_tokens(caller.user.id).await?))
}

/// Revokes one of the caller's own tokens.
///
/// Any signed-in caller, for their own tokens, sessions included; the token is refused from
/// the next request on. A token that is not the caller's, or is revoked or expired already,
/// is a 404, so that nobody learns of another user's tokens. Admins revoke other users'
/// with `DELETE /api/users/{name}/tokens/{id}`.
#[utoipa::path(
    delete, path = "/api/tokens/{id}", tag = "tokens",
    params(("id" = i64, Path, description = "The token's id")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 404, description = "The caller has no such token", body = ErrorBody),
    ),
)]
pub(super) async fn revoke_token(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    revoke(&state, caller.user.id, &id).await
}

/// Revokes token `raw_id` of user `user_id`: 404 unless it is theirs and live.
async fn revoke(state: &ApiState, user_id: i64, raw_id: &str) -> Result<StatusCode, ApiError> {
    let id: i64 = raw_id
        .parse()
        .map_err(|_| bad_request(format!("invalid token id {raw_id:?}: use a number")))?;
    let revoked = state
        .store
        .revoke_token(user_id, id, state.clock.now_ms())
        .await?;
    if !revoked {
        return Err(ApiError::NotFound(format!(
            "no live token {id} of this user (kadence token list)"
        )));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Lists a user's tokens, API tokens and sessions alike, newest first (admin).
///
/// Admin only. Revoked and expired tokens are listed too, for the record; never a token's
/// text. The whole list, not a page.
#[utoipa::path(
    get, path = "/api/users/{name}/tokens", tag = "tokens",
    params(("name" = String, Path, description = "The user's name")),
    responses(
        (status = 200, description = "The user's tokens (never their secrets)", body = Vec<TokenInfo>),
        (status = 404, description = "No such user", body = ErrorBody),
    ),
)]
pub(super) async fn list_user_tokens(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<Vec<TokenInfo>>, ApiError> {
    caller.require_admin()?;
    let user = find_user(&state, &name).await?;
    Ok(Json(state.store.list_tokens(user.id).await?))
}

/// Revokes one of a user's tokens (admin).
///
/// Admin only. The token is refused from the next request on. To end everything a user
/// holds at once, disable them (`PUT /api/users/{name}/status`). 404 when the user does not
/// exist or has no such live token.
#[utoipa::path(
    delete, path = "/api/users/{name}/tokens/{id}", tag = "tokens",
    params(
        ("name" = String, Path, description = "The user's name"),
        ("id" = i64, Path, description = "The token's id"),
    ),
    responses(
        (status = 204, description = "Revoked"),
        (status = 404, description = "No such user, or no such live token of theirs", body = ErrorBody),
    ),
)]
pub(super) async fn revoke_user_token(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath((name, id)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    caller.require_admin()?;
    let user = find_user(&state, &name).await?;
    revoke(&state, user.id, &id).await
}
