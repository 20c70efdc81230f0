//! The `[metrics]` section: who may read `/metrics`.
//!
//! `/metrics` names every app, handler and executor, and counts their runs: for a deployment
//! whose API faces more than its operators, that is more than strangers should see. Two ways
//! to close it, which may be combined:
//! - `listen`: serve `/metrics` on an address of its own (an internal interface, or loopback
//!   beside a Prometheus agent), and not on the API's address at all;
//! - `token`: require `Authorization: Bearer <token>` wherever `/metrics` is served
//!   (Prometheus: `authorization: { credentials_file: … }` in the scrape config).
//!
//! Neither is set by default, so that a Prometheus on the same host scrapes a development node
//! as it is; a node whose API listens beyond loopback with neither set says so in a warning
//! when it starts.

use std::net::SocketAddr;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

/// Who may read `/metrics`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Serve `/metrics` here only (e.g. `10.0.0.5:9464`, or `127.0.0.1:0` for any free port);
    /// the API's address then answers 404 for it. Default: on the API's address.
    pub listen: Option<SocketAddr>,
    /// When set, `/metrics` answers 401 to a request without `Authorization: Bearer` and this
    /// token (`KADENCE_METRICS__TOKEN`). Default: none.
    #[serde(skip_serializing)]
    pub token: Option<SecretString>,
}

impl MetricsConfig {
    /// Whether `/metrics` is open to anyone who reaches the API at `api_listen`: served there,
    /// without a token, on an address beyond loopback.
    pub fn open_beyond_loopback(&self, api_listen: SocketAddr) -> bool {
        self.listen.is_none() && self.token.is_none() && !api_listen.ip().is_loopback()
    }
}
