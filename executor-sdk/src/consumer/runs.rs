//! Starting and finishing a trigger's run: [`Runs`].
//!
//! Every run goes in a task of its own, so the loop never waits for a handler. The task runs
//! the handler through the runner (timeout, panic, cancellation), ships the run's log lines
//! while it goes and once more at the end, then publishes the result — lines first, so a
//! reader who sees the run finished sees all of its lines — and reports back to the loop
//! ([`Finished`]). Refusals (no handler, DISCARD_LATER, covered, killed before starting) and
//! dead letters (records refused by signature verification, undecodable ones) take the same
//! way back, without a run.
//!
//! A run whose partition the group moved away ends without a result: its offset stays
//! uncommitted, and the new owner runs the trigger (see `handoff`).

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use kadence_kafka::RunTracer;
use kadence_schemas::{JobId, ResultRecord, TriggerId, TriggerRecord};
use opentelemetry::Context;
use rdkafka::message::{Message, OwnedMessage};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::beats::Assignment;
use crate::clock::Clock;
use crate::dispatch::Start;
use crate::handler::HandlerFn;
use crate::handoff::RunningRuns;
use crate::joblog::{FLUSH_INTERVAL, JobLogger, LogShipper};
use crate::metrics::{ExecutorMetrics, handler_label, outcome_of, seconds};
use crate::offsets::OffsetTracker;
use crate::publisher::Publisher;
use crate::runner::{RunOutcome, result_record, run_handler};
use crate::traces::{consume_span, end_with_result, end_without_result, handler_span};

/// A trigger ready to run (now or when its hold and lane allow).
pub(super) struct ReadyRun {
    pub(super) trigger: Arc<TriggerRecord>,
    pub(super) handler: HandlerFn,
    pub(super) partition: i32,
    pub(super) offset: i64,
    /// The trigger's `kadence.consume` span, ended when its result is out.
    pub(super) trace: Context,
}

impl AsRef<TriggerRecord> for ReadyRun {
    fn as_ref(&self) -> &TriggerRecord {
        &self.trigger
    }
}

/// A record whose processing ended. `handled` is false when its result could not be
/// published: it no longer counts as in flight, but its offset stays uncommitted so the
/// trigger is redelivered. `run` names the job lane to advance when a run ended.
pub(super) struct Finished {
    partition: i32,
    offset: i64,
    handled: bool,
    pub(super) run: Option<(JobId, TriggerId)>,
    /// The trigger did not run to a result here (handed back, or its partition moved before
    /// it started): forget its id, so that it runs if the partition comes back.
    pub(super) forget: bool,
}

impl Finished {
    /// A record done with, without a run.
    fn without_run(partition: i32, offset: i64, handled: bool) -> Finished {
        Finished {
            partition,
            offset,
            handled,
            run: None,
            forget: false,
        }
    }

    /// A trigger left to its partition's new owner without running to a result here.
    fn left_to_new_owner(partition: i32, offset: i64, run: (JobId, TriggerId)) -> Finished {
        Finished {
            partition,
            offset,
            handled: false,
            run: Some(run),
            forget: true,
        }
    }
}

/// Reports ended records: marks a handled one complete in the offset tracker at once (the
/// revocation callback commits from it while the loop waits), then tells the loop.
#[derive(Clone)]
pub(super) struct Reporter {
    tracker: Arc<Mutex<OffsetTracker>>,
    loop_tx: mpsc::UnboundedSender<Finished>,
}

impl Reporter {
    pub(super) fn new(
        tracker: Arc<Mutex<OffsetTracker>>,
        loop_tx: mpsc::UnboundedSender<Finished>,
    ) -> Reporter {
        Reporter { tracker, loop_tx }
    }

    fn report(&self, finished: Finished) {
        if finished.handled {
            self.tracker
                .lock()
                .expect("offset tracker lock")
                .complete(finished.partition, finished.offset);
        }
        let _ = self.loop_tx.send(finished);
    }
}

/// Starts runs and publishes their results; every task reports back through the reporter.
#[derive(Clone)]
pub(super) struct Runs {
    pub(super) executor_id: String,
    pub(super) publisher: Publisher,
    /// Fires after the drain deadline: publishing gives up.
    pub(super) hard_stop: CancellationToken,
    pub(super) reporter: Reporter,
    pub(super) running: RunningRuns,
    pub(super) assignment: Assignment,
    pub(super) max_log_lines: usize,
    pub(super) clock: Clock,
    pub(super) metrics: Arc<ExecutorMetrics>,
    pub(super) tracer: RunTracer,
}

impl Runs {
    /// Runs `start` in its own task.
    pub(super) fn start(&self, start: Start<ReadyRun>) {
        tokio::spawn(self.clone().run(start));
    }

