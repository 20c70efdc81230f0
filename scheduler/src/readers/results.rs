//! The results consumer: completes job-log rows from `{prefix}.results`.
//!
//! [`ResultsConsumer::complete_results_once`] is one step: receive a batch of what is ready
//! (waiting up to `wait` for the first record), decode each `ResultRecord`, write all
//! completions in one transaction (compare-and-set on an unfinished row: the first result
//! wins, a repeat is counted and ignored), send undecodable records and results for unknown
//! triggers to the dead-letter queue with the reason, and only then commit the offsets. If the
//! database or the DLQ is unavailable the batch is kept and retried by the next step, and
//! nothing is committed past it: no result is lost.
//!
//! A run's row is written once the broker acknowledged its trigger (see [`crate::engine::acks`]), so a
//! fast handler's result can arrive before it. A result whose trigger id no row has yet
//! waits ([`RUN_ROW_WAIT`], counted from the first time the database answered that no row has
//! it, so a database outage does not use it up): it is tried again with every later step,
//! and offsets are not committed past it; only after the wait is it an unknown trigger for
//! the DLQ.
//!
//! A run whose row this node holds back for its result ([`crate::engine::held_runs`]) is
//! taken from there and written once, already FINISHED, in the transaction that records the
//! batch; if that transaction fails the runs go back to the ack writer, which writes them
//! DISPATCHED, and their results are recorded by the update on the next try.
//!
//! Every result must be signed by an executor key of its `app` (see [`crate::readers::executor_auth`]),
//! and its `app` must be its run's: the store completes a run only for a result of the run's
//! own app, and one of another app goes to the DLQ saying whose run it named.

use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::{
    BatchConsumer, BatchStep, DeadLetters, KafkaSettings, RunTracer, reads_every_partition,
    run_steps, trace,
};
use kadence_schemas::{AppName, ResultRecord, Topics, codec};
use opentelemetry::{Context, KeyValue};
use rdkafka::message::{Message, OwnedMessage};
use tokio_util::sync::CancellationToken;

use crate::domain::model::{Completion, CompletionOutcome};
use crate::engine::held_runs::HeldRuns;
use crate::metrics::SchedulerMetrics;
use crate::readers::batch::ReaderError;
use crate::readers::executor_auth::{ExecutorKeyring, app_mismatch};
use crate::store::Runs;
use crate::traces::completion_span;

/// Longest result message stored, in bytes; longer ones are cut at a character boundary.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// How long a result waits for its run's row before it goes to the DLQ as an unknown
/// trigger: far longer than the ack writer takes (milliseconds; seconds while the database
/// is slow), short enough that a stray result does not hold back the commits for long.
pub const RUN_ROW_WAIT: Duration = Duration::from_secs(30);

/// How often results waiting for their run's row are tried again while nothing else arrives.
const WAITING_RETRY: Duration = Duration::from_millis(100);

/// What one step did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ResultsSummary {
    /// Runs completed.
    pub applied: usize,
    /// Results ignored because their run already had one.
    pub duplicates: usize,
    /// Records sent to the dead-letter queue.
    pub dead_lettered: usize,
    /// Results whose run's row is not written yet, kept to try again (see [`RUN_ROW_WAIT`]).
    pub waiting: usize,
}

struct Received {
    message: OwnedMessage,
    /// When the store first said no run has its trigger id: it waits [`RUN_ROW_WAIT`] from
    /// then on. Not from its receipt: while the database is out of reach the run rows of the
    /// outage's triggers cannot be written either, and a result received then must not run
    /// out of wait before the ack writer had a chance to write its row.
    unknown_since: std::sync::OnceLock<std::time::Instant>,
    /// The completion and the app it is for, or why the record goes to the DLQ: the kind of
    /// reason (a metric label) and the reason.
    decoded: Result<(Completion, AppName), (&'static str, String)>,
}

impl Received {
    /// Whether a result the store found no run for (`outcome`) still waits for its row:
    /// for [`RUN_ROW_WAIT`] from the first such answer.
    fn waits_for_its_row(&self, outcome: Option<&CompletionOutcome>) -> bool {
        matches!(outcome, Some(CompletionOutcome::UnknownTrigger))
            && self
                .unknown_since
                .get_or_init(std::time::Instant::now)
                .elapsed()
                < RUN_ROW_WAIT
    }
}

/// The reader's name, in logs, errors and the consumer's metric label.
const NAME: &str = "results";

/// Consumes `{prefix}.results` in group `{prefix}.scheduler`.
pub struct ResultsConsumer {
    consumer: BatchConsumer,
    topic: String,
    store: Arc<dyn Runs>,
    dead_letters: DeadLetters,
    unwritten: Vec<Received>,
    /// Results whose run's row is not written yet (see [`RUN_ROW_WAIT`]).
    waiting: Vec<Received>,
    metrics: Arc<SchedulerMetrics>,
    tracer: RunTracer,
    keyring: Arc<ExecutorKeyring>,
    held: Arc<HeldRuns>,
}

impl ResultsConsumer {
    /// Joins the scheduler group and subscribes to the results topic.
    pub fn new(
        settings: &KafkaSettings,
        topics: &Topics,
        session_timeout: Duration,
        store: Arc<dyn Runs>,
        dead_letters: DeadLetters,
        keyring: Arc<ExecutorKeyring>,
        batch_max: usize,
    ) -> Result<ResultsConsumer, ReaderError> {
        let consumer = BatchConsumer::subscribe(
            settings,
            &topics.scheduler_group(),
            &topics.results(),
            session_timeout,
            NAME,
            batch_max,
        )
        .map_err(ReaderError::start(NAME))?;
        Ok(ResultsConsumer {
            consumer,
            topic: topics.results(),
            store,
            dead_letters,
            unwritten: Vec::new(),
            waiting: Vec::new(),
            metrics: Arc::default(),
            tracer: RunTracer::local("kadence-scheduler"),
            keyring,
            held: Arc::new(HeldRuns::new(Duration::ZERO, Duration::ZERO)),
        })
    }

