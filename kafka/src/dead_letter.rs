//! The dead-letter queue, `{prefix}.dlq`: a record that cannot be processed goes there with
//! its original key and bytes and headers naming the reason and where it came from, so the
//! partition keeps flowing and an operator can inspect and replay it.

use kadence_schemas::headers;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;

/// Where a record that could not be processed came from.
#[derive(Debug, Clone, Copy)]
pub struct RecordOrigin<'a> {
    /// Source topic.
    pub topic: &'a str,
    /// Source partition.
    pub partition: i32,
    /// Source offset.
    pub offset: i64,
}

impl<'a> RecordOrigin<'a> {
    /// Where `message` was read from.
    pub fn of(message: &'a OwnedMessage) -> RecordOrigin<'a> {
        RecordOrigin {
            topic: message.topic(),
            partition: message.partition(),
            offset: message.offset(),
        }
    }
}

/// The headers of a dead letter: `kadence.dlq.reason`, `.topic`, `.partition` and `.offset`.
pub fn dead_letter_headers(reason: &str, origin: RecordOrigin<'_>) -> OwnedHeaders {
    let partition = origin.partition.to_string();
    let offset = origin.offset.to_string();
    OwnedHeaders::new()
        .insert(Header {
            key: headers::DLQ_REASON,
            value: Some(reason),
        })
        .insert(Header {
            key: headers::DLQ_SOURCE_TOPIC,
            value: Some(origin.topic),
        })
        .insert(Header {
            key: headers::DLQ_SOURCE_PARTITION,
            value: Some(&partition),
        })
        .insert(Header {
            key: headers::DLQ_SOURCE_OFFSET,
            value: Some(&offset),
        })
}

/// Sends records that cannot be processed to the dead-letter topic.
#[derive(Clone)]
pub struct DeadLetters {
    producer: FutureProducer,
    topic: String,
}

impl DeadLetters {
    /// A dead-letter sender producing to `topic` (`{prefix}.dlq`).
    pub fn new(producer: FutureProducer, topic: String) -> Self {
        DeadLetters { producer, topic }
    }

    /// Sends a consumed record that cannot be processed, with `reason`, and waits for the
    /// broker's acknowledgement (one try: a caller that keeps the record retries its batch).
    pub async fn send_message(
        &self,
        message: &OwnedMessage,
        reason: &str,
    ) -> Result<(), KafkaError> {
        self.warn(message, reason);
        self.send(
            message.key(),
            message.payload(),
            RecordOrigin::of(message),
            reason,
        )
        .await
    }

    /// Sends one record and waits for the broker's acknowledgement.
    pub async fn send(
        &self,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        origin: RecordOrigin<'_>,
        reason: &str,
    ) -> Result<(), KafkaError> {
        let mut record: FutureRecord<'_, [u8], [u8]> =
            FutureRecord::to(&self.topic).headers(dead_letter_headers(reason, origin));
        if let Some(key) = key {
            record = record.key(key);
        }
        if let Some(payload) = payload {
            record = record.payload(payload);
        }
        self.producer
            .send(record, Timeout::Never)
            .await
            .map(|_| ())
            .map_err(|(error, _)| error)
    }

    fn warn(&self, message: &OwnedMessage, reason: &str) {
        tracing::warn!(topic = message.topic(), partition = message.partition(),
            offset = message.offset(), %reason, "sending a record to the dead-letter queue");
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::message::Headers;

    use super::*;

    #[test]
    fn dead_letter_headers_name_the_reason_and_the_origin() {
        let origin = RecordOrigin {
            topic: "kadence.results",
            partition: 3,
            offset: 42,
        };
        let headers = dead_letter_headers("undecodable", origin);
        let pairs: Vec<(String, String)> = headers
            .iter()
            .map(|h| {
                (
                    h.key.to_owned(),
                    String::from_utf8_lossy(h.value.unwrap()).into_owned(),
                )
            })
            .collect();
        assert_eq!(
            pairs,
            [
                (headers::DLQ_REASON.to_owned(), "undecodable".to_owned()),
                (
                    headers::DLQ_SOURCE_TOPIC.to_owned(),
                    "kadence.results".to_owned()
                ),
                (headers::DLQ_SOURCE_PARTITION.to_owned(), "3".to_owned()),
                (headers::DLQ_SOURCE_OFFSET.to_owned(), "42".to_owned()),
            ]
        );
    }
}
