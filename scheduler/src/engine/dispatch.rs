//! Dispatch: turns released fires into `TriggerRecord`s on `{prefix}.triggers.{app}`.
//!
//! One loop owns the idempotent producer. It takes the fires released so far (up to
//! [`EMIT_BATCH`] at a time, fewer when fewer are due); for each it picks the partition
//! ([`crate::engine::routing`]) and encodes the record, signs the batch on the signing threads, and
//! enqueues each record; deliveries complete concurrently.
//! Never drops a trigger:
//! - a full local queue or a retriable broker error (broker down, leader moving) retries with
//!   backoff for as long as it takes;
//! - a fatal error (record too large, not authorised, unknown app) is logged loudly with the
//!   trigger id and the fire stays pending in the database (open in its batch, or a pending
//!   row); when the lease ends the claim loop hands it back here, so it is retried after the
//!   operator fixes the cause;
//! - a fire whose job was stopped or rescheduled after it was planned is dropped, not emitted
//!   ([`crate::engine::cancellations`]), and its batch told so;
//! - acknowledged triggers are noted in the [`AckLedger`] and recorded by the
//!   [`AckWriter`](crate::engine::acks::AckWriter) in batches (the run row written or marked).
//!
//! Every trigger is signed on its way out ([`SignedProducer`]): the signature covers the
//! record's exact bytes on its topic, so executors that trust the scheduler's key run it and
//! nothing else. Its validity window (`expires_at_ms`, `signing.trigger_validity` after its
//! time) is among those bytes, so a captured copy stops running when the window ends.
//!
//! The number of deliveries in flight is bounded; when the bound is reached the loop stops
//! taking fires, which backs up the wheel and the pre-read loop (backpressure, no loss).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use kadence_kafka::{Backoff, RunTracer, is_retriable};
use kadence_schemas::{Topics, codec};
use rdkafka::error::KafkaError;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::TriggerSignatures;
use crate::domain::model::{PendingFire, RouteStrategy};
use crate::engine::acks::{AckLedger, SettledFire};
use crate::engine::cancellations::CancelledFires;
use crate::engine::partitions::PartitionDirectory;
use crate::engine::pressure::SchedulingPressure;
use crate::engine::registry::Registry;
use crate::engine::routing::{NoOwners, Router, candidates_of};
use crate::engine::signature_forms::SignatureForms;
use crate::engine::signer::{OutgoingRecord, SignedProducer, SignedRecord};
use crate::metrics::SchedulerMetrics;
use crate::store::DispatchAck;
use crate::traces::dispatch_span;

/// Fires taken from the wheel for one round of encoding, signing and enqueueing, at most:
/// large enough to spread a busy second's signing over the threads, small enough (a few
/// milliseconds of work) that the deliveries of the previous round are settled promptly.
pub const EMIT_BATCH: usize = 1024;

/// The pace at which one trigger the broker refused with a retriable error is sent again:
/// 10 ms doubling to 5 s, counted per trigger.
const BROKER_RETRY: Backoff = Backoff::new(Duration::from_millis(10), Duration::from_secs(5));

/// The outcome of one delivery attempt.
enum Delivery {
    Acked {
        fire: PendingFire,
        partition: i32,
    },
    Failed {
        fire: PendingFire,
        error: KafkaError,
        attempt: u32,
    },
    Retry {
        fire: PendingFire,
        attempt: u32,
    },
}

/// Settings of the dispatch loop.
#[derive(Debug, Clone)]
pub struct DispatchSettings {
    /// Deliveries awaiting acknowledgement at most.
    pub max_in_flight: usize,
    /// How long shutdown waits for deliveries in flight.
    pub drain_timeout: Duration,
    /// How long a trigger stays valid after its scheduled time (or its emission, if later):
    /// executors refuse it past that. `None`: triggers carry no window.
    pub trigger_validity: Option<Duration>,
    /// Whether triggers are signed alone or by the round (PROTOCOL.md section 3).
    pub trigger_signatures: TriggerSignatures,
}

/// What one dispatch step did with the fires it was given.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DispatchSummary {
    /// Triggers the broker acknowledged; their marks went to the ack writer.
    pub acknowledged: usize,
    /// Fires not emitted: cancelled by a stop or an edit, or their app unavailable or their
    /// record unencodable (those stay pending).
    pub not_emitted: usize,
    /// Triggers the broker refused with a non-retriable error (they stay pending).
    pub refused: usize,
}

