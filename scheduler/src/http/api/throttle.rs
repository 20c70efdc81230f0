//! Failed logins make their client wait; they never lock an account. A lock on the user (the
//! old way: five failures, fifteen minutes) is a weapon: anyone who knows the admin's name
//! could keep the admin out for good. So failures are counted per (user name, client
//! address): past the first `auth.login_free_failures` (3, so that a typo is retyped at
//! once), each one doubles the wait before that address may try that user again (1 s, 2 s,
//! 4 s, … up to `auth.login_delay_max`, 5 min by default), and an attempt during the wait is
//! refused with 429 and `Retry-After` before its password is checked, so a guess costs the
//! wait. The right password from another address is not slowed by an attacker's
//! failures. Once the waits have grown, one address gets about a dozen guesses an hour at a
//! user; hashing with Argon2id and the audit trail (every failure and every throttled
//! attempt, see `audit`) do the rest.
//!
//! An address that fails for many users is slowed as a whole: past
//! `auth.login_free_failures_per_address` failures within `auth.login_failure_window`, every
//! attempt from it waits, doubling the same way, so that one address cannot try one password
//! on every user. A success does not clear that count (one right password must not reset an
//! address that is trying many users); it clears only its own user and address. The address
//! is the [`ClientAddress`](super::client::ClientAddress): behind a proxy, the one
//! `api.trusted_proxies` lets it read from `X-Forwarded-For`; without that setting every
//! client behind the proxy is the proxy's one address, and shares its waits.
//!
//! Counts are forgotten when their window (`auth.login_failure_window`, from the first
//! failure) has passed and their wait has ended. They live in the node's memory: behind a
//! load balancer over N nodes an attacker gets N times the attempts. Memory is bounded: past
//! [`PRUNE_ABOVE`] keys the forgotten ones are dropped, and past [`TRACKED_AT_MOST`] keys
//! whose waits are all running, a new key is not tracked (its attempt still counts under its
//! address, unless that is new too); user names are kept as 64-bit keyed hashes, so a long
//! made-up name costs no more than a short one.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::Mutex;

use crate::config::AuthConfig;

/// Past this many keys, the forgotten ones are dropped (at most once a second).
const PRUNE_ABOVE: usize = 10_000;
/// Keys tracked at most: a few megabytes.
const TRACKED_AT_MOST: usize = 200_000;

/// What failures are counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// A user name (case folded, hashed) from an address (none: a server started without
    /// connection info, where every client is one).
    Pair(u64, Option<IpAddr>),
    /// An address, over all user names.
    Address(IpAddr),
}

/// The failures counted under one key.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    window_opened_ms: i64,
    /// No attempt before this instant.
    wait_until_ms: i64,
}

/// The failed-login counts of one node.
#[derive(Debug)]
pub struct LoginThrottle {
    first_delay_ms: i64,
    max_delay_ms: i64,
    free_per_pair: u32,
    free_per_address: u32,
    window_ms: i64,
    names: RandomState,
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    failures: HashMap<Key, Failures>,
    pruned_at_ms: i64,
}

impl LoginThrottle {
    /// Waits and limits from the `[auth]` settings.
    pub fn new(config: &AuthConfig) -> Self {
        let millis =
            |duration: std::time::Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        let first_delay_ms = millis(config.login_delay_first);
        LoginThrottle {
            first_delay_ms,
            max_delay_ms: millis(config.login_delay_max).max(first_delay_ms),
            free_per_pair: config.login_free_failures,
            free_per_address: config.login_free_failures_per_address,
            window_ms: millis(config.login_failure_window),
            names: RandomState::new(),
            counts: Mutex::new(Counts::default()),
        }
    }

    /// `Err(seconds to wait)` while `user` from `address`, or `address` itself, is waiting
    /// after failed logins.
    pub fn check(&self, user: &str, address: Option<IpAddr>, now_ms: i64) -> Result<(), u64> {
        let counts = self.lock();
        let wait_ms = (self.keys(user, address).into_iter())
            .filter_map(|(key, _)| counts.failures.get(&key))
            .map(|failures| failures.wait_until_ms.saturating_sub(now_ms))
            .max()
            .unwrap_or(0);
        if wait_ms > 0 {
            return Err(u64::try_from(wait_ms).unwrap_or(u64::MAX).div_ceil(1000));
        }
        Ok(())
    }

