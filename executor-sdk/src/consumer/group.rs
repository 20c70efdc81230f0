//! The trigger consumer as a member of the group `{prefix}.executor.{app}` ([`Group`]): its
//! client settings, the rebalance callbacks, receiving and committing.
//!
//! Every record received is tracked as in flight at once; offsets are committed only up to
//! the lowest trigger whose result is not yet published (`offsets`). When the group revokes
//! partitions, the callback first lets their runs finish or hands them back (`handoff`), then
//! commits what they completed synchronously, before the partitions move. Assignments and
//! revocations also update the [`Assignment`] the beats report.
//!
//! The group protocol ([`GroupProtocol`]) changes the client settings and the lists the
//! callbacks see, not the callbacks. Under the classic protocol with the `range` assignor
//! (named for every executor of any SDK, so that a mixed group shares it) a rebalance is eager: the whole assignment is revoked, then a whole new one
//! assigned. Under the consumer protocol (KIP-848), and under the classic one with the
//! `cooperative-sticky` assignor, librdkafka reports the rebalance protocol as
//! `COOPERATIVE`: a revocation lists only the partitions leaving and an assignment only those
//! arriving, and the rebalance handler ([`rebalance_resuming`], rust-rdkafka's default but for
//! the detour below), which runs after `pre_rebalance`, applies them with
//! `incremental_unassign`/`incremental_assign` instead of replacing the assignment. So every list is handled as a change: the runs, offsets and [`Assignment`]
//! entries of the partitions named, and only those; the others keep running and committing.
//!
//! On tansu ([`BrokerKind::Tansu`](kadence_kafka::settings::BrokerKind)) a partition assigned
//! is started before the group's committed offset and the records before it are dropped as
//! they arrive ([`ResumePoints`]): tansu serves a fetch that starts inside a record batch from
//! the next batch, and the offset committed after runs handed back is often inside one.
//!
//! A shadow executor is a member of `{prefix}.shadow.{app}` on the same topic, and a new
//! shadow group starts at the live end (`auto.offset.reset=latest`), not at the beginning: a
//! candidate handler must not run the topic's history. The client would look the end up
//! only when it first fetches, a moment after the assignment is announced; so on assignment
//! the callback commits the end for each partition the group has no offset for yet, before
//! announcing it. Every trigger emitted after [`OwnedPartitions`](crate::OwnedPartitions)
//! shows a partition then reaches the shadow, and a shadow restarted before its first
//! trigger still starts at the end it took.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kadence_kafka::settings::BrokerKind;
use kadence_kafka::{ResumePoints, close_consumer, rebalance_resuming};
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};

use crate::error::ExecutorError;
use crate::handoff::RunningRuns;
use crate::metrics::ExecutorMetrics;
use crate::offsets::OffsetTracker;
use crate::partitions::Assignment;
use crate::settings::{ExecutorSettings, GroupProtocol};

/// This executor's membership of its app's consumer group.
pub(super) struct Group {
    consumer: StreamConsumer<ExecutorContext>,
    tracker: Arc<Mutex<OffsetTracker>>,
    topic: String,
}

impl Group {
    /// Joins the group and subscribes to `{prefix}.triggers.{app}`. The callbacks keep
    /// `assignment` and wait for the revoked partitions' runs in `running`.
    pub(super) fn join(
        settings: &ExecutorSettings,
        assignment: Assignment,
        running: RunningRuns,
        metrics: Arc<ExecutorMetrics>,
    ) -> Result<Group, ExecutorError> {
        let topic = settings.topics.triggers(&settings.app);
        let tracker = Arc::new(Mutex::new(OffsetTracker::default()));
        let consumer: StreamConsumer<ExecutorContext> = client_config(settings)
            .create_with_context(ExecutorContext {
                tracker: Arc::clone(&tracker),
                topic: topic.clone(),
                assignment,
                running,
                rebalance_timeout: settings.rebalance_timeout,
                metrics,
                starts_at_end: settings.shadow,
                resume: ResumePoints::new(settings.kafka.broker_kind, &topic),
            })
            .map_err(ExecutorError::kafka("create the trigger consumer"))?;
        consumer
            .subscribe(&[&topic])
            .map_err(ExecutorError::kafka("subscribe to the trigger topic"))?;
        Ok(Group {
            consumer,
            tracker,
            topic,
        })
    }

    /// The offset tracker, which run tasks complete their offsets in.
    pub(super) fn tracker(&self) -> Arc<Mutex<OffsetTracker>> {
        Arc::clone(&self.tracker)
    }