/// Where a dispatcher reports what happened to the fires it was given.
pub struct DispatchOutcomes {
    /// Acknowledged triggers, to be recorded, and fires dropped as cancelled.
    pub acks: mpsc::Sender<SettledFire>,
    /// Acknowledged triggers whose mark is not written yet.
    pub ledger: Arc<AckLedger>,
    /// Fires not to emit: their job was stopped or rescheduled after they were planned.
    pub cancelled: Arc<CancelledFires>,
}

/// Produces trigger records for released fires.
pub struct Dispatcher {
    producer: SignedProducer,
    topics: Topics,
    partitions: Arc<PartitionDirectory>,
    registry: Arc<Registry>,
    outcomes: DispatchOutcomes,
    clock: Arc<dyn Clock>,
    settings: DispatchSettings,
    forms: SignatureForms,
    router: Router,
    metrics: Arc<SchedulerMetrics>,
    tracer: RunTracer,
    /// Told of every acknowledgement, so that a late one presses (see
    /// [`crate::engine::pressure`]).
    pressure: Option<Arc<SchedulingPressure>>,
}

impl Dispatcher {
    /// A dispatcher producing signed triggers with `producer` and reporting to `outcomes`.
    pub fn new(
        producer: SignedProducer,
        topics: Topics,
        partitions: Arc<PartitionDirectory>,
        registry: Arc<Registry>,
        outcomes: DispatchOutcomes,
        clock: Arc<dyn Clock>,
        settings: DispatchSettings,
    ) -> Self {
        Dispatcher {
            producer,
            topics,
            partitions,
            forms: SignatureForms::new(settings.trigger_signatures, Arc::clone(&registry)),
            registry,
            outcomes,
            clock,
            settings,
            router: Router::new(),
            metrics: Arc::default(),
            tracer: RunTracer::local("kadence-scheduler"),
            pressure: None,
        }
    }

    /// The same dispatcher counting into `metrics`.
    pub fn with_metrics(self, metrics: Arc<SchedulerMetrics>) -> Self {
        Dispatcher { metrics, ..self }
    }

    /// The same dispatcher starting each run's trace with `tracer`.
    pub fn with_tracer(self, tracer: RunTracer) -> Self {
        Dispatcher { tracer, ..self }
    }

    /// The same dispatcher telling `pressure` when the broker acknowledges a trigger late.
    pub fn pressing(self, pressure: Arc<SchedulingPressure>) -> Self {
        Dispatcher {
            pressure: Some(pressure),
            ..self
        }
    }

    /// Dispatches fires from `due` until it closes or `shutdown` fires, then waits for the
    /// deliveries in flight (up to the drain timeout). Fires not acknowledged stay pending in
    /// the database and are claimed again after their lease.
    pub async fn run(self, mut due: mpsc::Receiver<PendingFire>, shutdown: CancellationToken) {
        let mut in_flight: FuturesUnordered<BoxFuture<'static, Delivery>> = FuturesUnordered::new();
        let mut closing = false;
        let mut released = Vec::with_capacity(EMIT_BATCH);
        let drain_deadline = tokio::time::sleep(Duration::MAX / 4);
        tokio::pin!(drain_deadline);
        let dispatching = self
            .metrics
            .pending_fires
            .with_label_values(&["dispatching"]);
        loop {
            dispatching.set(in_flight.len() as i64);
            if closing && in_flight.is_empty() {
                return;
            }
            let room = EMIT_BATCH.min(self.settings.max_in_flight.saturating_sub(in_flight.len()));
            tokio::select! {
                biased;
                Some(outcome) = in_flight.next(), if !in_flight.is_empty() => {
                    if let Some(next) = self.settle(outcome, closing).await {
                        in_flight.push(next);
                    }
                }
                received = due.recv_many(&mut released, room), if !closing && room > 0 => {
                    if received == 0 {
                        closing = true;
                    }
                    in_flight.extend(self.emit_all(released.drain(..).map(|fire| (fire, 0))).await);
                }
                _ = shutdown.cancelled(), if !closing => {
                    closing = true;
                    drain_deadline.as_mut().reset(tokio::time::Instant::now() + self.settings.drain_timeout);
                }
                _ = &mut drain_deadline, if closing => {
                    tracing::warn!(in_flight = in_flight.len(), "dispatch drain timed out; unacknowledged fires stay pending");
                    return;
                }
            }
        }
    }

