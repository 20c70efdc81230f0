//! The consumer loop: an explicit state machine, **consuming → draining → done**.
//!
//! - *Consuming*: receive trigger records from `{prefix}.triggers.{app}` (group
//!   `{prefix}.executor.{app}`) while fewer than `max_in_flight` are in flight, every record
//!   the consumer has ready in one turn; each is admitted at once — its signature verified
//!   (when the executor trusts scheduler keys), decoded (typed, `decode`), recognised if
//!   redelivered, given its handler, then held or placed in its job's lane (`dispatch`) — so
//!   a slow handler never delays other triggers, and the triggers of one partition start
//!   side by side as their jobs' block strategies allow. Every run goes in its own task and
//!   reports back over a channel when it ends.
//! - *Draining* (shutdown requested): stop receiving, wait for the records in flight until
//!   the drain deadline, then cancel what is left (those triggers are redelivered after a
//!   restart).
//! - *Done*: commit the final offsets, leave the group, send the last beat.
//!
//! Offsets are committed only up to the lowest trigger whose result is not yet published; a
//! record that fails verification (unsigned, unknown key, bad signature, malformed signature
//! header) or cannot be decoded goes to `{prefix}.dlq` with the reason and is committed past:
//! it never runs, and it never stops the partition. Verification comes first, so not even
//! the decoder sees a record the scheduler did not sign.
//!
//! A shadow executor (`ExecutorBuilder::shadow`) takes the same way in its own group, with
//! three differences made here: a record it cannot take is logged, counted and committed
//! past without a dead letter (the production group dead-letters the same record), it sends
//! no beats (the beat tick still sets the gauges), and its runs are told they are shadows
//! (`runs`: the handler's context, lines to `tracing`). Its results go to
//! `{prefix}.shadow-results` (the publisher's choice).
//!
//! Here is the loop: one `select!` over its events, each handled by one method of `Loop`.
//! Held triggers wait on one timer, set to the earliest of them. Around it:
//! - `group`: the trigger consumer in its group: client settings, the rebalance callbacks
//!   (assign and revoke; a shadow's start fixed at assignment), receiving (tracking
//!   offsets) and committing.
//! - `intake`: a received record verified and decoded, or the reason it cannot be taken.
//! - `runs`: a run's task (handler, log lines, result) and the refusals and dead letters that
//!   take the same way back to the loop.
//! - `answers`: results handed to the producer without waiting; one task takes the broker's
//!   acknowledgements and settles their records (offset complete, run unregistered).
//! - `report`: what runs and acknowledgements tell the loop (a run over, a record done).
//! - `control`: the `{prefix}.control` reader and what a KILL does to the runs; the loop
//!   takes no trigger before the reader has caught up with the commands sent before start.
//! - `kills`: the KILLs remembered for the triggers they cover that arrive later.
//! - `dedupe`: recognising redelivered triggers by id.

mod answers;
mod control;
mod dedupe;
mod group;
mod intake;
mod kills;
mod report;
mod runs;

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kadence_schemas::ExecutorState;
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use tokio::sync::mpsc;
use tokio::time::{Interval, MissedTickBehavior};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::beats::{Activity, Beats};
use crate::clock::Clock;
use crate::dispatch::{Dispatch, Step};
use crate::error::ExecutorError;
use crate::handler::Registry;
use crate::handoff::RunningRuns;
use crate::metrics::ExecutorMetrics;
use crate::partitions::Assignment;
use crate::publisher::Publisher;
use crate::settings::ExecutorSettings;
use crate::traces::RunSpans;
use control::ControlEvent;
use dedupe::RecentTriggers;
use group::Group;
use kills::RememberedKills;
use report::{Ended, Reporter};
use runs::{ReadyRun, Runs, RunsConfig};

/// Records admitted in one loop turn at most, so that ended runs, control commands and the
/// hold are served between bursts.
const RECEIVE_BATCH: usize = 512;

