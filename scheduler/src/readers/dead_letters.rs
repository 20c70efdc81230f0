//! The dead-letter reader: ends the runs whose triggers an executor dead-lettered.
//!
//! An executor that cannot take a trigger (signed by a key it does not trust yet, invalid
//! for it) sends it to `{prefix}.dlq` with the reason and commits past it: the trigger is
//! never run, and no result comes. Left alone, its run would stay DISPATCHED until the
//! lost-run monitor's `registry.lost_run_after` (10 minutes), and alarms and retries would not see it. This reader takes each
//! dead letter that came from a trigger topic and completes the run it names as failed
//! (code 500, the dead letter's reason as the message), through the same first-result-wins
//! compare-and-set as real results: a result that arrived first stands, and every node may
//! run the reader (group `{prefix}.scheduler.dlq`).
//!
//! A dead letter closes a run only when the run is still unfinished and matches the record
//! exactly: the trigger id, the log id and the app of the topic it came from; and only when
//! the executor that wrote it signed it with an executor key of that app (see
//! [`crate::readers::executor_auth`]), so that whoever may write the DLQ cannot fail another app's
//! runs. A dead letter of a trigger that fails that check is logged and otherwise left
//! alone: it is a dead letter already. Other dead letters (results, beats, logs, control records the scheduler or
//! executors refused, records that do not decode) are for operators and left as they are.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::{BatchConsumer, BatchStep, KafkaSettings, run_steps};
use kadence_schemas::{Topics, TriggerId, TriggerRecord, codec, headers, result_code};
use rdkafka::message::{Headers, Message, OwnedMessage};
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::domain::model::{Completion, CompletionOutcome, RunState};
use crate::readers::batch::ReaderError;
use crate::readers::executor_auth::{ExecutorKeyring, app_mismatch};
use crate::readers::results::{MAX_MESSAGE_BYTES, bound_message};
use crate::store::{Store, StoreError};

/// What one step did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetterSummary {
    /// Dead letters of trigger records read.
    pub triggers: usize,
    /// Runs failed because of them.
    pub failed: usize,
}

/// The reader's name, in logs and errors.
const NAME: &str = "dead letters";

/// Reads `{prefix}.dlq` in group `{prefix}.scheduler.dlq`.
pub struct DeadLetterReader {
    consumer: BatchConsumer,
    trigger_topic_prefix: String,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    keyring: Arc<ExecutorKeyring>,
    /// A batch whose runs are not failed yet (kept across a failed step).
    unread: Vec<OwnedMessage>,
}

impl DeadLetterReader {
    /// Joins the group and subscribes to the dead-letter topic.
    pub fn new(
        settings: &KafkaSettings,
        topics: &Topics,
        session_timeout: Duration,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        keyring: Arc<ExecutorKeyring>,
    ) -> Result<DeadLetterReader, ReaderError> {
        let group = format!("{}.dlq", topics.scheduler_group());
        let consumer =
            BatchConsumer::subscribe(settings, &group, &topics.dlq(), session_timeout, NAME, 500)
                .map_err(ReaderError::start(NAME))?;
        Ok(DeadLetterReader {
            consumer,
            trigger_topic_prefix: format!("{}.triggers.", topics.prefix()),
            store,
            clock,
            keyring,
            unread: Vec::new(),
        })
    }

    /// One step (see the module docs). Waits up to `wait` for the first record.
    pub async fn fail_dead_lettered_once(
        &mut self,
        wait: Duration,
    ) -> Result<DeadLetterSummary, ReaderError> {
        if self.unread.is_empty() {
            self.unread =
                (self.consumer.receive(wait).await).map_err(ReaderError::receive(NAME))?;
        }
        if self.unread.is_empty() {
            return Ok(DeadLetterSummary::default());
        }
        let mut letters = Vec::new();
        let received = std::time::Instant::now();
        for message in &self.unread {
            let Some(letter) = DeadTrigger::of(message, &self.trigger_topic_prefix) else {
                continue;
            };
            let refusal = match self
                .keyring
                .authenticate(message, "dead letter", received)
                .await
            {
                Ok(key_app) => app_mismatch("dead letter", &letter.topic_app, key_app.as_deref()),
                Err(refused) => Some(refused.to_string()),
            };
            match refusal {
                None => letters.push(letter),
                Some(reason) => {
                    tracing::warn!(trigger_id = %letter.record.trigger_id, reason,
                        "dead letter of a trigger not taken: its run is left as it is");
                }
            }
        }
        let failed = (self.fail_runs(&letters).await).map_err(ReaderError::write(NAME))?;
        let batch = std::mem::take(&mut self.unread);
        self.consumer
            .commit(&batch)
            .map_err(ReaderError::commit(NAME))?;
        Ok(DeadLetterSummary {
            triggers: letters.len(),
            failed,
        })
    }