    async fn run(self, start: Start<ReadyRun>) {
        let Start {
            pending: ready,
            cancellation,
            stop_reason,
        } = start;
        let (partition, offset) = (ready.partition, ready.offset);
        let run = (ready.trigger.job_id, ready.trigger.trigger_id.clone());
        if !self.assignment.owns(partition) {
            // Queued or held while the group moved its partition: the new owner runs it.
            end_without_result(&ready.trace, "partition moved before the run started");
            let left = Finished::left_to_new_owner(partition, offset, run);
            return self.reporter.report(left);
        }
        let handed_back = self
            .running
            .register(partition, offset, cancellation.clone());
        let started_at_ms = self.clock.now_ms();
        let handler = handler_label(&ready.trigger).to_owned();
        self.metrics
            .trigger_to_start
            .with_label_values(&[handler.as_str()])
            .observe(seconds(started_at_ms - ready.trigger.scheduled_at_ms));
        let logger = JobLogger::new(self.max_log_lines);
        let shipper = LogShipper::new(
            logger.clone(),
            Arc::clone(&ready.trigger),
            self.executor_id.clone(),
            self.publisher.clone(),
            self.hard_stop.clone(),
        );
        let trigger = Arc::clone(&ready.trigger);
        let handler_trace = handler_span(&self.tracer, &ready.trace, &ready.trigger);
        let run_handler = run_handler(ready.handler, trigger, cancellation, stop_reason, logger);
        let outcome = shipping_logs(run_handler, &shipper).await;
        if handed_back.load(Ordering::SeqCst) {
            // The group moved the partition and the run did not finish in time: no result,
            // no commit; the new owner runs the trigger.
            end_without_result(&handler_trace, "handed back to the partition's new owner");
            end_without_result(&ready.trace, "handed back to the partition's new owner");
            self.running.unregister(partition, offset);
            let left = Finished::left_to_new_owner(partition, offset, run);
            return self.reporter.report(left);
        }
        // Every line is out before the result: a finished run's log is complete.
        shipper.flush(true).await;
        let finished_at_ms = self.clock.now_ms();
        let record = result_record(
            &ready.trigger,
            &self.executor_id,
            outcome,
            started_at_ms,
            finished_at_ms,
        );
        self.metrics
            .run_duration
            .with_label_values(&[handler.as_str()])
            .observe(seconds(finished_at_ms - started_at_ms));
        self.metrics
            .record_run(partition, finished_at_ms - started_at_ms);
        end_with_result(&handler_trace, &record);
        self.count_result(&handler, &record);
        let handled = self.publish(&record, &ready.trace).await;
        // Complete before unregistering: the revocation callback commits what is complete
        // once no registered run is left.
        self.reporter.report(Finished {
            run: Some(run),
            ..Finished::without_run(partition, offset, handled)
        });
        self.running.unregister(partition, offset);
    }

    /// Publishes a failure result for a trigger that will not run.
    pub(super) fn refuse(
        &self,
        trigger: Arc<TriggerRecord>,
        partition: i32,
        offset: i64,
        message: String,
        trace: Context,
    ) {
        let runs = self.clone();
        tokio::spawn(async move {
            let now_ms = runs.clock.now_ms();
            let outcome = RunOutcome::failure(message);
            let record = result_record(&trigger, &runs.executor_id, outcome, now_ms, now_ms);
            runs.count_result(handler_label(&trigger), &record);
            let handled = runs.publish(&record, &trace).await;
            runs.reporter
                .report(Finished::without_run(partition, offset, handled));
        });
    }

    /// Completes a redelivered trigger that already ran (or runs) here, without running it.
    pub(super) fn skip_redelivered(&self, partition: i32, offset: i64) {
        self.reporter
            .report(Finished::without_run(partition, offset, true));
    }

    /// Sends a record that must not run (unverifiable or undecodable) to the dead-letter
    /// queue, with `reason`.
    pub(super) fn dead_letter(&self, message: OwnedMessage, reason: String) {
        let runs = self.clone();
        tokio::spawn(async move {
            let sent = runs
                .publisher
                .dead_letter(&message, &reason, &runs.hard_stop)
                .await;
            let handled = match sent {
                Ok(()) => true,
                Err(error) => {
                    tracing::error!(%error, "cannot dead-letter a record; it will be redelivered");
                    false
                }
            };
            let (partition, offset) = (message.partition(), message.offset());
            runs.reporter
                .report(Finished::without_run(partition, offset, handled));
        });
    }

    /// Counts the answer `record` to a trigger of `handler` by its outcome.
    fn count_result(&self, handler: &str, record: &ResultRecord) {
        let outcome = outcome_of(record.code, record.message.as_deref());
        self.metrics
            .results
            .with_label_values(&[handler, outcome])
            .inc();
    }

    /// Publishes a result carrying the `traceparent` of `trace` (the trigger's consume span),
    /// then ends that span; false (logged) when the result could not be published.
    async fn publish(&self, record: &ResultRecord, trace: &Context) -> bool {
        let published = self
            .publisher
            .publish_result(record, trace, &self.hard_stop)
            .await;
        match published {
            Ok(()) => {
                tracing::debug!(trigger_id = %record.trigger_id, code = record.code, "result published");
                end_with_result(trace, record);
                true
            }
            Err(error) => {
                tracing::error!(trigger_id = %record.trigger_id, %error,
                    "cannot publish result; the trigger stays uncommitted and will be redelivered");
                kadence_kafka::trace::end_with_error(
                    trace,
                    format!("result not published: {error}"),
                );
                false
            }
        }
    }

    /// Starts the `kadence.consume` span of `trigger`, received as `message`.
    pub(super) fn consume_span(&self, message: &OwnedMessage, trigger: &TriggerRecord) -> Context {
        consume_span(&self.tracer, message, trigger)
    }
}

/// Drives `run` to its outcome, shipping its log lines every [`FLUSH_INTERVAL`] meanwhile.
async fn shipping_logs(run: impl Future<Output = RunOutcome>, shipper: &LogShipper) -> RunOutcome {
    tokio::pin!(run);
    let mut flush_tick = tokio::time::interval(FLUSH_INTERVAL);
    loop {
        tokio::select! {
            outcome = &mut run => return outcome,
            _ = flush_tick.tick() => shipper.flush(false).await,
        }
    }
}
