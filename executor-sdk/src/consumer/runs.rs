//! Starting and finishing a trigger's run: [`Runs`].
//!
//! Every run goes in a task of its own, so the loop never waits for a handler. The task runs
//! the handler through the runner (timeout, panic, cancellation). Starts come first: a task
//! whose handler returned waits until every run handed to its task has started (a second's
//! triggers are released together, and each start is late by the work done before it), and
//! the loop takes no new records meanwhile. Then the task tells the loop (`Ended::Run`) so
//! that the job's lane starts what it queued — the next run of a SERIAL_EXECUTION job does
//! not wait for the broker — and, its handler's span and metrics made, ships the run's last
//! log lines (only a run that logged has any: lines go out while the run goes, from its first
//! line on) and hands the result to `answers`, which publishes it without waiting — lines
//! first, so a reader who sees the run finished sees all of its lines. When the broker has
//! the result, the record is settled and the loop hears of it (`Ended::Record`). Refusals
//! (no handler, DISCARD_LATER, covered, killed before starting) and dead letters (records
//! refused by signature verification, undecodable ones) take the same way back, without a
//! run.
//!
//! On a shadow executor the handler's context says so, and the run's lines go to the
//! executor's `tracing` output instead of `{prefix}.logs` (`joblog::LogSink`).
//!
//! A run whose partition the group moved away ends without a result: its offset stays
//! uncommitted, and the new owner runs the trigger (see `handoff`).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use kadence_schemas::{ResultRecord, TriggerRecord};
use opentelemetry::Context;
use rdkafka::message::{Message, OwnedMessage};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::answers::{Answer, Answers};
use super::report::Reporter;
use crate::clock::{Clock, millis_since_epoch};
use crate::context::RunPlace;
use crate::dispatch::Start;
use crate::handler::HandlerFn;
use crate::handoff::RunningRuns;
use crate::joblog::{FLUSH_INTERVAL, JobLogger, LogShipper, LogSink};
use crate::metrics::{ExecutorMetrics, handler_label, outcome_of, seconds};
use crate::partitions::Assignment;
use crate::publisher::Publisher;
use crate::runner::{RunOutcome, result_record, run_handler};
use crate::traces::{RunSpans, end_with_result, end_without_result};

/// A trigger ready to run (now or when its hold and lane allow).
pub(super) struct ReadyRun {
    pub(super) trigger: Arc<TriggerRecord>,
    pub(super) handler: HandlerFn,
    pub(super) partition: i32,
    pub(super) offset: i64,
    /// The route strategy the trigger's `kadence.route` header names.
    pub(super) route: Option<&'static str>,
    /// The trigger's `kadence.consume` span, ended when its result is out.
    pub(super) trace: Context,
}

impl AsRef<TriggerRecord> for ReadyRun {
    fn as_ref(&self) -> &TriggerRecord {
        &self.trigger
    }
}

/// A run whose handler has returned.
struct Ran {
    ready: ReadyRun,
    outcome: RunOutcome,
    logger: JobLogger,
    started: SystemTime,
    finished: SystemTime,
    /// Whether the run was handed back to its partition's new owner meanwhile.
    handed_back: bool,
}

/// What every run shares.
pub(super) struct RunsConfig {
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
    pub(super) spans: RunSpans,
    /// A shadow executor's runs: the handler is told, lines go to `tracing`, records that
    /// cannot be taken are skipped instead of dead-lettered.
    pub(super) shadow: bool,
}

/// Starts runs and hands their results over; every task reports back through the reporter.
/// Cheap to clone (one reference count per run).
#[derive(Clone)]
pub(super) struct Runs {
    shared: Arc<Shared>,
}

struct Shared {
    config: RunsConfig,
    answers: Answers,
    /// Runs spawned whose handler has not started yet; told when none is left.
    starting: AtomicUsize,
    all_started: Notify,
}

impl Runs {
    /// Runs with `config`; starts the task that settles published results.
    pub(super) fn new(config: RunsConfig) -> Runs {
        let answers = Answers::start(
            config.publisher.clone(),
            config.reporter.clone(),
            config.running.clone(),
            config.hard_stop.clone(),
        );
        Runs {
            shared: Arc::new(Shared {
                config,
                answers,
                starting: AtomicUsize::new(0),
                all_started: Notify::new(),
            }),
        }
    }

    /// The runs going now, by partition and offset.
    pub(super) fn running(&self) -> &RunningRuns {
        &self.shared.config.running
    }

    /// Counts `count` runs as starting, before they are handed to their tasks
    /// ([`start`](Self::start) each of them, with no exception: until the last one has
    /// started, no run of this node finishes).
    pub(super) fn will_start(&self, count: usize) {
        self.shared.starting.fetch_add(count, Ordering::SeqCst);
    }

