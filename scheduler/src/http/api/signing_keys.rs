//! The keys triggers are signed with (see [`crate::engine::signer`]): `GET /api/signing-keys` lists
//! them for anyone logged in (public halves only: executors are configured with them),
//! `POST /api/signing-keys/rotate` makes a new one that every node signs with from its next
//! key refresh on, and `POST /api/signing-keys/{id}/retire` stops a key being used, never the
//! only active one. Rotating and retiring are an admin's: a key decides what executors run.
//!
//! A rotation, for operators: rotate, add the new public key to every executor
//! (`.trusted_key(…)`, keeping the old one), and retire the old key once no executor needs
//! it; executors that trust only the old key refuse triggers signed with the new one.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::ApiState;
use super::audit::AuditNote;
use super::body::ApiPath;
use super::caller::Caller;
use super::error::{ApiError, ErrorBody};
use crate::engine::signer::new_signing_key;
use crate::store::{RetireOutcome, SigningKeyInfo};

/// A signing key as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SigningKeyView {
    /// Its id (the `kadence.signature.key` header of the records it signs).
    pub key_id: String,
    /// The public key to configure executors with: base64 of its 32 bytes.
    pub public_key: String,
    /// When it was made, ms since the epoch.
    pub created_at_ms: i64,
    /// When it was retired, ms; `null` while active.
    pub retired_at_ms: Option<i64>,
    /// Whether it is the key the nodes sign with now (the newest active one; a node that has
    /// not refreshed since a rotation still signs with the previous one for at most
    /// `signing.key_refresh_interval`).
    pub signing: bool,
}

/// The keys, newest first, the signing one marked.
fn views(keys: Vec<SigningKeyInfo>) -> Vec<SigningKeyView> {
    let signing = keys
        .iter()
        .find(|key| key.retired_at_ms.is_none())
        .map(|key| key.key_id.clone());
    keys.into_iter()
        .map(|key| SigningKeyView {
            signing: Some(&key.key_id) == signing.as_ref(),
            key_id: key.key_id,
            public_key: key.public_key,
            created_at_ms: key.created_at_ms,
            retired_at_ms: key.retired_at_ms,
        })
        .collect()
}

/// Lists the keys triggers are signed with, newest first: public halves only.
///
/// Any signed-in caller: the public keys are what executors are configured with
/// (`.trusted_key(…)`), and are no secret. `signing` marks the key the nodes sign with now,
/// the newest active one; a node that has not refreshed since a rotation signs with the one
/// before for at most `signing.key_refresh_interval`. The whole list, not a page.
#[utoipa::path(
    get, path = "/api/signing-keys", tag = "signing-keys",
    responses((status = 200, description = "Every key, newest first: public halves only", body = Vec<SigningKeyView>)),
)]
pub(super) async fn list_signing_keys(
    State(state): State<Arc<ApiState>>,
    _caller: Caller,
) -> Result<Json<Vec<SigningKeyView>>, ApiError> {
    Ok(Json(views(state.store.list_signing_keys().await?)))
}

/// Makes a new signing key, which every node signs with from its next key refresh (admin).
///
/// Admin only: a key decides what executors run. Within `signing.key_refresh_interval`
/// every node signs trigger and control records with the new key, and executors that trust
/// only the old ones refuse them. A rotation: rotate, add the new public key to every
/// executor (keeping the old one), and retire the old key
/// (`POST /api/signing-keys/{id}/retire`) once no executor needs it.
#[utoipa::path(
    post, path = "/api/signing-keys/rotate", tag = "signing-keys",
    responses((status = 201, description = "The new key, which every node signs with from its next refresh", body = SigningKeyView)),
)]
pub(super) async fn rotate_signing_key(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
) -> Result<(StatusCode, AuditNote, Json<SigningKeyView>), ApiError> {
    caller.require_admin()?;
    let (_, record) = new_signing_key().map_err(|error| ApiError::Internal(error.into()))?;
    let info = state
        .store
        .add_signing_key(&record, state.clock.now_ms())
        .await?;
    tracing::info!(key_id = %info.key_id, by = %caller.user.name,
        "new signing key; every node signs with it from its next key refresh");
    let note = AuditNote::default().with(json!({ "key_id": info.key_id }));
    let view = SigningKeyView {
        key_id: info.key_id,
        public_key: info.public_key,
        created_at_ms: info.created_at_ms,
        retired_at_ms: None,
        signing: true,
    };
    Ok((StatusCode::CREATED, note, Json(view)))
}

/// Retires a signing key: no node signs with it any more (admin).
///
/// Admin only. If it was the key the nodes sign with, the newest other active key takes
/// over, on each node from its next key refresh. The only active key cannot be retired
/// (409): the scheduler must sign with some key, so rotate first. Retiring a retired key
/// changes nothing. What executors accept is their own configuration: take the key out of
/// their trusted keys once nothing signed with it is waiting for them.
#[utoipa::path(
    post, path = "/api/signing-keys/{id}/retire", tag = "signing-keys",
    params(("id" = String, Path, description = "The key's id")),
    responses(
        (status = 200, description = "The key, retired", body = SigningKeyView),
        (status = 404, description = "No such key", body = ErrorBody),
        (status = 409, description = "It is the only active key: rotate first", body = ErrorBody),
    ),
)]
pub(super) async fn retire_signing_key(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(key_id): ApiPath<String>,
) -> Result<(AuditNote, Json<SigningKeyView>), ApiError> {
    caller.require_admin()?;
    let outcome = state
        .store
        .retire_signing_key(&key_id, state.clock.now_ms())
        .await?;
    let info = match outcome {
        RetireOutcome::Retired(info) | RetireOutcome::AlreadyRetired(info) => info,
        RetireOutcome::NotFound => {
            return Err(ApiError::NotFound(format!(
                "no signing key {key_id:?} (kadence key list shows them)"
            )));
        }
        RetireOutcome::OnlyActiveKey => {
            return Err(ApiError::Conflict(format!(
                "signing key {key_id} is the only active one and the scheduler must sign with \
                 some key: rotate first (kadence key rotate), give executors the new public \
                 key, then retire this one"
            )));
        }
    };
    let note = AuditNote::default().with(json!({ "key_id": info.key_id }));
    let view = SigningKeyView {
        key_id: info.key_id,
        public_key: info.public_key,
        created_at_ms: info.created_at_ms,
        retired_at_ms: info.retired_at_ms,
        signing: false,
    };
    Ok((note, Json(view)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str, retired: bool) -> SigningKeyInfo {
        SigningKeyInfo {
            key_id: id.into(),
            public_key: format!("pk-{id}"),
            created_at_ms: 1,
            retired_at_ms: retired.then_some(2),
        }
    }

    #[test]
    fn the_newest_active_key_is_the_signing_one() {
        let listed = views(vec![key("c", true), key("b", false), key("a", false)]);
        let signing: Vec<(&str, bool)> = listed
            .iter()
            .map(|view| (view.key_id.as_str(), view.signing))
            .collect();
        assert_eq!(signing, [("c", false), ("b", true), ("a", false)]);
    }
}
