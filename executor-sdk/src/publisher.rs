//! Publishing what the executor produces: results to `{prefix}.results` and records it cannot
//! read to `{prefix}.dlq`. Both wait for the broker's acknowledgement, retrying retriable
//! errors, because an offset is committed only after its result is published.

use std::sync::Arc;

use kadence_kafka::{Backoff, RecordOrigin, dead_letter_headers, is_retriable};
use kadence_schemas::{LogRecord, ResultRecord, codec};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use tokio_util::sync::CancellationToken;

use crate::error::ExecutorError;
use crate::metrics::ExecutorMetrics;
use crate::settings::ExecutorSettings;

/// Owns the executor's idempotent producer.
#[derive(Clone)]
pub(crate) struct Publisher {
    producer: FutureProducer,
    results_topic: String,
    logs_topic: String,
    dlq_topic: String,
    metrics: Arc<ExecutorMetrics>,
}

impl Publisher {
    pub(crate) fn new(
        settings: &ExecutorSettings,
        metrics: Arc<ExecutorMetrics>,
    ) -> Result<Publisher, ExecutorError> {
        Ok(Publisher {
            metrics,
            producer: settings
                .kafka
                .idempotent_producer()
                .map_err(ExecutorError::kafka("create the result producer"))?,
            results_topic: settings.topics.results(),
            logs_topic: settings.topics.logs(),
            dlq_topic: settings.topics.dlq(),
        })
    }

    /// The producer, shared with the beats.
    pub(crate) fn producer(&self) -> FutureProducer {
        self.producer.clone()
    }

    /// Publishes `record` with the `traceparent` of `trace`, retrying retriable errors until
    /// acknowledged or `give_up` fires.
    pub(crate) async fn publish_result(
        &self,
        record: &ResultRecord,
        trace: &opentelemetry::Context,
        give_up: &CancellationToken,
    ) -> Result<(), KafkaError> {
        let payload = codec::encode(record).map_err(|error| {
            tracing::error!(%error, trigger_id = %record.trigger_id, "cannot encode result");
            KafkaError::MessageProduction(RDKafkaErrorCode::InvalidMessage)
        })?;
        let key = record.trigger_id.as_str();
        let headers = kadence_kafka::trace::inject(trace, OwnedHeaders::new());
        self.send_with_retry("results", give_up, || {
            FutureRecord::<str, [u8]>::to(&self.results_topic)
                .key(key)
                .payload(&payload)
                .headers(headers.clone())
        })
        .await
    }

    /// Publishes a run's log lines, retrying retriable errors until acknowledged or `give_up`.
    pub(crate) async fn publish_log(
        &self,
        record: &LogRecord,
        give_up: &CancellationToken,
    ) -> Result<(), KafkaError> {
        let payload = codec::encode(record).map_err(|error| {
            tracing::error!(%error, trigger_id = %record.trigger_id, "cannot encode log lines");
            KafkaError::MessageProduction(RDKafkaErrorCode::InvalidMessage)
        })?;
        let key = record.trigger_id.as_str();
        self.send_with_retry("logs", give_up, || {
            FutureRecord::<str, [u8]>::to(&self.logs_topic)
                .key(key)
                .payload(&payload)
        })
        .await
    }

    /// Sends `message` to the dead-letter queue with `reason` and its origin in headers.
    pub(crate) async fn dead_letter(
        &self,
        message: &OwnedMessage,
        reason: &str,
        give_up: &CancellationToken,
    ) -> Result<(), KafkaError> {
        let headers = dead_letter_headers(reason, RecordOrigin::of(message));
        self.send_with_retry("dlq", give_up, || {
            let mut record =
                FutureRecord::<[u8], [u8]>::to(&self.dlq_topic).headers(headers.clone());
            if let Some(key) = message.key() {
                record = record.key(key);
            }
            if let Some(payload) = message.payload() {
                record = record.payload(payload);
            }
            record
        })
        .await
    }

    /// Sends `record` until acknowledged, retrying retriable errors (counted under `topic`,
    /// the kind of topic) until `give_up` fires.
    async fn send_with_retry<'a, K, P>(
        &'a self,
        topic: &'static str,
        give_up: &CancellationToken,
        record: impl Fn() -> FutureRecord<'a, K, P>,
    ) -> Result<(), KafkaError>
    where
        K: rdkafka::message::ToBytes + ?Sized + 'a,
        P: rdkafka::message::ToBytes + ?Sized + 'a,
    {
        let mut backoff = Backoff::standard();
        loop {
            let error = match self.producer.send(record(), Timeout::Never).await {
                Ok(_) => return Ok(()),
                Err((error, _)) => error,
            };
            if !is_retriable(&error) || give_up.is_cancelled() {
                return Err(error);
            }
            tracing::warn!(%error, topic, "publish failed; retrying");
            self.metrics
                .publish_retries
                .with_label_values(&[topic])
                .inc();
            tokio::select! {
                _ = give_up.cancelled() => return Err(error),
                _ = tokio::time::sleep(backoff.next_delay()) => {}
            }
        }
    }
}