    /// Fails the unfinished runs `letters` name exactly; returns how many.
    async fn fail_runs(&self, letters: &[DeadTrigger]) -> Result<usize, StoreError> {
        if letters.is_empty() {
            return Ok(0);
        }
        let ids: Vec<TriggerId> = (letters.iter())
            .map(|letter| letter.record.trigger_id.clone())
            .collect();
        let runs: HashMap<TriggerId, _> = (self.store.runs_by_trigger_ids(&ids).await?)
            .into_iter()
            .map(|summary| (summary.run.trigger_id.clone(), summary))
            .collect();
        let now_ms = self.clock.now_ms();
        let completions: Vec<Completion> = (letters.iter())
            .filter_map(|letter| {
                let summary = runs.get(&letter.record.trigger_id)?;
                let run = &summary.run;
                let names_it = run.log_id == letter.record.log_id
                    && summary.app.as_str() == letter.topic_app
                    && matches!(run.state, RunState::Scheduled | RunState::Dispatched);
                names_it.then(|| Completion {
                    app: None,
                    trigger_id: run.trigger_id.clone(),
                    executor_id: run.executor_id.clone().unwrap_or_default(),
                    code: result_code::FAILURE,
                    message: Some(bound_message(
                        format!(
                            "an executor refused the trigger and sent it to the dead-letter \
                             queue: {}",
                            letter.reason
                        ),
                        MAX_MESSAGE_BYTES,
                    )),
                    started_at_ms: run.dispatched_at_ms.unwrap_or(now_ms),
                    finished_at_ms: now_ms,
                    retry_after_ms: None,
                })
            })
            .collect();
        if completions.is_empty() {
            return Ok(0);
        }
        let outcomes = self.store.complete_runs(&completions).await?;
        let mut failed = 0;
        for (completion, outcome) in completions.iter().zip(&outcomes) {
            if *outcome == CompletionOutcome::Applied {
                failed += 1;
                tracing::warn!(trigger_id = %completion.trigger_id,
                    message = completion.message.as_deref().unwrap_or_default(),
                    "run failed: its trigger was dead-lettered");
            }
        }
        Ok(failed)
    }

    /// Runs steps until `shutdown` (see [`run_steps`]), then closes the consumer.
    pub async fn run(mut self, shutdown: CancellationToken) {
        run_steps(&mut self, &shutdown).await;
        self.consumer.close().await;
    }
}

impl BatchStep for DeadLetterReader {
    type Summary = DeadLetterSummary;
    type Error = ReaderError;

    fn name(&self) -> &'static str {
        NAME
    }

    async fn step(&mut self, wait: Duration) -> Result<DeadLetterSummary, ReaderError> {
        self.fail_dead_lettered_once(wait).await
    }
}

/// A dead letter that came from a trigger topic and still decodes as a trigger.
struct DeadTrigger {
    record: TriggerRecord,
    /// The app of the trigger topic it came from.
    topic_app: String,
    reason: String,
}

impl DeadTrigger {
    /// `message` as a dead trigger, or `None` for any other dead letter.
    fn of(message: &OwnedMessage, trigger_topic_prefix: &str) -> Option<DeadTrigger> {
        let header = |key: &str| {
            let found = message.headers()?.iter().find(|header| header.key == key)?;
            Some(String::from_utf8_lossy(found.value?).into_owned())
        };
        let topic = header(headers::DLQ_SOURCE_TOPIC)?;
        let topic_app = topic.strip_prefix(trigger_topic_prefix)?.to_owned();
        let record: TriggerRecord = codec::decode(message.payload()?).ok()?;
        Some(DeadTrigger {
            record,
            topic_app,
            reason: header(headers::DLQ_REASON).unwrap_or_else(|| "no reason given".to_owned()),
        })
    }
}
