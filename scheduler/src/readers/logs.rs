//! The logs consumer: stores the lines runs write, from `{prefix}.logs`, so that a person can
//! read a run's log from a given line on while it runs (XXL-JOB's rolling log:
//! `GET /api/runs/{log_id}/log?from_line=N`, `kadence job log <log id> --follow`).
//!
//! [`LogsConsumer::store_logs_once`] is one step: receive a batch, decode each `LogRecord`,
//! store the lines in one transaction (each (run, line number) once, so redeliveries never
//! duplicate a line; at most `logs.max_lines_per_run` per run), send undecodable records to
//! the dead-letter queue, then commit.
//!
//! A trigger runs twice when its first run is handed back in a rebalance (cancelled without a
//! result) or its executor dies, and the partition's next owner, possibly the same executor,
//! runs it again: both runs number their lines from 1 under the same log id. `LogRecord` v2
//! says when the run started on its executor (`run_started_at_ms`, the run's result's
//! `started_at_ms`), and the lines are stored under it, so the runs stay apart; reading a
//! run's log shows the run that started last, the one whose result completes the run (a v1
//! record's lines count as started at 0, the oldest). Nothing is read to store a record: the
//! run start is part of the key the insert already skips repeats by. On a database or DLQ error the batch is kept for the
//! next step and nothing is committed past it.
//!
//! It joins its own group, `{prefix}.scheduler.logs`, so that a burst of log lines never
//! delays results, which have their own consumer.
//!
//! Every log record must be signed by an executor key (see [`crate::readers::executor_auth`]); a
//! record signed by one app's key for a run of another app goes to the DLQ. A run's first
//! lines may come before its row is written (milliseconds after its trigger was
//! acknowledged): those are checked against the key alone, as there is no run to compare yet.

use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::{BatchConsumer, BatchStep, DeadLetters, KafkaSettings, run_steps};
use kadence_schemas::{LogRecord, Topics, codec};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use tokio_util::sync::CancellationToken;

use crate::readers::executor_auth::{ExecutorKeyring, app_mismatch};
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
    keyring: Arc<ExecutorKeyring>,
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
        keyring: Arc<ExecutorKeyring>,
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
            keyring,
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
        let (batches, unreadable) = self.read_batch().await?;
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

    /// The lines of the batch to store, and the records refused with their reasons: not
    /// signed by an executor key, undecodable, or signed by a key of another app than their
    /// run's.
    async fn read_batch(
        &self,
    ) -> Result<(Vec<LogLines>, Vec<(&OwnedMessage, String)>), StoreError> {
        let mut signed = Vec::with_capacity(self.unwritten.len());
        let mut unreadable = Vec::new();
        let received = std::time::Instant::now();
        for message in &self.unwritten {
            let decoded = match self
                .keyring
                .authenticate(message, "log record", received)
                .await
            {
                Ok(key_app) => decode(message).map(|lines| (lines, key_app)),
                Err(refused) => Err(refused.to_string()),
            };
            match decoded {
                Ok(decoded) => signed.push((message, decoded)),
                Err(reason) => unreadable.push((message, reason)),
            }
        }
        let log_ids: Vec<i64> = (signed.iter())
            .filter(|(_, (_, key_app))| key_app.is_some())
            .map(|(_, (lines, _))| lines.log_id)
            .collect();
        let run_apps = if log_ids.is_empty() {
            Default::default()
        } else {
            self.store.run_apps(&log_ids).await?
        };
        let mut batches = Vec::with_capacity(signed.len());
        for (message, (lines, key_app)) in signed {
            let mismatch = (run_apps.get(&lines.log_id))
                .and_then(|run_app| app_mismatch("log record", run_app, key_app.as_deref()));
            match mismatch {
                Some(reason) => unreadable.push((message, reason)),
                None => batches.push(lines),
            }
        }
        Ok((batches, unreadable))
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
        // A v1 record does not say which run it belongs to: its lines are the oldest run's.
        run_started_at_ms: record.run_started_at_ms.unwrap_or(0),
        first_line: record.first_line,
        lines: record.lines,
    })
}
