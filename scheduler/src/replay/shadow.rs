//! Shadow runs: a candidate handler version tried on real traffic, apart from production.
//!
//! Executors started as shadows (the SDK's `ExecutorBuilder::shadow`, the Python executor's
//! `shadow=True`) join `{prefix}.shadow.{app}` on the app's trigger topic, so they receive every
//! trigger beside the production group, and publish their results to
//! `{prefix}.shadow-results` (see `schemas/PROTOCOL.md`). The [`ShadowResultsConsumer`] here
//! stores those results in `shadow_results` (the first per trigger id wins) and never touches
//! a production run: a shadow result completes nothing, retries nothing, raises no alarm and
//! fires no child. [`diff_report`] sets them beside production's results by trigger id.
//!
//! The consumer joins its own group, `{prefix}.scheduler.shadow`; records that do not decode,
//! or are not signed by an executor key of their `app` (see [`crate::executor_auth`]), go to
//! the DLQ like any other.

use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::{BatchConsumer, BatchStep, DeadLetters, KafkaSettings, run_steps};

use crate::executor_auth::{ExecutorKeyring, app_mismatch};
use kadence_schemas::{AppName, JobId, ResultRecord, Topics, TriggerId, codec};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::store::{ShadowPair, ShadowResult, Store, StoreError};

/// A failed step of the shadow results consumer.
#[derive(Debug, thiserror::Error)]
pub enum ShadowError {
    /// The consumer could not be created or subscribed.
    #[error("cannot start the shadow results consumer: {0}")]
    Start(KafkaError),
    /// Receiving from the broker failed.
    #[error("cannot receive shadow results: {0}")]
    Receive(KafkaError),
    /// Storing failed; the batch is retried.
    #[error("cannot store shadow results: {0}")]
    Write(#[from] StoreError),
    /// Sending to the dead-letter queue failed; the batch is retried.
    #[error("cannot send a shadow result to the dead-letter queue: {0}")]
    DeadLetter(KafkaError),
    /// Committing offsets failed; the records will be redelivered and recognised.
    #[error("cannot commit shadow result offsets: {0}")]
    Commit(KafkaError),
}

/// What one step did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ShadowSummary {
    /// Shadow results stored (repeats are not counted).
    pub stored: u64,
    /// Records sent to the dead-letter queue.
    pub dead_lettered: usize,
}

/// Consumes `{prefix}.shadow-results` in group `{prefix}.scheduler.shadow`.
pub struct ShadowResultsConsumer {
    consumer: BatchConsumer,
    store: Arc<dyn Store>,
    dead_letters: DeadLetters,
    keyring: Arc<ExecutorKeyring>,
    unwritten: Vec<OwnedMessage>,
}

impl ShadowResultsConsumer {
    /// Joins the group and subscribes to the shadow results topic.
    pub fn new(
        settings: &KafkaSettings,
        topics: &Topics,
        session_timeout: Duration,
        store: Arc<dyn Store>,
        dead_letters: DeadLetters,
        keyring: Arc<ExecutorKeyring>,
    ) -> Result<ShadowResultsConsumer, ShadowError> {
        let group = format!("{}.shadow", topics.scheduler_group());
        let consumer = BatchConsumer::subscribe(
            settings,
            &group,
            &topics.shadow_results(),
            session_timeout,
            "shadow-results",
            1_000,
        )
        .map_err(ShadowError::Start)?;
        Ok(ShadowResultsConsumer {
            consumer,
            store,
            dead_letters,
            keyring,
            unwritten: Vec::new(),
        })
    }

    /// One step: receive a batch (waiting up to `wait` for the first record), store what
    /// decodes, dead-letter the rest, then commit. On a database or DLQ error the batch is
    /// kept for the next step and nothing is committed past it.
    pub async fn store_shadow_results_once(
        &mut self,
        wait: Duration,
    ) -> Result<ShadowSummary, ShadowError> {
        if self.unwritten.is_empty() {
            self.unwritten = self
                .consumer
                .receive(wait)
                .await
                .map_err(ShadowError::Receive)?;
        }
        if self.unwritten.is_empty() {
            return Ok(ShadowSummary::default());
        }
        let mut summary = ShadowSummary::default();
        let mut results = Vec::with_capacity(self.unwritten.len());
        let mut unreadable = Vec::new();
        let received = std::time::Instant::now();
        for message in &self.unwritten {
            let decoded = match self
                .keyring
                .authenticate(message, "shadow result record", received)
                .await
            {
                Ok(key_app) => decode(message, key_app.as_deref()),
                Err(refused) => Err(refused.to_string()),
            };
            match decoded {
                Ok(result) => results.push(result),
                Err(reason) => unreadable.push((message, reason)),
            }
        }
        summary.stored = self.store.record_shadow_results(&results).await?;
        for (message, reason) in unreadable {
            self.dead_letters
                .send_message(message, &reason)
                .await
                .map_err(ShadowError::DeadLetter)?;
            summary.dead_lettered += 1;
        }
        let batch = std::mem::take(&mut self.unwritten);
        self.consumer.commit(&batch).map_err(ShadowError::Commit)?;
        Ok(summary)
    }

    /// Runs steps until `shutdown` (see [`run_steps`]), then closes the consumer.
    pub async fn run(mut self, shutdown: CancellationToken) {
        run_steps(&mut self, &shutdown).await;
        self.consumer.close().await;
    }
}

impl BatchStep for ShadowResultsConsumer {
    type Summary = ShadowSummary;
    type Error = ShadowError;

    fn name(&self) -> &'static str {
        "shadow-results"
    }

    async fn step(&mut self, wait: Duration) -> Result<ShadowSummary, ShadowError> {
        self.store_shadow_results_once(wait).await
    }
}

/// The shadow result `message` holds, signed by a key of `key_app` (`None`: unsigned).
fn decode(message: &OwnedMessage, key_app: Option<&str>) -> Result<ShadowResult, String> {
    let bytes = message
        .payload()
        .ok_or_else(|| "shadow result record has no value".to_owned())?;
    let record = codec::decode::<ResultRecord>(bytes)
        .map_err(|error| format!("undecodable shadow result record: {error}"))?;
    if let Some(reason) = app_mismatch("shadow result record", record.app.as_str(), key_app) {
        return Err(reason);
    }
    // The checks and the bounded message of a production result, so that both sides of the
    // report were read the same way.
    let (app, job_id) = (record.app.clone(), record.job_id);
    let completion = crate::results::checked_completion(record)?;
    Ok(ShadowResult {
        trigger_id: completion.trigger_id,
        app,
        job_id,
        executor_id: completion.executor_id,
        code: completion.code,
        message: completion.message,
        started_at_ms: completion.started_at_ms,
        finished_at_ms: completion.finished_at_ms,
    })
}

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
    store: &dyn Store,
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
