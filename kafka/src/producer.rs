//! [`KafkaProducer`]: the producer Kadence's own processes send with, the scheduler's triggers
//! and dead letters and an executor's results, logs and beats.
//!
//! It is rdkafka's `FutureProducer` in what it offers (`send_result` hands a record to
//! librdkafka and returns a future of the broker's answer; `send` also waits out a full local
//! queue), built on `BaseProducer` with a polling thread of its own. The reason is that
//! thread: the `FutureProducer`'s polls in windows of 100 ms, and rdkafka turns the time left
//! in a window into whole milliseconds for librdkafka, rounding down, so every window ended
//! with up to a millisecond of polls that return at once. That was about 1 % of a core in
//! every process, doing nothing: an idle scheduler node spent more than half of its CPU
//! there, and at 1 000 triggers a second it was about 10 µs per trigger. This thread polls
//! in windows of a second and 50 µs, so the rounding leaves at most 50 µs of spinning per
//! second when nothing arrives, and at most one such tail a second when deliveries do.
//!
//! Delivery reports are handed to the waiting futures as they arrive; the window only bounds
//! how long the thread takes to notice the producer is no longer used. It does not hold up
//! the last handle's drop: the thread lets go of librdkafka's client within a window, and the
//! client's own drop (purge, then at most 500 ms to collect the purged reports) runs there.
//! As with the `FutureProducer`, records still queued when the last handle goes are purged,
//! and their futures resolve as cancelled.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Message, ToBytes};
use rdkafka::producer::future_producer::{Delivery, OwnedDeliveryResult};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, FutureRecord, ProducerContext};
use rdkafka::util::Timeout;

/// How long the polling thread waits for delivery reports in one call: rdkafka rounds what is
/// left of it down to whole milliseconds, so the 50 µs are what is left to spin on.
const POLL_WINDOW: Duration = Duration::from_micros(1_000_050);

/// How long [`KafkaProducer::send`] waits before trying a full local queue again.
const QUEUE_FULL_PAUSE: Duration = Duration::from_millis(10);

/// A producer whose every send returns a future of the broker's answer. Clones share one
/// librdkafka client; it closes once the last clone is gone.
#[derive(Clone)]
pub struct KafkaProducer {
    handle: Arc<Handle>,
}

/// What the clones share; its drop tells the polling thread to let go.
struct Handle {
    client: Arc<BaseProducer<DeliveryReports>>,
    in_use: Arc<AtomicBool>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.in_use.store(false, Ordering::Release);
    }
}

/// The future of one record's delivery: the broker's answer, or `Err(Canceled)` when the
/// producer was closed before it came.
pub struct DeliveryFuture {
    answer: oneshot::Receiver<OwnedDeliveryResult>,
}

impl Future for DeliveryFuture {
    type Output = Result<OwnedDeliveryResult, oneshot::Canceled>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.answer).poll(cx)
    }
}

/// The client context: each delivery report completes the future its record was sent with.
struct DeliveryReports;

impl ClientContext for DeliveryReports {}

impl ProducerContext for DeliveryReports {
    type DeliveryOpaque = Box<oneshot::Sender<OwnedDeliveryResult>>;

    fn delivery(&self, report: &DeliveryResult<'_>, waiting: Self::DeliveryOpaque) {
        let answer = match report {
            Ok(message) => Ok(Delivery {
                partition: message.partition(),
                offset: message.offset(),
                timestamp: message.timestamp(),
            }),
            Err((error, message)) => Err((error.clone(), message.detach())),
        };
        // Nobody waiting (the future was dropped) is fine: the record was sent all the same.
        let _ = waiting.send(answer);
    }
}

impl KafkaProducer {
    /// A producer with `config`, and its polling thread.
    pub fn new(config: &ClientConfig) -> Result<KafkaProducer, KafkaError> {
        let client: Arc<BaseProducer<DeliveryReports>> =
            Arc::new(config.create_with_context(DeliveryReports)?);
        let in_use = Arc::new(AtomicBool::new(true));
        std::thread::Builder::new()
            .name("kadence-producer-poll".into())
            .spawn({
                let client = Arc::clone(&client);
                let in_use = Arc::clone(&in_use);
                move || {
                    while in_use.load(Ordering::Acquire) {
                        client.poll(POLL_WINDOW);
                    }
                }
            })
            .map_err(|error| {
                KafkaError::ClientCreation(format!(
                    "cannot start the producer's polling thread: {error}"
                ))
            })?;
        Ok(KafkaProducer {
            handle: Arc::new(Handle { client, in_use }),
        })
    }

