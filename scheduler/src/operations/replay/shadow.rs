//! Shadow runs: a candidate handler version tried on real traffic, apart from production.
//!
//! Executors started as shadows join `{prefix}.shadow.{app}` on the app's trigger topic, so
//! they receive every trigger beside the production group, and publish their results to
//! `{prefix}.shadow-results`, which [`crate::readers::shadow_results`] stores. [`diff_report`]
//! sets them beside production's results by trigger id.

use serde::{Deserialize, Serialize};

use kadence_schemas::{AppName, JobId, TriggerId};

use crate::store::{Replays, ShadowPair, StoreError};

/// One run's result on one side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SideResult {
    /// Result code.
    pub code: i32,
    /// Result message.
    pub message: Option<String>,
    /// How long the handler ran, ms, when known.
    pub duration_ms: Option<i64>,
}

/// A trigger's production and shadow results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ShadowComparison {
    /// The trigger.
    pub trigger_id: TriggerId,
    /// Its job.
    pub job_id: JobId,
    /// Whether the two differ in code or message, or production has no result.
    pub disagrees: bool,
    /// Production's result; `None` while its run has none.
    pub production: Option<SideResult>,
    /// The shadow's.
    pub shadow: SideResult,
    /// The shadow executor.
    pub shadow_executor_id: String,
    /// When the shadow run started, ms.
    pub shadow_started_at_ms: i64,
}

/// The diff report of an app's shadow runs over a time range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ShadowReport {
    /// The app.
    pub app: AppName,
    /// Start of the range (shadow runs started at or after), ms.
    pub from_ms: i64,
    /// End of the range (started before), ms.
    pub to_ms: i64,
    /// Triggers compared.
    pub compared: usize,
    /// Of those, where shadow and production disagree.
    pub disagreements: usize,
    /// Whether more than `limit` shadow runs are in the range (the rows are the first).
    pub truncated: bool,
    /// The comparisons, disagreements first, then by the shadow run's start.
    pub rows: Vec<ShadowComparison>,
}

/// Compares the shadow runs of `app` started in `[from_ms, to_ms)` with production's, by
/// trigger id: at most `limit` rows, disagreements first.
pub async fn diff_report(
    store: &dyn Replays,
    app: &AppName,
    (from_ms, to_ms): (i64, i64),
    limit: u32,
) -> Result<ShadowReport, StoreError> {
    let mut pairs = store
        .shadow_pairs(app, from_ms, to_ms, limit.saturating_add(1))
        .await?;
    let truncated = pairs.len() > limit as usize;
    pairs.truncate(limit as usize);
    let rows: Vec<ShadowComparison> = pairs.into_iter().map(compare).collect();
    Ok(ShadowReport {
        app: app.clone(),
        from_ms,
        to_ms,
        compared: rows.len(),
        disagreements: rows.iter().filter(|row| row.disagrees).count(),
        truncated,
        rows,
    })
}

fn compare(pair: ShadowPair) -> ShadowComparison {
    let shadow = SideResult {
        code: pair.shadow.code,
        message: pair.shadow.message.clone(),
        duration_ms: Some(pair.shadow.finished_at_ms - pair.shadow.started_at_ms),
    };
    let production = pair
        .production
        .map(|(code, message, started, finished)| SideResult {
            code,
            message,
            duration_ms: started.map(|started| finished - started),
        });
    let disagrees = production.as_ref().is_none_or(|production| {
        production.code != shadow.code || production.message != shadow.message
    });
    ShadowComparison {
        trigger_id: pair.shadow.trigger_id,
        job_id: pair.shadow.job_id,
        disagrees,
        production,
        shadow,
        shadow_executor_id: pair.shadow.executor_id,
        shadow_started_at_ms: pair.shadow.started_at_ms,
    }
}
