//! Failed logins, counted per user name and per client address: after too many in a window,
//! further attempts (even right ones) are refused with 429 until the window has passed, so a
//! password cannot be guessed at the speed of the network. Counts live in the node's memory:
//! behind a load balancer over N nodes an attacker gets N times the attempts, still a few per
//! quarter hour. A successful login clears its user's count (not its address's: one right
//! password must not reset the count of an address that is trying many users).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use crate::config::AuthConfig;

/// Past this many tracked keys, the ones whose window has passed are dropped, so that a flood
/// of made-up user names cannot grow the map without bound.
const PRUNE_ABOVE: usize = 10_000;

/// What a key is counted under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    User(String),
    Address(IpAddr),
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    first_at_ms: i64,
}

/// The failed-login counts of one node.
#[derive(Debug)]
pub struct LoginThrottle {
    per_user: u32,
    per_address: u32,
    window_ms: i64,
    failures: Mutex<HashMap<Key, Failures>>,
}

impl LoginThrottle {
    /// Limits from the `[auth]` settings.
    pub fn new(config: &AuthConfig) -> Self {
        LoginThrottle {
            per_user: config.login_failures_per_user,
            per_address: config.login_failures_per_address,
            window_ms: i64::try_from(config.login_lockout.as_millis()).unwrap_or(i64::MAX),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// `Err(seconds to wait)` if `user` or `address` has used up its failures.
    pub fn check(&self, user: &str, address: Option<IpAddr>, now_ms: i64) -> Result<(), u64> {
        let failures = self
            .failures
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let mut wait_ms = 0;
        for (key, limit) in self.keys(user, address) {
            if let Some(counted) = failures.get(&key) {
                let ends_ms = counted.first_at_ms.saturating_add(self.window_ms);
                if counted.count >= limit && now_ms < ends_ms {
                    wait_ms = wait_ms.max(ends_ms - now_ms);
                }
            }
        }
        if wait_ms > 0 {
            return Err(u64::try_from(wait_ms).unwrap_or(0).div_ceil(1000));
        }
        Ok(())
    }

    /// Counts a failed login against `user` and `address`.
    pub fn failed(&self, user: &str, address: Option<IpAddr>, now_ms: i64) {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if failures.len() > PRUNE_ABOVE {
            let window_ms = self.window_ms;
            failures.retain(|_, counted| now_ms < counted.first_at_ms.saturating_add(window_ms));
        }
        for (key, _) in self.keys(user, address) {
            let counted = failures.entry(key).or_insert(Failures {
                count: 0,
                first_at_ms: now_ms,
            });
            if now_ms >= counted.first_at_ms.saturating_add(self.window_ms) {
                *counted = Failures {
                    count: 0,
                    first_at_ms: now_ms,
                };
            }
            counted.count += 1;
        }
    }

    /// Clears `user`'s count after a successful login.
    pub fn succeeded(&self, user: &str) {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        failures.remove(&Key::User(user.to_lowercase()));
    }

    fn keys(&self, user: &str, address: Option<IpAddr>) -> Vec<(Key, u32)> {
        let mut keys = vec![(Key::User(user.to_lowercase()), self.per_user)];
        if let Some(address) = address {
            keys.push((Key::Address(address), self.per_address));
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn throttle() -> LoginThrottle {
        LoginThrottle::new(&AuthConfig {
            login_failures_per_user: 3,
            login_failures_per_address: 5,
            login_lockout: Duration::from_secs(60),
            ..AuthConfig::default()
        })
    }

    #[test]
    fn a_user_is_locked_out_after_the_allowed_failures_until_the_window_passes() {
        let throttle = throttle();
        for _ in 0..3 {
            assert_eq!(throttle.check("ann", None, 1_000), Ok(()));
            throttle.failed("ann", None, 1_000);
        }
        assert_eq!(throttle.check("ann", None, 2_000), Err(59));
        assert_eq!(
            throttle.check("ANN", None, 2_000),
            Err(59),
            "names fold case"
        );
        assert_eq!(throttle.check("bob", None, 2_000), Ok(()));
        assert_eq!(throttle.check("ann", None, 61_000), Ok(()));
    }

    #[test]
    fn an_address_trying_many_users_is_locked_out_and_a_success_does_not_clear_it() {
        let throttle = throttle();
        let address: IpAddr = "10.0.0.7".parse().unwrap();
        for user in ["a", "b", "c", "d", "e"] {
            throttle.failed(user, Some(address), 0);
        }
        throttle.succeeded("a");
        assert!(throttle.check("z", Some(address), 10).is_err());
        assert_eq!(
            throttle.check("z", Some("10.0.0.8".parse().unwrap()), 10),
            Ok(())
        );
    }

    #[test]
    fn a_success_clears_the_users_count() {
        let throttle = throttle();
        throttle.failed("ann", None, 0);
        throttle.failed("ann", None, 0);
        throttle.succeeded("ann");
        throttle.failed("ann", None, 0);
        throttle.failed("ann", None, 0);
        assert_eq!(throttle.check("ann", None, 0), Ok(()));
    }
}
