//! The `[auth]` section: the first admin, how long credentials last, and how failed logins
//! are slowed down (see `crate::http::api` `throttle` for the reasoning).
//!
//! Failed logins make the client wait, never lock an account: past the first
//! `login_free_failures` of a user from one client address, each failure doubles the wait
//! before that address may try that user again, from `login_delay_first` up to
//! `login_delay_max`, while the right password from any other address goes straight in. An
//! address that fails for many users (more than `login_free_failures_per_address` within
//! `login_failure_window`) waits before every attempt, whatever the user. A failed check of
//! the present password in a password change counts as a failed login. These replace the
//! lockout settings of earlier versions (`login_failures_per_user`,
//! `login_failures_per_address`, `login_lockout`), which a configuration may no longer name.
//!
//! ```toml
//! [auth]
//! login_free_failures = 3
//! login_delay_first = "1s"
//! login_delay_max = "5m"
//! login_free_failures_per_address = 20
//! login_failure_window = "1h"
//! ```

use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

/// Users and credentials.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// The password of the first admin (user `admin`), created on the first start on a
    /// database without users (`KADENCE_AUTH__ADMIN_PASSWORD`). Without it the first start
    /// makes a random one and prints it once to the log. A secret: never logged. Ignored once
    /// users exist.
    #[serde(skip_serializing)]
    pub admin_password: Option<SecretString>,
    /// How long a login's session token is accepted (`kadence login`, the console). Default
    /// `12h`.
    #[serde(with = "humantime_serde")]
    pub session_ttl: Duration,
    /// Longest life an API token may be given (they are for automation, but must end).
    /// Default `366d`.
    #[serde(with = "humantime_serde")]
    pub api_token_max_ttl: Duration,
    /// Failed logins of one user from one client address that cost no wait: a typo or two
    /// is retyped at once. Default 3.
    pub login_free_failures: u32,
    /// How long a client address waits, after its first failed login of a user past the
    /// free ones, before it may try that user again (429 with `Retry-After` until then).
    /// Each further failure of the same user from the same address doubles the wait, up to
    /// `login_delay_max`. Other addresses are not slowed: the user logs in from elsewhere
    /// while an attacker waits. `0s` turns the waits off. Default `1s`.
    #[serde(with = "humantime_serde")]
    pub login_delay_first: Duration,
    /// The longest wait a run of failed logins leads to (a value below `login_delay_first`
    /// is taken as `login_delay_first`). Default `5m`: at most a dozen guesses an hour per
    /// user and address once the waits have grown.
    #[serde(with = "humantime_serde")]
    pub login_delay_max: Duration,
    /// Failed logins one client address may have, over all user names, within
    /// `login_failure_window`, before every attempt from it waits too (the wait doubling from
    /// `login_delay_first` with each further failure, up to `login_delay_max`): so that one
    /// address cannot try a password on many users. A right password does not clear the
    /// count. Behind a proxy, set `api.trusted_proxies`, or every client counts as the
    /// proxy's one address. Default 20.
    pub login_free_failures_per_address: u32,
    /// How long failed logins are counted: a window opens at the first failure of a user from
    /// an address (or of an address, for `login_free_failures_per_address`), and once it has
    /// passed the count starts over, and with it the wait. A right password clears the count
    /// of its user and address at once. Default `1h`.
    #[serde(with = "humantime_serde")]
    pub login_failure_window: Duration,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            admin_password: None,
            session_ttl: Duration::from_secs(12 * 3600),
            api_token_max_ttl: Duration::from_secs(366 * 24 * 3600),
            login_free_failures: 3,
            login_delay_first: Duration::from_secs(1),
            login_delay_max: Duration::from_secs(5 * 60),
            login_free_failures_per_address: 20,
            login_failure_window: Duration::from_secs(3600),
        }
    }
}

#[cfg(test)]
// figment's `Jail` closures return `figment::Error`, which is large; that is its API.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;

    #[test]
    fn the_login_waits_come_from_the_file_and_the_environment() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "kadence.toml",
                "[auth]\nlogin_delay_first = \"2s\"\nlogin_free_failures_per_address = 7\n",
            )?;
            jail.set_env("KADENCE_AUTH__LOGIN_DELAY_MAX", "90s");
            let path = std::path::Path::new("kadence.toml");
            let auth = crate::config::Config::load(Some(path)).expect("loads").auth;
            assert_eq!(auth.login_delay_first, Duration::from_secs(2));
            assert_eq!(auth.login_delay_max, Duration::from_secs(90));
            assert_eq!(auth.login_free_failures_per_address, 7);
            assert_eq!(auth.login_free_failures, 3);
            assert_eq!(auth.login_failure_window, Duration::from_secs(3600));
            Ok(())
        });
    }

    #[test]
    fn the_old_lockout_settings_are_refused_by_name() {
        figment::Jail::expect_with(|jail| {
            let path = std::path::Path::new("kadence.toml");
            for old in [
                "login_lockout = \"15m\"",
                "login_failures_per_user = 5",
                "login_failures_per_address = 20",
            ] {
                jail.create_file("kadence.toml", &format!("[auth]\n{old}\n"))?;
                let error = crate::config::Config::load(Some(path)).unwrap_err();
                let message = error.to_string();
                let key = old.split(' ').next().unwrap();
                assert!(message.contains(key), "{message}");
            }
            Ok(())
        });
    }
}
