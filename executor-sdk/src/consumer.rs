//! The consumer loop: an explicit state machine, **consuming → draining → done**.
//!
//! - *Consuming*: receive trigger records from `{prefix}.triggers.{app}` (group
//!   `{prefix}.executor.{app}`) while fewer than `max_in_flight` runs are going; each record is
//!   handed to its own task at once, so a slow handler never delays other triggers. Finished
//!   runs report back over a channel.
//! - *Draining* (shutdown requested): stop receiving, wait for the runs in flight until the
//!   drain deadline, then cancel what is left (those triggers are redelivered after restart).
//! - *Done*: commit the final offsets and leave the group.
//!
//! Offsets are committed only up to the lowest trigger whose result is not yet published
//! ([`OffsetTracker`]); on a revocation the committable offsets of the revoked partitions are
//! committed synchronously before they move. A redelivered trigger (same trigger id) that
//! this executor has already run or is running is not run again. A record that cannot be
//! decoded goes to `{prefix}.dlq` with the reason and is committed past: it never stops the
//! partition.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use kadence_kafka::close_consumer;
use kadence_schemas::{
    ControlCommand, ControlRecord, ExecutorState, JobId, ResultRecord, TriggerId, TriggerRecord,
    codec,
};
use rdkafka::client::ClientContext;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::beats::{Activity, Assignment, Beats};
use crate::clock::Clock;
use crate::error::ExecutorError;
use crate::handler::{HandlerFn, Registry};
use crate::handoff::RunningRuns;
use crate::hold::Held;
use crate::joblog::{FLUSH_INTERVAL, JobLogger, LogShipper};
use crate::lanes::{Active, Decision, Lanes};
use crate::offsets::OffsetTracker;
use crate::publisher::Publisher;
use crate::runner::{RunOutcome, StopReason, result_record, run_handler};
use crate::settings::ExecutorSettings;

/// How many recent trigger ids are remembered to recognise redeliveries.
const REMEMBERED_TRIGGERS: usize = 10_000;

/// Commits the revoked partitions' offsets before the group moves them, and keeps the
/// assignment the beats report.
struct ExecutorContext {
    tracker: Arc<Mutex<OffsetTracker>>,
    topic: String,
    assignment: Assignment,
    running: RunningRuns,
    rebalance_timeout: std::time::Duration,
}

impl ClientContext for ExecutorContext {}

impl ConsumerContext for ExecutorContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(revoked) = rebalance {
            let partitions: Vec<i32> = revoked.elements().iter().map(|e| e.partition()).collect();
            // Finish or hand back their runs before the offsets are committed (see `handoff`).
            let handed_back = self
                .running
                .finish_or_hand_back(&partitions, self.rebalance_timeout);
            if handed_back > 0 {
                tracing::warn!(
                    ?partitions,
                    handed_back,
                    "runs of revoked partitions did not finish in time; handed back to the new owner"
                );
            }
            let released = self
                .tracker
                .lock()
                .expect("offset tracker lock")
                .release(&partitions);
            tracing::info!(?partitions, "partitions revoked");
            self.assignment.revoke(&partitions);
            if let Some(offsets) = offset_list(&self.topic, &released)
                && let Err(error) = consumer.commit(&offsets, CommitMode::Sync)
            {
                tracing::warn!(%error, "cannot commit offsets of revoked partitions");
            }
        } else if let Rebalance::Assign(assigned) = rebalance {
            let partitions: Vec<i32> = assigned.elements().iter().map(|e| e.partition()).collect();
            tracing::info!(?partitions, "partitions assigned");
            self.assignment.assign(&partitions);
        }
    }
}

fn offset_list(topic: &str, offsets: &[(i32, i64)]) -> Option<TopicPartitionList> {
    if offsets.is_empty() {
        return None;
    }
    let mut list = TopicPartitionList::new();
    for &(partition, offset) in offsets {
        list.add_partition_offset(topic, partition, Offset::Offset(offset))
            .ok()?;
    }
    Some(list)
}

