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

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use kadence_schemas::{TriggerId, TriggerRecord, codec};
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::builder::{ExecutorSettings, HandlerFn};
use crate::error::ExecutorError;
use crate::offsets::OffsetTracker;
use crate::publisher::Publisher;
use crate::runner::{RunOutcome, now_ms, result_record, run_handler};

/// How many recent trigger ids are remembered to recognise redeliveries.
const REMEMBERED_TRIGGERS: usize = 10_000;

/// Commits the revoked partitions' offsets before the group moves them.
struct ExecutorContext {
    tracker: Arc<Mutex<OffsetTracker>>,
    topic: String,
}

impl ClientContext for ExecutorContext {}

impl ConsumerContext for ExecutorContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(revoked) = rebalance {
            let partitions: Vec<i32> = revoked.elements().iter().map(|e| e.partition()).collect();
            let released = self
                .tracker
                .lock()
                .expect("offset tracker lock")
                .release(&partitions);
            tracing::info!(?partitions, "partitions revoked");
            if let Some(offsets) = offset_list(&self.topic, &released)
                && let Err(error) = consumer.commit(&offsets, CommitMode::Sync)
            {
                tracing::warn!(%error, "cannot commit offsets of revoked partitions");
            }
        } else if let Rebalance::Assign(assigned) = rebalance {
            let partitions: Vec<i32> = assigned.elements().iter().map(|e| e.partition()).collect();
            tracing::info!(?partitions, "partitions assigned");
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
/// published: the run no longer counts as in flight, but its offset stays uncommitted so the
/// trigger is redelivered.
struct Finished {
    partition: i32,
    offset: i64,
    handled: bool,
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
    handlers: Arc<HashMap<String, HandlerFn>>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ExecutorError> {
    let topic = settings.topics.triggers(&settings.app);
    let tracker = Arc::new(Mutex::new(OffsetTracker::default()));
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &settings.brokers)
        .set("group.id", settings.topics.executor_group(&settings.app))
        .set("client.id", &settings.executor_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        // A trigger emitted before any executor joined must still run.
        .set("auto.offset.reset", "earliest")
        .set(
            "session.timeout.ms",
            settings.session_timeout.as_millis().to_string(),
        );
    for (key, value) in &settings.kafka_options {
        config.set(key, value);
    }
    let consumer: StreamConsumer<ExecutorContext> = config
        .create_with_context(ExecutorContext {
            tracker: Arc::clone(&tracker),
            topic: topic.clone(),
        })
        .map_err(ExecutorError::kafka("create the trigger consumer"))?;
    consumer
        .subscribe(&[&topic])
        .map_err(ExecutorError::kafka("subscribe to the trigger topic"))?;
    let publisher = Publisher::new(&settings)?;
    // Fires after the drain deadline: running handlers are cancelled and publishing gives up.
    let hard_stop = CancellationToken::new();
    let (finished_tx, mut finished_rx) = mpsc::unbounded_channel::<Finished>();
    let mut recent = RecentTriggers::new();
    let mut in_flight = 0usize;
    let mut phase = Phase::Consuming;
    let mut commit_tick = tokio::time::interval(settings.commit_interval);
    let drain_deadline = tokio::time::sleep(std::time::Duration::MAX / 4);
    tokio::pin!(drain_deadline);
    tokio::pin!(shutdown);
    tracing::info!(executor_id = %settings.executor_id, %topic, handlers = handlers.len(), "executor started");

    loop {
        if matches!(phase, Phase::Draining) && in_flight == 0 {
            break;
        }
        let consuming = matches!(phase, Phase::Consuming);
        tokio::select! {
            biased;
            Some(done) = finished_rx.recv() => {
                in_flight -= 1;
                if done.handled {
                    tracker.lock().expect("offset tracker lock").complete(done.partition, done.offset);
                }
            }
            _ = commit_tick.tick() => commit(&consumer, &tracker, &topic),
            _ = &mut shutdown, if consuming => {
                tracing::info!(in_flight, "executor draining");
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
                        start(message, &settings, &handlers, &publisher, &mut recent, &hard_stop, finished_tx.clone());
                    }
                    Err(error) => tracing::warn!(%error, "error while receiving triggers"),
                }
            }
        }
    }
    commit(&consumer, &tracker, &topic);
    tracing::info!(executor_id = %settings.executor_id, "executor stopped");
    Ok(())
}

/// Starts processing one record in its own task; never waits for the handler.
fn start(
    message: OwnedMessage,
    settings: &ExecutorSettings,
    handlers: &HashMap<String, HandlerFn>,
    publisher: &Publisher,
    recent: &mut RecentTriggers,
    hard_stop: &CancellationToken,
    finished: mpsc::UnboundedSender<Finished>,
) {
    let done = Finished {
        partition: message.partition(),
        offset: message.offset(),
        handled: true,
    };
    let publisher = publisher.clone();
    let hard_stop = hard_stop.clone();
    let decoded = match message.payload() {
        None => Err("trigger record has no value".to_owned()),
        Some(bytes) => codec::decode::<TriggerRecord>(bytes)
            .map_err(|error| format!("undecodable trigger record: {error}")),
    };
    let trigger = match decoded {
        Ok(trigger) => Arc::new(trigger),
        Err(reason) => {
            tracing::warn!(partition = done.partition, offset = done.offset, %reason, "sending trigger record to the dead-letter queue");
            tokio::spawn(async move {
                let handled = match publisher.dead_letter(&message, &reason, &hard_stop).await {
                    Ok(()) => true,
                    Err(error) => {
                        tracing::error!(%error, "cannot dead-letter a record; it will be redelivered");
                        false
                    }
                };
                let _ = finished.send(Finished { handled, ..done });
            });
            return;
        }
    };
    if !recent.insert(&trigger.trigger_id) {
        tracing::info!(trigger_id = %trigger.trigger_id, "trigger redelivered; it already ran here, not running it twice");
        let _ = finished.send(done);
        return;
    }
    let executor_id = settings.executor_id.clone();
    let handler = handlers.get(&trigger.handler).cloned();
    let known_handlers = if handler.is_none() {
        let mut names: Vec<&str> = handlers.keys().map(String::as_str).collect();
        names.sort_unstable();
        names.join(", ")
    } else {
        String::new()
    };
    tokio::spawn(async move {
        let started_at_ms = now_ms();
        let outcome = match handler {
            Some(handler) => {
                run_handler(handler, Arc::clone(&trigger), hard_stop.child_token()).await
            }
            None => RunOutcome::failure(format!(
                "executor {executor_id} has no handler named {:?} (it has: {known_handlers})",
                trigger.handler
            )),
        };
        let record = result_record(&trigger, &executor_id, outcome, started_at_ms);
        let handled = match publisher.publish_result(&record, &hard_stop).await {
            Ok(()) => {
                tracing::debug!(trigger_id = %trigger.trigger_id, code = record.code, "result published");
                true
            }
            Err(error) => {
                tracing::error!(trigger_id = %trigger.trigger_id, %error,
                    "cannot publish result; the trigger stays uncommitted and will be redelivered");
                false
            }
        };
        let _ = finished.send(Finished { handled, ..done });
    });
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
