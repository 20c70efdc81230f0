//! Client settings: the brokers, Kadence's defaults for each kind of client, then the
//! operator's raw librdkafka options, which win.

use std::collections::BTreeMap;

use crate::producer::KafkaProducer;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;

/// Which broker a Kadence process talks to, where that changes what its clients must do.
///
/// Kadence speaks the Kafka protocol and assumes Apache Kafka's semantics (Confluent, MSK and
/// Redpanda keep them). The development broker, tansu 0.6, departs from them in two ways a
/// client can work round, at a cost Kafka should not pay; `Tansu` turns those workarounds on:
/// - a consumer that resumes a partition at its group's committed offset is started up to
///   [`REWIND`](crate::resume::REWIND) records before it and drops those (tansu serves a
///   fetch that starts inside a record batch from the next batch, so a committed offset
///   inside a batch skipped the rest of it; see [`resume`](crate::resume));
/// - an executor's trigger fetch waits at most 10 ms (tansu holds every fetch for its whole
///   `fetch.wait.max.ms` even when records are there; Kafka answers as soon as one is, so
///   librdkafka's default of 500 ms costs it no latency and spares it ~100 idle fetches a
///   second per executor).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BrokerKind {
    /// Apache Kafka, or a broker with its semantics (the default).
    #[default]
    Kafka,
    /// tansu 0.6, the development stack's embedded broker.
    Tansu,
}

impl BrokerKind {
    /// `kafka` or `tansu`, as configuration and the environment spell it.
    pub fn name(self) -> &'static str {
        match self {
            BrokerKind::Kafka => "kafka",
            BrokerKind::Tansu => "tansu",
        }
    }
}

/// A broker kind that is neither `kafka` nor `tansu`.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown broker kind {0:?}: use kafka (Apache Kafka and brokers with its semantics) or tansu"
)]
pub struct UnknownBrokerKind(String);

impl std::str::FromStr for BrokerKind {
    type Err = UnknownBrokerKind;

    /// `kafka` (also when empty) or `tansu`, in any case.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "" | "kafka" => Ok(BrokerKind::Kafka),
            "tansu" => Ok(BrokerKind::Tansu),
            _ => Err(UnknownBrokerKind(text.to_owned())),
        }
    }
}

/// Connection settings for every Kafka client a Kadence process makes.
#[derive(Clone, Default)]
pub struct KafkaSettings {
    /// `bootstrap.servers`.
    pub brokers: String,
    /// Which broker that is, where its clients must behave differently ([`BrokerKind`]).
    pub broker_kind: BrokerKind,
    /// Raw librdkafka options applied to every client (the escape hatch: security, tuning).
    /// Never logged: it may hold credentials.
    pub options: BTreeMap<String, String>,
}

impl std::fmt::Debug for KafkaSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSettings")
            .field("brokers", &self.brokers)
            .field("broker_kind", &self.broker_kind)
            .field("options", &format_args!("<{} options>", self.options.len()))
            .finish()
    }
}

impl KafkaSettings {
    /// A client configuration with the brokers and the raw options.
    pub fn client_config(&self) -> ClientConfig {
        self.client_config_with(&[])
    }

    /// A client configuration with the brokers, Kadence's `defaults` for this client, then the
    /// raw options, which win: an operator can override any default.
    pub fn client_config_with(&self, defaults: &[(&str, &str)]) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.brokers);
        for (key, value) in defaults {
            config.set(*key, *value);
        }
        for (key, value) in &self.options {
            config.set(key, value);
        }
        config
    }

    /// An idempotent producer: retries inside librdkafka never duplicate or reorder records of
    /// a partition, and a record counts as sent only when every in-sync replica has it.
    /// `linger.ms` stays small because trigger and result latency matter more than batch size
    /// at the rates Kadence produces. A send that times out inside librdkafka (30 s) comes back
    /// as a retriable error for the caller's own retry loop.
    pub fn idempotent_producer(&self) -> Result<KafkaProducer, KafkaError> {
        KafkaProducer::new(&self.client_config_with(&[
            ("enable.idempotence", "true"),
            ("acks", "all"),
            ("linger.ms", "2"),
            ("message.timeout.ms", "30000"),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operators_options_override_kadence_defaults() {
        let settings = KafkaSettings {
            brokers: "b:9092".into(),
            broker_kind: BrokerKind::Kafka,
            options: BTreeMap::from([("linger.ms".into(), "20".into())]),
        };
        let config = settings.client_config_with(&[("linger.ms", "2"), ("acks", "all")]);
        assert_eq!(config.get("bootstrap.servers"), Some("b:9092"));
        assert_eq!(config.get("linger.ms"), Some("20"));
        assert_eq!(config.get("acks"), Some("all"));
    }

    #[test]
    fn options_are_not_printed() {
        let settings = KafkaSettings {
            brokers: "b:9092".into(),
            broker_kind: BrokerKind::Kafka,
            options: BTreeMap::from([("sasl.password".into(), "secret".into())]),
        };
        let printed = format!("{settings:?}");
        assert!(printed.contains("<1 options>") && !printed.contains("secret"));
    }
}
