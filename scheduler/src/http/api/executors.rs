//! The executor registry as listed: partitions, handlers, running jobs, liveness.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::body::ApiQuery;
use super::caller::Caller;
use super::error::ApiError;
use super::pages::{Page, join_key, page_request, split_key};
use super::{ApiState, parse_app_filter};
use crate::domain::model::ExecutorEntry;

/// Query of `GET /api/executors`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ExecutorQuery {
    /// Only this app's executors.
    pub app: Option<String>,
    /// The `next` of the previous page.
    pub after: Option<String>,
    /// Executors at most (default 100, at most 1 000).
    pub limit: Option<u32>,
}

/// An executor as listed: its latest beat, and whether it takes triggers now.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExecutorView {
    /// The registry entry.
    #[serde(flatten)]
    pub entry: ExecutorEntry,
    /// RUNNING with a beat younger than the dead timeout.
    pub live: bool,
}

/// Lists the executors of the apps the caller may see, as their latest beats show them.
///
/// Any signed-in caller: an admin sees every app's executors, a member those of the apps
/// granted to them (`app` naming another is a 403). Each executor shows the partitions it
/// owns, its handlers and its running and queued jobs, as its latest beat said, and `live`:
/// RUNNING with a beat younger than `registry.dead_timeout`. A dead executor stays listed
/// for `registry.forget_after` (1 h), then is forgotten. By app, then executor id.
#[utoipa::path(
    get, path = "/api/executors", tag = "executors", params(ExecutorQuery),
    responses((status = 200, description = "A page of the executors of the apps the caller may see", body = Page<ExecutorView>)),
)]
pub(super) async fn list_executors(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ExecutorQuery>,
) -> Result<Json<Page<ExecutorView>>, ApiError> {
    let apps = caller.visible_apps(parse_app_filter(query.app.as_deref())?)?;
    let page = page_request(query.after.as_deref(), query.limit, |text| {
        split_key(text, 2).map(|parts| (parts[0].to_owned(), parts[1].to_owned()))
    })?;
    let now = state.clock.now_ms();
    let executors = state
        .store
        .list_executors_page(apps.as_deref(), &page)
        .await?;
    let views = executors
        .into_iter()
        .map(|entry| ExecutorView {
            live: state.registry.is_live(&entry, now),
            entry,
        })
        .collect();
    Ok(Json(Page::new(views, page.limit, |view: &ExecutorView| {
        join_key(&[view.entry.app.as_str(), &view.entry.executor_id])
    })))
}
