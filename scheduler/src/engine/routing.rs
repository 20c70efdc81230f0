//! Routing = partition choice. In XXL-JOB the route strategy picks an executor address; here it
//! picks a partition of `{prefix}.triggers.{app}`, and the executors' consumer group decides
//! which executor owns that partition. A trigger for an app with no live executor therefore
//! waits in its partition until one joins, instead of failing.
//!
//! The strategies follow XXL-JOB's `ExecutorRoute*` classes with partitions for addresses:
//! - FIRST / LAST: partition 0 / the last one;
//! - RANDOM: uniform;
//! - ROUND: a per-job counter that starts at a random value in [0, 100) and is reset after
//!   1 000 000 or every 24 h;
//! - CONSISTENT_HASH: XXL-JOB's ring — the first four bytes of the MD5 of a UTF-8 key, read
//!   little-endian; 100 virtual nodes per partition keyed `SHARD-{partition}-NODE-{i}`; the
//!   job's key is its decimal id; the first node at or after the job's hash, wrapping. A job
//!   always lands on the same partition, so one executor at a time runs it;
//! - LEAST_FREQUENTLY_USED / LEAST_RECENTLY_USED: per job over the partitions, reset every 24 h.
//!
//! - FAILOVER: the first partition whose owning executor's beat is fresh (from the registry,
//!   [`crate::engine::registry`]); BUSYOVER: the first partition whose live owner reports this job
//!   neither running nor queued. When no partition qualifies, FAILOVER takes the first
//!   partition (the trigger waits there until an executor joins) and BUSYOVER falls back to
//!   FAILOVER's choice (XXL-JOB fails the trigger instead; we never drop one);
//! - SHARDING_BROADCAST fires are split into one shard per partition before they are written
//!   ([`crate::domain::model::PendingFire::into_shards`]); each shard names its single partition.
//!
//! Every strategy chooses among *candidate* partitions: all of the app's, or those a manual
//! trigger named (XXL-JOB's address override), in which case the ring, the counters and the
//! failover order run over the named ones only.
//!
//! State is per scheduler node and in memory, as in XXL-JOB (several nodes each keep their
//! own counters; the strategies' intent — spreading — holds).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use kadence_schemas::JobId;
use md5::{Digest, Md5};
use rand::Rng;

use crate::domain::model::{PendingFire, RouteStrategy};

/// ROUND's counter is reset past this (XXL-JOB's value).
const ROUND_RESET_AFTER: u64 = 1_000_000;
/// LEAST_FREQUENTLY_USED's counts are reset past this (XXL-JOB's value).
const USE_COUNT_RESET_AFTER: u64 = 1_000_000;
/// Every per-job routing state is dropped this often (XXL-JOB: 24 h).
const STATE_LIFETIME_MS: i64 = 24 * 60 * 60 * 1000;
/// Virtual nodes per partition on the consistent-hash ring (XXL-JOB's value).
const VIRTUAL_NODES: i32 = 100;

/// XXL-JOB's ring hash: the first four bytes of the MD5 digest, little-endian.
pub fn ring_hash(key: &str) -> u32 {
    let digest = Md5::digest(key.as_bytes());
    u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// A consistent-hash ring: hash of each virtual node → partition.
type Ring = BTreeMap<u32, i32>;

/// XXL-JOB's consistent-hash ring over `partitions`.
fn build_ring(partitions: &[i32]) -> Ring {
    let mut ring = BTreeMap::new();
    for &partition in partitions {
        for node in 0..VIRTUAL_NODES {
            ring.insert(
                ring_hash(&format!("SHARD-{partition}-NODE-{node}")),
                partition,
            );
        }
    }
    ring
}

/// The partition of `job` on XXL-JOB's consistent-hash ring over `partitions`.
pub fn consistent_hash_partition(job: JobId, partitions: i32) -> i32 {
    on_ring(&build_ring(&all_partitions(partitions)), job)
}

/// Partitions `0..count` (at least partition 0).
pub fn all_partitions(count: i32) -> Vec<i32> {
    (0..count.max(1)).collect()
}

/// The first node at or after the job's hash, wrapping around.
/// The candidate partitions of `fire` on a trigger topic of `partitions`: those it names, or
/// all when it names none. Named partitions the topic does not have are ignored, loudly: the
/// API refuses them, but a row edited by hand could still hold one; when none is left, all.
pub fn candidates_of(fire: &PendingFire, partitions: i32) -> Vec<i32> {
    let Some(named) = &fire.route_partitions else {
        return all_partitions(partitions);
    };
    let in_range: Vec<i32> = (named.iter().copied())
        .filter(|partition| (0..partitions).contains(partition))
        .collect();
    if in_range.len() < named.len() {
        tracing::error!(trigger_id = %fire.trigger_id, ?named, partitions,
            "trigger names partitions the app does not have; ignoring those");
    }
    if in_range.is_empty() {
        all_partitions(partitions)
    } else {
        in_range
    }
}

fn on_ring(ring: &Ring, job: JobId) -> i32 {
    let job_hash = ring_hash(&job.to_string());
    ring.range(job_hash..)
        .next()
        .or_else(|| ring.iter().next())
        .map(|(_, partition)| *partition)
        .unwrap_or(0)
}

/// What routing knows of the executor that owns a partition (from the registry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionOwner {
    /// No executor with a fresh beat owns it (none joined, or its owner's beats stopped).
    Unknown,
    /// A live executor owns it; `job_busy` says whether it reports the job running or queued.
    Live {
        /// The job being routed has a run in progress or queued there.
        job_busy: bool,
    },
}

