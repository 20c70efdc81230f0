//! The control topic `{prefix}.control`: operators' commands to executors (KILL).
//!
//! Every executor reads it without a consumer group (every executor must see every command)
//! and forwards its own app's commands to the loop, which applies them to its runs and
//! remembers them (`kills`) through [`apply`]. A starting executor reads it from its
//! beginning, keeping the commands of the last `kill_memory`, and says when it has caught
//! up with the end ([`ControlEvent::CaughtUp`]): the loop takes no trigger before that, so a
//! KILL sent while no executor was up still covers the triggers emitted before it. If the
//! end cannot be learnt or reached within the session timeout, the reader says it caught up
//! anyway (logged) rather than keep the executor idle. An unreadable record is logged and
//! skipped: there is nothing to redeliver.
//!
//! An executor that trusts scheduler keys verifies every control record before it reads it,
//! as it does triggers; one that fails (unsigned, unknown key, bad signature, malformed
//! header) is logged as a warning with the reason and ignored, never applied, and counted
//! (`kadence_executor_control_refused_total{reason}`, as are empty and undecodable ones). It is not
//! dead-lettered: every executor of every app reads every control record, so each would
//! write its own copy to `{prefix}.dlq`, and a refused command has nothing to retry.

use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::{TrustedKeys, close_consumer};
use kadence_schemas::{ControlCommand, ControlRecord, TriggerRecord, codec};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::intake::refusal_kind;
use super::kills::RememberedKills;
use crate::clock::Clock;
use crate::dispatch::{Dispatch, Step};
use crate::error::ExecutorError;
use crate::metrics::ExecutorMetrics;
use crate::settings::ExecutorSettings;

/// What the control reader tells the loop.
#[derive(Debug)]
pub(super) enum ControlEvent {
    /// A command for this executor's app.
    Command(ControlRecord),
    /// Every command sent before this executor started has been read.
    CaughtUp,
}

/// Starts reading the control topic from its beginning, sending this app's commands of the
/// last `kill_memory` to `events` until `stop` fires.
pub(super) fn spawn_reader(
    settings: &ExecutorSettings,
    metrics: &Arc<ExecutorMetrics>,
    clock: Clock,
    events: mpsc::UnboundedSender<ControlEvent>,
    stop: CancellationToken,
) -> Result<(), ExecutorError> {
    // librdkafka wants a group id even for assigned partitions; nothing is ever committed.
    let group = format!(
        "{}.control.{}",
        settings.topics.prefix(),
        settings.executor_id
    );
    let config = settings
        .kafka
        .client_config_with(&[("group.id", &group), ("enable.auto.commit", "false")]);
    let consumer: StreamConsumer = config
        .create()
        .map_err(ExecutorError::kafka("create the control consumer"))?;
    let topic = settings.topics.control();
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(&topic, 0, Offset::Beginning)
        .map_err(ExecutorError::kafka("assign the control topic"))?;
    consumer
        .assign(&assignment)
        .map_err(ExecutorError::kafka("assign the control topic"))?;
    let reader = Reader {
        consumer: Arc::new(consumer),
        topic,
        app: settings.app.clone(),
        trusted: settings.trusted_keys.clone(),
        memory_ms: i64::try_from(settings.kill_memory.as_millis()).unwrap_or(i64::MAX),
        clock,
        patience: settings.session_timeout,
        events,
        metrics: Arc::clone(metrics),
    };
    tokio::spawn(reader.run(stop));
    Ok(())
}

struct Reader {
    consumer: Arc<StreamConsumer>,
    topic: String,
    app: kadence_schemas::AppName,
    trusted: TrustedKeys,
    memory_ms: i64,
    /// The consumer loop's clock: a command is remembered while younger than `memory_ms`.
    clock: Clock,
    /// How long catching up may take before the loop is let go anyway.
    patience: Duration,
    events: mpsc::UnboundedSender<ControlEvent>,
    metrics: Arc<ExecutorMetrics>,
}