    /// One step: emits `fires` and waits until each is settled (acknowledged, refused, or not
    /// emitted), retrying retriable broker errors as [`run`](Self::run) does. The loop keeps
    /// deliveries in flight across fires; this step is the same work for a known batch, for
    /// tests and tools that drive dispatch with their own clock.
    pub async fn dispatch_once(
        &self,
        fires: impl IntoIterator<Item = PendingFire>,
    ) -> DispatchSummary {
        let mut summary = DispatchSummary::default();
        let fires: Vec<PendingFire> = fires.into_iter().collect();
        let given = fires.len();
        let mut in_flight: FuturesUnordered<BoxFuture<'static, Delivery>> = self
            .emit_all(fires.into_iter().map(|fire| (fire, 0)))
            .await
            .into_iter()
            .collect();
        summary.not_emitted = given - in_flight.len();
        while let Some(outcome) = in_flight.next().await {
            match &outcome {
                Delivery::Acked { .. } => summary.acknowledged += 1,
                Delivery::Failed { error, .. } if !is_retriable(error) => summary.refused += 1,
                Delivery::Failed { .. } | Delivery::Retry { .. } => {}
            }
            let retry_of = matches!(outcome, Delivery::Retry { .. });
            match self.settle(outcome, false).await {
                Some(next) => in_flight.push(next),
                // A retry that could not even be enqueued again stays pending.
                None if retry_of => summary.not_emitted += 1,
                None => {}
            }
        }
        summary
    }

    /// Builds, signs and enqueues the trigger records of `fires` (each with its delivery
    /// attempt); returns their deliveries. A fire that cannot be sent at all (cancelled, its
    /// app unavailable, its record unencodable) has none and stays pending.
    async fn emit_all(
        &self,
        fires: impl IntoIterator<Item = (PendingFire, u32)>,
    ) -> Vec<BoxFuture<'static, Delivery>> {
        let mut prepared = Vec::new();
        let mut records = Vec::new();
        let mut forms = self.forms.for_round(self.clock.now_ms());
        for (fire, attempt) in fires {
            let sign_by_round = forms.by_round(&fire.app);
            if let Some(record) = self.prepare(&fire, sign_by_round).await {
                records.push(record);
                prepared.push((fire, attempt));
            }
        }
        let signed = self.producer.sign_all(records).await;
        prepared
            .into_iter()
            .zip(signed)
            .map(|((fire, attempt), signed)| self.enqueue(fire, attempt, signed))
            .collect()
    }

    /// The unsigned trigger record of `fire` on its chosen partition, to be signed by the round
    /// or alone, or `None` when it is not to be sent (cancelled: its batch is told) or cannot
    /// be (it stays pending).
    async fn prepare(&self, fire: &PendingFire, sign_by_round: bool) -> Option<OutgoingRecord> {
        if self.outcomes.cancelled.is_cancelled(fire) {
            tracing::debug!(trigger_id = %fire.trigger_id,
                "not emitting a fire cancelled by a stop or a schedule change");
            // Its batch no longer waits for it (a send error means shutdown).
            let _ = self
                .outcomes
                .acks
                .send(SettledFire::Cancelled(fire.log_id))
                .await;
            return None;
        }
        let partitions = match self.partitions.partitions(&fire.app).await {
            Ok(count) => count,
            Err(reason) => {
                tracing::error!(trigger_id = %fire.trigger_id, %reason,
                    "cannot dispatch trigger: its app is unavailable; it stays pending");
                return None;
            }
        };
        let partition = self.choose_partition(fire, partitions);
        let record = fire.trigger_record(self.clock.now_ms(), self.settings.trigger_validity);
        match codec::encode(&record) {
            Ok(payload) => Some(OutgoingRecord {
                topic: self.topics.triggers(&fire.app),
                key: fire.job_id.to_string(),
                payload,
                partition: Some(partition),
                route: route_header(fire.route_strategy),
                sign_by_round,
            }),
            Err(error) => {
                tracing::error!(trigger_id = %fire.trigger_id, %error,
                    "cannot encode trigger record; it stays pending");
                None
            }
        }
    }

    /// Enqueues the signed record of `fire`; the delivery settles like any other when it
    /// cannot even be enqueued (a full local queue is retriable).
    fn enqueue(
        &self,
        fire: PendingFire,
        attempt: u32,
        signed: SignedRecord,
    ) -> BoxFuture<'static, Delivery> {
        let record = signed.record();
        let span = dispatch_span(
            &self.tracer,
            &fire,
            &record.topic,
            record.partition.unwrap_or_default(),
        );
        match self.producer.send_signed(signed, &span) {
            Ok(delivery) => async move {
                let outcome = match delivery.await {
                    Ok(Ok(done)) => Delivery::Acked {
                        fire,
                        partition: done.partition,
                    },
                    Ok(Err((error, _))) => Delivery::Failed {
                        fire,
                        error,
                        attempt,
                    },
                    Err(_) => Delivery::Failed {
                        fire,
                        error: KafkaError::Canceled,
                        attempt,
                    },
                };
                end_dispatch_span(&span, &outcome);
                outcome
            }
            .boxed(),
            Err(error) => async move {
                let outcome = Delivery::Failed {
                    fire,
                    error,
                    attempt,
                };
                end_dispatch_span(&span, &outcome);
                outcome
            }
            .boxed(),
        }
    }

    /// The partition for `fire` among its candidates (see [`crate::engine::routing`]).
    fn choose_partition(&self, fire: &PendingFire, partitions: i32) -> i32 {
        let now_ms = self.clock.now_ms();
        let candidates = candidates_of(fire, partitions);
        match fire.route_strategy {
            RouteStrategy::Failover | RouteStrategy::Busyover => {
                let owners = self.registry.owners(&fire.app, fire.job_id, now_ms);
                self.router.choose(
                    fire.job_id,
                    fire.route_strategy,
                    &candidates,
                    &owners,
                    now_ms,
                )
            }
            strategy => self
                .router
                .choose(fire.job_id, strategy, &candidates, &NoOwners, now_ms),
        }
    }

    /// Acts on a finished delivery; may return a follow-up (a retry) to keep in flight.
    async fn settle(
        &self,
        outcome: Delivery,
        closing: bool,
    ) -> Option<BoxFuture<'static, Delivery>> {
        match outcome {
            Delivery::Acked { fire, partition } => {
                let now_ms = self.clock.now_ms();
                tracing::debug!(trigger_id = %fire.trigger_id, partition,
                    lateness_ms = now_ms - fire.fire_at_ms, "trigger acknowledged");
                self.metrics.count_acknowledged(&fire, now_ms);
                if let Some(pressure) = &self.pressure {
                    pressure.acknowledged(fire.fire_at_ms, now_ms);
                }
                let ack = DispatchAck {
                    log_id: fire.log_id,
                    partition,
                    dispatched_at_ms: now_ms,
                    executor_id: self.registry.owner_of(&fire.app, partition, now_ms),
                    fire: Some(Box::new(fire)),
                };
                // Noted before it is queued: from here on no claim re-emits it, however long
                // the database takes to record it.
                self.outcomes.ledger.acknowledged(ack.log_id);
                // The ack writer only stops after dispatch does; a send error means shutdown.
                let _ = self
                    .outcomes
                    .acks
                    .send(SettledFire::Acknowledged(ack))
                    .await;
                None
            }
            Delivery::Failed {
                fire,
                error,
                attempt,
            } if is_retriable(&error) => {
                if closing {
                    return None;
                }
                let backoff = BROKER_RETRY.delay_after(attempt);
                if attempt % 10 == 9 {
                    tracing::warn!(trigger_id = %fire.trigger_id, %error, attempt,
                        "trigger still not accepted by the broker; retrying");
                }
                Some(
                    async move {
                        tokio::time::sleep(backoff).await;
                        Delivery::Retry {
                            fire,
                            attempt: attempt + 1,
                        }
                    }
                    .boxed(),
                )
            }
            Delivery::Failed { fire, error, .. } => {
                tracing::error!(trigger_id = %fire.trigger_id, job_id = %fire.job_id, %error,
                    "broker refused trigger with a non-retriable error; it stays pending and is \
                     retried when its lease expires");
                None
            }
            Delivery::Retry { fire, attempt } => {
                if closing {
                    return None;
                }
                self.emit_all([(fire, attempt)]).await.pop()
            }
        }
    }
}

