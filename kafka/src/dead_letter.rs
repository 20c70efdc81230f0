//! The dead-letter queue, `{prefix}.dlq`: a record that cannot be processed goes there with
//! its original key and bytes and headers naming the reason and where it came from, so the
//! partition keeps flowing and an operator can inspect and replay it.
//!
//! A dead letter keeps the original record's headers, in their order, before its own
//! (`schemas/PROTOCOL.md` section 8): a dead-lettered trigger still carries the scheduler's
//! signature and trace context, so it can be inspected as it was and replayed to its topic
//! byte for byte, where it verifies again. Dropped from the original are the headers the dead
//! letter sets itself — `kadence.dlq.*` (a record read back from the DLQ and refused again
//! names its latest refusal once) and the executor signature headers (a signature over the
//! original topic does not hold on the DLQ; an executor signs its dead letter anew).

use crate::producer::KafkaProducer;
use kadence_schemas::headers;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::FutureRecord;
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

/// Whether a header of the original record is left off its dead letter, which sets it itself.
fn replaced_on_dead_letters(name: &str) -> bool {
    name.starts_with("kadence.dlq.")
        || name == headers::EXECUTOR_KEY
        || name == headers::EXECUTOR_SIGNATURE
}

/// The headers of a dead letter: the `original` record's (see the module docs), then
/// `kadence.dlq.reason`, `.topic`, `.partition` and `.offset`.
pub fn dead_letter_headers(
    original: Option<&OwnedHeaders>,
    reason: &str,
    origin: RecordOrigin<'_>,
) -> OwnedHeaders {
    let partition = origin.partition.to_string();
    let offset = origin.offset.to_string();
    let mut kept = OwnedHeaders::new();
    for header in original.into_iter().flat_map(|original| original.iter()) {
        if !replaced_on_dead_letters(header.key) {
            kept = kept.insert(header);
        }
    }
    kept.insert(Header {
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
    producer: KafkaProducer,
    topic: String,
}

impl DeadLetters {
    /// A dead-letter sender producing to `topic` (`{prefix}.dlq`).
    pub fn new(producer: KafkaProducer, topic: String) -> Self {
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
        let headers = dead_letter_headers(message.headers(), reason, RecordOrigin::of(message));
        let mut record: FutureRecord<'_, [u8], [u8]> =
            FutureRecord::to(&self.topic).headers(headers);
        if let Some(key) = message.key() {
            record = record.key(key);
        }
        if let Some(payload) = message.payload() {
            record = record.payload(payload);
        }
        self.producer.send(record, Timeout::Never).await.map(|_| ())
    }

    fn warn(&self, message: &OwnedMessage, reason: &str) {
        tracing::warn!(topic = message.topic(), partition = message.partition(),
            offset = message.offset(), %reason, "sending a record to the dead-letter queue");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_letter_headers_keep_the_originals_and_name_the_reason_and_the_origin() {
        let origin = RecordOrigin {
            topic: "kadence.results",
            partition: 3,
            offset: 42,
        };
        let original = OwnedHeaders::new()
            .insert(Header {
                key: headers::SIGNATURE_KEY,
                value: Some("0123456789abcdef"),
            })
            .insert(Header {
                key: headers::DLQ_REASON,
                value: Some("refused before"),
            })
            .insert(Header {
                key: "traceparent",
                value: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            })
            .insert(Header {
                key: headers::EXECUTOR_SIGNATURE,
                value: Some("over another topic"),
            });
        let headers = dead_letter_headers(Some(&original), "undecodable", origin);
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
                (
                    headers::SIGNATURE_KEY.to_owned(),
                    "0123456789abcdef".to_owned()
                ),
                (
                    "traceparent".to_owned(),
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned()
                ),
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
