//! The legacy executors a bridge fronts: who registered, who still answers, and which of the
//! bridge's partitions each one is handed.
//!
//! XXL-JOB's admin keeps a registry row per executor address, renewed by the executor's
//! `api/registry` call every 30 s and dropped 90 s after the last one (its dead timeout).
//! The bridge keeps the same registry in memory, shared with its peers (`admin`: every
//! registration is passed on, and a bridge that starts takes its peers' registrations), and adds
//! what XXL-JOB's FAILOVER does at each trigger: a `beat` call to each executor every probe
//! interval, so an executor that stopped answering leaves routing within seconds, not 90.
//!
//! **Partitions become executors.** Kadence routes by partition: the scheduler's strategy
//! picks a partition of the app's trigger topic, and whoever owns it runs the trigger. The
//! bridge owns some partitions (the consumer group decides) and splits them, in order, into
//! one contiguous range per live executor, in address order as XXL-JOB sorts its registry.
//! It beats each executor's range as that executor's own (`beats`), so the scheduler's
//! FIRST, LAST, ROUND, RANDOM, CONSISTENT_HASH, LFU, LRU, FAILOVER and BUSYOVER choose among
//! the legacy executors exactly as among native ones, and a trigger from partition `p` goes
//! to the executor whose range holds `p`. An app needs at least as many partitions as it has
//! legacy executors, or some receive nothing (the bridge warns).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

/// A legacy executor's address, as it registered it (`http://10.0.0.5:9999/`).
pub type Address = String;

/// What the bridge knows of one legacy executor.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Registration {
    /// When its registration was last renewed, ms since the epoch.
    renewed_at_ms: i64,
    /// Whether its last `beat` answered; a fresh registration counts as an answer.
    answers: bool,
}

/// The registry of legacy executors (see the module docs).
pub struct LegacyExecutors {
    dead_timeout_ms: i64,
    registrations: Mutex<BTreeMap<Address, Registration>>,
    /// Bumped on every change of who is live, so waiting triggers look again.
    changes: watch::Sender<u64>,
}

impl LegacyExecutors {
    /// An empty registry that drops a registration `dead_timeout` after its last renewal
    /// (XXL-JOB: 90 s).
    pub fn new(dead_timeout: Duration) -> LegacyExecutors {
        LegacyExecutors {
            dead_timeout_ms: i64::try_from(dead_timeout.as_millis()).unwrap_or(i64::MAX),
            registrations: Mutex::new(BTreeMap::new()),
            changes: watch::channel(0).0,
        }
    }

    /// Takes a registration (or its renewal) of `address` at `now_ms`. Returns whether the
    /// executor is new to this bridge.
    pub fn register(&self, address: &str, now_ms: i64) -> bool {
        let mut registrations = self.registrations.lock().expect("registry lock");
        let fresh = Registration {
            renewed_at_ms: now_ms,
            answers: true,
        };
        let previous = registrations.insert(address.to_owned(), fresh);
        let new = previous.is_none();
        if previous.is_none_or(|held| !held.answers) {
            drop(registrations);
            self.changed();
        }
        new
    }

    /// Takes a registration a peer bridge holds, renewed at `renewed_at_ms` by the peer's
    /// clock: kept with that time, so a registration the executor stopped renewing still runs
    /// out (two bridges never keep a dead executor alive for each other). An older time than
    /// the one held changes nothing.
    pub fn adopt(&self, address: &str, renewed_at_ms: i64) {
        let mut registrations = self.registrations.lock().expect("registry lock");
        let held = registrations.get(address).map(|held| held.renewed_at_ms);
        if held.is_some_and(|held| held >= renewed_at_ms) {
            return;
        }
        let adopted = Registration {
            renewed_at_ms,
            answers: true,
        };
        registrations.insert(address.to_owned(), adopted);
        drop(registrations);
        self.changed();
    }

    /// Every registration with the time it was last renewed, for a peer that starts.
    pub fn snapshot(&self) -> Vec<(Address, i64)> {
        (self.registrations.lock().expect("registry lock"))
            .iter()
            .map(|(address, held)| (address.clone(), held.renewed_at_ms))
            .collect()
    }

    /// Forgets `address` (its `api/registryRemove`, sent when it stops). Returns whether it
    /// was known.
    pub fn remove(&self, address: &str) -> bool {
        let removed = (self.registrations.lock().expect("registry lock"))
            .remove(address)
            .is_some();
        if removed {
            self.changed();
        }
        removed
    }

    /// Records whether `address` answered its `beat`.
    pub fn answered(&self, address: &str, answers: bool) {
        let mut registrations = self.registrations.lock().expect("registry lock");
        if let Some(registration) = registrations.get_mut(address)
            && registration.answers != answers
        {
            registration.answers = answers;
            drop(registrations);
            tracing::info!(address, answers, "legacy executor's beat changed");
            self.changed();
        }
    }