/// A record whose processing ended. `handled` is false when its result could not be
/// published: it no longer counts as in flight, but its offset stays uncommitted so the
/// trigger is redelivered. `run` names the job lane to advance when a run ended.
struct Finished {
    partition: i32,
    offset: i64,
    handled: bool,
    run: Option<(JobId, TriggerId)>,
    /// The trigger did not run to a result here (handed back, or its partition moved before
    /// it started): forget its id, so that it runs if the partition comes back.
    forget: bool,
}

impl Finished {
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
struct Reporter {
    tracker: Arc<Mutex<OffsetTracker>>,
    loop_tx: mpsc::UnboundedSender<Finished>,
}

impl Reporter {
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

/// A trigger ready to run (now or when its lane allows).
struct ReadyRun {
    trigger: Arc<TriggerRecord>,
    handler: HandlerFn,
    partition: i32,
    offset: i64,
}

impl AsRef<TriggerId> for ReadyRun {
    fn as_ref(&self) -> &TriggerId {
        &self.trigger.trigger_id
    }
}

/// Reads `{prefix}.control` from its end, without a consumer group (every executor must see
/// every command), and forwards this app's commands to the loop. An unreadable record is
/// logged and skipped: commands are not replayed, so there is nothing to redeliver.
fn spawn_control_reader(
    settings: &ExecutorSettings,
    commands: mpsc::UnboundedSender<ControlRecord>,
    stop: CancellationToken,
) -> Result<(), ExecutorError> {
    // librdkafka wants a group id even for assigned partitions; nothing is ever committed.
    let group = format!(
        "{}.control.{}",
        settings.topics.prefix(),
        settings.executor_id
    );
    let config = settings
        .kafka
        .client_config_with(&[("group.id", &group), ("enable.auto.commit", "false")]);
    let consumer: StreamConsumer = config
        .create()
        .map_err(ExecutorError::kafka("create the control consumer"))?;
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(&settings.topics.control(), 0, Offset::End)
        .map_err(ExecutorError::kafka("assign the control topic"))?;
    consumer
        .assign(&assignment)
        .map_err(ExecutorError::kafka("assign the control topic"))?;
    let app = settings.app.clone();
    let close_limit = settings.session_timeout;
    tokio::spawn(async move {
        loop {
            let received = tokio::select! {
                _ = stop.cancelled() => break,
                received = consumer.recv() => received,
            };
            let message = match received {
                Ok(message) => message,
                Err(error) => {
                    tracing::warn!(%error, "error while reading control commands");
                    continue;
                }
            };
            match message.payload().map(codec::decode::<ControlRecord>) {
                Some(Ok(command)) if command.app == app => {
                    let _ = commands.send(command);
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => {
                    tracing::warn!(%error, offset = message.offset(), "skipping an unreadable control record")
                }
                None => tracing::warn!(
                    offset = message.offset(),
                    "skipping an empty control record"
                ),
            }
        }
        close_consumer(consumer, "control", close_limit).await;
    });
    Ok(())
}

/// Applies a control command to this executor's runs (running, queued and held).
fn apply_control(
    command: ControlRecord,
    runs: &Runs,
    lanes: &mut Lanes<ReadyRun>,
    held: &mut Held<ReadyRun>,
) {
    match command.command {
        ControlCommand::Kill => {
            let reason = format!(
                "killed: {}",
                command
                    .reason
                    .as_deref()
                    .unwrap_or("requested by an operator")
            );
            let mut refused = Vec::new();
            if let Some(job) = command.job_id {
                tracing::info!(%job, "killing the job's running and queued runs");
                refused.extend(lanes.stop_all(job, &reason));
                refused.extend(held.take_job(job));
            }
            if let Some(trigger_id) = &command.trigger_id {
                refused.extend(lanes.stop_trigger(trigger_id, &reason));
                refused.extend(held.take_trigger(trigger_id));
            }
            for queued in refused {
                runs.refuse(
                    queued.trigger,
                    queued.partition,
                    queued.offset,
                    reason.clone(),
                );
            }
        }
    }
}

/// Starts runs and publishes their results; every task reports back on `finished`.
struct Runs {
    executor_id: String,
    publisher: Publisher,
    hard_stop: CancellationToken,
    finished: Reporter,
    running: RunningRuns,
    assignment: Assignment,
    max_log_lines: usize,
}

impl Runs {
    /// Starts `ready` in its own task and records it in its lane.
    fn start(&self, ready: ReadyRun, lanes: &mut Lanes<ReadyRun>) {
        let job = ready.trigger.job_id;
        let trigger_id = ready.trigger.trigger_id.clone();
        let cancellation = self.hard_stop.child_token();
        let stop_reason = StopReason::default();
        lanes.started(
            job,
            Active {
                trigger_id: trigger_id.clone(),
                cancellation: cancellation.clone(),
                stop_reason: stop_reason.clone(),
            },
        );
        let publisher = self.publisher.clone();
        let executor_id = self.executor_id.clone();
        let hard_stop = self.hard_stop.clone();
        let finished = self.finished.clone();
        let running = self.running.clone();
        let assignment = self.assignment.clone();
        let logger = JobLogger::new(self.max_log_lines);
        let shipper = LogShipper::new(
            logger.clone(),
            Arc::clone(&ready.trigger),
            executor_id.clone(),
            publisher.clone(),
            hard_stop.clone(),
        );
        tokio::spawn(async move {
            let (partition, offset) = (ready.partition, ready.offset);
            if !assignment.owns(partition) {
                // Queued or held while the group moved its partition: the new owner runs it.
                finished.report(Finished::left_to_new_owner(
                    partition,
                    offset,
                    (job, trigger_id),
                ));
                return;
            }
            let handed_back = running.register(partition, offset, cancellation.clone());
            let started_at_ms = Clock::System.now_ms();
            let run = run_handler(
                ready.handler,
                Arc::clone(&ready.trigger),
                cancellation,
                stop_reason,
                logger,
            );
            tokio::pin!(run);
            let mut flush_tick = tokio::time::interval(FLUSH_INTERVAL);
            let outcome = loop {
                tokio::select! {
                    outcome = &mut run => break outcome,
                    _ = flush_tick.tick() => shipper.flush(false).await,
                }
            };
            if handed_back.load(std::sync::atomic::Ordering::SeqCst) {
                // The group moved the partition and the run did not finish in time: no result,
                // no commit; the new owner runs the trigger.
                running.unregister(partition, offset);
                finished.report(Finished::left_to_new_owner(
                    partition,
                    offset,
                    (job, trigger_id),
                ));
                return;
            }
            // Every line is out before the result: a finished run's log is complete.
            shipper.flush(true).await;
            let record = result_record(
                &ready.trigger,
                &executor_id,
                outcome,
                started_at_ms,
                Clock::System.now_ms(),
            );
            let handled = publish(&publisher, &record, &hard_stop).await;
            // Complete before unregistering: the revocation callback commits what is complete
            // once no registered run is left.
            finished.report(Finished {
                partition,
                offset,
                handled,
                run: Some((job, trigger_id)),
                forget: false,
            });
            running.unregister(partition, offset);
        });
    }

    /// Publishes a failure result for a trigger that will not run.
    fn refuse(&self, trigger: Arc<TriggerRecord>, partition: i32, offset: i64, message: String) {
        let publisher = self.publisher.clone();
        let executor_id = self.executor_id.clone();
        let hard_stop = self.hard_stop.clone();
        let finished = self.finished.clone();
        tokio::spawn(async move {
            let record = result_record(
                &trigger,
                &executor_id,
                RunOutcome::failure(message),
                Clock::System.now_ms(),
                Clock::System.now_ms(),
            );
            let handled = publish(&publisher, &record, &hard_stop).await;
            finished.report(Finished {
                partition,
                offset,
                handled,
                run: None,
                forget: false,
            });
        });
    }

    /// Sends an undecodable record to the dead-letter queue.
    fn dead_letter(&self, message: OwnedMessage, reason: String) {
        let publisher = self.publisher.clone();
        let hard_stop = self.hard_stop.clone();
        let finished = self.finished.clone();
        tokio::spawn(async move {
            let handled = match publisher.dead_letter(&message, &reason, &hard_stop).await {
                Ok(()) => true,
                Err(error) => {
                    tracing::error!(%error, "cannot dead-letter a record; it will be redelivered");
                    false
                }
            };
            finished.report(Finished {
                partition: message.partition(),
                offset: message.offset(),
                handled,
                run: None,
                forget: false,
            });
        });
    }
}

/// Publishes a result; false (logged) when it could not be.
async fn publish(
    publisher: &Publisher,
    record: &ResultRecord,
    hard_stop: &CancellationToken,
) -> bool {
    match publisher.publish_result(record, hard_stop).await {
        Ok(()) => {
            tracing::debug!(trigger_id = %record.trigger_id, code = record.code, "result published");
            true
        }
        Err(error) => {
            tracing::error!(trigger_id = %record.trigger_id, %error,
                "cannot publish result; the trigger stays uncommitted and will be redelivered");
            false
        }
    }
}

/// Trigger ids recently started here, to recognise redeliveries.
struct RecentTriggers {
    seen: HashSet<TriggerId>,
    order: VecDeque<TriggerId>,
}

impl RecentTriggers {
    fn new() -> Self {
        RecentTriggers {
            seen: HashSet::new(),
            order: VecDeque::new(),
        }
    }

    /// Forgets `id` (it did not run to a result here).
    fn forget(&mut self, id: &TriggerId) {
        if self.seen.remove(id) {
            self.order.retain(|known| known != id);
        }
    }

    /// Remembers `id`; false if it was already known.
    fn insert(&mut self, id: &TriggerId) -> bool {
        if !self.seen.insert(id.clone()) {
            return false;
        }
        self.order.push_back(id.clone());
        if self.order.len() > REMEMBERED_TRIGGERS
            && let Some(oldest) = self.order.pop_front()
        {
            self.seen.remove(&oldest);
        }
        true
    }
}

enum Phase {
    Consuming,
    Draining,
}

/// Runs the executor until `shutdown` resolves and the drain completes.
pub(crate) async fn run(
    settings: ExecutorSettings,
    handlers: Arc<Registry>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ExecutorError> {
    let topic = settings.topics.triggers(&settings.app);
    let tracker = Arc::new(Mutex::new(OffsetTracker::default()));
    let group = settings.topics.executor_group(&settings.app);
    let session_timeout = settings.session_timeout.as_millis().to_string();
    // Heartbeats at a tenth of the session timeout (librdkafka's default is 3 s): a member
    // learns of a rebalance at its next heartbeat, and one that rejoins after the round closed
    // starts another. On the development broker (tansu) three executors starting together kept
    // passing partitions round among themselves for minutes with 3 s heartbeats, leaving one
    // partition unowned (seen in the routing tests); with 1 s they settle.
    let heartbeat_interval = (settings.session_timeout.as_millis() / 10)
        .clamp(100, 3_000)
        .to_string();
    let config = settings.kafka.client_config_with(&[
        ("group.id", &group),
        ("client.id", &settings.executor_id),
        ("enable.auto.commit", "false"),
        ("enable.auto.offset.store", "false"),
        // A trigger emitted before any executor joined must still run.
        ("auto.offset.reset", "earliest"),
        ("session.timeout.ms", &session_timeout),
        ("heartbeat.interval.ms", &heartbeat_interval),
    ]);
    let assignment = Assignment::default();
    let running = RunningRuns::default();
    let consumer: StreamConsumer<ExecutorContext> = config
        .create_with_context(ExecutorContext {
            tracker: Arc::clone(&tracker),
            topic: topic.clone(),
            assignment: assignment.clone(),
            running: running.clone(),
            rebalance_timeout: settings.rebalance_timeout,
        })
        .map_err(ExecutorError::kafka("create the trigger consumer"))?;
    consumer
        .subscribe(&[&topic])
        .map_err(ExecutorError::kafka("subscribe to the trigger topic"))?;
    // Fires after the drain deadline: running handlers are cancelled and publishing gives up.
    let hard_stop = CancellationToken::new();
    let (finished_tx, mut finished_rx) = mpsc::unbounded_channel::<Finished>();
    let publisher = Publisher::new(&settings)?;
    let beats = Beats::new(
        publisher.producer(),
        settings.topics.beats(),
        settings.executor_id.clone(),
        settings.app.clone(),
        handlers.names(),
        settings.beat_interval,
    );
    let runs = Runs {
        executor_id: settings.executor_id.clone(),
        publisher,
        hard_stop: hard_stop.clone(),
        finished: Reporter {
            tracker: Arc::clone(&tracker),
            loop_tx: finished_tx,
        },
        running,
        assignment: assignment.clone(),
        max_log_lines: settings.max_log_lines,
    };
    let mut lanes: Lanes<ReadyRun> = Lanes::new(
        settings.max_concurrent_per_job,
        settings.executor_id.clone(),
    );
    let (control_tx, mut control_rx) = mpsc::unbounded_channel::<ControlRecord>();
    let control_stop = CancellationToken::new();
    let _stop_control_reader = control_stop.clone().drop_guard();
    spawn_control_reader(&settings, control_tx, control_stop)?;
    let mut recent = RecentTriggers::new();
    let mut held: Held<ReadyRun> = Held::default();
    let mut in_flight = 0usize;
    let mut phase = Phase::Consuming;
    let mut commit_tick = tokio::time::interval(settings.commit_interval);
    let mut beat_tick = tokio::time::interval(settings.beat_interval);
    beat_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let drain_deadline = tokio::time::sleep(std::time::Duration::MAX / 4);
    tokio::pin!(drain_deadline);
    tokio::pin!(shutdown);
    tracing::info!(executor_id = %settings.executor_id, %topic, handlers = handlers.names().len(), "executor started");

    loop {
        if matches!(phase, Phase::Draining) && in_flight == 0 {
            break;
        }
        let consuming = matches!(phase, Phase::Consuming);
        tokio::select! {
            biased;
            Some(done) = finished_rx.recv() => {
                in_flight -= 1;
                if let Some((job, trigger_id)) = done.run {
                    if done.forget {
                        recent.forget(&trigger_id);
                    }
                    for next in lanes.finished(job, &trigger_id) {
                        runs.start(next, &mut lanes);
                    }
                }
            }
            Some(command) = control_rx.recv() => apply_control(command, &runs, &mut lanes, &mut held),
            _ = sleep_until_ms(held.next_release_ms()), if held.next_release_ms().is_some() => {
                for ready in held.release(Clock::System.now_ms()) {
                    place(ready, &runs, &mut lanes);
                }
            }
            _ = commit_tick.tick() => commit(&consumer, &tracker, &topic),
            _ = beat_tick.tick() => {
                let state = if consuming { ExecutorState::Running } else { ExecutorState::Stopping };
                beats.send(beats.beat(state, assignment.owned(), activity(&lanes, &held)));
            }
            _ = assignment.changed(), if consuming => {
                beats.send(beats.beat(ExecutorState::Running, assignment.owned(), activity(&lanes, &held)));
            }
            _ = &mut shutdown, if consuming => {
                tracing::info!(in_flight, "executor draining");
                // Out of routing at once, before the drain.
                beats.send(beats.beat(ExecutorState::Stopping, assignment.owned(), activity(&lanes, &held)));
                phase = Phase::Draining;
                drain_deadline.as_mut().reset(tokio::time::Instant::now() + settings.drain_timeout);
            }
            _ = &mut drain_deadline, if !consuming => {
                tracing::warn!(in_flight, "drain deadline passed; cancelling the remaining runs (they will be redelivered)");
                hard_stop.cancel();
                break;
            }
            received = consumer.recv(), if consuming && in_flight < settings.max_in_flight => {
                match received {
                    Ok(message) => {
                        let message = message.detach();
                        tracker.lock().expect("offset tracker lock").track(message.partition(), message.offset());
                        in_flight += 1;
                        admit(message, &handlers, &runs, &mut recent, &mut lanes, &mut held);
                    }
                    Err(error) => tracing::warn!(%error, "error while receiving triggers"),
                }
            }
        }
    }
    commit(&consumer, &tracker, &topic);
    // Leaving the group hands the partitions to the other executors at once.
    close_consumer(
        consumer,
        "triggers",
        settings.session_timeout + settings.rebalance_timeout,
    )
    .await;
    // The last word: stopping, owning nothing, running nothing.
    beats
        .send_and_wait(beats.beat(ExecutorState::Stopping, Vec::new(), Activity::default()))
        .await;
    tracing::info!(executor_id = %settings.executor_id, "executor stopped");
    Ok(())
}

/// What the beats report: running and queued jobs, held triggers counting as queued.
fn activity(lanes: &Lanes<ReadyRun>, held: &Held<ReadyRun>) -> Activity {
    let mut activity = lanes.activity();
    activity.queued_jobs.extend(held.jobs().map(JobId::get));
    activity.queued_jobs.sort_unstable();
    activity.queued_jobs.dedup();
    activity
}

/// Sleeps until `at_ms` (wall-clock ms since the epoch); forever when there is none.
async fn sleep_until_ms(at_ms: Option<i64>) {
    match at_ms {
        Some(at_ms) => Clock::System.sleep_until_ms(at_ms).await,
        None => std::future::pending().await,
    }
}

/// Decodes one record, then holds it until its scheduled time or places it in its job's
/// lane at once; never waits for a handler.
fn admit(
    message: OwnedMessage,
    handlers: &Registry,
    runs: &Runs,
    recent: &mut RecentTriggers,
    lanes: &mut Lanes<ReadyRun>,
    held: &mut Held<ReadyRun>,
) {
    let (partition, offset) = (message.partition(), message.offset());
    let decoded = match message.payload() {
        None => Err("trigger record has no value".to_owned()),
        Some(bytes) => codec::decode::<TriggerRecord>(bytes)
            .map_err(|error| format!("undecodable trigger record: {error}")),
    };
    let trigger = match decoded {
        Ok(trigger) => Arc::new(trigger),
        Err(reason) => {
            tracing::warn!(partition, offset, %reason, "sending trigger record to the dead-letter queue");
            runs.dead_letter(message, reason);
            return;
        }
    };
    if !recent.insert(&trigger.trigger_id) {
        tracing::info!(trigger_id = %trigger.trigger_id, "trigger redelivered; it already ran here, not running it twice");
        runs.finished.report(Finished {
            partition,
            offset,
            handled: true,
            run: None,
            forget: false,
        });
        return;
    }
    let handler = match handlers.resolve(&trigger) {
        Ok(handler) => handler,
        Err(message) => {
            runs.refuse(trigger, partition, offset, message);
            return;
        }
    };
    let scheduled_at_ms = trigger.scheduled_at_ms;
    let ready = ReadyRun {
        trigger,
        handler,
        partition,
        offset,
    };
    if scheduled_at_ms > Clock::System.now_ms() {
        // Emitted ahead of its time (see `hold`): it runs at its millisecond, not before.
        let (job, trigger_id) = (ready.trigger.job_id, ready.trigger.trigger_id.clone());
        held.hold(scheduled_at_ms, job, trigger_id, ready);
    } else {
        place(ready, runs, lanes);
    }
}

/// Applies the job's block strategy to a trigger that is due.
fn place(ready: ReadyRun, runs: &Runs, lanes: &mut Lanes<ReadyRun>) {
    let (partition, offset) = (ready.partition, ready.offset);
    let job = ready.trigger.job_id;
    let strategy = ready.trigger.block_strategy;
    match lanes.admit(job, strategy) {
        Decision::Run => runs.start(ready, lanes),
        Decision::Queue => lanes.queue(job, strategy, ready),
        Decision::Discard(message) => runs.refuse(ready.trigger, partition, offset, message),
        Decision::Cover => {
            let (reason, covered) = lanes.cover(job, &ready.trigger.trigger_id);
            for queued in covered {
                runs.refuse(
                    queued.trigger,
                    queued.partition,
                    queued.offset,
                    reason.clone(),
                );
            }
            runs.start(ready, lanes);
        }
    }
}

fn commit(consumer: &StreamConsumer<ExecutorContext>, tracker: &Mutex<OffsetTracker>, topic: &str) {
    let ready = tracker
        .lock()
        .expect("offset tracker lock")
        .take_committable();
    if let Some(offsets) = offset_list(topic, &ready)
        && let Err(error) = consumer.commit(&offsets, CommitMode::Async)
    {
        tracing::warn!(%error, "cannot commit offsets; they will be committed with the next ones");
    }
}