    /// The trigger topic.
    pub(super) fn topic(&self) -> &str {
        &self.topic
    }

    /// The next record, tracked as in flight (not one read again before its partition's
    /// committed offset, on tansu: see the module docs).
    pub(super) async fn recv(&self) -> Result<OwnedMessage, KafkaError> {
        let resume = &self.consumer.context().resume;
        let message = loop {
            let message = self.consumer.recv().await?;
            if resume.admits(message.partition(), message.offset()) {
                break message.detach();
            }
        };
        self.tracker
            .lock()
            .expect("offset tracker lock")
            .track(message.partition(), message.offset());
        Ok(message)
    }

    /// Commits what is committable, without waiting; a failed commit is retried with the next.
    pub(super) fn commit(&self) {
        let ready = self
            .tracker
            .lock()
            .expect("offset tracker lock")
            .take_committable();
        if let Some(offsets) = offset_list(&self.topic, &ready)
            && let Err(error) = self.consumer.commit(&offsets, CommitMode::Async)
        {
            tracing::warn!(%error, "cannot commit offsets; they will be committed with the next ones");
        }
    }

    /// Commits and leaves the group, which hands the partitions to the other executors at
    /// once; gives up on a clean close after `limit`.
    pub(super) async fn leave(self, limit: Duration) {
        self.commit();
        close_consumer(self.consumer, "triggers", limit).await;
    }
}

/// The trigger consumer's librdkafka settings over the user's.
fn client_config(settings: &ExecutorSettings) -> ClientConfig {
    let group = settings.group();
    // A production group runs what was emitted before it joined; a shadow group only what
    // comes after it (see the module docs).
    let reset = if settings.shadow {
        "latest"
    } else {
        "earliest"
    };
    let mut defaults = vec![
        ("group.id", group.as_str()),
        ("group.protocol", settings.group_protocol.as_str()),
        ("client.id", &settings.executor_id),
        ("enable.auto.commit", "false"),
        ("enable.auto.offset.store", "false"),
        ("auto.offset.reset", reset),
        // The client's statistics carry each partition's lag, for the metrics.
        ("statistics.interval.ms", "5000"),
        // A fetch is answered as soon as one record is there.
        ("fetch.min.bytes", "1"),
    ];
    // Kafka answers that fetch as soon as a record arrives, so librdkafka's `fetch.wait.max.ms`
    // (500 ms) bounds only idle fetches. tansu 0.6 holds every fetch for its whole wait (half
    // of it past 250 ms), which kept each trigger 0.25–0.5 s at the broker: a trigger sent
    // without the emit lead (manual runs, retries) started that much later. There the wait
    // is 10 ms, at the cost of ~100 small requests a second per idle executor.
    if settings.kafka.broker_kind == BrokerKind::Tansu {
        defaults.push(("fetch.wait.max.ms", "10"));
    }
    let session_timeout = settings.session_timeout.as_millis().to_string();
    // Heartbeats at a tenth of the session timeout (librdkafka's default is 3 s): a member
    // learns of a rebalance at its next heartbeat, and one that rejoins after the round closed
    // starts another. On the development broker (tansu) three executors starting together kept
    // passing partitions round among themselves for minutes with 3 s heartbeats, leaving one
    // partition unowned (seen in the routing tests); with 1 s they settle.
    let heartbeat_interval = (settings.session_timeout.as_millis() / 10)
        .clamp(100, 3_000)
        .to_string();
    // Under the consumer protocol the broker keeps the session and the heartbeat, and
    // librdkafka refuses a consumer that sets either.
    if settings.group_protocol == GroupProtocol::Classic {
        defaults.push(("session.timeout.ms", &session_timeout));
        defaults.push(("heartbeat.interval.ms", &heartbeat_interval));
        // Named, not left to the client's default: the members of a classic group must share
        // an assignor, and the executors of an app may be of different SDKs (librdkafka's
        // default list is `range,roundrobin`, the Java client's `range,cooperative-sticky`).
        // PROTOCOL.md section 1 names `range` for every executor.
        defaults.push(("partition.assignment.strategy", "range"));
    }
    settings.kafka.client_config_with(&defaults)
}

