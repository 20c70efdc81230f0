//! The executor registry: the live view of executors, per app, from the `ExecutorBeat`s they
//! publish to the compacted topic `{prefix}.beats` (XXL-JOB's `xxl_job_registry`, without the
//! HTTP calls). FAILOVER and BUSYOVER consult it on every trigger ([`Registry::owners`]), so
//! the dispatch path never reads the database for it.
//!
//! Three parts keep it, each in its layer:
//! - this in-memory [`Registry`], which routing reads;
//! - the beats reader ([`crate::readers::beats`]), which fills it and the `executors` table;
//! - the sweeper ([`crate::monitors::executor_sweep`]), which marks executors whose beats
//!   stopped DEAD in the table and forgets them later.
//!
//! An executor is **live** while its state is RUNNING and its latest beat is younger than the
//! dead timeout (default 10 s, see [`crate::config::RegistryConfig`]). A beat's time is the
//! earlier of its send time and the time this node read it ([`entry_from_beat`]), so a beat
//! replayed from the topic after a restart is not mistaken for a fresh one. A STOPPING beat
//! (graceful shutdown) takes the executor out of routing at once. When two live executors
//! claim the same partition (the moment of a rebalance), the one with the newer beat owns it.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use kadence_schemas::{AppName, ExecutorBeat, JobId};

use crate::domain::model::{ExecutorEntry, ExecutorStatus};
use crate::engine::routing::{OwnerLookup, PartitionOwner};

/// The live view of executors, per app, from their latest beats.
pub struct Registry {
    dead_timeout_ms: i64,
    apps: RwLock<HashMap<AppName, HashMap<String, ExecutorEntry>>>,
}

impl Registry {
    /// An empty registry that considers an executor dead after `dead_timeout` without a beat.
    pub fn new(dead_timeout: Duration) -> Registry {
        Registry {
            dead_timeout_ms: i64::try_from(dead_timeout.as_millis()).unwrap_or(i64::MAX),
            apps: RwLock::new(HashMap::new()),
        }
    }

    /// How long an executor stays live after its latest beat, ms.
    pub fn dead_timeout_ms(&self) -> i64 {
        self.dead_timeout_ms
    }

    /// Takes in an executor's beat; an older beat than the one held is ignored. Returns whether
    /// the entry was taken.
    pub fn observe(&self, entry: ExecutorEntry) -> bool {
        let mut apps = self.apps.write().expect("registry lock");
        // An executor that moved to another app (same id, restarted with other settings).
        for (app, executors) in apps.iter_mut() {
            if *app != entry.app {
                executors.remove(&entry.executor_id);
            }
        }
        let executors = apps.entry(entry.app.clone()).or_default();
        match executors.get(&entry.executor_id) {
            Some(held) if held.last_beat_at_ms > entry.last_beat_at_ms => false,
            _ => {
                executors.insert(entry.executor_id.clone(), entry);
                true
            }
        }
    }

    /// Whether `entry` takes triggers at `now_ms`: RUNNING with a beat younger than the dead
    /// timeout.
    pub fn is_live(&self, entry: &ExecutorEntry, now_ms: i64) -> bool {
        is_live(entry, now_ms, self.dead_timeout_ms)
    }

