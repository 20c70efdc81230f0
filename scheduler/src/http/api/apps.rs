//! Apps (XXL-JOB's executor groups): create one with its trigger topic, list them.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kadence_schemas::AppName;
use serde::{Deserialize, Serialize};

use super::audit::AuditNote;
use super::body::{ApiJson, ApiQuery};
use super::caller::Caller;
use super::error::ApiError;
use super::error::ErrorBody;
use super::pages::{Page, PageQuery, page_request};
use super::{ApiState, MAX_PARTITIONS, bad_request};
use crate::domain::model::App;
use crate::domain::model::limits::APP_TITLE;
use crate::engine::kafka::TopicError;

/// Body of `POST /api/apps`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAppRequest {
    /// App name: 1–64 of `A-Z a-z 0-9 _ -`.
    pub name: String,
    /// Partitions of its trigger topic, 1–1024: the most executors that share its triggers.
    pub partitions: i32,
    /// Human-readable title, at most 255 characters.
    #[serde(default)]
    #[schema(max_length = 255)]
    pub title: String,
}

/// Creates an app with its trigger topic `{prefix}.triggers.{app}` (admin).
///
/// Admin only: an app is a trigger topic and a consumer group, the cluster's to give out.
/// The topic is created first, with `partitions` partitions (1 to 1024): the most executors
/// that share the app's triggers, and the shards of a broadcast job. The API cannot change
/// the count later, so choose it for the most executors the app will run. A topic that
/// exists with the same count is used as it is; one with another count is a 409, as is an
/// app of the same name. A topic the broker does not show in time is a 503: try again.
#[utoipa::path(
    post, path = "/api/apps", tag = "apps", request_body = NewAppRequest,
    responses(
        (status = 201, description = "The app; its trigger topic exists", body = App),
        (status = 409, description = "An app with this name exists, or its topic exists with another partition count", body = ErrorBody),
    ),
)]
pub(super) async fn create_app(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiJson(request): ApiJson<NewAppRequest>,
) -> Result<(StatusCode, AuditNote, Json<App>), ApiError> {
    // An app is a trigger topic and a consumer group: the cluster's to give out.
    caller.require_admin()?;
    let name = AppName::parse(&request.name).map_err(bad_request)?;
    APP_TITLE.check(&request.title)?;
    if !(1..=MAX_PARTITIONS).contains(&request.partitions) {
        return Err(bad_request(format!(
            "partitions must be between 1 and {MAX_PARTITIONS}, not {}",
            request.partitions
        )));
    }
    if state.store.get_app(&name).await?.is_some() {
        return Err(ApiError::Conflict(format!("app {name} exists already")));
    }
    // Topic first: an app must never exist without its topic.
    state
        .admin
        .ensure_topic(&state.topics.triggers(&name), request.partitions, &[])
        .await
        .map_err(|error| match error {
            TopicError::PartitionMismatch { .. } => ApiError::Conflict(error.to_string()),
            TopicError::NotVisible { .. } => ApiError::Unavailable(error.to_string()),
            other => ApiError::Internal(other.into()),
        })?;
    let app = App {
        name: name.clone(),
        title: request.title,
        partitions: request.partitions,
        created_at_ms: state.clock.now_ms(),
    };
    state.store.create_app(&app).await?;
    state.partitions.remember(name, app.partitions);
    let note = AuditNote::app(&app.name).with(serde_json::json!({ "partitions": app.partitions }));
    Ok((StatusCode::CREATED, note, Json(app)))
}

/// Lists the apps the caller may see, a page at a time.
///
/// Any signed-in caller: an admin sees every app, a member only the apps granted to them.
/// By name; `next` is the last app's name.
#[utoipa::path(
    get, path = "/api/apps", tag = "apps", params(PageQuery),
    responses((status = 200, description = "A page of the apps the caller may see", body = Page<App>)),
)]
pub(super) async fn list_apps(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<Page<App>>, ApiError> {
    let apps = caller.visible_apps(None)?;
    let page = page_request(query.after.as_deref(), query.limit, |text| {
        Some(text.to_owned())
    })?;
    let apps = state.store.list_apps_page(apps.as_deref(), &page).await?;
    Ok(Json(Page::new(apps, page.limit, |app| {
        app.name.to_string()
    })))
}
