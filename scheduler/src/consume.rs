//! What every scheduler consumer of a Kadence topic does the same way: take a batch of what
//! is ready, commit past a processed batch, and close off the runtime's threads when the
//! scheduler stops (see [`close_consumer`]).

use std::collections::HashMap;
use std::time::Duration;

use futures::FutureExt;
use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext, StreamConsumer};

use crate::kafka::KafkaSettings;
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};

pub use kadence_executor::kafka::close_consumer;

/// How long a stopping scheduler waits for each of its consumers to leave its group: well
/// inside the stop deadline, so that a broker that does not answer delays nothing else.
pub const CONSUMER_CLOSE_LIMIT: Duration = Duration::from_secs(5);

/// A consumer in `group` subscribed to `topic`: manual commits, from the earliest offset when
/// the group has none (nothing produced before the group existed is skipped).
pub fn subscribe(
    settings: &KafkaSettings,
    group: &str,
    topic: &str,
    session_timeout: Duration,
) -> Result<StreamConsumer, KafkaError> {
    let session_timeout = session_timeout.as_millis().to_string();
    let consumer: StreamConsumer = settings
        .client_config_with(&[
            ("group.id", group),
            ("enable.auto.commit", "false"),
            ("auto.offset.reset", "earliest"),
            ("session.timeout.ms", &session_timeout),
        ])
        .create()?;
    consumer.subscribe(&[topic])?;
    Ok(consumer)
}

/// Waits up to `wait` for a first record, then takes whatever else is ready, up to `max`.
/// An empty batch means nothing arrived in time.
pub async fn receive_batch<C: ConsumerContext + 'static>(
    consumer: &StreamConsumer<C>,
    wait: Duration,
    max: usize,
) -> Result<Vec<OwnedMessage>, KafkaError> {
    let first = match tokio::time::timeout(wait, consumer.recv()).await {
        Err(_) => return Ok(Vec::new()),
        Ok(received) => received?.detach(),
    };
    let mut batch = vec![first];
    while batch.len() < max.max(1) {
        match consumer.recv().now_or_never() {
            Some(Ok(message)) => batch.push(message.detach()),
            Some(Err(error)) => {
                tracing::warn!(%error, "error while draining a batch; continuing with it");
                break;
            }
            None => break,
        }
    }
    Ok(batch)
}

/// Commits, per partition, the offset after the last of `messages` (all processed).
pub fn commit_batch<'a, C: ConsumerContext + 'static>(
    consumer: &StreamConsumer<C>,
    messages: impl IntoIterator<Item = &'a OwnedMessage>,
) -> Result<(), KafkaError> {
    let mut next: HashMap<(String, i32), i64> = HashMap::new();
    for message in messages {
        let entry = next
            .entry((message.topic().to_owned(), message.partition()))
            .or_insert(0);
        *entry = (*entry).max(message.offset() + 1);
    }
    if next.is_empty() {
        return Ok(());
    }
    let mut offsets = TopicPartitionList::new();
    for ((topic, partition), offset) in next {
        offsets.add_partition_offset(&topic, partition, Offset::Offset(offset))?;
    }
    consumer.commit(&offsets, CommitMode::Async)
}
