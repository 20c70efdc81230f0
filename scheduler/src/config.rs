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

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use kadence_kafka::settings::BrokerKind;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

mod alarm;
mod api;
mod auth;
mod metrics;
mod networks;

pub use alarm::{AlarmConfig, SmtpTls, WebhookNetworks};
pub use api::{ApiConfig, TrustedProxies};
pub use auth::AuthConfig;
pub use metrics::MetricsConfig;
pub use networks::IpNetworks;

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
    /// The keys triggers and control records are signed with (see [`crate::signer`]).
    pub signing: crate::signer::SigningConfig,
    /// Whether executors must sign what they write (see [`crate::executor_auth`]).
    pub executor_auth: crate::executor_auth::ExecutorAuthConfig,
    /// Trace export and per-job metrics (see [`crate::traces`]).
    pub telemetry: crate::traces::TelemetryConfig,
    /// Replays and backfills (see [`crate::replay`]).
    pub replay: crate::replay::ReplayConfig,
    /// Who may read `/metrics`: a listen address of its own, a token.
    pub metrics: MetricsConfig,
}

/// The scheduler's database.
///
/// The node opens three connection pools on it, so that no kind of work can take the
/// connections another needs: `scheduling_connections` for the loops that make fires happen on
/// time (pre-read, acknowledgements, claims, cancellations, results), `background_connections`
/// for the rest of the node's own work (executor beats, log lines, follow-ups, reports,
/// retention, lost runs) and `api_connections` for HTTP requests. However many clients call
/// the API, the scheduling loops keep their connections; an API request that cannot get one
/// within `api_acquire_timeout` is answered 503 with `Retry-After`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite://FILE` (created if missing), `postgres://…`, or `mysql://…` (MySQL 8,
    /// MariaDB 10.11+; `mariadb://…` is taken too). Default `sqlite://kadence.db`.
    #[serde(skip_serializing)]
    pub url: SecretString,
    /// Connections of the scheduling loops (pre-read, acknowledgements, claims,
    /// cancellations, results). Default 5: one per loop, so none waits for another.
    pub scheduling_connections: u32,
    /// Connections of the node's other loops (beats, log lines, follow-ups, reports,
    /// retention, lost runs). Default 4.
    pub background_connections: u32,
    /// Connections of the HTTP API. Default 8.
    pub api_connections: u32,
    /// How long an API request waits for a connection before it is answered 503 (busy, retry
    /// later). Default `3s`.
    #[serde(with = "humantime_serde")]
    pub api_acquire_timeout: Duration,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: SecretString::from("sqlite://kadence.db"),
            scheduling_connections: 5,
            background_connections: 4,
            api_connections: 8,
            api_acquire_timeout: Duration::from_secs(3),
        }
    }
}

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

/// The scheduling loops.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// Schedule shards the jobs are spread over (see the `shards` module): nodes share them
    /// evenly, each scanning only its own. Read when the first node starts on a database and
    /// fixed from then on (a node configured otherwise logs a warning and uses the
    /// database's number). More shards than nodes you will ever run; 1 to 1024. Default 16.
    pub shards: u32,
    /// How long after its fire time a pending fire stays owned by the node that wrote it before
    /// another node may claim it. Default `10s`: long enough to ride out a broker hiccup
    /// without duplicates, short enough that a crash delays fires by seconds, not minutes.
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
    /// How long a node owns its schedule shards unrenewed (it renews every third of it): a
    /// dead node's shards are taken over within 4/3 of it, its fires then late by at most
    /// that minus the read-ahead, never missed (`shards::check_shard_lease`). Default `5s`.
    #[serde(with = "humantime_serde")]
    pub shard_lease: Duration,
    /// Pause between claim passes. Default `2s`.
    #[serde(with = "humantime_serde")]
    pub claim_interval: Duration,
    /// Trigger deliveries awaiting broker acknowledgement at most. Default 10000.
    pub max_in_flight: usize,
    /// How long shutdown waits for deliveries in flight. Default `10s`.
    #[serde(with = "humantime_serde")]
    pub drain_timeout: Duration,
    /// How long before its fire time a trigger is produced; executors hold it until its
    /// scheduled time, so runs start on their millisecond even when thousands are due on the
    /// same second (see the book's benchmarks page). Default `1s`. `0s` produces at the fire
    /// time, for executors that do not hold early triggers (every Kadence SDK does).
    #[serde(with = "humantime_serde")]
    pub emit_lead: Duration,
    /// How often every node reads the fires that stops and schedule edits on other nodes
    /// cancelled, so that it does not emit its copies of them. A fire planned before a stop
    /// and due later than `emit_lead` + this after it is never emitted. Default `250ms`.
    #[serde(with = "humantime_serde")]
    pub cancel_poll_interval: Duration,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            node_id: None,
            pre_read_window: Duration::from_secs(5),
            pre_read_interval: Duration::from_secs(1),
            batch_size: 1000,
            shards: 16,
            lease: Duration::from_secs(10),
            shard_lease: Duration::from_secs(5),
            claim_interval: Duration::from_secs(2),
            max_in_flight: 10_000,
            drain_timeout: Duration::from_secs(10),
            emit_lead: Duration::from_secs(1),
            cancel_poll_interval: Duration::from_millis(250),
        }
    }
}

