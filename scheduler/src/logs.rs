//! The logs consumer: stores the lines runs write, from `{prefix}.logs`, so that a person can
//! read a run's log from a given line on while it runs (XXL-JOB's rolling log:
//! `GET /api/runs/{log_id}/log?from_line=N`, `kadence job log <log id> --follow`).
//!
//! [`LogsConsumer::store_logs_once`] is one step: receive a batch, decode each `LogRecord`,
//! store the lines in one transaction (each (run, line number) once, so redeliveries never
//! duplicate a line; at most `logs.max_lines_per_run` per run), send undecodable records to
//! the dead-letter queue, then commit. On a database or DLQ error the batch is kept for the
//! next step and nothing is committed past it.
//!
//! It joins its own group, `{prefix}.scheduler.logs`, so that a burst of log lines never
//! delays results, which have their own consumer.

use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::{BatchConsumer, BatchStep, DeadLetters, KafkaSettings, run_steps};
use kadence_schemas::{LogRecord, Topics, codec};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use tokio_util::sync::CancellationToken;

use crate::store::{LogLines, Store, StoreError};

/// A failed logs step.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    /// The consumer could not be created or subscribed.
    #[error("cannot start the logs consumer: {0}")]
    Start(KafkaError),
    /// Receiving from the broker failed.
    #[error("cannot receive log lines: {0}")]
    Receive(KafkaError),
    /// Storing failed; the batch is retried.
    #[error("cannot store log lines: {0}")]
    Write(#[from] StoreError),
    /// Sending to the dead-letter queue failed; the batch is retried.
    #[error("cannot send a log record to the dead-letter queue: {0}")]
    DeadLetter(KafkaError),
    /// Committing offsets failed; the records will be redelivered and recognised.
    #[error("cannot commit log offsets: {0}")]
    Commit(KafkaError),
}

/// What one step did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LogsSummary {
    /// Lines stored (repeats and lines past the limit are not counted).
    pub stored: u64,
    /// Records sent to the dead-letter queue.
    pub dead_lettered: usize,
}

/// Consumes `{prefix}.logs` in group `{prefix}.scheduler.logs`.
pub struct LogsConsumer {
    consumer: BatchConsumer,
    topic: String,
    store: Arc<dyn Store>,
    dead_letters: DeadLetters,
    max_lines_per_run: i64,
    unwritten: Vec<OwnedMessage>,
}

impl LogsConsumer {
    /// Joins the group and subscribes to the logs topic.
    pub fn new(
        settings: &KafkaSettings,
        topics: &Topics,
        session_timeout: Duration,
        store: Arc<dyn Store>,
        dead_letters: DeadLetters,
        max_lines_per_run: i64,
    ) -> Result<LogsConsumer, LogsError> {
        let group = format!("{}.logs", topics.scheduler_group());
        let consumer = BatchConsumer::subscribe(
            settings,
            &group,
            &topics.logs(),
            session_timeout,
            "logs",
            1_000,
        )
        .map_err(LogsError::Start)?;
        Ok(LogsConsumer {
            consumer,
            topic: topics.logs(),
            store,
            dead_letters,
            max_lines_per_run,
            unwritten: Vec::new(),
        })
    }

    /// The same consumer reporting its lag per partition into `metrics`.
    pub fn with_metrics(self, metrics: Arc<crate::metrics::SchedulerMetrics>) -> Self {
        let topic = self.topic.clone();
        self.consumer.on_statistics(move |statistics| {
            metrics.record_consumer_lag("logs", &topic, statistics)
        });
        self
    }

    /// One step (see the module docs). Waits up to `wait` for the first record.
    pub async fn store_logs_once(&mut self, wait: Duration) -> Result<LogsSummary, LogsError> {
        if self.unwritten.is_empty() {
            self.unwritten = self
                .consumer
                .receive(wait)
                .await
                .map_err(LogsError::Receive)?;
        }
        if self.unwritten.is_empty() {
            return Ok(LogsSummary::default());
        }
        let mut summary = LogsSummary::default();
        let mut batches = Vec::with_capacity(self.unwritten.len());
        let mut unreadable = Vec::new();
        for message in &self.unwritten {
            match decode(message) {
                Ok(lines) => batches.push(lines),
                Err(reason) => unreadable.push((message, reason)),
            }
        }
        summary.stored = self
            .store
            .append_log_lines(&batches, self.max_lines_per_run)
            .await?;
        for (message, reason) in unreadable {
            self.dead_letters
                .send_message(message, &reason)
                .await
                .map_err(LogsError::DeadLetter)?;
            summary.dead_lettered += 1;
        }
        let batch = std::mem::take(&mut self.unwritten);
        self.consumer.commit(&batch).map_err(LogsError::Commit)?;
        Ok(summary)
    }

    /// Runs steps until `shutdown` (see [`run_steps`]), then closes the consumer.
    pub async fn run(mut self, shutdown: CancellationToken) {
        run_steps(&mut self, &shutdown).await;
        self.consumer.close().await;
    }
}

impl BatchStep for LogsConsumer {
    type Summary = LogsSummary;
    type Error = LogsError;

    fn name(&self) -> &'static str {
        "logs"
    }

    async fn step(&mut self, wait: Duration) -> Result<LogsSummary, LogsError> {
        self.store_logs_once(wait).await
    }
}

fn decode(message: &OwnedMessage) -> Result<LogLines, String> {
    let bytes = message
        .payload()
        .ok_or_else(|| "log record has no value".to_owned())?;
    let record = codec::decode::<LogRecord>(bytes)
        .map_err(|error| format!("undecodable log record: {error}"))?;
    if record.first_line < 1 {
        return Err(format!(
            "log record of run {} starts at line {}: lines are numbered from 1",
            record.trigger_id, record.first_line
        ));
    }
    Ok(LogLines {
        log_id: record.log_id,
        first_line: record.first_line,
        lines: record.lines,
    })
}