    /// Drops the registrations not renewed within the dead timeout; returns their addresses.
    pub fn expire(&self, now_ms: i64) -> Vec<Address> {
        let mut registrations = self.registrations.lock().expect("registry lock");
        let dead: Vec<Address> = (registrations.iter())
            .filter(|(_, held)| now_ms - held.renewed_at_ms > self.dead_timeout_ms)
            .map(|(address, _)| address.clone())
            .collect();
        for address in &dead {
            registrations.remove(address);
        }
        drop(registrations);
        if !dead.is_empty() {
            self.changed();
        }
        dead
    }

    /// Every registered address, live or not, to probe.
    pub fn registered(&self) -> Vec<Address> {
        (self.registrations.lock().expect("registry lock"))
            .keys()
            .cloned()
            .collect()
    }

    /// The live executors at `now_ms`, in address order: registered within the dead timeout
    /// and answering their beats.
    pub fn live(&self, now_ms: i64) -> Vec<Address> {
        (self.registrations.lock().expect("registry lock"))
            .iter()
            .filter(|(_, held)| held.answers && now_ms - held.renewed_at_ms <= self.dead_timeout_ms)
            .map(|(address, _)| address.clone())
            .collect()
    }

    /// A receiver that sees every change of who is live.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|generation| *generation += 1);
    }
}

/// `owned` partitions (any order) split into one contiguous range per executor of `live`
/// (address order), the first executor taking the lowest partitions and the earlier ones the
/// extra partition of an uneven split, so partition 0 (FIRST) always goes to the first
/// executor; with fewer partitions than executors, the last ones get none. Every bridge and
/// every beat computes the same split from the same inputs.
pub fn split(owned: &[i32], live: &[Address]) -> Vec<(Address, Vec<i32>)> {
    let mut partitions = owned.to_vec();
    partitions.sort_unstable();
    partitions.dedup();
    let (count, executors) = (partitions.len(), live.len());
    let start = |index: usize| (index * count).div_ceil(executors);
    (live.iter().enumerate())
        .map(|(index, address)| {
            let range = start(index)..start(index + 1);
            (address.clone(), partitions[range].to_vec())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "http://127.0.0.1:9001/";
    const B: &str = "http://127.0.0.1:9002/";

    fn addresses(list: &[&str]) -> Vec<Address> {
        list.iter().map(|address| (*address).to_owned()).collect()
    }

    #[test]
    fn partitions_split_into_ranges_in_address_order() {
        let live = addresses(&[A, B]);
        assert_eq!(
            split(&[3, 0, 2, 1], &live),
            [(A.to_owned(), vec![0, 1]), (B.to_owned(), vec![2, 3])]
        );
        // Odd counts: the earlier executors take the extra partition.
        assert_eq!(
            split(&[0, 1, 2], &live),
            [(A.to_owned(), vec![0, 1]), (B.to_owned(), vec![2])]
        );
        // More executors than partitions: the last ones go without.
        assert_eq!(
            split(&[4], &live),
            [(A.to_owned(), vec![4]), (B.to_owned(), vec![])]
        );
    }

    #[test]
    fn an_executor_is_live_while_registered_and_answering() {
        let registry = LegacyExecutors::new(Duration::from_secs(90));
        let changes = registry.subscribe();
        assert!(registry.register(B, 1_000));
        assert!(registry.register(A, 1_000));
        assert!(!registry.register(A, 31_000), "a renewal is not new");
        assert_eq!(registry.live(31_000), addresses(&[A, B]));
        registry.answered(A, false);
        assert_eq!(registry.live(31_000), addresses(&[B]));
        // A renewal proves it answers again.
        registry.register(A, 40_000);
        assert_eq!(registry.live(40_000), addresses(&[A, B]));
        // B renewed last at 1 s: dead 90 s later.
        assert_eq!(registry.expire(91_001), addresses(&[B]));
        assert_eq!(registry.live(91_001), addresses(&[A]));
        assert!(registry.remove(A));
        assert!(registry.live(91_001).is_empty());
        assert!(changes.has_changed().unwrap());
    }

    #[test]
    fn a_peers_registration_keeps_its_time_and_runs_out_with_it() {
        let registry = LegacyExecutors::new(Duration::from_secs(90));
        registry.adopt(A, 10_000);
        registry.adopt(A, 5_000);
        assert_eq!(registry.snapshot(), [(A.to_owned(), 10_000)]);
        assert_eq!(registry.live(99_000), addresses(&[A]));
        assert_eq!(
            registry.expire(100_001),
            addresses(&[A]),
            "not renewed since 10 s"
        );
    }
}
