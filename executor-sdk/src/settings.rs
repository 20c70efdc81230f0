//! [`ExecutorSettings`]: what a built executor runs with, checked once by the builder and
//! read by the parts that run it (consumer, publisher, beats). The handlers, scripts included,
//! are the [`Registry`](crate::handler::Registry)'s. [`GroupProtocol`] is the one setting with
//! a type of its own, because it changes which other client settings the group consumer may
//! carry.

use std::time::Duration;

use kadence_kafka::{ExecutorKey, KafkaSettings, RunTracer, TrustedKeys};
use kadence_schemas::{AppName, Topics};

/// Settings of a built executor (each documented, with its default, on the
/// [`ExecutorBuilder`](crate::ExecutorBuilder) method that sets it).
#[derive(Clone)]
pub(crate) struct ExecutorSettings {
    /// The brokers and the user's raw librdkafka options (see
    /// [`ExecutorBuilder::kafka_option`](crate::ExecutorBuilder::kafka_option)).
    pub(crate) kafka: KafkaSettings,
    pub(crate) app: AppName,
    pub(crate) topics: Topics,
    /// The scheduler keys whose signatures are accepted; empty: records are not verified.
    pub(crate) trusted_keys: TrustedKeys,
    /// The key every record this executor writes is signed with; `None` when it runs
    /// unsigned ([`crate::ExecutorBuilder::allow_unsigned`]).
    pub(crate) executor_key: Option<ExecutorKey>,
    pub(crate) executor_id: String,
    pub(crate) session_timeout: Duration,
    /// How the trigger consumer joins its group (see [`GroupProtocol`]).
    pub(crate) group_protocol: GroupProtocol,
    pub(crate) max_in_flight: usize,
    pub(crate) max_concurrent_per_job: usize,
    pub(crate) drain_timeout: Duration,
    pub(crate) commit_interval: Duration,
    pub(crate) beat_interval: Duration,
    pub(crate) max_log_lines: usize,
    pub(crate) rebalance_timeout: Duration,
    pub(crate) kill_memory: Duration,
    /// Where `GET /metrics` is served; `None`: not served.
    pub(crate) metrics_address: Option<std::net::SocketAddr>,
    /// Starts the executor's spans of each run; exports them when an OTLP endpoint is set.
    pub(crate) tracer: RunTracer,
    /// Whether an OTLP endpoint is set: without one, runs make no spans, only ids.
    pub(crate) exports_spans: bool,
    /// A shadow executor (see [`ExecutorBuilder::shadow`](crate::ExecutorBuilder::shadow)):
    /// its own group, results to `{prefix}.shadow-results`, no beats, logs or dead letters.
    pub(crate) shadow: bool,
    /// What the beats say in place of the executor's own beat, when something fronts others
    /// (see [`BeatPlan`](crate::BeatPlan)).
    pub(crate) beat_plan: Option<std::sync::Arc<dyn crate::BeatPlan>>,
}

impl ExecutorSettings {
    /// The consumer group this executor joins: `{prefix}.executor.{app}`, or
    /// `{prefix}.shadow.{app}` for a shadow executor.
    pub(crate) fn group(&self) -> String {
        if self.shadow {
            self.topics.shadow_group(&self.app)
        } else {
            self.topics.executor_group(&self.app)
        }
    }

    /// Where results go: `{prefix}.results`, or `{prefix}.shadow-results` for a shadow
    /// executor (whose results complete nothing).
    pub(crate) fn results_topic(&self) -> String {
        if self.shadow {
            self.topics.shadow_results()
        } else {
            self.topics.results()
        }
    }
}