/// Ends a trigger's dispatch span as its delivery went: acknowledged, or failed with why (a
/// retry starts a span of its own).
fn end_dispatch_span(span: &opentelemetry::Context, outcome: &Delivery) {
    match outcome {
        Delivery::Acked { partition, .. } => {
            if kadence_kafka::trace::is_recording(span) {
                kadence_kafka::trace::set_attribute(
                    span,
                    opentelemetry::KeyValue::new(
                        "messaging.destination.partition.id",
                        partition.to_string(),
                    ),
                );
            }
            kadence_kafka::trace::end(span);
        }
        Delivery::Failed { error, .. } => {
            kadence_kafka::trace::end_with_error(span, error.to_string())
        }
        Delivery::Retry { .. } => kadence_kafka::trace::end(span),
    }
}

/// The `kadence.route` header of a trigger routed by `strategy`: the strategies whose choice
/// depends on the executors' state at the time (FAILOVER and BUSYOVER) are named, so that an
/// executor fronting others can make the same choice among them; the rest are decided by the
/// partition alone and carry none.
fn route_header(strategy: RouteStrategy) -> Option<&'static str> {
    match strategy {
        RouteStrategy::Failover | RouteStrategy::Busyover => Some(strategy.as_str()),
        _ => None,
    }
}