    /// The same consumer counting into `metrics`.
    pub fn with_metrics(self, metrics: Arc<SchedulerMetrics>) -> Self {
        let (lag, topic) = (Arc::clone(&metrics), self.topic.clone());
        self.consumer
            .on_statistics(move |statistics| lag.record_consumer_lag(NAME, &topic, statistics));
        ResultsConsumer { metrics, ..self }
    }

    /// The same consumer taking the runs `held` holds for their results, and telling it
    /// whether this node reads every partition of the results topic (from the client's
    /// statistics, every 5 s).
    pub fn taking_held_runs_from(self, held: Arc<HeldRuns>) -> Self {
        let (reading, topic) = (Arc::clone(&held), self.topic.clone());
        self.consumer.on_statistics(move |statistics| {
            reading.set_reading_every_result(reads_every_partition(statistics, &topic));
        });
        ResultsConsumer { held, ..self }
    }

    /// The same consumer tracing each completion with `tracer`, in its run's trace.
    pub fn with_tracer(self, tracer: RunTracer) -> Self {
        ResultsConsumer { tracer, ..self }
    }

    /// One step (see the module docs). Waits up to `wait` for the first record.
    pub async fn complete_results_once(
        &mut self,
        wait: Duration,
    ) -> Result<ResultsSummary, ReaderError> {
        if self.unwritten.is_empty() {
            let wait = if self.waiting.is_empty() {
                wait
            } else {
                wait.min(WAITING_RETRY)
            };
            self.unwritten = self.receive(wait).await?;
            self.unwritten.append(&mut self.waiting);
        }
        if self.unwritten.is_empty() {
            return Ok(ResultsSummary::default());
        }
        let (summary, waiting) = self.write().await?;
        let (waiting, done): (Vec<_>, Vec<_>) = std::mem::take(&mut self.unwritten)
            .into_iter()
            .enumerate()
            .partition(|(index, _)| waiting.contains(index));
        self.waiting = waiting.into_iter().map(|(_, received)| received).collect();
        let done: Vec<Received> = done.into_iter().map(|(_, received)| received).collect();
        self.commit(&done)?;
        Ok(summary)
    }

    /// Runs steps until `shutdown` (see [`run_steps`]), then records a batch it still holds
    /// if it can and closes the consumer.
    pub async fn run(mut self, shutdown: CancellationToken) {
        run_steps(&mut self, &shutdown).await;
        if !self.unwritten.is_empty()
            && let Err(error) = self.complete_results_once(Duration::ZERO).await
        {
            tracing::warn!(%error, "results batch left unrecorded at shutdown; it will be redelivered");
        }
        self.consumer.close().await;
    }

    async fn receive(&self, wait: Duration) -> Result<Vec<Received>, ReaderError> {
        let batch = self
            .consumer
            .receive(wait)
            .await
            .map_err(ReaderError::receive(NAME))?;
        self.held.results_lag(oldest_age(&batch));
        let received_at = std::time::Instant::now();
        let mut received = Vec::with_capacity(batch.len());
        for message in batch {
            let signed = (self.keyring)
                .authenticate(&message, "result record", received_at)
                .await;
            received.push(decode(message, signed));
        }
        Ok(received)
    }