/// The consumer group protocol the executor joins its group with (librdkafka's
/// `group.protocol`), set with
/// [`ExecutorBuilder::group_protocol`](crate::ExecutorBuilder::group_protocol).
///
/// Either runs triggers the same way: the same group, the same commit rule, the same
/// hand-back of revoked partitions' runs. They differ in who keeps the member alive and in
/// how partitions move:
///
/// - [`Classic`](Self::Classic): the client chooses its session timeout (the builder's
///   [`session_timeout`](crate::ExecutorBuilder::session_timeout)) and heartbeats at a tenth
///   of it; a rebalance stops the whole group, takes every partition from every member and
///   hands them out again (eager), unless the raw option `partition.assignment.strategy` names
///   `cooperative-sticky`.
/// - [`Consumer`](Self::Consumer) (Kafka's KIP-848 protocol, Apache Kafka 4.0 and later): the
///   broker keeps the session and the heartbeat, with its `group.consumer.session.timeout.ms`
///   and `group.consumer.heartbeat.interval.ms` (45 s and 5 s unless the broker or the group's
///   dynamic configuration says otherwise), and assigns the partitions itself (the raw
///   option `group.remote.assignor` may name its assignor). A rebalance is incremental: only the partitions that move are
///   revoked from their old owner and then assigned to the new one, and every member keeps
///   consuming the rest meanwhile. The broker must offer the protocol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GroupProtocol {
    /// Kafka's original group protocol (JoinGroup/SyncGroup); every Kafka-compatible broker
    /// offers it. The default.
    #[default]
    Classic,
    /// Kafka's consumer group protocol of KIP-848 (ConsumerGroupHeartbeat): session,
    /// heartbeat and assignment are the broker's.
    Consumer,
}

impl GroupProtocol {
    /// The value of librdkafka's `group.protocol`: `classic` or `consumer`.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupProtocol::Classic => "classic",
            GroupProtocol::Consumer => "consumer",
        }
    }
}

impl std::fmt::Display for GroupProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for GroupProtocol {
    type Err = crate::ExecutorError;

    /// `classic` or `consumer`, as librdkafka spells them.
    fn from_str(text: &str) -> Result<GroupProtocol, crate::ExecutorError> {
        match text {
            "classic" => Ok(GroupProtocol::Classic),
            "consumer" => Ok(GroupProtocol::Consumer),
            other => Err(crate::ExecutorError::Config(format!(
                "unknown group protocol {other:?}: use \"classic\" or \"consumer\""
            ))),
        }
    }
}

impl ExecutorSettings {
    /// Logs the start, and an error when nothing is verified or signed (the builder allowed it).
    pub(crate) fn announce_start(&self, handlers: usize, topic: &str) {
        let executor_key = self.executor_key.as_ref().map(|key| key.key_id());
        tracing::info!(executor_id = %self.executor_id, topic, group = self.group(),
            shadow = self.shadow, handlers,
            trusted_keys = ?self.trusted_keys.key_ids(), executor_key, "executor started");
        if executor_key.is_none() {
            tracing::error!(
                "RUNNING UNSIGNED (ExecutorBuilder::allow_unsigned): no executor key, so results, \
                 log lines and beats go unsigned, and a scheduler that requires executor \
                 signatures (its default) refuses them"
            );
        }
        if self.trusted_keys.is_empty() {
            tracing::error!(
                topic,
                "RUNNING UNVERIFIED (ExecutorBuilder::allow_unverified): no trusted scheduler key, \
                 so triggers and control records are not verified, and whoever can write these \
                 topics runs and kills handlers here"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_protocols_parse_as_librdkafka_spells_them() {
        for protocol in [GroupProtocol::Classic, GroupProtocol::Consumer] {
            assert_eq!(
                protocol.as_str().parse::<GroupProtocol>().unwrap(),
                protocol
            );
            assert_eq!(protocol.to_string(), protocol.as_str());
        }
        assert_eq!(GroupProtocol::default(), GroupProtocol::Classic);
        let unknown = "Consumer".parse::<GroupProtocol>().unwrap_err().to_string();
        assert_eq!(
            unknown,
            "invalid executor configuration: unknown group protocol \"Consumer\": use \"classic\" or \"consumer\""
        );
    }
}
