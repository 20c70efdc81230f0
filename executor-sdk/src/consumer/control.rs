//! The control topic `{prefix}.control`: operators' commands to executors (KILL).
//!
//! Every executor reads it from its end, without a consumer group (every executor must see
//! every command), and forwards its own app's commands to the loop, which applies them to
//! its runs through [`apply`]. An unreadable record is logged and skipped: commands are not
//! replayed, so there is nothing to redeliver.
//!
//! An executor that trusts scheduler keys verifies every control record before it reads it,
//! as it does triggers; one that fails (unsigned, unknown key, bad signature, malformed
//! header) is logged as a warning with the reason and ignored, never applied. It is not
//! dead-lettered: every executor of every app reads every control record, so each would
//! write its own copy to `{prefix}.dlq`, and a refused command has nothing to retry.

use kadence_kafka::{TrustedKeys, close_consumer};
use kadence_schemas::{ControlCommand, ControlRecord, TriggerRecord, codec};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::dispatch::{Dispatch, Step};
use crate::error::ExecutorError;
use crate::settings::ExecutorSettings;

/// Starts reading the control topic from its end, sending this app's commands to `commands`
/// until `stop` fires.
pub(super) fn spawn_reader(
    settings: &ExecutorSettings,
    commands: mpsc::UnboundedSender<ControlRecord>,
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
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(&settings.topics.control(), 0, Offset::End)
        .map_err(ExecutorError::kafka("assign the control topic"))?;
    consumer
        .assign(&assignment)
        .map_err(ExecutorError::kafka("assign the control topic"))?;
    let app = settings.app.clone();
    let trusted = settings.trusted_keys.clone();
    let close_limit = settings.session_timeout;
    tokio::spawn(async move {
        loop {
            let received = tokio::select! {
                _ = stop.cancelled() => break,
                received = consumer.recv() => received,
            };
            match received {
                Ok(message) if !trusted.is_empty() && verified(&trusted, &message).is_none() => {}
                Ok(message) => match decode(&message) {
                    Some(command) if command.app == app => {
                        let _ = commands.send(command);
                    }
                    _ => {}
                },
                Err(error) => tracing::warn!(%error, "error while reading control commands"),
            }
        }
        close_consumer(consumer, "control", close_limit).await;
    });
    Ok(())
}

/// The key that signed `message`; `None` (logged) when it is not signed by a trusted key.
fn verified(trusted: &TrustedKeys, message: &BorrowedMessage<'_>) -> Option<String> {
    match trusted.verify_message(message) {
        Ok(key_id) => Some(key_id),
        Err(error) => {
            tracing::warn!(offset = message.offset(), %error,
                "ignoring a control record that fails signature verification");
            None
        }
    }
}

/// The command in `message`; `None` (logged) when there is none to read.
fn decode(message: &BorrowedMessage<'_>) -> Option<ControlRecord> {
    match message.payload().map(codec::decode::<ControlRecord>) {
        Some(Ok(command)) => Some(command),
        Some(Err(error)) => {
            tracing::warn!(%error, offset = message.offset(), "skipping an unreadable control record");
            None
        }
        None => {
            tracing::warn!(
                offset = message.offset(),
                "skipping an empty control record"
            );
            None
        }
    }
}

/// Applies `command` to this executor's runs (running, queued and held); returns the steps
/// that follow (the refusals of what was killed before it started).
pub(super) fn apply<P: AsRef<TriggerRecord>>(
    command: ControlRecord,
    dispatch: &mut Dispatch<P>,
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
            dispatch.kill(command.job_id, command.trigger_id.as_ref(), &reason)
        }
    }
}
