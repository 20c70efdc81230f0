//! The keys executors sign what they write with (see [`crate::readers::executor_auth`]):
//! `POST /api/apps/{app}/executor-keys` makes one for an app and answers its text once,
//! `GET /api/apps/{app}/executor-keys` lists an app's keys (never their secrets), and
//! `DELETE /api/apps/{app}/executor-keys/{key_id}` revokes one.
//!
//! Making and revoking keys is an admin's, like making apps and rotating the signing key: a
//! key lets whoever holds it complete the app's runs and so fire its child jobs. Members who
//! may view the app see its keys listed, to tell which one their executors use.
//!
//! A rotation, for operators: make a new key, give it to the app's executors (restarting them
//! one at a time), then revoke the old key. Every node refuses a revoked key within
//! `executor_auth.key_refresh_interval`; a new key works at once on every node (a node reads
//! the keys again when a record names one it does not know).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kadence_kafka::ExecutorKey;
use kadence_schemas::AppName;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::audit::AuditNote;
use super::body::ApiPath;
use super::caller::Caller;
use super::error::{ApiError, ErrorBody};
use super::{ApiState, bad_request};
use crate::domain::model::Access;
use crate::store::{ExecutorKeyInfo, NewExecutorKey};

/// A key just made: what is listed of it, and its text, shown this once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NewExecutorKeyView {
    /// The key as listed from now on.
    #[serde(flatten)]
    pub info: ExecutorKeyInfo,
    /// The text to configure the app's executors with (`KADENCE_EXECUTOR_KEY`,
    /// `ExecutorBuilder::executor_key`, Python's `executor_key=`): `{key id}.{secret}`. It is
    /// shown only in this answer; the scheduler cannot show it again.
    pub executor_key: String,
}

/// The app named by a path, which must exist.
async fn existing_app(state: &ApiState, app: &str) -> Result<AppName, ApiError> {
    let app = AppName::parse(app).map_err(bad_request)?;
    ensure_exists(state, &app).await?;
    Ok(app)
}

/// 404 unless `app` exists.
async fn ensure_exists(state: &ApiState, app: &AppName) -> Result<(), ApiError> {
    if state.store.get_app(app).await?.is_none() {
        return Err(ApiError::NotFound(format!(
            "no app {app} (kadence app list shows them)"
        )));
    }
    Ok(())
}

/// Makes an executor key for an app; its text is shown this once (admin).
///
/// Admin only: a key lets whoever holds it complete the app's runs, and so fire its child
/// jobs. Configure the app's executors with the text (`KADENCE_EXECUTOR_KEY`,
/// `{key id}.{secret}`); the scheduler cannot show it again. The key works at once on every
/// node. To rotate: make a new key, give it to the app's executors (restarting them one at
/// a time), then revoke the old one. 404 for an app that does not exist.
#[utoipa::path(
    post, path = "/api/apps/{app}/executor-keys", tag = "executor-keys",
    params(("app" = String, Path, description = "The app whose executors will sign with it")),
    responses(
        (status = 201, description = "The new key, with its text shown this once", body = NewExecutorKeyView),
        (status = 404, description = "No such app", body = ErrorBody),
    ),
)]
pub(super) async fn create_executor_key(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(app): ApiPath<String>,
) -> Result<(StatusCode, AuditNote, Json<NewExecutorKeyView>), ApiError> {
    caller.require_admin()?;
    let app = existing_app(&state, &app).await?;
    let key = ExecutorKey::generate().map_err(|error| ApiError::Internal(error.into()))?;
    let record = NewExecutorKey {
        key_id: key.key_id().to_owned(),
        app: app.as_str().to_owned(),
        secret: SecretString::from(key.secret_text()),
        created_by: caller.user.name.clone(),
    };
    let info = (state.store)
        .add_executor_key(&record, state.clock.now_ms())
        .await?;
    tracing::info!(key_id = %info.key_id, %app, by = %caller.user.name, "new executor key");
    let note = AuditNote::app(&app).with(json!({ "key_id": info.key_id }));
    let view = NewExecutorKeyView {
        info,
        executor_key: key.text(),
    };
    Ok((StatusCode::CREATED, note, Json(view)))
}

/// Lists an app's executor keys, newest first, revoked ones included; never their secrets.
///
/// Needs VIEW on the app, so that members can tell which key their executors use. The grant
/// is checked first: a member without one gets 403 whether the app exists or not; 404 (an
/// app that does not exist) only reaches those who may see every app. An app's executors sign their results, logs, beats and dead
/// letters with one of its keys, and the scheduler refuses what a key of another app, or a
/// revoked one, signed. The whole list, not a page.
#[utoipa::path(
    get, path = "/api/apps/{app}/executor-keys", tag = "executor-keys",
    params(("app" = String, Path, description = "The app")),
    responses(
        (status = 200, description = "The app's keys, revoked ones included, newest first; never their secrets", body = Vec<ExecutorKeyInfo>),
        (status = 403, description = "No VIEW grant on the app (whether it exists or not)", body = ErrorBody),
        (status = 404, description = "No such app", body = ErrorBody),
    ),
)]
pub(super) async fn list_executor_keys(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(app): ApiPath<String>,
) -> Result<Json<Vec<ExecutorKeyInfo>>, ApiError> {
    // The grant first: a member without one is refused alike for an app that exists and
    // one that does not, so the answer tells no app names (an admin gets the 404).
    let app = AppName::parse(&app).map_err(bad_request)?;
    caller.require(&app, Access::View)?;
    ensure_exists(&state, &app).await?;
    Ok(Json(
        state.store.list_executor_keys(Some(app.as_str())).await?,
    ))
}

/// Revokes one of an app's executor keys (admin).
///
/// Admin only. Every node refuses what the key signs within
/// `executor_auth.key_refresh_interval`: executors still using it can no longer complete
/// runs or beat, so give them a new key first. The key stays listed, revoked; revoking it
/// again changes nothing. 404 for a key that is not the app's.
#[utoipa::path(
    delete, path = "/api/apps/{app}/executor-keys/{key_id}", tag = "executor-keys",
    params(
        ("app" = String, Path, description = "The key's app"),
        ("key_id" = String, Path, description = "The key's id"),
    ),
    responses(
        (status = 200, description = "The key, revoked: every node refuses it within executor_auth.key_refresh_interval", body = ExecutorKeyInfo),
        (status = 404, description = "No such app, or no such key of it", body = ErrorBody),
    ),
)]
pub(super) async fn revoke_executor_key(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath((app, key_id)): ApiPath<(String, String)>,
) -> Result<(AuditNote, Json<ExecutorKeyInfo>), ApiError> {
    caller.require_admin()?;
    let app = existing_app(&state, &app).await?;
    let not_found = || {
        ApiError::NotFound(format!(
            "app {app} has no executor key {key_id:?} (kadence executor-key list --app {app})"
        ))
    };
    // Checked before revoking: a key of another app is not this path's to revoke.
    let keys = state.store.list_executor_keys(Some(app.as_str())).await?;
    if !keys.iter().any(|key| key.key_id == key_id) {
        return Err(not_found());
    }
    let info = (state.store)
        .revoke_executor_key(&key_id, state.clock.now_ms())
        .await?
        .ok_or_else(not_found)?;
    tracing::info!(key_id = %info.key_id, %app, by = %caller.user.name,
        "executor key revoked; every node refuses it from its next key refresh");
    let note = AuditNote::app(&app).with(json!({ "key_id": info.key_id }));
    Ok((note, Json(info)))
}
