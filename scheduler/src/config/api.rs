//! The `[api]` section: where the HTTP API listens, how it protects itself from load and
//! from clients that hold on to it (see `crate::http::api` for where each limit applies), and the
//! book it serves under `/docs/` (see `crate::http::book`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::IpNetworks;

/// The HTTP API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// Listen address. Default `127.0.0.1:8080`.
    pub listen: SocketAddr,
    /// Requests of authenticated routes handled at once at most; one more is answered 503
    /// with `Retry-After` at once rather than queued (a queue only turns overload into
    /// timeouts). `/health` and the routes anyone may call (counted by
    /// `public_max_concurrent_requests`) are not counted. Default 64.
    pub max_concurrent_requests: usize,
    /// How long a request may take before it is answered 503 with `Retry-After`. Default
    /// `10s`.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// How long a client may take to send a request's head (request line and headers) before
    /// its connection is closed; a keep-alive connection idle for as long is closed too, so a
    /// client that pools connections should drop idle ones sooner. Default `10s`.
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// How long after its head a request's body must have arrived whole; a slower one is
    /// answered 408 and its connection closed, so that a client sending a byte at a time
    /// cannot hold a place among the requests in flight. Shorter than `request_timeout`, so
    /// that the slow client is told it was too slow rather than that the node is busy.
    /// Default `5s`.
    #[serde(with = "humantime_serde")]
    pub body_read_timeout: Duration,
    /// Requests of the routes anyone may call without credentials (the logins, the password
    /// reset, the schema registry) handled at once at most, apart from
    /// `max_concurrent_requests`: one more is answered 503 with `Retry-After`, and signed-in
    /// users keep their own budget whatever strangers send. Default 8.
    pub public_max_concurrent_requests: usize,
    /// Of those, requests from one client address at once at most; one more is answered 429
    /// with `Retry-After`. Default 2.
    pub public_requests_per_address: usize,
    /// XXL-JOB imports (bodies up to 64 MiB, where other routes take 512 KiB) handled at
    /// once at most; one more is answered 503 with `Retry-After` before its body is read.
    /// Default 2.
    pub max_concurrent_imports: usize,
    /// The proxies in front of the node (addresses or CIDR ranges, e.g.
    /// `["10.0.0.0/8", "192.168.1.7"]`): for a request one of them sends, the client is the
    /// address it appended to `X-Forwarded-For` (the last one no trusted proxy holds). That
    /// address is what failed logins and the per-address limit count under. Default none:
    /// the connection's peer is the client, and `X-Forwarded-For` is ignored, since anyone
    /// can write it.
    pub trusted_proxies: TrustedProxies,
    /// The Kadence book, as `mdbook build docs` writes it (`docs/book`), served at `/docs/`
    /// to anyone (it is documentation; no session) and linked from the console's help. Read
    /// from this directory at run time rather than compiled in: the binary does not depend on
    /// a docs build, a deployment ships the book beside the binary or leaves it out, and no
    /// cargo feature is needed. A directory that does not exist or has no `index.html` stops
    /// the node at start. Default none: `/docs` answers 404 saying how to serve the book.
    pub book_dir: Option<PathBuf>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            max_concurrent_requests: 64,
            request_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(5),
            public_max_concurrent_requests: 8,
            public_requests_per_address: 2,
            max_concurrent_imports: 2,
            trusted_proxies: TrustedProxies::default(),
            book_dir: None,
        }
    }
}

/// The addresses whose `X-Forwarded-For` is believed (`api.trusted_proxies`).
pub type TrustedProxies = IpNetworks;

#[cfg(test)]
// figment's `Jail` closures return `figment::Error`, which is large; that is its API.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;

    #[test]
    fn trusted_proxies_are_addresses_or_ranges() {
        let proxies = TrustedProxies::parse(&["10.0.0.0/8", " 192.168.1.7 ", "fd00::/8"]).unwrap();
        assert!(proxies.contains("10.200.3.4".parse().unwrap()));
        assert!(proxies.contains("192.168.1.7".parse().unwrap()));
        assert!(!proxies.contains("192.168.1.8".parse().unwrap()));
        assert!(proxies.contains("fd12::1".parse().unwrap()));
        assert!(
            proxies.contains("::ffff:10.0.0.1".parse().unwrap()),
            "an IPv4 peer on a dual-stack socket is the IPv4 address"
        );
        let error = TrustedProxies::parse(&["10.0.0.0/33"]).unwrap_err();
        assert!(error.contains("\"10.0.0.0/33\""), "{error}");
        assert!(TrustedProxies::default().is_empty());
    }

    #[test]
    fn the_limits_come_from_the_environment_too() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("KADENCE_API__BODY_READ_TIMEOUT", "2s");
            jail.set_env("KADENCE_API__PUBLIC_MAX_CONCURRENT_REQUESTS", "3");
            jail.set_env("KADENCE_API__TRUSTED_PROXIES", "[10.0.0.0/8, 192.168.1.7]");
            jail.set_env("KADENCE_API__BOOK_DIR", "docs/book");
            let api = crate::config::Config::load(None).expect("loads").api;
            assert_eq!(api.book_dir, Some(PathBuf::from("docs/book")));
            assert_eq!(api.body_read_timeout, Duration::from_secs(2));
            assert_eq!(api.public_max_concurrent_requests, 3);
            assert!(api.trusted_proxies.contains("10.9.8.7".parse().unwrap()));
            assert!(api.trusted_proxies.contains("192.168.1.7".parse().unwrap()));
            jail.set_env("KADENCE_API__TRUSTED_PROXIES", "[proxy.local]");
            let error = crate::config::Config::load(None).unwrap_err().to_string();
            assert!(error.contains("\"proxy.local\""), "{error}");
            Ok(())
        });
    }
}
