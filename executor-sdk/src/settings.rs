//! [`ExecutorSettings`]: what a built executor runs with, checked once by the builder and
//! read by the parts that run it (consumer, publisher, beats). The handlers, scripts included,
//! are the [`Registry`](crate::handler::Registry)'s.

use std::time::Duration;

use kadence_kafka::{KafkaSettings, RunTracer, TrustedKeys};
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
    pub(crate) executor_id: String,
    pub(crate) session_timeout: Duration,
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