    /// The live executors of `app` at `now_ms`, by id.
    pub fn live_executors(&self, app: &AppName, now_ms: i64) -> Vec<ExecutorEntry> {
        let apps = self.apps.read().expect("registry lock");
        let mut live: Vec<ExecutorEntry> = apps
            .get(app)
            .map(|executors| {
                executors
                    .values()
                    .filter(|entry| self.is_live(entry, now_ms))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        live.sort_by(|a, b| a.executor_id.cmp(&b.executor_id));
        live
    }

    /// Per app known to the registry: its live executors and the distinct partitions they
    /// own at `now_ms` (for the metrics).
    pub fn liveness(&self, now_ms: i64) -> Vec<(AppName, usize, usize)> {
        let apps: Vec<AppName> = self
            .apps
            .read()
            .expect("registry lock")
            .keys()
            .cloned()
            .collect();
        apps.into_iter()
            .map(|app| {
                let live = self.live_executors(&app, now_ms);
                let owned: std::collections::BTreeSet<i32> = live
                    .iter()
                    .flat_map(|entry| entry.owned_partitions.iter().copied())
                    .collect();
                (app, live.len(), owned.len())
            })
            .collect()
    }

    /// What keeps `app`'s triggers from being signed by the round at `now_ms`, if anything
    /// (PROTOCOL.md section 3, `signing.trigger_signatures = "auto"`): no live executor (a
    /// trigger may wait for one of any version), or an executor that beat within the dead
    /// timeout, RUNNING or STOPPING (a draining executor still runs what it holds), without
    /// `round-signatures` in its beat.
    pub fn round_signatures_held_back(&self, app: &AppName, now_ms: i64) -> Option<HeldBack> {
        let apps = self.apps.read().expect("registry lock");
        let Some(executors) = apps.get(app) else {
            return Some(HeldBack::NoLiveExecutor);
        };
        let recent = |entry: &&ExecutorEntry| beat_recently(entry, now_ms, self.dead_timeout_ms);
        if let Some(old) = (executors.values().filter(recent))
            .filter(|entry| !entry.verifies_round_signatures())
            .min_by(|a, b| a.executor_id.cmp(&b.executor_id))
        {
            return Some(HeldBack::By(old.executor_id.clone()));
        }
        let any_live = executors.values().any(|entry| self.is_live(entry, now_ms));
        (!any_live).then_some(HeldBack::NoLiveExecutor)
    }

    /// The live executor owning `partition` of `app`'s trigger topic at `now_ms` (the newest
    /// claim, as in [`Registry::owners`]).
    ///
    /// Dispatch asks this for every acknowledged trigger: it reads the entries in place and
    /// copies only the winner's id.
    pub fn owner_of(&self, app: &AppName, partition: i32, now_ms: i64) -> Option<String> {
        let apps = self.apps.read().expect("registry lock");
        (apps.get(app)?.values())
            .filter(|entry| {
                self.is_live(entry, now_ms) && entry.owned_partitions.contains(&partition)
            })
            .max_by_key(|entry| claim(entry))
            .map(|entry| entry.executor_id.clone())
    }

    /// Who owns each partition of `app`'s trigger topic at `now_ms`, and whether `job` is busy
    /// there: what FAILOVER and BUSYOVER route by.
    pub fn owners(&self, app: &AppName, job: JobId, now_ms: i64) -> AppOwners {
        let apps = self.apps.read().expect("registry lock");
        let mut newest: HashMap<i32, (Claim<'_>, PartitionOwner)> = HashMap::new();
        let live = (apps.get(app).into_iter())
            .flat_map(HashMap::values)
            .filter(|entry| self.is_live(entry, now_ms));
        for entry in live {
            let job_busy =
                entry.running_jobs.contains(&job.get()) || entry.queued_jobs.contains(&job.get());
            for &partition in &entry.owned_partitions {
                match newest.get(&partition) {
                    Some((held, _)) if *held >= claim(entry) => {}
                    _ => {
                        newest.insert(partition, (claim(entry), PartitionOwner::Live { job_busy }));
                    }
                }
            }
        }
        AppOwners {
            owners: newest
                .into_iter()
                .map(|(partition, (_, owner))| (partition, owner))
                .collect(),
        }
    }
}

/// How strongly an executor claims the partitions its beat names; the stronger claim owns a
/// partition two live executors claim (the moment of a rebalance).
type Claim<'a> = (i64, Reverse<&'a str>);

/// `entry`'s claim: the newer beat wins, and of two as new the smaller executor id, so that
/// every node and every lookup name the same owner.
fn claim(entry: &ExecutorEntry) -> Claim<'_> {
    (entry.last_beat_at_ms, Reverse(entry.executor_id.as_str()))
}

/// Whether `entry` takes triggers at `now_ms`: RUNNING, with a beat at most `dead_timeout_ms`
/// old.
pub fn is_live(entry: &ExecutorEntry, now_ms: i64, dead_timeout_ms: i64) -> bool {
    entry.state == ExecutorStatus::Running && beat_recently(entry, now_ms, dead_timeout_ms)
}

/// Whether `entry`'s latest beat is at most `dead_timeout_ms` old at `now_ms`, whatever its
/// state.
fn beat_recently(entry: &ExecutorEntry, now_ms: i64, dead_timeout_ms: i64) -> bool {
    now_ms.saturating_sub(entry.last_beat_at_ms) <= dead_timeout_ms
}

/// Why an app's triggers are signed one by one under `auto` (see
/// [`Registry::round_signatures_held_back`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldBack {
    /// The app has no live executor.
    NoLiveExecutor,
    /// This executor's beats do not list `round-signatures`.
    By(String),
}

impl std::fmt::Display for HeldBack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeldBack::NoLiveExecutor => f.write_str("no executor of the app is live"),
            HeldBack::By(executor) => write!(
                f,
                "executor {executor} does not list round-signatures in its beats (a version \
                 before round signatures)"
            ),
        }
    }
}

/// The owners of one app's partitions at one instant (see [`Registry::owners`]).
#[derive(Debug, Clone, Default)]
pub struct AppOwners {
    owners: HashMap<i32, PartitionOwner>,
}

impl OwnerLookup for AppOwners {
    fn owner(&self, partition: i32) -> PartitionOwner {
        self.owners
            .get(&partition)
            .copied()
            .unwrap_or(PartitionOwner::Unknown)
    }
}