impl Reader {
    async fn run(self, stop: CancellationToken) {
        let mut end = self.end_offset().await;
        if end.is_none_or(|end| end <= 0) {
            self.caught_up(&mut end);
        }
        let patience = tokio::time::sleep(self.patience);
        tokio::pin!(patience);
        loop {
            let received = tokio::select! {
                _ = stop.cancelled() => break,
                _ = &mut patience, if end.is_some() => {
                    tracing::warn!(topic = %self.topic,
                        "control commands not read to their end in time; taking triggers anyway");
                    self.caught_up(&mut end);
                    continue;
                }
                received = self.consumer.recv() => received,
            };
            match received {
                Ok(message) => {
                    self.forward(&message);
                    if end.is_some_and(|end| message.offset() + 1 >= end) {
                        self.caught_up(&mut end);
                    }
                }
                Err(error) => tracing::warn!(%error, "error while reading control commands"),
            }
        }
        let limit = self.patience;
        if let Ok(consumer) = Arc::try_unwrap(self.consumer) {
            close_consumer(consumer, "control", limit).await;
        }
    }

    /// The offset after the last command sent before now; `None` if it cannot be learnt.
    async fn end_offset(&self) -> Option<i64> {
        let (consumer, topic, timeout) = (
            Arc::clone(&self.consumer),
            self.topic.clone(),
            self.patience,
        );
        let watermarks =
            tokio::task::spawn_blocking(move || consumer.fetch_watermarks(&topic, 0, timeout))
                .await;
        match watermarks {
            Ok(Ok((_, high))) => Some(high),
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot learn the end of the control topic");
                None
            }
            Err(error) => {
                tracing::warn!(%error, "cannot learn the end of the control topic");
                None
            }
        }
    }

    /// Tells the loop that the commands sent before the start are read; `end` becomes `None`
    /// so that it is said once.
    fn caught_up(&self, end: &mut Option<i64>) {
        *end = None;
        let _ = self.events.send(ControlEvent::CaughtUp);
    }

    /// Sends this app's command in `message` to the loop if it is signed (when keys are
    /// trusted) and recent enough to remember; counts it if it is refused.
    fn forward(&self, message: &BorrowedMessage<'_>) {
        let read = if self.trusted.is_empty() {
            decode(message)
        } else {
            verify(&self.trusted, message).and_then(|()| decode(message))
        };
        match read {
            Ok(command)
                if command.app == self.app
                    && command.requested_at_ms >= self.clock.now_ms() - self.memory_ms =>
            {
                let _ = self.events.send(ControlEvent::Command(command));
            }
            Ok(_) => {}
            Err(reason) => self
                .metrics
                .control_refused
                .with_label_values(&[reason])
                .inc(),
        }
    }
}

/// Whether `message` is signed by a trusted key; if not, the kind of refusal (logged).
fn verify(trusted: &TrustedKeys, message: &BorrowedMessage<'_>) -> Result<(), &'static str> {
    trusted
        .verify_message(message)
        .map(|_| ())
        .map_err(|error| {
            tracing::warn!(offset = message.offset(), %error,
            "ignoring a control record that fails signature verification");
            refusal_kind(&error)
        })
}

/// The command in `message`; if there is none to read, the kind of refusal (logged).
fn decode(message: &BorrowedMessage<'_>) -> Result<ControlRecord, &'static str> {
    match message.payload().map(codec::decode::<ControlRecord>) {
        Some(Ok(command)) => Ok(command),
        Some(Err(error)) => {
            tracing::warn!(%error, offset = message.offset(), "skipping an unreadable control record");
            Err("undecodable")
        }
        None => {
            tracing::warn!(
                offset = message.offset(),
                "skipping an empty control record"
            );
            Err("no_value")
        }
    }
}

/// Applies `command` to this executor's runs (running, queued and held) and remembers it
/// for the triggers it covers that have not arrived yet; returns the steps that follow (the
/// refusals of what was killed before it started).
pub(super) fn apply<P: AsRef<TriggerRecord>>(
    command: ControlRecord,
    dispatch: &mut Dispatch<P>,
    kills: &mut RememberedKills,
    now_ms: i64,
) -> Vec<Step<P>> {
    match command.command {
        ControlCommand::Kill => {
            let reason = format!(
                "killed: {}",
                command
                    .reason
                    .as_deref()
                    .unwrap_or("requested by an operator")
            );
            if let Some(job) = command.job_id {
                tracing::info!(%job, "killing the job's running and queued runs");
            }
            kills.remember(&command, &reason, now_ms);
            dispatch.kill(command.job_id, command.trigger_id.as_ref(), &reason)
        }
    }
}