/// Runs the executor until `shutdown` resolves and the drain completes; the rebalance
/// callbacks keep `assignment`.
pub(crate) async fn run(
    settings: ExecutorSettings,
    registry: Arc<Registry>,
    assignment: Assignment,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ExecutorError> {
    let metrics = Arc::new(ExecutorMetrics::new(settings.app.as_str(), settings.shadow));
    // The endpoint answers until the executor has stopped, last beat included.
    let metrics_stop = CancellationToken::new();
    let _stop_serving_metrics = metrics_stop.clone().drop_guard();
    if let Some(address) = settings.metrics_address {
        crate::metrics::serve(Arc::clone(&metrics), address, metrics_stop)
            .await
            .map_err(|error| {
                ExecutorError::Config(format!("cannot serve metrics on {address}: {error}"))
            })?;
    }
    let mut state = Loop::start(settings, registry, assignment, metrics)?;
    let drain_deadline = tokio::time::sleep(Duration::MAX / 4);
    tokio::pin!(drain_deadline);
    tokio::pin!(shutdown);
    // One timer for the hold, moved to the next held trigger's time when that changes.
    let hold_timer = tokio::time::sleep(Duration::MAX / 4);
    tokio::pin!(hold_timer);
    let mut hold_at_ms = None;
    while !state.drained() {
        let next_release_ms = state.dispatch.next_release_ms();
        if next_release_ms != hold_at_ms {
            hold_at_ms = next_release_ms;
            if let Some(at_ms) = next_release_ms {
                hold_timer.as_mut().reset(state.clock.instant_at(at_ms));
            }
        }
        let consuming = matches!(state.phase, Phase::Consuming);
        let has_room = state.in_flight < state.settings.max_in_flight;
        // Runs handed to their tasks start before more records are taken: the triggers of
        // one second are released together, and those of the next (sent ahead, held when
        // they come) can wait a few milliseconds without anyone noticing.
        let starting = state.runs.starting() > 0;
        tokio::select! {
            biased;
            Some(ended) = state.ended.recv() => state.ended(ended),
            Some(event) = state.commands.recv() => state.control(event),
            _ = &mut hold_timer, if hold_at_ms.is_some() => {
                // Set again from the next release time, even if it is the same.
                hold_at_ms = None;
                state.release_due();
            }
            _ = state.commit_tick.tick() => state.group.commit(),
            _ = state.beat_tick.tick() => state.beat(),
            Ok(()) = state.assignment_changes.changed(), if consuming => state.beat(),
            _ = &mut shutdown, if consuming => {
                state.drain();
                let deadline = tokio::time::Instant::now() + state.settings.drain_timeout;
                drain_deadline.as_mut().reset(deadline);
            }
            _ = &mut drain_deadline, if !consuming => {
                state.give_up();
                break;
            }
            _ = state.runs.all_started(), if starting => {}
            received = state.group.recv(),
                if consuming && has_room && state.control_caught_up && !starting
                => state.receive(received),
        }
    }
    let tracer = state.settings.tracer.clone();
    state.stop().await;
    // The exporter blocks while it sends the last spans.
    let _ = tokio::task::spawn_blocking(move || tracer.shutdown()).await;
    Ok(())
}

enum Phase {
    Consuming,
    Draining,
}

/// The loop's state: what it owns and counts between events.
struct Loop {
    settings: ExecutorSettings,
    registry: Arc<Registry>,
    group: Group,
    runs: Runs,
    dispatch: Dispatch<ReadyRun>,
    recent: RecentTriggers,
    /// `None` on a shadow executor, which sends no beats.
    beats: Option<Beats>,
    assignment: Assignment,
    /// Wakes the loop when the group assigns or revokes partitions, for a beat at once.
    assignment_changes: tokio::sync::watch::Receiver<std::collections::BTreeSet<i32>>,
    /// Ended runs and records, from the run tasks and the acknowledgement task.
    ended: mpsc::UnboundedReceiver<Ended>,
    /// This app's control commands, from the control reader.
    commands: mpsc::UnboundedReceiver<ControlEvent>,
    /// Whether the control reader has read the commands sent before the start: until then
    /// no trigger is taken, so none runs that a KILL sent while no executor was up covers.
    control_caught_up: bool,
    /// KILLs remembered for the triggers they cover that arrive later.
    kills: RememberedKills,
    /// What the executor counts.
    metrics: Arc<ExecutorMetrics>,
    /// Stops the control reader when the loop ends, however it ends.
    _control_reader: DropGuard,
    /// Fires after the drain deadline: running handlers are cancelled and publishing gives up.
    hard_stop: CancellationToken,
    commit_tick: Interval,
    beat_tick: Interval,
    /// Records received and not yet ended (run, refused, skipped or dead-lettered).
    in_flight: usize,
    /// Where the loop reads the time: every "now" of the loop, its runs, its dispatch and its
    /// control reader, its beats and its log records comes from this one clock.
    clock: Clock,
    phase: Phase,
}

impl Loop {
    /// Joins the group and starts the control reader.
    fn start(
        settings: ExecutorSettings,
        registry: Arc<Registry>,
        assignment: Assignment,
        metrics: Arc<ExecutorMetrics>,
    ) -> Result<Loop, ExecutorError> {
        let assignment_changes = assignment.subscribe();
        let running = RunningRuns::default();
        let group = Group::join(
            &settings,
            assignment.clone(),
            running.clone(),
            Arc::clone(&metrics),
        )?;
        let hard_stop = CancellationToken::new();
        let (ended_tx, ended) = mpsc::unbounded_channel();
        let publisher = Publisher::new(&settings, Arc::clone(&metrics))?;
        // The one clock of the loop, its runs, its dispatch, its control reader and its beats.
        let clock = Clock::System;
        let beats = Beats::of_executor(&settings, &publisher, registry.names(), clock);
        let runs = Runs::new(RunsConfig {
            executor_id: settings.executor_id.clone(),
            publisher,
            hard_stop: hard_stop.clone(),
            reporter: Reporter::new(group.tracker(), ended_tx),
            running,
            assignment: assignment.clone(),
            max_log_lines: settings.max_log_lines,
            clock,
            metrics: Arc::clone(&metrics),
            spans: RunSpans::new(settings.tracer.clone(), settings.exports_spans),
            shadow: settings.shadow,
        });
        let dispatch = Dispatch::new(
            clock,
            settings.max_concurrent_per_job,
            settings.executor_id.clone(),
            hard_stop.clone(),
        );
        let (commands_tx, commands) = mpsc::unbounded_channel();
        let kills = RememberedKills::new(
            i64::try_from(settings.kill_memory.as_millis()).unwrap_or(i64::MAX),
        );
        let control_stop = CancellationToken::new();
        control::spawn_reader(
            &settings,
            &metrics,
            clock,
            commands_tx,
            control_stop.clone(),
        )?;
        let mut beat_tick = tokio::time::interval(settings.beat_interval);
        beat_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        settings.announce_start(registry.names().len(), group.topic());
        Ok(Loop {
            commit_tick: tokio::time::interval(settings.commit_interval),
            beat_tick,
            settings,
            registry,
            group,
            runs,
            dispatch,
            recent: RecentTriggers::new(),
            beats,
            assignment,
            assignment_changes,
            ended,
            commands,
            control_caught_up: false,
            kills,
            metrics,
            _control_reader: control_stop.drop_guard(),
            hard_stop,
            in_flight: 0,
            phase: Phase::Consuming,
            clock,
        })
    }

    /// Whether the drain is complete.
    fn drained(&self) -> bool {
        matches!(self.phase, Phase::Draining) && self.in_flight == 0
    }

    /// What ended, and whatever else has ended meanwhile: a run's end may start what its lane
    /// queued; a record done makes room.
    fn ended(&mut self, first: Ended) {
        let mut next = Some(first);
        while let Some(ended) = next {
            match ended {
                Ended::Record => self.in_flight -= 1,
                Ended::Run {
                    job,
                    trigger_id,
                    forget,
                } => {
                    if forget {
                        self.recent.forget(&trigger_id);
                    }
                    let steps = self.dispatch.finished(job, &trigger_id);
                    self.carry_out(steps);
                }
                Ended::Unanswered { trigger_id } => self.recent.forget(&trigger_id),
            }
            next = self.ended.try_recv().ok();
        }
    }

    fn control(&mut self, event: ControlEvent) {
        match event {
            ControlEvent::Command(command) => {
                let now_ms = self.clock.now_ms();
                let steps = control::apply(command, &mut self.dispatch, &mut self.kills, now_ms);
                self.carry_out(steps);
            }
            ControlEvent::CaughtUp => {
                tracing::info!("control commands read up to the start; taking triggers");
                self.control_caught_up = true;
            }
        }
    }

    fn release_due(&mut self) {
        let steps = self.dispatch.release_due();
        self.carry_out(steps);
    }

    /// Admits `received`, then every record the consumer has ready without waiting, while
    /// there is room: a burst is taken in one go, not one loop turn per record.
    fn receive(&mut self, received: Result<OwnedMessage, KafkaError>) {
        let mut next = Some(received);
        let mut budget = RECEIVE_BATCH;
        while let Some(received) = next {
            match received {
                Ok(message) => {
                    self.in_flight += 1;
                    self.admit(message);
                }
                Err(error) => tracing::warn!(%error, "error while receiving triggers"),
            }
            budget -= 1;
            let has_room = self.in_flight < self.settings.max_in_flight;
            next = if budget > 0 && has_room {
                self.group.recv().now_or_never()
            } else {
                None
            };
        }
    }

    /// Verifies and decodes one record, then hands it to the dispatch (held until its time or
    /// placed in its job's lane at once); never waits for a handler.
    fn admit(&mut self, message: OwnedMessage) {
        let (partition, offset) = (message.partition(), message.offset());
        let received_at_ms = self.clock.now_ms();
        let trigger =
            match intake::read_trigger(&self.settings.trusted_keys, &message, received_at_ms) {
                Ok(trigger) => Arc::new(trigger),
                Err((kind, reason)) => return self.cannot_take(message, kind, reason),
            };
        for handed_back in self.runs.running().take_handed_back() {
            self.recent.forget(&handed_back);
        }
        if !self.recent.insert(&trigger.trigger_id) {
            self.metrics.redeliveries.inc();
            tracing::info!(trigger_id = %trigger.trigger_id, "trigger redelivered; it already ran here, not running it twice");
            return self.runs.skip(partition, offset);
        }
        let trace = self.runs.consume_span(&message, &trigger);
        if let Some(reason) = self.kills.covering(&trigger, received_at_ms) {
            tracing::info!(trigger_id = %trigger.trigger_id, %reason,
                "a KILL sent before this trigger arrived covers it; not running it");
            return self.runs.refuse(trigger, partition, offset, reason, trace);
        }
        let handler = match self.registry.resolve(&trigger) {
            Ok(handler) => handler,
            Err(message) => return self.runs.refuse(trigger, partition, offset, message, trace),
        };
        let ready = ReadyRun {
            trigger,
            handler,
            partition,
            offset,
            route: crate::context::route_of(&message),
            trace,
        };
        let steps = self.dispatch.admit(ready);
        self.carry_out(steps);
    }

    /// A record that must not run (`kind` of `reason`, a metric label): dead-lettered, or on a
    /// shadow executor skipped, since production's group dead-letters the same record and a
    /// second dead letter would only double it; either way committed past.
    fn cannot_take(&self, message: OwnedMessage, kind: &'static str, reason: String) {
        let (partition, offset) = (message.partition(), message.offset());
        if self.settings.shadow {
            self.metrics.shadow_skipped.with_label_values(&[kind]).inc();
            tracing::warn!(partition, offset, %reason,
                "shadow executor skipping a trigger record it cannot take (production dead-letters it)");
            return self.runs.skip(partition, offset);
        }
        self.metrics.dead_letters.with_label_values(&[kind]).inc();
        tracing::warn!(partition, offset, %reason, "sending trigger record to the dead-letter queue");
        self.runs.dead_letter(message, reason)
    }

    /// Starts the runs and publishes the refusals the dispatch decided.
    fn carry_out(&self, steps: Vec<Step<ReadyRun>>) {
        // Every run of the batch counts as starting before the first one is handed to its
        // task: the runs that start first then finish (span, result) only once the last one
        // has started. Counted one at a time, the count fell to zero whenever the workers
        // caught up with the handing out, and the first runs' results were published in
        // the middle of a second's starts, delaying the rest (measured: p99 84 ms for 10 000
        // triggers released at once on one executor).
        let starts = (steps.iter())
            .filter(|step| matches!(step, Step::Start(_)))
            .count();
        self.runs.will_start(starts);
        for step in steps {
            match step {
                Step::Start(start) => self.runs.start(start),
                Step::Refuse(ready, message) => {
                    let ReadyRun {
                        trigger,
                        partition,
                        offset,
                        trace,
                        ..
                    } = ready;
                    self.runs.refuse(trigger, partition, offset, message, trace)
                }
            }
        }
    }

    /// Beats the state of the phase (RUNNING while consuming, STOPPING once draining), and
    /// sets the gauges of what is held, queued and running to what the beat says (a shadow
    /// executor only sets the gauges).
    fn beat(&self) {
        let state = match self.phase {
            Phase::Consuming => ExecutorState::Running,
            Phase::Draining => ExecutorState::Stopping,
        };
        let activity = self.dispatch.activity();
        self.metrics.held.set(self.dispatch.held_count() as i64);
        self.metrics
            .queued_jobs
            .set(activity.queued_jobs.len() as i64);
        self.metrics.running.set(activity.running_jobs.len() as i64);
        let held = |partition| {
            self.dispatch
                .held_matching(|ready| ready.partition == partition)
        };
        self.metrics
            .update_expected_waits(held, |partition| self.runs.running().count_on(partition));
        if let Some(beats) = &self.beats {
            beats.send(beats.beat(state, self.assignment.owned(), activity));
        }
    }

    fn drain(&mut self) {
        tracing::info!(in_flight = self.in_flight, "executor draining");
        self.phase = Phase::Draining;
        // Out of routing at once, before the drain.
        self.beat();
    }

    fn give_up(&self) {
        tracing::warn!(
            in_flight = self.in_flight,
            "drain deadline passed; cancelling the remaining runs (they will be redelivered)"
        );
        self.hard_stop.cancel();
    }

    /// Commits, leaves the group and says so in a last beat.
    async fn stop(self) {
        let limit = self.settings.session_timeout + self.settings.rebalance_timeout;
        self.group.leave(limit).await;
        // The last word: stopping, owning nothing, running nothing.
        if let Some(beats) = &self.beats {
            let last = beats.beat(ExecutorState::Stopping, Vec::new(), Activity::default());
            beats.send_and_wait(last).await;
        }
        tracing::info!(executor_id = %self.settings.executor_id, "executor stopped");
    }
}