    /// Counts a failed login of `user` from `address`, and sets the waits it leads to.
    pub fn failed(&self, user: &str, address: Option<IpAddr>, now_ms: i64) {
        let mut counts = self.lock();
        let tracked = counts.failures.len();
        if tracked > PRUNE_ABOVE && now_ms >= counts.pruned_at_ms.saturating_add(1_000) {
            let window_ms = self.window_ms;
            counts
                .failures
                .retain(|_, failures| !failures.forgotten(now_ms, window_ms));
            counts.pruned_at_ms = now_ms;
        }
        for (key, free) in self.keys(user, address) {
            let room = counts.failures.len() < TRACKED_AT_MOST;
            let failures = match counts.failures.get_mut(&key) {
                Some(failures) => failures,
                None if room => counts.failures.entry(key).or_insert(Failures {
                    count: 0,
                    window_opened_ms: now_ms,
                    wait_until_ms: now_ms,
                }),
                None => continue,
            };
            if now_ms >= failures.window_opened_ms.saturating_add(self.window_ms) {
                failures.count = 0;
                failures.window_opened_ms = now_ms;
            }
            failures.count = failures.count.saturating_add(1);
            if let Some(wait_ms) = self.wait_after(failures.count.saturating_sub(free)) {
                failures.wait_until_ms = failures.wait_until_ms.max(now_ms.saturating_add(wait_ms));
            }
        }
    }

    /// Clears the count of `user` from `address` after a successful login (not the
    /// address's: see the module docs).
    pub fn succeeded(&self, user: &str, address: Option<IpAddr>) {
        let key = self.pair(user, address);
        self.lock().failures.remove(&key);
    }

    /// The wait after the `excess`th failure past the free ones: none for the free ones, then
    /// doubling from the first delay up to the longest.
    fn wait_after(&self, excess: u32) -> Option<i64> {
        let doublings = excess.checked_sub(1)?;
        let factor = 1_i64.checked_shl(doublings.min(62)).unwrap_or(i64::MAX);
        Some(
            self.first_delay_ms
                .saturating_mul(factor)
                .min(self.max_delay_ms),
        )
    }

    /// The keys an attempt is counted under, each with the failures it has free.
    fn keys(&self, user: &str, address: Option<IpAddr>) -> Vec<(Key, u32)> {
        let mut keys = vec![(self.pair(user, address), self.free_per_pair)];
        if let Some(address) = address {
            keys.push((Key::Address(address), self.free_per_address));
        }
        keys
    }

    fn pair(&self, user: &str, address: Option<IpAddr>) -> Key {
        Key::Pair(self.names.hash_one(user.to_lowercase()), address)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        (self.counts.lock()).unwrap_or_else(|poison| poison.into_inner())
    }
}

