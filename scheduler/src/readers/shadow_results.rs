//! The shadow results reader: executors started as shadows (the SDK's
//! `ExecutorBuilder::shadow`, the Python executor's `shadow=True`) publish their results to
//! `{prefix}.shadow-results` (see `schemas/PROTOCOL.md`). The [`ShadowResultsConsumer`] stores
//! them in `shadow_results` (the first per trigger id wins) and never touches a production
//! run: a shadow result completes nothing, retries nothing, raises no alarm and fires no
//! child. The diff report against production is [`crate::operations::replay::shadow`].
//!
//! The consumer joins its own group, `{prefix}.scheduler.shadow`; records that do not decode,
//! or are not signed by an executor key of their `app` (see [`crate::readers::executor_auth`]),
//! go to the DLQ like any other.

use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::{BatchConsumer, BatchStep, DeadLetters, KafkaSettings, run_steps};

use crate::readers::executor_auth::{ExecutorKeyring, app_mismatch};
use kadence_schemas::{ResultRecord, Topics, codec};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use tokio_util::sync::CancellationToken;

use crate::store::{ShadowResult, Store, StoreError};

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
    let completion = crate::readers::results::checked_completion(record)?;
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
