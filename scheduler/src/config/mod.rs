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
//! url = "sqlite://kadence.db"        # or postgres://user:pass@host/db, mysql://user:pass@host/db
//! [kafka]
//! brokers = "127.0.0.1:9092"
//! broker_kind = "kafka"              # or "tansu" (the development broker)
//! [kafka.options]                    # raw librdkafka options for every client
//! "security.protocol" = "SASL_SSL"
//! [api]
//! listen = "127.0.0.1:8080"
//! book_dir = "docs/book"             # serve the book at /docs/ (default: not served)
//! [metrics]
//! listen = "10.0.0.5:9464"           # /metrics here only (default: on the API's address)
//! ```

use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::{Deserialize, Serialize};

// Each section is a file of this folder named after its TOML table (`[schedule]` is
// `schedule.rs`), holding the section's struct, its defaults and the few helpers that read
// it; this file holds the root `Config` and its loading. A section never lives beside the
// code that reads it: configuration is read by every layer, so it depends on none of them.
// (These are comments, not module docs: the module docs are the configuration page's opening.)
mod alarm;
mod api;
mod auth;
mod database;
mod executor_auth;
mod kafka;
mod logs;
mod metrics;
mod monitors;
mod networks;
mod registry;
mod replay;
mod retention;
mod schedule;
mod signing;
mod telemetry;

pub use alarm::{AlarmConfig, SmtpTls, WebhookNetworks};
pub use api::{ApiConfig, TrustedProxies};
pub use auth::AuthConfig;
pub use database::{DatabaseConfig, names_postgres};
pub use executor_auth::ExecutorAuthConfig;
pub use kafka::KafkaConfig;
pub use logs::LogsConfig;
pub use metrics::MetricsConfig;
pub use monitors::MonitorConfig;
pub use networks::IpNetworks;
pub use registry::RegistryConfig;
pub use replay::ReplayConfig;
pub use retention::RetentionConfig;
pub use schedule::ScheduleConfig;
pub use signing::{SigningConfig, TriggerSignatures};
pub use telemetry::TelemetryConfig;

/// Everything `kadence serve` needs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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
    /// The executor registry built from beats.
    pub registry: RegistryConfig,
    /// Job logs (the lines runs write).
    pub logs: LogsConfig,
    /// Alarms for failed runs (e-mail, webhook).
    pub alarm: AlarmConfig,
    /// The follow-up monitor: retries, alarms, child jobs; and reports.
    pub monitors: MonitorConfig,
    /// How long runs, log lines and reports are kept.
    pub retention: RetentionConfig,
    /// Users and credentials.
    pub auth: AuthConfig,
    /// The keys triggers and control records are signed with (see [`crate::engine::signer`]).
    pub signing: SigningConfig,
    /// Whether executors must sign what they write (see [`crate::readers::executor_auth`]).
    pub executor_auth: ExecutorAuthConfig,
    /// Trace export and per-job metrics (see [`crate::traces`]).
    pub telemetry: TelemetryConfig,
    /// Replays and backfills (see [`crate::operations::replay`]).
    pub replay: ReplayConfig,
    /// Who may read `/metrics`: a listen address of its own, a token.
    pub metrics: MetricsConfig,
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
mod tests;
