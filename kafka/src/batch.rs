//! The one shape of a batch consumer, which the scheduler's results, logs and beats readers
//! share: take a batch of what is ready, process it, commit past it only when it is done, and
//! retry a failed step with backoff until asked to stop; then close off the runtime.
//!
//! A reader implements [`BatchStep`] (one step: receive, process, commit) and hands itself to
//! [`run_steps`]; it keeps a batch it could not finish and offers it again on the next step,
//! so nothing is committed past an unprocessed record.

use std::collections::HashMap;
use std::fmt::{Debug, Display};
use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::FutureExt;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

use crate::closing::close_consumer;
use crate::failure_log::{FailureLog, Severity};
use crate::resume::{ResumePoints, rebalance_resuming};
use crate::retry::Backoff;
use crate::settings::{BrokerKind, KafkaSettings};

/// How long a stopping process waits for each batch consumer to leave its group: well inside
/// any stop deadline, so that a broker that does not answer delays nothing else.
pub const CONSUMER_CLOSE_LIMIT: Duration = Duration::from_secs(5);

/// How long one step of [`run_steps`] waits for a first record before it returns empty.
pub const STEP_WAIT: Duration = Duration::from_millis(500);

/// How often a subscribed batch consumer's client reports its statistics (consumer lag per
/// partition) to the callbacks given to [`BatchConsumer::on_statistics`].
const STATISTICS_INTERVAL_MS: &str = "5000";

/// What a batch consumer's client statistics are handed to.
type StatisticsCallback = Arc<dyn Fn(&Statistics) + Send + Sync>;

/// Each partition of `topic` the client's `statistics` list, with its consumer lag (records
/// not yet read past the committed offset), or `None` for a partition the client does not
/// consume (it reports `-1`). librdkafka's internal partition `-1` is left out.
pub fn partition_lags<'a>(
    statistics: &'a Statistics,
    topic: &str,
) -> impl Iterator<Item = (i32, Option<i64>)> + 'a {
    topic_partitions(statistics, topic).map(|(partition, state)| {
        let lag = (state.consumer_lag >= 0).then_some(state.consumer_lag);
        (partition, lag)
    })
}

/// Each partition of `topic` the client's `statistics` list, without librdkafka's internal
/// partition `-1`.
fn topic_partitions<'a>(
    statistics: &'a Statistics,
    topic: &str,
) -> impl Iterator<Item = (i32, &'a rdkafka::statistics::Partition)> + 'a {
    (statistics.topics.get(topic).into_iter())
        .flat_map(|topic| &topic.partitions)
        .filter(|(partition, _)| **partition >= 0)
        .map(|(&partition, state)| (partition, state))
}

/// Whether the client's `statistics` show it reading every partition of `topic` (the group
/// gave it all of them): each partition the topic has in the client's metadata is being
/// fetched (librdkafka's fetch state of a partition not assigned is `none`, of one being
/// given up `stopping` or `stopped`). `false` while the client knows no partition of it.
pub fn reads_every_partition(statistics: &Statistics, topic: &str) -> bool {
    let mut partitions = topic_partitions(statistics, topic).peekable();
    partitions.peek().is_some()
        && partitions.all(|(_, state)| {
            !matches!(state.fetch_state.as_str(), "none" | "stopping" | "stopped")
        })
}

/// The client context of a batch consumer: passes the client's statistics on, once someone
/// asked for them, and applies the group's rebalances resuming where the group committed
/// ([`ResumePoints`]).
pub struct ReaderContext {
    callbacks: RwLock<Vec<StatisticsCallback>>,
    resume: ResumePoints,
    /// Bounds each offset lookup while partitions are assigned.
    lookup_timeout: Duration,
}

impl ClientContext for ReaderContext {
    fn stats(&self, statistics: Statistics) {
        for callback in self.callbacks.read().expect("statistics callbacks").iter() {
            callback(&statistics);
        }
    }
}

impl ConsumerContext for ReaderContext {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        partitions: &mut TopicPartitionList,
    ) {
        rebalance_resuming(
            self,
            consumer,
            err,
            partitions,
            &self.resume,
            self.lookup_timeout,
        );
    }

    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(revoked) = rebalance {
            let partitions: Vec<i32> = revoked.elements().iter().map(|e| e.partition()).collect();
            self.resume.forget(&partitions);
        }
    }
}

/// A consumer read in batches with manual commits.
pub struct BatchConsumer {
    consumer: StreamConsumer<ReaderContext>,
    name: &'static str,
    max: usize,
}

impl BatchConsumer {
    /// A consumer in `group` subscribed to `topic`: manual commits, from the earliest offset
    /// when the group has none (nothing produced before the group existed is skipped).
    /// Batches hold at most `max` records; `name` says which consumer in logs.
    pub fn subscribe(
        settings: &KafkaSettings,
        group: &str,
        topic: &str,
        session_timeout: Duration,
        name: &'static str,
        max: usize,
    ) -> Result<BatchConsumer, KafkaError> {
        let session_timeout_ms = session_timeout.as_millis().to_string();
        let context = ReaderContext {
            callbacks: RwLock::default(),
            resume: ResumePoints::new(settings.broker_kind, topic),
            lookup_timeout: session_timeout,
        };
        let consumer: StreamConsumer<ReaderContext> = settings
            .client_config_with(&[
                ("group.id", group),
                ("enable.auto.commit", "false"),
                ("auto.offset.reset", "earliest"),
                ("session.timeout.ms", &session_timeout_ms),
                ("statistics.interval.ms", STATISTICS_INTERVAL_MS),
            ])
            .create_with_context(context)?;
        consumer.subscribe(&[topic])?;
        Ok(BatchConsumer {
            consumer,
            name,
            max: max.max(1),
        })
    }

