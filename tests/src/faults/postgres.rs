//! A PostgreSQL database of a scenario's own on the server the tests use
//! (`KADENCE_TEST_POSTGRES_URL`, default `postgres://postgres@127.0.0.1:5432/test`), dropped
//! at the end.

use sqlx::{Connection, Executor};

/// A PostgreSQL database of the scenario's own, dropped at the end.
pub struct ScenarioDatabase {
    admin_url: String,
    name: String,
    /// The server's port, which the proxy forwards to.
    pub server_port: u16,
}

impl ScenarioDatabase {
    /// Creates it, under a name of its own (scenarios run side by side).
    pub async fn create() -> ScenarioDatabase {
        let admin_url = std::env::var("KADENCE_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let name = crate::unique("kfaults_");
        let mut connection = sqlx::PgConnection::connect(&admin_url)
            .await
            .unwrap_or_else(|error| panic!("PostgreSQL at {admin_url}: {error}"));
        connection
            .execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .expect("create the scenario's database");
        let server_port = reqwest::Url::parse(&admin_url)
            .ok()
            .and_then(|url| url.port())
            .unwrap_or(5432);
        ScenarioDatabase {
            admin_url,
            name,
            server_port,
        }
    }

    /// The database's URL, straight to the server.
    pub fn url(&self) -> String {
        self.url_through(self.server_port)
    }

    /// The database's URL through the proxy on `proxy_port`.
    pub fn url_through(&self, proxy_port: u16) -> String {
        let mut url = reqwest::Url::parse(&self.admin_url).expect("a URL");
        url.set_port(Some(proxy_port)).expect("a port");
        url.set_path(&self.name);
        url.to_string()
    }

    /// Drops it, closing its connections.
    pub async fn drop_it(&self) {
        if let Ok(mut connection) = sqlx::PgConnection::connect(&self.admin_url).await {
            let _ = connection
                .execute(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name).as_str())
                .await;
        }
    }
}