/// Answers FAILOVER's and BUSYOVER's question about each partition.
pub trait OwnerLookup {
    /// The owner of `partition`, as of now.
    fn owner(&self, partition: i32) -> PartitionOwner;
}

/// For strategies that do not look at executors, and for tests: every owner unknown.
pub struct NoOwners;

impl OwnerLookup for NoOwners {
    fn owner(&self, _partition: i32) -> PartitionOwner {
        PartitionOwner::Unknown
    }
}

#[derive(Default)]
struct RouterState {
    round: HashMap<JobId, u64>,
    use_counts: HashMap<JobId, HashMap<i32, u64>>,
    recency: HashMap<JobId, VecDeque<i32>>,
    reset_at_ms: i64,
}

/// Picks partitions; keeps the per-job state the stateful strategies need.
#[derive(Default)]
pub struct Router {
    state: Mutex<RouterState>,
    /// Rings depend only on the candidate partitions: built once per set.
    rings: Mutex<HashMap<Vec<i32>, Arc<Ring>>>,
}

impl Router {
    /// A router with no history.
    pub fn new() -> Self {
        Router::default()
    }

    /// The partition for one trigger of `job` among `candidates` (not empty; callers pass
    /// [`all_partitions`] unless the trigger named some), at `now_ms`. `owners` is consulted
    /// by FAILOVER and BUSYOVER only.
    pub fn choose(
        &self,
        job: JobId,
        strategy: RouteStrategy,
        candidates: &[i32],
        owners: &dyn OwnerLookup,
        now_ms: i64,
    ) -> i32 {
        let Some(&first) = candidates.first() else {
            return 0;
        };
        match strategy {
            // A broadcast shard names its single partition; a broadcast that was not split
            // (cannot happen through the store) goes to the first candidate.
            RouteStrategy::First | RouteStrategy::ShardingBroadcast => first,
            RouteStrategy::Last => candidates[candidates.len() - 1],
            RouteStrategy::Random => candidates[rand::rng().random_range(0..candidates.len())],
            RouteStrategy::ConsistentHash => {
                let ring = Arc::clone(
                    self.rings
                        .lock()
                        .expect("ring cache lock")
                        .entry(candidates.to_vec())
                        .or_insert_with(|| Arc::new(build_ring(candidates))),
                );
                on_ring(&ring, job)
            }
            RouteStrategy::Failover => failover(candidates, owners),
            RouteStrategy::Busyover => candidates
                .iter()
                .copied()
                .find(|&partition| {
                    owners.owner(partition) == PartitionOwner::Live { job_busy: false }
                })
                .unwrap_or_else(|| failover(candidates, owners)),
            RouteStrategy::Round
            | RouteStrategy::LeastFrequentlyUsed
            | RouteStrategy::LeastRecentlyUsed => {
                let mut state = self.state.lock().expect("router lock");
                if now_ms >= state.reset_at_ms {
                    *state = RouterState {
                        reset_at_ms: now_ms + STATE_LIFETIME_MS,
                        ..RouterState::default()
                    };
                }
                match strategy {
                    RouteStrategy::Round => round(&mut state, job, candidates),
                    RouteStrategy::LeastFrequentlyUsed => {
                        least_frequently_used(&mut state, job, candidates)
                    }
                    _ => least_recently_used(&mut state, job, candidates),
                }
            }
        }
    }
}

/// The first candidate with a live owner, else the first candidate (the trigger waits there).
fn failover(candidates: &[i32], owners: &dyn OwnerLookup) -> i32 {
    candidates
        .iter()
        .copied()
        .find(|&partition| matches!(owners.owner(partition), PartitionOwner::Live { .. }))
        .unwrap_or(candidates[0])
}

