//! API tokens for automation: `GET /api/tokens` lists the caller's tokens (sessions too,
//! revoked and expired ones for the record), `POST /api/tokens` makes a named one with an
//! expiry (shown once), `DELETE /api/tokens/{id}` revokes one of the caller's.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::body::ApiJson;
use super::caller::Caller;
use super::error::ApiError;
use super::{ApiState, bad_request};
use crate::auth::{mint_token, token_hash};
use crate::model::{TokenInfo, TokenKind, User};
use crate::store::NewToken;

/// Longest token name, in characters.
const MAX_TOKEN_NAME_CHARS: usize = 100;
/// An API token's life when the request does not say.
const DEFAULT_TOKEN_DAYS: u32 = 90;
const DAY_MS: i64 = 24 * 3600 * 1000;

/// Answer of a login, or of making an API token: the token is shown this once.
#[derive(Debug, Serialize, Deserialize)]
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
#[derive(Debug, Serialize, Deserialize)]
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
    let max_days = u32::try_from(state.api_token_max_ttl.as_secs() / 86_400).unwrap_or(u32::MAX);
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

pub(super) async fn list_tokens(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
) -> Result<Json<Vec<TokenInfo>>, ApiError> {
    Ok(Json(state.store.list_tokens(caller.user.id).await?))
}

pub(super) async fn revoke_token(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id: i64 = id
        .parse()
        .map_err(|_| bad_request(format!("invalid token id {id:?}: use a number")))?;
    let revoked = state
        .store
        .revoke_token(caller.user.id, id, state.clock.now_ms())
        .await?;
    if !revoked {
        return Err(ApiError::NotFound(format!(
            "you have no live token {id} (kadence token list)"
        )));
    }
    Ok(StatusCode::NO_CONTENT)
}