/// Commits the revoked partitions' offsets before the group moves them, and keeps the
/// assignment the beats report.
struct ExecutorContext {
    tracker: Arc<Mutex<OffsetTracker>>,
    topic: String,
    assignment: Assignment,
    running: RunningRuns,
    rebalance_timeout: Duration,
    metrics: Arc<ExecutorMetrics>,
    /// A shadow's: the start in a partition new to the group is its end, committed at
    /// assignment.
    starts_at_end: bool,
    /// Where assigned partitions resume (a detour on tansu, see the module docs).
    resume: ResumePoints,
}

impl ClientContext for ExecutorContext {
    /// Sets the lag gauge of every partition this executor consumes; the client reports
    /// `-1` for a partition it does not (the gauge is then removed).
    fn stats(&self, statistics: Statistics) {
        for (partition, lag) in kadence_kafka::partition_lags(&statistics, &self.topic) {
            self.metrics.record_lag(partition, lag);
        }
    }
}

impl ConsumerContext for ExecutorContext {
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
            self.rebalance_timeout,
        );
    }

    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(revoked) => self.revoke(consumer, &partitions(revoked)),
            Rebalance::Assign(assigned) => {
                let partitions = partitions(assigned);
                self.metrics
                    .rebalances
                    .with_label_values(&["assigned"])
                    .inc();
                if self.starts_at_end {
                    self.commit_ends(consumer, &partitions);
                }
                tracing::info!(?partitions, "partitions assigned");
                self.assignment.assign(&partitions);
            }
            Rebalance::Error(_) => {}
        }
    }
}

impl ExecutorContext {
    fn revoke(&self, consumer: &BaseConsumer<Self>, partitions: &[i32]) {
        // Lost, not revoked: this member's session expired and the group gave the partitions
        // to others, which may be running the same triggers already. Their runs are handed
        // back at once, and nothing is committed for them (the group has moved on, and would
        // refuse the commit).
        let lost = consumer.assignment_lost();
        let wait = if lost {
            Duration::ZERO
        } else {
            self.rebalance_timeout
        };
        // Finish or hand back their runs before the offsets are committed (see `handoff`).
        let handed_back = self.running.finish_or_hand_back(partitions, wait);
        self.metrics
            .rebalances
            .with_label_values(&["revoked"])
            .inc();
        self.metrics.hand_backs.inc_by(handed_back as u64);
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
            .release(partitions);
        tracing::info!(?partitions, lost, "partitions revoked");
        self.assignment.revoke(partitions);
        self.resume.forget(partitions);
        if !lost
            && let Some(offsets) = offset_list(&self.topic, &released)
            && let Err(error) = consumer.commit(&offsets, CommitMode::Sync)
        {
            tracing::warn!(%error, "cannot commit offsets of revoked partitions");
        }
    }

    /// Commits the end of each of `partitions` that has no committed offset in the group, so
    /// that the group starts there (see the module docs). On a failure the client's own reset
    /// to the end still applies, only later: logged, not fatal.
    fn commit_ends(&self, consumer: &BaseConsumer<Self>, partitions: &[i32]) {
        let timeout = self.rebalance_timeout;
        let mut wanted = TopicPartitionList::new();
        for &partition in partitions {
            wanted.add_partition(&self.topic, partition);
        }
        let committed = match consumer.committed_offsets(wanted, timeout) {
            Ok(committed) => committed,
            Err(error) => {
                return tracing::warn!(%error, "cannot read the shadow group's offsets; it starts where the client finds the end");
            }
        };
        let mut ends = TopicPartitionList::new();
        for element in committed.elements() {
            if element.offset() != Offset::Invalid {
                continue;
            }
            let partition = element.partition();
            match consumer.fetch_watermarks(&self.topic, partition, timeout) {
                Ok((_, high)) => {
                    let _ = ends.add_partition_offset(&self.topic, partition, Offset::Offset(high));
                }
                Err(error) => {
                    tracing::warn!(%error, partition, "cannot find the end of a partition for the shadow group");
                }
            }
        }
        if ends.count() == 0 {
            return;
        }
        match consumer.commit(&ends, CommitMode::Sync) {
            Ok(()) => {
                tracing::info!(starts = ?ends.to_topic_map(), "shadow group starts at the end of its new partitions")
            }
            Err(error) => tracing::warn!(%error, "cannot commit the shadow group's start"),
        }
    }
}