    /// Runs `start`, counted already ([`will_start`](Self::will_start)), in its own task.
    pub(super) fn start(&self, start: Start<ReadyRun>) {
        tokio::spawn(self.clone().run(start));
    }

    /// Runs handed to their tasks whose handlers have not started yet.
    pub(super) fn starting(&self) -> usize {
        self.shared.starting.load(Ordering::SeqCst)
    }

    /// Resolves once no run handed to its task is waiting to start.
    pub(super) async fn all_started(&self) {
        let notified = self.shared.all_started.notified();
        tokio::pin!(notified);
        // Registered before the count is read, so the last start's wake-up is not missed.
        notified.as_mut().enable();
        if self.starting() > 0 {
            notified.await;
        }
    }

    /// The run is under way (or left): one fewer to start.
    fn started(&self) {
        if self.shared.starting.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.shared.all_started.notify_waiters();
        }
    }

    async fn run(self, start: Start<ReadyRun>) {
        let Start {
            pending: ready,
            cancellation,
            stop_reason,
        } = start;
        let config = &self.shared.config;
        let (partition, offset) = (ready.partition, ready.offset);
        if !config.assignment.owns(partition) {
            self.started();
            // Queued or held while the group moved its partition: the new owner runs it.
            end_without_result(&ready.trace, "partition moved before the run started");
            let (job, trigger_id) = (ready.trigger.job_id, ready.trigger.trigger_id.clone());
            config.reporter.run_ended(job, trigger_id, true);
            return config.reporter.record_done(partition, offset, false);
        }
        let handed_back = config.running.register(
            partition,
            offset,
            ready.trigger.trigger_id.clone(),
            cancellation.clone(),
        );
        let started = config.clock.now();
        self.started();
        let logger = JobLogger::new(config.max_log_lines);
        let trigger = Arc::clone(&ready.trigger);
        let handler = ready.handler.clone();
        let place = RunPlace {
            partition,
            route: ready.route,
            shadow: config.shadow,
        };
        let run = run_handler(
            handler,
            trigger,
            cancellation,
            stop_reason,
            logger.clone(),
            place,
        );
        let run_started_at_ms = millis_since_epoch(started);
        let outcome = (self.shipping_logs(run, &logger, &ready.trigger, run_started_at_ms)).await;
        let finished = config.clock.now();
        // The rest of the run's work (its span and metrics, last lines, result) waits until
        // the runs handed to their tasks have started: all of a second's triggers are
        // released together, and a start is late by whatever runs before it.
        self.all_started().await;
        let ran = Ran {
            ready,
            outcome,
            logger,
            started,
            finished,
            handed_back: handed_back.load(Ordering::SeqCst),
        };
        // Boxed: the task that starts the handler stays small (it is made for every trigger,
        // while the trigger waits); what follows the handler is made when it is needed.
        Box::pin(self.finish(ran)).await
    }

    /// After the handler: the run's span and metrics, its last log lines, its result.
    async fn finish(&self, ran: Ran) {
        let config = &self.shared.config;
        let Ran { ready, .. } = &ran;
        let (partition, offset) = (ready.partition, ready.offset);
        let (job, trigger_id) = (ready.trigger.job_id, ready.trigger.trigger_id.clone());
        let started_at_ms = millis_since_epoch(ran.started);
        let finished_at_ms = millis_since_epoch(ran.finished);
        let handler = handler_label(&ready.trigger);
        let handler_trace = config
            .spans
            .handler(&ready.trace, &ready.trigger, ran.started);
        if ran.handed_back {
            // The group moved the partition and the run did not finish in time: no result,
            // no commit; the new owner runs the trigger.
            end_without_result(&handler_trace, "handed back to the partition's new owner");
            end_without_result(&ready.trace, "handed back to the partition's new owner");
            config.running.unregister(partition, offset);
            // Forgotten already, when it was handed back (see `handoff`): forgetting it now
            // could forget its redelivery, admitted meanwhile.
            config.reporter.run_ended(job, trigger_id, false);
            return config.reporter.record_done(partition, offset, false);
        }
        if ran.outcome.abandoned {
            // The executor gave up draining: no result, no commit; whoever owns the partition
            // next runs the trigger (PROTOCOL.md section 7).
            end_without_result(&handler_trace, "cancelled at the drain deadline");
            end_without_result(&ready.trace, "cancelled at the drain deadline");
            config.running.unregister(partition, offset);
            config.reporter.run_ended(job, trigger_id, true);
            return config.reporter.record_done(partition, offset, false);
        }
        config.reporter.run_ended(job, trigger_id, false);
        let metrics = &config.metrics;
        let waited = started_at_ms - ready.trigger.scheduled_at_ms;
        let took = finished_at_ms - started_at_ms;
        metrics
            .trigger_to_start
            .with_label_values(&[handler])
            .observe(seconds(waited));
        metrics
            .run_duration
            .with_label_values(&[handler])
            .observe(seconds(took));
        metrics.record_run(partition, took);
        // Every line is acknowledged by the broker before the result is produced: a finished
        // run's log is complete (or its lost records are counted).
        if ran.logger.has_unshipped() {
            let shipper = self.log_shipper(&ran.logger, &ready.trigger, started_at_ms);
            Box::pin(shipper.flush(true)).await;
        }
        let Ran { ready, outcome, .. } = ran;
        let executor_id = &config.executor_id;
        let record = result_record(
            &ready.trigger,
            executor_id,
            outcome,
            started_at_ms,
            finished_at_ms,
        );
        end_with_result(&handler_trace, &record);
        self.count_result(handler_label(&ready.trigger), &record);
        let answer = Answer {
            record,
            trace: ready.trace,
            partition,
            offset,
            registered: true,
        };
        self.shared.answers.send(answer).await;
    }

    /// Drives `run` to its outcome; once it writes its first log line, ships its lines every
    /// [`FLUSH_INTERVAL`] meanwhile, the first time an interval after that line: a run that
    /// ends sooner ships all its lines in one record, at its end (one row in the scheduler's
    /// store rather than one per shipping), as the Python and Java executors do.
    async fn shipping_logs(
        &self,
        run: impl Future<Output = RunOutcome>,
        logger: &JobLogger,
        trigger: &Arc<TriggerRecord>,
        run_started_at_ms: i64,
    ) -> RunOutcome {
        tokio::pin!(run);
        tokio::select! {
            biased;
            outcome = &mut run => return outcome,
            () = logger.written() => {}
        }
        let shipper = self.log_shipper(logger, trigger, run_started_at_ms);
        let first_flush = tokio::time::Instant::now() + FLUSH_INTERVAL;
        let mut flush_tick = tokio::time::interval_at(first_flush, FLUSH_INTERVAL);
        loop {
            tokio::select! {
                biased;
                outcome = &mut run => return outcome,
                // Boxed, as the other rare ways below: a run's task holds the largest of its
                // futures, and every run's task is made for every trigger.
                _ = flush_tick.tick() => Box::pin(shipper.flush(false)).await,
            }
        }
    }

    fn log_shipper(
        &self,
        logger: &JobLogger,
        trigger: &Arc<TriggerRecord>,
        run_started_at_ms: i64,
    ) -> LogShipper {
        let config = &self.shared.config;
        let sink = match config.shadow {
            true => LogSink::Tracing,
            false => LogSink::Topic(config.publisher.clone()),
        };
        LogShipper::new(
            logger.clone(),
            Arc::clone(trigger),
            config.executor_id.clone(),
            run_started_at_ms,
            (sink, config.clock),
            config.hard_stop.clone(),
        )
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
        let config = &self.shared.config;
        let now_ms = config.clock.now_ms();
        let outcome = RunOutcome::failure(message);
        let record = result_record(&trigger, &config.executor_id, outcome, now_ms, now_ms);
        self.count_result(handler_label(&trigger), &record);
        let answer = Answer {
            record,
            trace,
            partition,
            offset,
            registered: false,
        };
        let runs = self.clone();
        tokio::spawn(async move { runs.shared.answers.send(answer).await });
    }

    /// Completes a record without running it or answering it: a redelivered trigger that
    /// already ran (or runs) here, or, on a shadow executor, one it cannot take.
    pub(super) fn skip(&self, partition: i32, offset: i64) {
        self.shared
            .config
            .reporter
            .record_done(partition, offset, true);
    }

    /// Sends a record that must not run (unverifiable or undecodable) to the dead-letter
    /// queue, with `reason`.
    pub(super) fn dead_letter(&self, message: OwnedMessage, reason: String) {
        let runs = self.clone();
        tokio::spawn(async move {
            let config = &runs.shared.config;
            let sent = config
                .publisher
                .dead_letter(&message, &reason, &config.hard_stop)
                .await;
            let handled = match sent {
                Ok(()) => true,
                Err(error) => {
                    tracing::error!(%error, "cannot dead-letter a record; it will be redelivered");
                    false
                }
            };
            let (partition, offset) = (message.partition(), message.offset());
            config.reporter.record_done(partition, offset, handled);
        });
    }

    /// Counts the answer `record` to a trigger of `handler` by its outcome.
    fn count_result(&self, handler: &str, record: &ResultRecord) {
        let outcome = outcome_of(record.code, record.message.as_deref());
        self.shared
            .config
            .metrics
            .results
            .with_label_values(&[handler, outcome])
            .inc();
    }

    /// Starts the `kadence.consume` span of `trigger`, received as `message`.
    pub(super) fn consume_span(&self, message: &OwnedMessage, trigger: &TriggerRecord) -> Context {
        self.shared.config.spans.consume(message, trigger)
    }
}
