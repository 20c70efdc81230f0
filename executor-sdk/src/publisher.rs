//! Publishing what the executor produces: results to `{prefix}.results` (a shadow executor's
//! to `{prefix}.shadow-results`, where they complete nothing), job log lines to
//! `{prefix}.logs` and records it cannot read to `{prefix}.dlq`, through one idempotent
//! producer.
//!
//! A result is handed to the producer without waiting ([`Publisher::enqueue_result`]): the
//! broker's acknowledgement comes back as a future that the consumer's acknowledgement task
//! collects (`consumer::answers`), since an offset is committed only after its result is
//! published. The producer batches what is enqueued meanwhile (`linger.ms`), so results go
//! out in a few requests per second however many triggers run. Log lines are enqueued the
//! same way, and the run waits for their acknowledgements before its result (see
//! `joblog`); a log record the producer could not deliver within its own retries is dropped
//! and counted, never retried past them, so a log never holds a result back for longer than
//! the producer's delivery timeout. Dead letters and a result whose first delivery failed
//! wait for their acknowledgement, retrying retriable errors.
//!
//! Everything published here is signed with the executor key (see
//! [`crate::ExecutorBuilder::executor_key`]): [`Publisher::signed`] adds the two headers to
//! each record on its way out, so no path can forget them.

use std::sync::Arc;

use kadence_kafka::trace;
use kadence_kafka::{Backoff, ExecutorKey, RecordOrigin, dead_letter_headers, is_retriable};
use kadence_kafka::{DeliveryFuture, KafkaProducer};
use kadence_schemas::{LogRecord, ResultRecord, codec};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
use tokio_util::sync::CancellationToken;

use crate::error::ExecutorError;
use crate::metrics::ExecutorMetrics;
use crate::settings::ExecutorSettings;

/// How long to wait before enqueueing again into a full producer queue.
const QUEUE_FULL_PAUSE: std::time::Duration = std::time::Duration::from_millis(5);

/// Owns the executor's idempotent producer. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Publisher {
    inner: Arc<Inner>,
}

struct Inner {
    producer: KafkaProducer,
    results_topic: String,
    logs_topic: String,
    dlq_topic: String,
    executor_key: Option<ExecutorKey>,
    metrics: Arc<ExecutorMetrics>,
}

impl Publisher {
    pub(crate) fn new(
        settings: &ExecutorSettings,
        metrics: Arc<ExecutorMetrics>,
    ) -> Result<Publisher, ExecutorError> {
        let inner = Inner {
            metrics,
            producer: settings
                .kafka
                .idempotent_producer()
                .map_err(ExecutorError::kafka("create the result producer"))?,
            results_topic: settings.results_topic(),
            logs_topic: settings.topics.logs(),
            dlq_topic: settings.topics.dlq(),
            executor_key: settings.executor_key.clone(),
        };
        Ok(Publisher {
            inner: Arc::new(inner),
        })
    }

    /// The producer, shared with the beats.
    pub(crate) fn producer(&self) -> KafkaProducer {
        self.inner.producer.clone()
    }

    /// `headers` with the executor key's signature of `payload` on `topic` added (unchanged
    /// when the executor runs unsigned).
    pub(crate) fn signed(
        &self,
        topic: &str,
        payload: &[u8],
        headers: OwnedHeaders,
    ) -> OwnedHeaders {
        sign_with(self.inner.executor_key.as_ref(), topic, payload, headers)
    }

    /// `record` as the bytes of its record on the results topic.
    pub(crate) fn encode_result(record: &ResultRecord) -> Result<Vec<u8>, KafkaError> {
        codec::encode(record).map_err(|error| {
            tracing::error!(%error, trigger_id = %record.trigger_id, "cannot encode result");
            KafkaError::MessageProduction(RDKafkaErrorCode::InvalidMessage)
        })
    }

    /// Hands the result `record` (encoded as `payload`) with the `traceparent` of `trace` to
    /// the producer without waiting for the broker; the future resolves with the broker's
    /// answer. `QueueFull` means the producer holds as many records as it may: try again
    /// shortly.
    pub(crate) fn enqueue_result(
        &self,
        record: &ResultRecord,
        payload: &[u8],
        trace: &opentelemetry::Context,
    ) -> Result<DeliveryFuture, KafkaError> {
        let topic = &self.inner.results_topic;
        let headers = self.signed(topic, payload, trace::inject(trace, OwnedHeaders::new()));
        let sent = FutureRecord::<str, [u8]>::to(topic)
            .key(record.trigger_id.as_str())
            .payload(payload)
            .headers(headers);
        self.inner
            .producer
            .send_result(sent)
            .map_err(|(error, _)| error)
    }