/// The executor registry (see [`crate::registry`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RegistryConfig {
    /// An executor whose latest beat is older than this is dead: FAILOVER and BUSYOVER stop
    /// routing to its partitions and the lost-run monitor may fail its runs. Default `10s`:
    /// executors beat every 3 s, so two lost beats are tolerated, and it is well under Kafka's
    /// default consumer session timeout (45 s), so FAILOVER moves triggers away from a crashed
    /// executor long before the group rebalances its partitions.
    #[serde(with = "humantime_serde")]
    pub dead_timeout: Duration,
    /// Pause between sweeps that mark dead executors in the database. Default `2s`.
    #[serde(with = "humantime_serde")]
    pub sweep_interval: Duration,
    /// How long a dead executor stays listed before it is deleted. Default `1h`.
    #[serde(with = "humantime_serde")]
    pub forget_after: Duration,
    /// A run still unfinished this long after dispatch, whose executor is dead and which no
    /// live executor reports running or queued, is failed as lost. Default `10m` (XXL-JOB's).
    #[serde(with = "humantime_serde")]
    pub lost_run_after: Duration,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            dead_timeout: Duration::from_secs(10),
            sweep_interval: Duration::from_secs(2),
            forget_after: Duration::from_secs(3600),
            lost_run_after: Duration::from_secs(600),
        }
    }
}

/// Job logs (see [`crate::logs`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogsConfig {
    /// Lines stored per run at most; later lines are dropped. Default 10 000 (the executor SDK
    /// keeps as many by default and says so in a last line when it cuts).
    pub max_lines_per_run: i64,
}

impl Default for LogsConfig {
    fn default() -> Self {
        LogsConfig {
            max_lines_per_run: 10_000,
        }
    }
}

/// The follow-up monitor (see [`crate::monitors::follow_up`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MonitorConfig {
    /// Pause between follow-up steps when there is nothing to do. Default `500ms`.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// How long a node holds a claimed run before another may take it over (it died, or an
    /// alarm server hangs). Keep it well above `alarm.timeout`: a claimed failed run's alarm
    /// takes up to that, and a claim that expires first has its alarm sent again. Default
    /// `1m`.
    #[serde(with = "humantime_serde")]
    pub lock: Duration,
    /// Runs followed up per step at most, and alarms in delivery at once at most (see
    /// [`crate::monitors::follow_up`]). Default 200.
    pub batch_size: u32,
    /// Pause between recounts of the daily reports. Default `1m`.
    #[serde(with = "humantime_serde")]
    pub report_interval: Duration,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            interval: Duration::from_millis(500),
            lock: Duration::from_secs(60),
            batch_size: 200,
            report_interval: Duration::from_secs(60),
        }
    }
}

/// Retention (see [`crate::monitors::retention`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// Finished runs, their log lines and report rows older than this many days are deleted.
    /// Default 30 (XXL-JOB's `logretentiondays`).
    pub days: u32,
    /// Pause between retention passes. Default `1h`.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Rows deleted per transaction. Default 1000.
    pub batch_size: u32,
    /// Batches of each kind per retention pass at most (the next pass goes on). Default 100.
    /// The drop of unkept runs is not capped by it but by time (half of
    /// `monitors.report_interval`): see [`crate::monitors::retention`].
    pub max_batches: u32,
    /// How long a finished run that its job's history policy does not keep (FAILURES, NONE)
    /// stays before it is counted and dropped, with the report recount every
    /// `monitors.report_interval`: long enough that a result delivered again is still
    /// recognised as a repeat. Default `10m`.
    #[serde(with = "humantime_serde")]
    pub unkept_runs_for: Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            days: 30,
            interval: Duration::from_secs(3600),
            batch_size: 1000,
            max_batches: 100,
            unkept_runs_for: Duration::from_secs(600),
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
mod tests;