/// The registry entry a beat read at `received_at_ms` stands for.
pub fn entry_from_beat(beat: ExecutorBeat, received_at_ms: i64) -> ExecutorEntry {
    let state = match beat.state {
        kadence_schemas::ExecutorState::Running => ExecutorStatus::Running,
        kadence_schemas::ExecutorState::Stopping => ExecutorStatus::Stopping,
    };
    let last_beat_at_ms = beat.sent_at_ms.min(received_at_ms);
    ExecutorEntry {
        executor_id: beat.executor_id,
        app: beat.app,
        host: beat.host,
        version: beat.version,
        handlers: beat.handlers,
        owned_partitions: beat.owned_partitions,
        running_jobs: beat.running_jobs,
        queued_jobs: beat.queued_jobs,
        state,
        first_seen_at_ms: last_beat_at_ms,
        last_beat_at_ms,
        features: beat.features,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app() -> AppName {
        AppName::parse("billing").unwrap()
    }

    fn entry(id: &str, partitions: &[i32], running: &[i64], beat_ms: i64) -> ExecutorEntry {
        ExecutorEntry {
            executor_id: id.to_owned(),
            app: app(),
            host: "h".to_owned(),
            version: "1".to_owned(),
            handlers: vec!["x".to_owned()],
            owned_partitions: partitions.to_vec(),
            running_jobs: running.to_vec(),
            queued_jobs: Vec::new(),
            state: ExecutorStatus::Running,
            first_seen_at_ms: beat_ms,
            last_beat_at_ms: beat_ms,
            features: vec![ExecutorBeat::ROUND_SIGNATURES.to_owned()],
        }
    }

    #[test]
    fn round_signatures_wait_for_a_live_executor_and_for_every_recent_one_to_verify_them() {
        let registry = Registry::new(Duration::from_secs(10));
        assert_eq!(
            registry.round_signatures_held_back(&app(), 1_000),
            Some(HeldBack::NoLiveExecutor),
            "an app nobody beat for"
        );
        registry.observe(entry("new", &[0], &[], 1_000));
        assert_eq!(registry.round_signatures_held_back(&app(), 1_000), None);

        // An executor of a version before features, draining: it still runs what it holds.
        let mut old = entry("old", &[], &[], 2_000);
        old.features.clear();
        old.state = ExecutorStatus::Stopping;
        registry.observe(old);
        assert_eq!(
            registry.round_signatures_held_back(&app(), 2_000),
            Some(HeldBack::By("old".to_owned()))
        );
        // Once its beats are older than the dead timeout it holds nothing back.
        registry.observe(entry("new", &[0], &[], 5_000));
        assert_eq!(registry.round_signatures_held_back(&app(), 12_001), None);
        // And when no executor is live any more, nothing is signed by the round.
        assert_eq!(
            registry.round_signatures_held_back(&app(), 15_001),
            Some(HeldBack::NoLiveExecutor)
        );
    }

    #[test]
    fn owners_come_from_fresh_running_executors_only() {
        let registry = Registry::new(Duration::from_secs(10));
        let job = JobId::new(5).unwrap();
        registry.observe(entry("a", &[0, 1], &[5], 1_000));
        registry.observe(entry("b", &[2], &[], 1_000));
        let owners = registry.owners(&app(), job, 11_000);
        assert_eq!(owners.owner(0), PartitionOwner::Live { job_busy: true });
        assert_eq!(owners.owner(2), PartitionOwner::Live { job_busy: false });
        assert_eq!(owners.owner(3), PartitionOwner::Unknown);
        // One millisecond past the dead timeout both are gone.
        let owners = registry.owners(&app(), job, 11_001);
        assert_eq!(owners.owner(0), PartitionOwner::Unknown);
        // A STOPPING beat takes the executor out at once.
        let mut stopping = entry("b", &[2], &[], 2_000);
        stopping.state = ExecutorStatus::Stopping;
        registry.observe(stopping);
        assert_eq!(
            registry.owners(&app(), job, 2_000).owner(2),
            PartitionOwner::Unknown
        );
    }

    #[test]
    fn older_beats_never_replace_newer_ones_and_the_newest_claim_owns_a_partition() {
        let registry = Registry::new(Duration::from_secs(10));
        let job = JobId::new(5).unwrap();
        assert!(registry.observe(entry("a", &[0], &[], 5_000)));
        assert!(!registry.observe(entry("a", &[1], &[], 4_000)));
        assert_eq!(
            registry.live_executors(&app(), 5_000)[0].owned_partitions,
            vec![0]
        );
        // During a rebalance b already claims partition 0 while a's last beat still does.
        registry.observe(entry("b", &[0], &[5], 6_000));
        assert_eq!(
            registry.owners(&app(), job, 6_000).owner(0),
            PartitionOwner::Live { job_busy: true }
        );
    }

    #[test]
    fn a_beat_counts_from_the_earlier_of_its_send_and_receive_times() {
        let beat = ExecutorBeat {
            executor_id: "e".to_owned(),
            app: app(),
            host: "h".to_owned(),
            version: "1".to_owned(),
            handlers: vec![],
            owned_partitions: vec![0],
            running_jobs: vec![],
            queued_jobs: vec![],
            state: kadence_schemas::ExecutorState::Running,
            sent_at_ms: 1_000,
            features: vec![],
        };
        // Replayed long after it was sent: as old as it is.
        assert_eq!(entry_from_beat(beat.clone(), 90_000).last_beat_at_ms, 1_000);
        // Sent by a clock running ahead: as of when it arrived.
        assert_eq!(entry_from_beat(beat, 400).last_beat_at_ms, 400);
    }
}