    /// Records the batch; returns what it did and the positions of the results that wait.
    async fn write(&self) -> Result<(ResultsSummary, Vec<usize>), ReaderError> {
        let completions: Vec<Completion> = self
            .unwritten
            .iter()
            .filter_map(|received| received.decoded.as_ref().ok())
            .map(|(completion, _)| completion.clone())
            .collect();
        let spans = self.completion_spans();
        let held = self.held.take(&completions);
        let written = (self.store)
            .complete_runs_writing_rows(&completions, &held.acks())
            .await;
        let outcomes = match written {
            Ok(outcomes) => {
                held.written();
                outcomes
            }
            Err(error) => {
                // (`held` goes back to the ack writer as it is dropped.)
                for span in spans.iter().flatten() {
                    trace::end_with_error(span, error.to_string());
                }
                return Err(ReaderError::write(NAME)(error));
            }
        };
        let mut summary = ResultsSummary::default();
        let mut waiting = Vec::new();
        let mut outcomes = outcomes.into_iter();
        for (index, (received, span)) in self.unwritten.iter().zip(&spans).enumerate() {
            let outcome = match &received.decoded {
                Ok(_) => outcomes.next(),
                Err(_) => None,
            };
            let waits = received.waits_for_its_row(outcome.as_ref());
            if let (Some(span), Some(outcome)) = (span, &outcome) {
                let label = if waits { "waiting" } else { outcome.label() };
                trace::set_attribute(span, KeyValue::new("kadence.completion", label));
                trace::end(span);
            }
            let (kind, reason) = match &received.decoded {
                Err((kind, reason)) => (*kind, reason.clone()),
                Ok((completion, app)) => match outcome {
                    Some(CompletionOutcome::Applied) => {
                        summary.applied += 1;
                        let code = completion.code.to_string();
                        self.metrics
                            .results
                            .with_label_values(&[app.as_str(), code.as_str()])
                            .inc();
                        let job = completion.trigger_id.job_id().get();
                        self.metrics.jobs.completed(app.as_str(), job, &code);
                        continue;
                    }
                    Some(CompletionOutcome::Duplicate) => {
                        tracing::debug!(trigger_id = %completion.trigger_id, "duplicate result ignored");
                        summary.duplicates += 1;
                        self.metrics.duplicate_results.inc();
                        continue;
                    }
                    Some(CompletionOutcome::UnknownTrigger) if waits => {
                        summary.waiting += 1;
                        waiting.push(index);
                        continue;
                    }
                    refused => refusal(completion, app, refused),
                },
            };
            let message = &received.message;
            self.dead_letters
                .send_message(message, &reason)
                .await
                .map_err(ReaderError::dead_letter(NAME))?;
            summary.dead_lettered += 1;
            self.metrics
                .dead_letters
                .with_label_values(&["results", kind])
                .inc();
        }
        Ok((summary, waiting))
    }

    /// A `kadence.complete` span for each decodable result of the batch, in its run's trace.
    fn completion_spans(&self) -> Vec<Option<Context>> {
        self.unwritten
            .iter()
            .map(|received| {
                let (completion, _) = received.decoded.as_ref().ok()?;
                let trigger_id = &completion.trigger_id;
                let job_id = trigger_id.job_id();
                Some(completion_span(
                    &self.tracer,
                    &received.message,
                    job_id,
                    trigger_id,
                ))
            })
            .collect()
    }

    /// Commits past `batch`, but not past a result still waiting in the same partition.
    fn commit(&self, batch: &[Received]) -> Result<(), ReaderError> {
        let mut first_waiting: std::collections::HashMap<i32, i64> = Default::default();
        for received in &self.waiting {
            let offset = first_waiting
                .entry(received.message.partition())
                .or_insert(i64::MAX);
            *offset = (*offset).min(received.message.offset());
        }
        self.consumer
            .commit(
                batch
                    .iter()
                    .map(|received| &received.message)
                    .filter(|message| {
                        first_waiting
                            .get(&message.partition())
                            .is_none_or(|waiting| message.offset() < *waiting)
                    }),
            )
            .map_err(ReaderError::commit(NAME))
    }
}

impl BatchStep for ResultsConsumer {
    type Summary = ResultsSummary;
    type Error = ReaderError;

    fn name(&self) -> &'static str {
        NAME
    }

    async fn step(&mut self, wait: Duration) -> Result<ResultsSummary, ReaderError> {
        self.complete_results_once(wait).await
    }
}

/// How long ago the oldest record of `batch` was produced, by its timestamp (zero for an
/// empty batch, or records stamped in the future by a clock ahead of this node's).
fn oldest_age(batch: &[OwnedMessage]) -> Duration {
    let now_ms = kadence_schemas::now_ms();
    let oldest_ms = (batch.iter())
        .filter_map(|message| message.timestamp().to_millis())
        .min();
    oldest_ms.map_or(Duration::ZERO, |oldest_ms| {
        Duration::from_millis(u64::try_from(now_ms - oldest_ms).unwrap_or(0))
    })
}