    /// Publishes the result `record` (encoded as `payload`) with the `traceparent` of
    /// `trace`, retrying retriable errors until acknowledged or `give_up` fires.
    pub(crate) async fn publish_result(
        &self,
        record: &ResultRecord,
        payload: &[u8],
        trace: &opentelemetry::Context,
        give_up: &CancellationToken,
    ) -> Result<(), KafkaError> {
        let key = record.trigger_id.as_str();
        let topic = &self.inner.results_topic;
        let headers = self.signed(topic, payload, trace::inject(trace, OwnedHeaders::new()));
        self.send_with_retry("results", give_up, || {
            FutureRecord::<str, [u8]>::to(&self.inner.results_topic)
                .key(key)
                .payload(payload)
                .headers(headers.clone())
        })
        .await
    }

    /// Counts a publish to `topic` (the kind of topic) that is tried again.
    pub(crate) fn count_retry(&self, topic: &'static str) {
        self.inner
            .metrics
            .publish_retries
            .with_label_values(&[topic])
            .inc();
    }

    /// Hands a run's log lines to the producer without waiting for the broker; the future
    /// resolves with its answer. Waits only while the producer's queue is full (until
    /// `give_up`). The producer retries inside its `delivery.timeout.ms` (30 s by default,
    /// `message.timeout.ms`) and nothing retries after it: a log record that did not get
    /// through is dropped ([`Publisher::log_dropped`]) rather than hold the run's result back.
    pub(crate) async fn enqueue_log(
        &self,
        record: &LogRecord,
        give_up: &CancellationToken,
    ) -> Result<DeliveryFuture, KafkaError> {
        let payload = codec::encode(record).map_err(|error| {
            tracing::error!(%error, trigger_id = %record.trigger_id, "cannot encode log lines");
            KafkaError::MessageProduction(RDKafkaErrorCode::InvalidMessage)
        })?;
        let topic = &self.inner.logs_topic;
        let headers = self.signed(topic, &payload, OwnedHeaders::new());
        loop {
            let sent = FutureRecord::<str, [u8]>::to(topic)
                .key(record.trigger_id.as_str())
                .payload(&payload)
                .headers(headers.clone());
            match self.inner.producer.send_result(sent) {
                Ok(delivery) => return Ok(delivery),
                Err((error, _))
                    if error == KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
                        && !give_up.is_cancelled() =>
                {
                    tokio::time::sleep(QUEUE_FULL_PAUSE).await
                }
                Err((error, _)) => return Err(error),
            }
        }
    }

    /// Logs and counts a log record the broker did not take: its lines are lost.
    pub(crate) fn log_dropped(&self, record: &LogRecord, error: &dyn std::fmt::Display) {
        tracing::warn!(trigger_id = %record.trigger_id, first_line = record.first_line,
            lines = record.lines.len(), %error, "cannot ship job log lines; they are dropped");
        self.inner.metrics.log_records_dropped.inc();
    }

    /// Sends `message` to the dead-letter queue with its own headers, then `reason` and its
    /// origin, then this executor's signature.
    pub(crate) async fn dead_letter(
        &self,
        message: &OwnedMessage,
        reason: &str,
        give_up: &CancellationToken,
    ) -> Result<(), KafkaError> {
        let headers = self.signed(
            &self.inner.dlq_topic,
            message.payload().unwrap_or_default(),
            dead_letter_headers(message.headers(), reason, RecordOrigin::of(message)),
        );
        self.send_with_retry("dlq", give_up, || {
            let mut record =
                FutureRecord::<[u8], [u8]>::to(&self.inner.dlq_topic).headers(headers.clone());
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
            let error = match self.inner.producer.send(record(), Timeout::Never).await {
                Ok(_) => return Ok(()),
                Err(error) => error,
            };
            if !is_retriable(&error) || give_up.is_cancelled() {
                return Err(error);
            }
            tracing::warn!(%error, topic, "publish failed; retrying");
            self.count_retry(topic);
            tokio::select! {
                _ = give_up.cancelled() => return Err(error),
                _ = tokio::time::sleep(backoff.next_delay()) => {}
            }
        }
    }
}

/// `headers` with `key`'s signature of `payload` on `topic` added; unchanged without a key.
pub(crate) fn sign_with(
    key: Option<&ExecutorKey>,
    topic: &str,
    payload: &[u8],
    headers: OwnedHeaders,
) -> OwnedHeaders {
    match key {
        Some(key) => key.headers(topic, payload, Some(headers)),
        None => headers,
    }
}
