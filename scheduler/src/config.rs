//! Typed configuration for `kadence serve`.
//!
//! Layers, later wins: built-in defaults, then a TOML file (`--config`, optional), then the
//! environment: `KADENCE_<SECTION>__<FIELD>` (double underscore between section and field),
//! e.g. `KADENCE_DATABASE__URL`, `KADENCE_KAFKA__BROKERS`, `KADENCE_SCHEDULE__PRE_READ_WINDOW=5s`.
//! Unknown fields are an error (a typo must not silently fall back to a default). Durations
//! are written like `500ms`, `5s`, `2m`. The database URL is a secret: it is never logged.
//!
//! ```toml
//! [database]
//! url = "sqlite://kadence.db"        # or postgres://user:pass@host/db
//! [kafka]
//! brokers = "127.0.0.1:9092"
//! [kafka.options]                    # raw librdkafka options for every client
//! "security.protocol" = "SASL_SSL"
//! [api]
//! listen = "127.0.0.1:8080"
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use secrecy::SecretString;
use serde::Deserialize;

/// Everything `kadence serve` needs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The scheduler's database.
    pub database: DatabaseConfig,
    /// The Kafka cluster and topics.
    pub kafka: KafkaConfig,
    /// The HTTP API.
    pub api: ApiConfig,
    /// The pre-read loop, wheel, dispatch and claims.
    pub schedule: ScheduleConfig,
}

/// The scheduler's database.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite://FILE` (created if missing) or `postgres://…`. Default `sqlite://kadence.db`.
    pub url: SecretString,
    /// Connection pool size. Default 8.
    pub max_connections: u32,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: SecretString::from("sqlite://kadence.db"),
            max_connections: 8,
        }
    }
}

/// The Kafka cluster and Kadence's topics on it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaConfig {
    /// Bootstrap servers, comma separated. Default `127.0.0.1:9092`.
    pub brokers: String,
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
            topic_prefix: kadence_schemas::topics::DEFAULT_PREFIX.to_owned(),
            results_partitions: 6,
            session_timeout: Duration::from_secs(10),
            options: BTreeMap::new(),
        }
    }
}

/// The HTTP API.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// Listen address. Default `127.0.0.1:8080`.
    pub listen: SocketAddr,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
        }
    }
}

/// The scheduling loops.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScheduleConfig {
    /// This node's id, owner of the fires it writes. Default: host name, process id and a
    /// random suffix, so a restarted process never mistakes its predecessor's fires for its own.
    pub node_id: Option<String>,
    /// How far ahead the pre-read loop writes fires. Default `5s` (XXL-JOB's value).
    #[serde(with = "humantime_serde")]
    pub pre_read_window: Duration,
    /// Pause between pre-read scans. Default `1s`.
    #[serde(with = "humantime_serde")]
    pub pre_read_interval: Duration,
    /// Jobs read per scan at most. Default 1000.
    pub batch_size: u32,
    /// How long after its fire time a pending fire stays owned by the node that wrote it before
    /// another node may claim it. Default `10s`: long enough to ride out a broker hiccup
    /// without duplicates, short enough that a crash delays fires by seconds, not minutes.
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
    /// Pause between claim passes. Default `2s`.
    #[serde(with = "humantime_serde")]
    pub claim_interval: Duration,
    /// Trigger deliveries awaiting broker acknowledgement at most. Default 10000.
    pub max_in_flight: usize,
    /// How long shutdown waits for deliveries in flight. Default `10s`.
    #[serde(with = "humantime_serde")]
    pub drain_timeout: Duration,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            node_id: None,
            pre_read_window: Duration::from_secs(5),
            pre_read_interval: Duration::from_secs(1),
            batch_size: 1000,
            lease: Duration::from_secs(10),
            claim_interval: Duration::from_secs(2),
            max_in_flight: 10_000,
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(#[from] Box<figment::Error>);

impl Config {
    /// Loads defaults, then `file` (if given), then `KADENCE_<SECTION>__<FIELD>` variables.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let mut figment = Figment::new();
        if let Some(file) = file {
            figment = figment.merge(Toml::file_exact(file));
        }
        // Only nested variables are settings: single-level ones such as KADENCE_API_URL
        // belong to the CLI and the scripts.
        figment = figment.merge(
            Env::prefixed("KADENCE_")
                .filter(|key| key.as_str().contains("__"))
                .split("__"),
        );
        figment
            .extract()
            .map_err(|error| ConfigError(Box::new(error)))
    }
}

#[cfg(test)]
// figment's `Jail` closures return `figment::Error`, which is large; that is its API.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    #[test]
    fn file_then_environment_with_typed_durations() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "kadence.toml",
                r#"
                [database]
                url = "postgres://kadence:hunter2@db/kadence"
                [schedule]
                pre_read_window = "3s"
                batch_size = 50
                "#,
            )?;
            jail.set_env("KADENCE_KAFKA__BROKERS", "b1:9092,b2:9092");
            jail.set_env("KADENCE_SCHEDULE__LEASE", "1m");
            jail.set_env("KADENCE_API_URL", "http://ignored"); // the CLI's, not a setting
            let config = Config::load(Some(Path::new("kadence.toml"))).expect("loads");
            assert_eq!(config.schedule.pre_read_window, Duration::from_secs(3));
            assert_eq!(config.schedule.batch_size, 50);
            assert_eq!(config.schedule.lease, Duration::from_secs(60));
            assert_eq!(config.kafka.brokers, "b1:9092,b2:9092");
            assert_eq!(config.kafka.topic_prefix, "kadence");
            assert!(
                config
                    .database
                    .url
                    .expose_secret()
                    .starts_with("postgres://")
            );
            assert!(
                !format!("{config:?}").contains("hunter2"),
                "secrets never in Debug"
            );
            Ok(())
        });
    }

    #[test]
    fn unknown_fields_are_refused() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("kadence.toml", "[schedule]\npre_read_windw = \"3s\"\n")?;
            let error = Config::load(Some(Path::new("kadence.toml"))).unwrap_err();
            assert!(error.to_string().contains("pre_read_windw"), "{error}");
            Ok(())
        });
    }
}