impl Failures {
    /// Whether nothing is left of these failures: their window and their wait have passed.
    fn forgotten(&self, now_ms: i64, window_ms: i64) -> bool {
        now_ms >= self.window_opened_ms.saturating_add(window_ms) && now_ms >= self.wait_until_ms
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn throttle() -> LoginThrottle {
        LoginThrottle::new(&AuthConfig {
            login_free_failures: 0,
            login_delay_first: Duration::from_secs(1),
            login_delay_max: Duration::from_secs(60),
            login_free_failures_per_address: 5,
            login_failure_window: Duration::from_secs(3600),
            ..AuthConfig::default()
        })
    }

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    #[test]
    fn each_failure_doubles_the_wait_up_to_the_longest() {
        let throttle = throttle();
        let attacker = ip("198.51.100.7");
        let mut now = 0;
        let mut waits = Vec::new();
        for _ in 0..9 {
            assert_eq!(throttle.check("admin", attacker, now), Ok(()));
            throttle.failed("admin", attacker, now);
            let wait = throttle.check("admin", attacker, now).unwrap_err();
            assert_eq!(
                throttle.check("ADMIN", attacker, now),
                Err(wait),
                "names fold case"
            );
            waits.push(wait);
            now += i64::try_from(wait).unwrap() * 1000;
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(
            throttle.check("admin", attacker, now - 500),
            Err(1),
            "Retry-After rounds up"
        );
    }

    #[test]
    fn an_attackers_failures_do_not_slow_the_user_from_another_address() {
        let throttle = throttle();
        let (attacker, admin) = (ip("198.51.100.7"), ip("203.0.113.9"));
        for second in 0..4 {
            throttle.failed("admin", attacker, second * 60_000);
        }
        assert!(throttle.check("admin", attacker, 180_500).is_err());
        assert_eq!(throttle.check("admin", admin, 180_500), Ok(()));
        assert_eq!(throttle.check("admin", None, 180_500), Ok(()));
    }

    #[test]
    fn an_address_trying_many_users_waits_past_its_free_failures_and_a_success_does_not_clear_it() {
        let throttle = throttle();
        let address = ip("10.0.0.7");
        for user in ["a", "b", "c", "d", "e"] {
            throttle.failed(user, address, 0);
        }
        assert_eq!(throttle.check("z", address, 10), Ok(()), "five are free");
        throttle.failed("f", address, 10);
        assert_eq!(throttle.check("z", address, 20), Err(1));
        throttle.succeeded("a", address);
        assert_eq!(throttle.check("z", address, 30), Err(1));
        assert_eq!(throttle.check("z", ip("10.0.0.8"), 30), Ok(()));
        throttle.failed("g", address, 2_000);
        assert_eq!(throttle.check("z", address, 2_000), Err(2), "doubling too");
    }

    #[test]
    fn a_success_clears_its_user_and_address_only() {
        let throttle = throttle();
        let (home, elsewhere) = (ip("192.0.2.1"), ip("192.0.2.2"));
        throttle.failed("ann", home, 0);
        throttle.failed("ann", elsewhere, 0);
        throttle.succeeded("ann", home);
        assert_eq!(throttle.check("ann", home, 0), Ok(()));
        assert_eq!(throttle.check("ann", elsewhere, 0), Err(1));
    }

    #[test]
    fn the_count_starts_over_when_its_window_has_passed() {
        let throttle = throttle();
        let address = ip("192.0.2.1");
        for n in 0..4 {
            throttle.failed("ann", address, n * 100_000);
        }
        assert_eq!(throttle.check("ann", address, 300_000), Err(8));
        throttle.failed("ann", address, 3_700_000);
        assert_eq!(
            throttle.check("ann", address, 3_700_000),
            Err(1),
            "a new window, a new first wait"
        );
    }

    #[test]
    fn forgotten_counts_are_dropped_and_the_keys_stay_bounded() {
        let throttle = throttle();
        for n in 0..=PRUNE_ABOVE {
            throttle.failed(&format!("user-{n}"), None, 0);
        }
        assert_eq!(throttle.lock().failures.len(), PRUNE_ABOVE + 1);
        throttle.failed("late", None, 3_600_000);
        assert_eq!(
            throttle.lock().failures.len(),
            1,
            "only the new count is left"
        );
        let long = "x".repeat(100_000);
        throttle.failed(&long, None, 3_600_000);
        assert!(throttle.check(&long, None, 3_600_000).is_err());
    }

    #[test]
    fn the_first_failures_of_a_user_from_an_address_are_free() {
        let throttle = LoginThrottle::new(&AuthConfig::default());
        let address = ip("192.0.2.1");
        for _ in 0..3 {
            throttle.failed("ann", address, 0);
            assert_eq!(throttle.check("ann", address, 0), Ok(()), "a typo is free");
        }
        throttle.failed("ann", address, 0);
        assert_eq!(throttle.check("ann", address, 0), Err(1));
    }

    #[test]
    fn no_first_delay_means_no_waits() {
        let throttle = LoginThrottle::new(&AuthConfig {
            login_delay_first: Duration::ZERO,
            ..AuthConfig::default()
        });
        for _ in 0..50 {
            throttle.failed("ann", ip("192.0.2.1"), 0);
        }
        assert_eq!(throttle.check("ann", ip("192.0.2.1"), 0), Ok(()));
    }
}