/// Why a result the store did not apply (`outcome`: not for an unknown trigger still
/// waiting) goes to the dead-letter queue: the kind of reason and the reason.
fn refusal(
    completion: &Completion,
    app: &AppName,
    outcome: Option<CompletionOutcome>,
) -> (&'static str, String) {
    let trigger_id = &completion.trigger_id;
    match outcome {
        Some(CompletionOutcome::OtherApp { run_app }) => (
            "wrong_app",
            format!("result of app {app} for trigger {trigger_id}, a run of app {run_app}"),
        ),
        _ => (
            "unknown_trigger",
            format!("result for unknown trigger id {trigger_id}: no job-log row has it"),
        ),
    }
}

/// The completion `message` asks for, given what its executor signature says (`signed`: the
/// app of the key that signed it).
fn decode(
    message: OwnedMessage,
    signed: Result<Option<String>, kadence_kafka::ExecutorAuthError>,
) -> Received {
    let decoded = match (signed, message.payload()) {
        (Err(refused), _) => Err((refused.kind(), refused.to_string())),
        (Ok(_), None) => Err(("no_value", "result record has no value".to_owned())),
        (Ok(key_app), Some(bytes)) => codec::decode::<ResultRecord>(bytes)
            .map_err(|error| ("undecodable", format!("undecodable result record: {error}")))
            .and_then(|record| {
                if let Some(reason) =
                    app_mismatch("result record", record.app.as_str(), key_app.as_deref())
                {
                    return Err(("wrong_key_app", reason));
                }
                let app = record.app.clone();
                checked_completion(record)
                    .map(|completion| (completion, app))
                    .map_err(|reason| ("wrong_job", reason))
            }),
    };
    Received {
        message,
        unknown_since: std::sync::OnceLock::new(),
        decoded,
    }
}

/// The completion a result asks for, after the checks that need no database: the result
/// must name the job its trigger id belongs to (the leading number of every trigger id), so
/// an executor that mixes up its fields cannot complete another job's run.
pub(crate) fn checked_completion(record: ResultRecord) -> Result<Completion, String> {
    let trigger_job = record.trigger_id.job_id();
    if record.job_id != trigger_job {
        return Err(format!(
            "result for trigger {} names job {}, but the trigger belongs to job {trigger_job}",
            record.trigger_id, record.job_id
        ));
    }
    Ok(to_completion(record))
}

fn to_completion(record: ResultRecord) -> Completion {
    Completion {
        app: Some(record.app.as_str().to_owned()),
        trigger_id: record.trigger_id,
        executor_id: record.executor_id,
        code: record.code,
        message: record.message.map(|m| bound_message(m, MAX_MESSAGE_BYTES)),
        started_at_ms: record.started_at_ms,
        finished_at_ms: record.finished_at_ms,
        retry_after_ms: record.retry_after_ms,
    }
}

/// Cuts `message` to at most `limit` bytes at a character boundary, saying so.
pub fn bound_message(mut message: String, limit: usize) -> String {
    const MARK: &str = " …[truncated]";
    if message.len() <= limit {
        return message;
    }
    let mut cut = limit.saturating_sub(MARK.len());
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    message.truncate(cut);
    message.push_str(MARK);
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        assert_eq!(bound_message("short".into(), 100), "short");
        let long = "é".repeat(100); // 200 bytes
        let cut = bound_message(long, 50);
        assert!(cut.len() <= 50, "{}", cut.len());
        assert!(cut.ends_with("…[truncated]"));
    }

    #[test]
    fn the_lag_is_the_age_of_the_oldest_record_received() {
        use rdkafka::Timestamp;
        let now_ms = kadence_schemas::now_ms();
        let stamped = |timestamp| OwnedMessage::new(None, None, "r".into(), timestamp, 0, 0, None);
        assert_eq!(oldest_age(&[]), Duration::ZERO, "nothing waiting");
        let lag = oldest_age(&[
            stamped(Timestamp::CreateTime(now_ms - 1_000)),
            stamped(Timestamp::CreateTime(now_ms - 3_000)),
            stamped(Timestamp::NotAvailable),
        ]);
        assert!(
            (Duration::from_secs(3)..Duration::from_secs(4)).contains(&lag),
            "{lag:?}"
        );
        let ahead = oldest_age(&[stamped(Timestamp::CreateTime(now_ms + 60_000))]);
        assert_eq!(
            ahead,
            Duration::ZERO,
            "a clock ahead of ours counts as no lag"
        );
    }
}
