//! The `[database]` section: the scheduler's database and its three connection pools.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

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

impl DatabaseConfig {
    /// Whether the URL names a PostgreSQL database.
    pub fn is_postgres(&self) -> bool {
        names_postgres(self.url.expose_secret())
    }
}

/// Whether a database URL names PostgreSQL (`postgres:` or `postgresql:`).
pub fn names_postgres(url: &str) -> bool {
    url.starts_with("postgres:") || url.starts_with("postgresql:")
}