    /// A consumer assigned every one of `partitions` of `topic` from the beginning, outside
    /// any group's assignment and committing nothing: every start reads the whole topic again
    /// (a compacted topic whose latest records rebuild a state). librdkafka still wants a
    /// `group` id.
    pub fn assign_from_beginning(
        settings: &KafkaSettings,
        group: &str,
        topic: &str,
        partitions: i32,
        name: &'static str,
        max: usize,
    ) -> Result<BatchConsumer, KafkaError> {
        // Assigned, not subscribed: no rebalance, nothing to resume.
        let context = ReaderContext {
            callbacks: RwLock::default(),
            resume: ResumePoints::new(BrokerKind::Kafka, topic),
            lookup_timeout: Duration::ZERO,
        };
        let consumer: StreamConsumer<ReaderContext> = settings
            .client_config_with(&[
                ("group.id", group),
                ("enable.auto.commit", "false"),
                ("enable.auto.offset.store", "false"),
            ])
            .create_with_context(context)?;
        let mut assignment = TopicPartitionList::new();
        for partition in 0..partitions.max(1) {
            assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
        }
        consumer.assign(&assignment)?;
        Ok(BatchConsumer {
            consumer,
            name,
            max: max.max(1),
        })
    }

    /// Hands the client's statistics (every 5 s on a subscribed consumer: consumer lag per
    /// partition, among much else) to `callback`, from the client's own thread, as well as
    /// to the callbacks given before.
    pub fn on_statistics(&self, callback: impl Fn(&Statistics) + Send + Sync + 'static) {
        let callbacks = &self.consumer.context().callbacks;
        (callbacks.write().expect("statistics callbacks")).push(Arc::new(callback));
    }

    /// Waits up to `wait` for a first record, then takes whatever else is ready, up to the
    /// batch size. An empty batch means nothing arrived in time.
    /// Records read again before a partition's committed offset (on tansu, see
    /// [`ResumePoints`]) are left out.
    pub async fn receive(&self, wait: Duration) -> Result<Vec<OwnedMessage>, KafkaError> {
        let resume = &self.consumer.context().resume;
        let deadline = tokio::time::Instant::now() + wait;
        let first = loop {
            match tokio::time::timeout_at(deadline, self.consumer.recv()).await {
                Err(_) => return Ok(Vec::new()),
                Ok(received) => {
                    let message = received?;
                    if resume.admits(message.partition(), message.offset()) {
                        break message.detach();
                    }
                }
            }
        };
        let mut batch = vec![first];
        while batch.len() < self.max {
            match self.consumer.recv().now_or_never() {
                Some(Ok(message)) if !resume.admits(message.partition(), message.offset()) => {}
                Some(Ok(message)) => batch.push(message.detach()),
                Some(Err(error)) => {
                    tracing::warn!(consumer = self.name, %error,
                        "error while draining a batch; continuing with it");
                    break;
                }
                None => break,
            }
        }
        Ok(batch)
    }

    /// Commits, per partition, the offset after the last of `messages` (all processed).
    pub fn commit<'a>(
        &self,
        messages: impl IntoIterator<Item = &'a OwnedMessage>,
    ) -> Result<(), KafkaError> {
        let mut next: HashMap<(&str, i32), i64> = HashMap::new();
        for message in messages {
            let entry = next
                .entry((message.topic(), message.partition()))
                .or_insert(0);
            *entry = (*entry).max(message.offset() + 1);
        }
        if next.is_empty() {
            return Ok(());
        }
        let mut offsets = TopicPartitionList::new();
        for ((topic, partition), offset) in next {
            offsets.add_partition_offset(topic, partition, Offset::Offset(offset))?;
        }
        self.consumer.commit(&offsets, CommitMode::Async)
    }

    /// Leaves the group and closes, on a thread of its own, within [`CONSUMER_CLOSE_LIMIT`].
    pub async fn close(self) {
        close_consumer(self.consumer, self.name, CONSUMER_CLOSE_LIMIT).await;
    }
}

/// One step of a batch reader: receive what is ready (waiting up to `wait` for the first
/// record), process it, commit past it. A step that fails keeps its batch for the next one.
pub trait BatchStep: Send {
    /// What a step did; the default value means it did nothing.
    type Summary: Debug + Default + PartialEq + Send;
    /// Why a step failed.
    type Error: Display + Send;

    /// Which reader, in logs.
    fn name(&self) -> &'static str;

    /// One step.
    fn step(
        &mut self,
        wait: Duration,
    ) -> impl Future<Output = Result<Self::Summary, Self::Error>> + Send;
}

/// Runs `reader`'s steps until `shutdown`: a step that did something is logged at debug, a
/// failed one tried again after a backoff (250 ms doubling to 5 s), its failures logged at
/// warn by a [`FailureLog`]. Returns at the shutdown; the caller finishes what it holds and
/// closes its consumer.
pub async fn run_steps<S: BatchStep>(reader: &mut S, shutdown: &CancellationToken) {
    let mut backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(5));
    let mut failures = FailureLog::new(format!("{} batch step", reader.name()), Severity::Warning);
    loop {
        let step = tokio::select! {
            _ = shutdown.cancelled() => return,
            step = reader.step(STEP_WAIT) => step,
        };
        failures.record(&step);
        match step {
            Ok(summary) => {
                backoff.reset();
                if summary != S::Summary::default() {
                    tracing::debug!(reader = reader.name(), ?summary, "batch processed");
                }
            }
            Err(_) => {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(backoff.next_delay()) => {}
                }
            }
        }
    }
}
