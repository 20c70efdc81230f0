//! The `[kafka]` section: the Kafka cluster and Kadence's topics on it.

use std::collections::BTreeMap;
use std::time::Duration;

use kadence_kafka::settings::BrokerKind;
use serde::{Deserialize, Serialize};

/// The Kafka cluster and Kadence's topics on it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaConfig {
    /// Bootstrap servers, comma separated. Default `127.0.0.1:9092`.
    pub brokers: String,
    /// Which broker that is: `kafka` (Apache Kafka and brokers with its semantics, the
    /// default) or `tansu` (the development broker; its readers then resume partitions by a
    /// detour, see `kadence_kafka::resume`).
    pub broker_kind: BrokerKind,
    /// Prefix of every topic and group id. Default `kadence`.
    pub topic_prefix: String,
    /// Partitions of `{prefix}.results` and `{prefix}.logs` when Kadence creates them.
    /// Default 6.
    pub results_partitions: i32,
    /// Consumer group session timeout. Default `10s`.
    #[serde(with = "humantime_serde")]
    pub session_timeout: Duration,
    /// Raw librdkafka options for every client (security, tuning). Default none. Never logged.
    pub options: BTreeMap<String, String>,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        KafkaConfig {
            brokers: "127.0.0.1:9092".to_owned(),
            broker_kind: BrokerKind::Kafka,
            topic_prefix: kadence_schemas::topics::DEFAULT_PREFIX.to_owned(),
            results_partitions: 6,
            session_timeout: Duration::from_secs(10),
            options: BTreeMap::new(),
        }
    }
}