    /// Hands `record` to librdkafka without waiting; the future resolves with the broker's
    /// answer. When it cannot be queued (a full local queue is
    /// `MessageProduction(QueueFull)`), the error comes back with the record.
    #[allow(clippy::result_large_err)]
    pub fn send_result<'a, K, P>(
        &self,
        record: FutureRecord<'a, K, P>,
    ) -> Result<DeliveryFuture, (KafkaError, FutureRecord<'a, K, P>)>
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        let (waiting, answer) = oneshot::channel();
        let queued = BaseRecord {
            topic: record.topic,
            partition: record.partition,
            payload: record.payload,
            key: record.key,
            timestamp: record.timestamp,
            headers: record.headers,
            delivery_opaque: Box::new(waiting),
        };
        match self.handle.client.send(queued) {
            Ok(()) => Ok(DeliveryFuture { answer }),
            Err((error, refused)) => Err((
                error,
                FutureRecord {
                    topic: refused.topic,
                    partition: refused.partition,
                    payload: refused.payload,
                    key: refused.key,
                    timestamp: refused.timestamp,
                    headers: refused.headers,
                },
            )),
        }
    }

    /// Sends `record` and waits for the broker's answer. A full local queue is tried again
    /// every 10 ms until `queue_timeout` has passed (`Timeout::Never`: for as long as it
    /// takes); then, or on any other error, the error is returned.
    pub async fn send<K, P>(
        &self,
        mut record: FutureRecord<'_, K, P>,
        queue_timeout: Timeout,
    ) -> Result<Delivery, KafkaError>
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        let started = Instant::now();
        let delivery = loop {
            match self.send_result(record) {
                Ok(delivery) => break delivery,
                Err((error, refused))
                    if error == KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
                        && may_wait(queue_timeout, started) =>
                {
                    record = refused;
                    tokio::time::sleep(QUEUE_FULL_PAUSE).await;
                }
                Err((error, _)) => return Err(error),
            }
        };
        match delivery.await {
            Ok(Ok(delivered)) => Ok(delivered),
            Ok(Err((error, _))) => Err(error),
            Err(oneshot::Canceled) => Err(KafkaError::Canceled),
        }
    }
}

/// Whether a send begun at `started` may still wait for room under `queue_timeout`.
fn may_wait(queue_timeout: Timeout, started: Instant) -> bool {
    match queue_timeout {
        Timeout::Never => true,
        Timeout::After(limit) => started.elapsed() < limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable_broker() -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("message.timeout.ms", "300")
            .set("queue.buffering.max.messages", "1");
        config
    }

    #[tokio::test]
    async fn a_record_that_cannot_be_delivered_resolves_with_the_error() {
        let producer = KafkaProducer::new(&unreachable_broker()).expect("a producer");
        let delivery = producer
            .send_result(FutureRecord::<str, str>::to("kadence-test").payload("x"))
            .map_err(|(error, _)| error)
            .expect("queued");
        let answer = tokio::time::timeout(Duration::from_secs(10), delivery)
            .await
            .expect("an answer well within the message timeout")
            .expect("not cancelled");
        let (error, message) = answer.expect_err("no broker to deliver to");
        assert_eq!(
            error,
            KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut)
        );
        assert_eq!(message.payload(), Some(&b"x"[..]));
    }

    #[tokio::test]
    async fn a_full_queue_gives_the_record_back_and_send_stops_waiting_at_its_timeout() {
        let producer = KafkaProducer::new(&unreachable_broker()).expect("a producer");
        let first = producer
            .send_result(FutureRecord::<str, str>::to("kadence-test").payload("first"))
            .map_err(|(error, _)| error)
            .expect("queued");
        let (error, refused) = producer
            .send_result(FutureRecord::<str, str>::to("kadence-test").payload("second"))
            .err()
            .expect("the queue holds one record");
        assert_eq!(
            error,
            KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
        );
        assert_eq!(refused.payload, Some("second"));
        let waited = producer
            .send(refused, Timeout::After(Duration::from_millis(30)))
            .await;
        assert_eq!(
            waited.expect_err("still full"),
            KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
        );
        drop(first);
    }

    #[tokio::test]
    async fn a_dropped_producer_cancels_what_it_still_held() {
        let mut config = unreachable_broker();
        config.set("message.timeout.ms", "60000");
        let patient = KafkaProducer::new(&config).expect("a producer");
        let delivery = patient
            .send_result(FutureRecord::<str, str>::to("kadence-test").payload("x"))
            .map_err(|(error, _)| error)
            .expect("queued");
        drop(patient);
        let answer = tokio::time::timeout(Duration::from_secs(5), delivery)
            .await
            .expect("an answer within a polling window and the purge");
        // Purged: either the future is dropped unanswered or answered with the purge's error.
        match answer {
            Err(oneshot::Canceled) => {}
            Ok(Err((error, _))) => assert_eq!(
                error,
                KafkaError::MessageProduction(RDKafkaErrorCode::PurgeQueue)
            ),
            Ok(Ok(delivered)) => panic!("delivered to no broker: {delivered:?}"),
        }
    }
}
