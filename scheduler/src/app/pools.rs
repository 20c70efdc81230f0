//! A node's database connections: [`StorePools`], one pool per kind of work, and
//! [`open_store`], the one way a URL (`sqlite:`, `postgres:` or `mysql:`) becomes a [`Store`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use secrecy::ExposeSecret;

use crate::config::{DatabaseConfig, names_postgres};
use crate::store::{MySqlStore, PoolSettings, PostgresStore, SqliteStore, Store};

/// Opens the store a database URL names (`sqlite:`, `postgres:`/`postgresql:` or
/// `mysql:`/`mariadb:`) with a pool
/// of `max_connections`, and brings its schema up to date.
pub async fn open_store(url: &str, max_connections: u32) -> anyhow::Result<Arc<dyn Store>> {
    let store = connect_store(url, PoolSettings::new(max_connections)).await?;
    store.migrate().await?;
    Ok(store)
}

/// Connects to the store a database URL names, without migrating.
async fn connect_store(url: &str, pool: PoolSettings) -> anyhow::Result<Arc<dyn Store>> {
    Ok(if url.starts_with("sqlite:") {
        Arc::new(SqliteStore::connect(url, pool).await?)
    } else if names_postgres(url) {
        Arc::new(PostgresStore::connect(url, pool).await?)
    } else if url.starts_with("mysql:") {
        Arc::new(MySqlStore::connect(url, pool).await?)
    } else if let Some(rest) = url.strip_prefix("mariadb:") {
        // MariaDB speaks MySQL's protocol; sqlx knows it by the `mysql:` scheme only.
        Arc::new(MySqlStore::connect(&format!("mysql:{rest}"), pool).await?)
    } else {
        anyhow::bail!(
            "unsupported database URL scheme: use sqlite://FILE, postgres://USER@HOST/DB \
             or mysql://USER@HOST/DB (MySQL 8, MariaDB 10.11+)"
        );
    })
}

/// A node's three connection pools on its database (see [`DatabaseConfig`]).
#[derive(Clone)]
pub struct StorePools {
    /// Pre-read, acknowledgements, claims, cancellations, results.
    pub scheduling: Arc<dyn Store>,
    /// Beats, log lines, follow-ups, reports, retention, lost runs.
    pub background: Arc<dyn Store>,
    /// HTTP requests; an operation waits at most `api_acquire_timeout` for a connection.
    pub api: Arc<dyn Store>,
}

impl StorePools {
    /// Opens the three pools and brings the schema up to date. Their sessions are ended by
    /// the database when idle inside a transaction for `shard_lease` (see
    /// [`PoolSettings::idle_in_transaction`]).
    pub async fn open(
        config: &DatabaseConfig,
        shard_lease: Duration,
    ) -> anyhow::Result<StorePools> {
        let url = config.url.expose_secret();
        let pool =
            |max_connections| PoolSettings::new(max_connections).idle_in_transaction(shard_lease);
        let scheduling = connect_store(url, pool(config.scheduling_connections))
            .await
            .context("opening the scheduling connection pool")?;
        scheduling.migrate().await?;
        let background = connect_store(url, pool(config.background_connections))
            .await
            .context("opening the background connection pool")?;
        let api = connect_store(
            url,
            PoolSettings {
                acquire_timeout: config.api_acquire_timeout,
                ..pool(config.api_connections)
            },
        )
        .await
        .context("opening the API connection pool")?;
        Ok(StorePools {
            scheduling,
            background,
            api,
        })
    }
}
