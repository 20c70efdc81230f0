//! Results on their way to the broker ([`Answers`]): a run hands its result over and is done;
//! one task collects the broker's acknowledgements and settles each record.
//!
//! A run (or a refusal) encodes its `ResultRecord` and enqueues it in the producer without
//! waiting ([`Answers::send`]). Nothing downstream waits for the broker per record: the
//! producer batches what was enqueued meanwhile, and the acknowledgement task takes every
//! acknowledgement as it comes. Settling a record is what at-least-once needs, in this order:
//! its offset is completed in the tracker (committable from now on), its run is unregistered
//! (a revocation waits for registered runs, then commits what is complete), its consume span
//! ends, and the loop hears that one record less is in flight.
//!
//! Backpressure is bounded twice: the loop stops fetching at `max_in_flight` records not yet
//! settled, and a producer queue that is full makes the sending run wait a few milliseconds
//! and try again (the run's task waits, never the loop). A delivery that fails with a
//! retriable error is sent again, waiting for the broker, until it is acknowledged or the
//! executor gives up at its drain deadline; a result that cannot be published is settled
//! unhandled: its offset stays uncommitted (nothing past it on its partition is committed
//! while this executor owns it) and its trigger id is forgotten, so the trigger is
//! redelivered to the partition's next owner, this executor included.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kadence_kafka::DeliveryFuture;
use kadence_kafka::is_retriable;
use kadence_schemas::ResultRecord;
use opentelemetry::Context;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::report::Reporter;
use crate::handoff::RunningRuns;
use crate::publisher::Publisher;
use crate::traces::end_with_result;

/// How long a run waits before it tries again to enqueue its result in a full producer.
const QUEUE_FULL_PAUSE: Duration = Duration::from_millis(5);

/// A trigger's result and what to settle once the broker has it.
pub(super) struct Answer {
    pub(super) record: ResultRecord,
    /// The trigger's `kadence.consume` span: the result carries its `traceparent`, and it
    /// ends when the result is out.
    pub(super) trace: Context,
    pub(super) partition: i32,
    pub(super) offset: i64,
    /// Whether a run is registered for the record (unregistered when settled).
    pub(super) registered: bool,
}

/// An answer handed to the producer, and its acknowledgement to come.
struct Enqueued {
    answer: Answer,
    payload: Vec<u8>,
    delivery: DeliveryFuture,
}

/// Publishes results without waiting and settles their records when acknowledged. Cheap to
/// clone.
#[derive(Clone)]
pub(super) struct Answers {
    publisher: Publisher,
    settle: Settle,
    enqueued: mpsc::UnboundedSender<Enqueued>,
}

impl Answers {
    /// Starts the acknowledgement task; it ends once every `Answers` is dropped and every
    /// enqueued result is settled.
    pub(super) fn start(
        publisher: Publisher,
        reporter: Reporter,
        running: RunningRuns,
        give_up: CancellationToken,
    ) -> Answers {
        let (enqueued, acknowledgements) = mpsc::unbounded_channel();
        let settle = Settle {
            reporter,
            running,
            publisher: publisher.clone(),
            give_up,
        };
        tokio::spawn(acknowledge(acknowledgements, settle.clone()));
        Answers {
            publisher,
            settle,
            enqueued,
        }
    }

    /// Hands `answer` to the producer; waits only while the producer's queue is full.
    pub(super) async fn send(&self, answer: Answer) {
        let Ok(payload) = Publisher::encode_result(&answer.record) else {
            return self
                .settle
                .unhandled(answer, "the result cannot be encoded");
        };
        loop {
            let error = match self
                .publisher
                .enqueue_result(&answer.record, &payload, &answer.trace)
            {
                Ok(delivery) => {
                    let enqueued = Enqueued {
                        answer,
                        payload,
                        delivery,
                    };
                    if let Err(mpsc::error::SendError(enqueued)) = self.enqueued.send(enqueued) {
                        // The acknowledgement task is gone (the runtime is stopping).
                        self.settle
                            .unhandled(enqueued.answer, "the executor is stopping");
                    }
                    return;
                }
                Err(error) => error,
            };
            let full = error == KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull);
            if !full {
                // Not even enqueued (e.g. a record over the size limit): the slow way retries
                // what is retriable and gives the last word.
                return Box::pin(self.settle.again(answer, payload, error)).await;
            }
            if self.settle.give_up.is_cancelled() {
                return self
                    .settle
                    .unhandled(answer, "the producer's queue stayed full");
            }
            tokio::time::sleep(QUEUE_FULL_PAUSE).await;
        }
    }
}

/// Takes every acknowledgement as it comes, until no `Answers` is left and nothing is
/// enqueued.
async fn acknowledge(mut enqueued: mpsc::UnboundedReceiver<Enqueued>, settle: Settle) {
    let mut waiting = FuturesUnordered::new();
    let mut open = true;
    while open || !waiting.is_empty() {
        tokio::select! {
            received = enqueued.recv(), if open => match received {
                Some(Enqueued { answer, payload, delivery }) => {
                    waiting.push(async move { (delivery.await, answer, payload) });
                }
                None => open = false,
            },
            Some((delivered, answer, payload)) = waiting.next() => match delivered {
                Ok(Ok(_)) => settle.handled(answer),
                Ok(Err((error, _))) => {
                    let settle = settle.clone();
                    tokio::spawn(async move { settle.again(answer, payload, error).await });
                }
                Err(_) => settle.unhandled(answer, "the producer was dropped"),
            },
        }
    }
}

/// What settling a record takes.
#[derive(Clone)]
struct Settle {
    reporter: Reporter,
    running: RunningRuns,
    publisher: Publisher,
    /// Fires after the drain deadline: a failed result is not sent again.
    give_up: CancellationToken,
}

impl Settle {
    /// The broker has the result: complete the offset, then unregister the run (the
    /// revocation callback commits what is complete once no registered run is left).
    fn handled(&self, answer: Answer) {
        tracing::debug!(trigger_id = %answer.record.trigger_id, code = answer.record.code, "result published");
        end_with_result(&answer.trace, &answer.record);
        self.reporter
            .record_done(answer.partition, answer.offset, true);
        if answer.registered {
            self.running.unregister(answer.partition, answer.offset);
        }
    }

    /// The result will not be published: the record is no longer in flight, but its offset
    /// stays uncommitted and the trigger is redelivered.
    fn unhandled(&self, answer: Answer, why: &str) {
        tracing::error!(trigger_id = %answer.record.trigger_id, why,
            "cannot publish result; the trigger stays uncommitted and will be redelivered");
        kadence_kafka::trace::end_with_error(&answer.trace, format!("result not published: {why}"));
        self.reporter
            .record_done(answer.partition, answer.offset, false);
        self.reporter.unanswered(answer.record.trigger_id.clone());
        if answer.registered {
            self.running.unregister(answer.partition, answer.offset);
        }
    }

    /// The first delivery failed with `error`: retriable errors are tried again, waiting for
    /// the broker, until acknowledged or given up.
    async fn again(&self, answer: Answer, payload: Vec<u8>, error: KafkaError) {
        if !is_retriable(&error) || self.give_up.is_cancelled() {
            return self.unhandled(answer, &error.to_string());
        }
        tracing::warn!(%error, trigger_id = %answer.record.trigger_id, "publishing a result failed; retrying");
        self.publisher.count_retry("results");
        let published = self
            .publisher
            .publish_result(&answer.record, &payload, &answer.trace, &self.give_up)
            .await;
        match published {
            Ok(()) => self.handled(answer),
            Err(error) => self.unhandled(answer, &error.to_string()),
        }
    }
}