fn partitions(list: &TopicPartitionList) -> Vec<i32> {
    list.elements().iter().map(|e| e.partition()).collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ExecutorBuilder, JobContext, JobResult};

    async fn ok(_ctx: JobContext) -> JobResult {
        Ok(())
    }

    fn settings(protocol: GroupProtocol, builder: ExecutorBuilder) -> ExecutorSettings {
        builder
            .brokers("127.0.0.1:9")
            .app("billing")
            .executor_id("billing-1")
            .session_timeout(Duration::from_secs(6))
            .rebalance_timeout(Duration::from_secs(3))
            .group_protocol(protocol)
            .handler("ok", ok)
            .build()
            .expect("valid settings")
            .settings
    }

    /// The settings both protocols share, with the group's and the client's names.
    const SHARED: [(&str, &str); 8] = [
        ("bootstrap.servers", "127.0.0.1:9"),
        ("group.id", "kadence.executor.billing"),
        ("client.id", "billing-1"),
        ("enable.auto.commit", "false"),
        ("enable.auto.offset.store", "false"),
        ("auto.offset.reset", "earliest"),
        ("statistics.interval.ms", "5000"),
        ("fetch.min.bytes", "1"),
    ];

    #[test]
    fn the_classic_protocol_sets_the_session_timeout_and_heartbeat() {
        let config = client_config(&settings(
            GroupProtocol::Classic,
            ExecutorBuilder::default()
                .allow_unverified()
                .allow_unsigned(),
        ));
        let mut expected = std::collections::BTreeMap::from(SHARED);
        expected.insert("group.protocol", "classic");
        expected.insert("session.timeout.ms", "6000");
        expected.insert("heartbeat.interval.ms", "600");
        expected.insert("partition.assignment.strategy", "range");
        assert_eq!(config.config_map(), expected);
    }

    #[test]
    fn the_consumer_protocol_leaves_the_session_and_heartbeat_to_the_broker() {
        let config = client_config(&settings(
            GroupProtocol::Consumer,
            ExecutorBuilder::default()
                .allow_unverified()
                .allow_unsigned(),
        ));
        let mut expected = std::collections::BTreeMap::from(SHARED);
        expected.insert("group.protocol", "consumer");
        assert_eq!(config.config_map(), expected);
        for refused in [
            "session.timeout.ms",
            "heartbeat.interval.ms",
            "partition.assignment.strategy",
            "group.protocol.type",
        ] {
            assert_eq!(config.get(refused), None, "{refused} is set");
        }
    }

    #[test]
    fn librdkafka_takes_the_config_of_either_protocol() {
        // librdkafka checks a consumer's settings when it creates one, before it connects
        // (nothing listens on port 9): under the consumer protocol it refuses
        // `session.timeout.ms` and `heartbeat.interval.ms`.
        for protocol in [GroupProtocol::Classic, GroupProtocol::Consumer] {
            let config = client_config(&settings(
                protocol,
                ExecutorBuilder::default()
                    .allow_unverified()
                    .allow_unsigned(),
            ));
            if let Err(error) = config.create::<BaseConsumer>() {
                panic!("librdkafka refuses the {protocol} config: {error}");
            }
        }
        let mut classic_leftover = client_config(&settings(
            GroupProtocol::Consumer,
            ExecutorBuilder::default()
                .allow_unverified()
                .allow_unsigned(),
        ));
        classic_leftover.set("session.timeout.ms", "6000");
        let refusal = classic_leftover
            .create::<BaseConsumer>()
            .err()
            .expect("librdkafka refuses a session timeout under the consumer protocol");
        assert!(
            refusal.to_string().contains("session.timeout.ms"),
            "{refusal}"
        );
    }

    #[test]
    fn only_tansu_gets_the_short_fetch_wait() {
        let on_kafka = client_config(&settings(
            GroupProtocol::Classic,
            ExecutorBuilder::default()
                .allow_unverified()
                .allow_unsigned(),
        ));
        assert_eq!(
            on_kafka.get("fetch.wait.max.ms"),
            None,
            "librdkafka's default"
        );
        let on_tansu = client_config(&settings(
            GroupProtocol::Classic,
            ExecutorBuilder::default()
                .allow_unverified()
                .allow_unsigned()
                .broker_kind(BrokerKind::Tansu),
        ));
        assert_eq!(on_tansu.get("fetch.wait.max.ms"), Some("10"));
    }

    #[test]
    fn raw_options_still_override_the_classic_defaults() {
        let builder = ExecutorBuilder::default()
            .allow_unverified()
            .allow_unsigned()
            .kafka_option("session.timeout.ms", "30000");
        let config = client_config(&settings(GroupProtocol::Classic, builder));
        assert_eq!(config.get("session.timeout.ms"), Some("30000"));
        assert_eq!(config.get("heartbeat.interval.ms"), Some("600"));
    }
}