fn round(state: &mut RouterState, job: JobId, candidates: &[i32]) -> i32 {
    let count = match state.round.get(&job) {
        Some(&count) if count <= ROUND_RESET_AFTER => count + 1,
        // First use (or past the reset): start at a random value so that jobs created
        // together do not all begin on partition 0.
        _ => rand::rng().random_range(0..100),
    };
    state.round.insert(job, count);
    candidates[(count % candidates.len() as u64) as usize]
}

fn least_frequently_used(state: &mut RouterState, job: JobId, candidates: &[i32]) -> i32 {
    let counts = state.use_counts.entry(job).or_default();
    let spread = candidates.len() as u64;
    for &partition in candidates {
        let count = counts.entry(partition).or_insert(u64::MAX);
        if *count > USE_COUNT_RESET_AFTER {
            // New partition (or past the reset): start at a small random count, as XXL-JOB
            // does, so jobs do not all pick the first partition first.
            *count = rand::rng().random_range(0..spread);
        }
    }
    let least = candidates
        .iter()
        .copied()
        .min_by_key(|partition| counts[partition])
        .expect("at least one candidate");
    *counts.get_mut(&least).expect("counted above") += 1;
    least
}

fn least_recently_used(state: &mut RouterState, job: JobId, candidates: &[i32]) -> i32 {
    let order = state.recency.entry(job).or_default();
    for &partition in candidates {
        if !order.contains(&partition) {
            order.push_back(partition);
        }
    }
    let position = order
        .iter()
        .position(|partition| candidates.contains(partition))
        .expect("every candidate is in the order");
    let eldest = order.remove(position).expect("position is in range");
    order.push_back(eldest);
    eldest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: i64) -> JobId {
        JobId::new(id).unwrap()
    }

    #[test]
    fn first_and_last_are_fixed() {
        let router = Router::new();
        assert_eq!(
            router.choose(
                job(1),
                RouteStrategy::First,
                &all_partitions(6),
                &NoOwners,
                0
            ),
            0
        );
        assert_eq!(
            router.choose(
                job(1),
                RouteStrategy::Last,
                &all_partitions(6),
                &NoOwners,
                0
            ),
            5
        );
        assert_eq!(
            router.choose(
                job(1),
                RouteStrategy::Last,
                &all_partitions(1),
                &NoOwners,
                0
            ),
            0
        );
    }

    #[test]
    fn random_covers_every_partition_and_stays_in_range() {
        let router = Router::new();
        let mut seen = [0u32; 4];
        for _ in 0..4_000 {
            seen[router.choose(
                job(1),
                RouteStrategy::Random,
                &all_partitions(4),
                &NoOwners,
                0,
            ) as usize] += 1;
        }
        // Each partition expects 1000 hits; 700 is more than 9 standard deviations below.
        assert!(seen.iter().all(|&hits| hits > 700), "{seen:?}");
    }

    /// Vectors computed independently (Python's hashlib over the same keys and ring).
    #[test]
    fn consistent_hash_matches_xxl_jobs_ring() {
        assert_eq!(ring_hash("1"), 943_901_380);
        assert_eq!(ring_hash("SHARD-0-NODE-0"), 4_193_559_948);
        assert_eq!(ring_hash("kadence"), 1_911_229_544);
        let three = [
            (1, 2),
            (2, 1),
            (3, 1),
            (7, 2),
            (42, 2),
            (100, 2),
            (12345, 0),
            (999_999, 0),
        ];
        let six = [
            (1, 4),
            (2, 1),
            (3, 1),
            (7, 3),
            (42, 2),
            (100, 2),
            (12345, 0),
            (999_999, 4),
        ];
        for (partitions, vectors) in [(3, three), (6, six)] {
            for (id, expected) in vectors {
                assert_eq!(
                    consistent_hash_partition(job(id), partitions),
                    expected,
                    "job {id} over {partitions}"
                );
            }
        }
        let router = Router::new();
        for _ in 0..10 {
            assert_eq!(
                router.choose(
                    job(7),
                    RouteStrategy::ConsistentHash,
                    &all_partitions(6),
                    &NoOwners,
                    0
                ),
                3,
                "always the same"
            );
        }
    }

    #[test]
    fn round_cycles_from_a_random_start_per_job() {
        let router = Router::new();
        let first = router.choose(
            job(1),
            RouteStrategy::Round,
            &all_partitions(4),
            &NoOwners,
            0,
        );
        for step in 1..=8 {
            assert_eq!(
                router.choose(
                    job(1),
                    RouteStrategy::Round,
                    &all_partitions(4),
                    &NoOwners,
                    0
                ),
                (first + step) % 4
            );
        }
    }

    #[test]
    fn least_frequently_used_balances_each_job() {
        let router = Router::new();
        let mut hits = [0u32; 3];
        for _ in 0..300 {
            hits[router.choose(
                job(9),
                RouteStrategy::LeastFrequentlyUsed,
                &all_partitions(3),
                &NoOwners,
                0,
            ) as usize] += 1;
        }
        // Initial counts are below 3, so after 300 uses the spread is at most 3 apart.
        assert!(
            hits.iter().max().unwrap() - hits.iter().min().unwrap() <= 3,
            "{hits:?}"
        );
    }

    #[test]
    fn least_recently_used_rotates_and_resets_daily() {
        let router = Router::new();
        let picks: Vec<i32> = (0..6)
            .map(|_| {
                router.choose(
                    job(5),
                    RouteStrategy::LeastRecentlyUsed,
                    &all_partitions(3),
                    &NoOwners,
                    0,
                )
            })
            .collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2]);
        // A day later the history is gone and the order starts again.
        router.choose(
            job(5),
            RouteStrategy::LeastRecentlyUsed,
            &all_partitions(3),
            &NoOwners,
            0,
        );
        assert_eq!(
            router.choose(
                job(5),
                RouteStrategy::LeastRecentlyUsed,
                &all_partitions(3),
                &NoOwners,
                STATE_LIFETIME_MS
            ),
            0
        );
    }

    /// Owners for tests: partition → live owner's busy flag (absent = unknown).
    struct Owners(HashMap<i32, bool>);

    impl OwnerLookup for Owners {
        fn owner(&self, partition: i32) -> PartitionOwner {
            match self.0.get(&partition) {
                Some(&job_busy) => PartitionOwner::Live { job_busy },
                None => PartitionOwner::Unknown,
            }
        }
    }

    #[test]
    fn failover_takes_the_first_partition_with_a_live_owner() {
        let router = Router::new();
        let all = all_partitions(4);
        let choose =
            |owners: &Owners| router.choose(job(1), RouteStrategy::Failover, &all, owners, 0);
        assert_eq!(choose(&Owners(HashMap::from([(0, false), (1, false)]))), 0);
        // Partition 0's owner is stale: skip it, whether or not the job is busy elsewhere.
        assert_eq!(choose(&Owners(HashMap::from([(2, true), (3, false)]))), 2);
        // Nobody alive: the first partition, where the trigger waits for an executor.
        assert_eq!(choose(&Owners(HashMap::new())), 0);
    }

    #[test]
    fn busyover_takes_the_first_live_owner_with_the_job_idle() {
        let router = Router::new();
        let all = all_partitions(4);
        let choose =
            |owners: &Owners| router.choose(job(1), RouteStrategy::Busyover, &all, owners, 0);
        assert_eq!(
            choose(&Owners(HashMap::from([
                (0, true),
                (1, true),
                (2, false),
                (3, false)
            ]))),
            2
        );
        // Busy everywhere: fall back to failover's choice rather than drop the trigger.
        assert_eq!(choose(&Owners(HashMap::from([(1, true), (3, true)]))), 1);
        assert_eq!(choose(&Owners(HashMap::new())), 0);
    }

    #[test]
    fn named_partitions_restrict_every_strategy() {
        let router = Router::new();
        let named = [1, 3];
        for strategy in [
            RouteStrategy::First,
            RouteStrategy::Last,
            RouteStrategy::Random,
            RouteStrategy::Round,
            RouteStrategy::ConsistentHash,
            RouteStrategy::LeastFrequentlyUsed,
            RouteStrategy::LeastRecentlyUsed,
            RouteStrategy::Failover,
            RouteStrategy::Busyover,
            RouteStrategy::ShardingBroadcast,
        ] {
            for _ in 0..20 {
                let partition = router.choose(job(4), strategy, &named, &NoOwners, 0);
                assert!(named.contains(&partition), "{strategy}: {partition}");
            }
        }
        assert_eq!(
            router.choose(job(4), RouteStrategy::First, &named, &NoOwners, 0),
            1
        );
        assert_eq!(
            router.choose(job(4), RouteStrategy::Last, &named, &NoOwners, 0),
            3
        );
        // The ring over the named partitions only: keys SHARD-1-NODE-i and SHARD-3-NODE-i.
        let ring = build_ring(&named);
        assert_eq!(ring.len(), 200);
        assert_eq!(
            router.choose(job(4), RouteStrategy::ConsistentHash, &named, &NoOwners, 0),
            on_ring(&ring, job(4))
        );
        let picks: Vec<i32> = (0..4)
            .map(|_| {
                router.choose(
                    job(8),
                    RouteStrategy::LeastRecentlyUsed,
                    &named,
                    &NoOwners,
                    0,
                )
            })
            .collect();
        assert_eq!(picks, vec![1, 3, 1, 3]);
    }
}
