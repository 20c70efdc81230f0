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
//! State is per scheduler node and in memory, as in XXL-JOB (several nodes each keep their
//! own counters; the strategies' intent — spreading — holds).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use kadence_schemas::JobId;
use md5::{Digest, Md5};
use rand::Rng;

use crate::model::RouteStrategy;

/// ROUND's counter is reset past this (XXL-JOB's value).
const ROUND_RESET_AFTER: u64 = 1_000_000;
/// Every per-job routing state is dropped this often (XXL-JOB: 24 h).
const STATE_LIFETIME_MS: i64 = 24 * 60 * 60 * 1000;
/// Virtual nodes per partition on the consistent-hash ring (XXL-JOB's value).
const VIRTUAL_NODES: i32 = 100;

/// XXL-JOB's ring hash: the first four bytes of the MD5 digest, little-endian.
pub fn ring_hash(key: &str) -> u32 {
    let digest = Md5::digest(key.as_bytes());
    u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// XXL-JOB's consistent-hash ring over `partitions`: hash of each virtual node → partition.
fn build_ring(partitions: i32) -> BTreeMap<u32, i32> {
    let mut ring = BTreeMap::new();
    for partition in 0..partitions.max(1) {
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
    on_ring(&build_ring(partitions), job)
}

/// The first node at or after the job's hash, wrapping around.
fn on_ring(ring: &BTreeMap<u32, i32>, job: JobId) -> i32 {
    let job_hash = ring_hash(&job.to_string());
    ring.range(job_hash..)
        .next()
        .or_else(|| ring.iter().next())
        .map(|(_, partition)| *partition)
        .unwrap_or(0)
}

#[derive(Default)]
struct RouterState {
    round: HashMap<JobId, u64>,
    use_counts: HashMap<JobId, Vec<u64>>,
    recency: HashMap<JobId, VecDeque<i32>>,
    reset_at_ms: i64,
}

/// Picks partitions; keeps the per-job state the stateful strategies need.
#[derive(Default)]
pub struct Router {
    state: Mutex<RouterState>,
    /// Rings depend only on the partition count: built once per count.
    rings: Mutex<HashMap<i32, Arc<BTreeMap<u32, i32>>>>,
}

impl Router {
    /// A router with no history.
    pub fn new() -> Self {
        Router::default()
    }

    /// The partition for one trigger of `job` among `partitions` (≥ 1), at `now_ms`.
    pub fn choose(&self, job: JobId, strategy: RouteStrategy, partitions: i32, now_ms: i64) -> i32 {
        let partitions = partitions.max(1);
        match strategy {
            RouteStrategy::First => 0,
            RouteStrategy::Last => partitions - 1,
            RouteStrategy::Random => rand::rng().random_range(0..partitions),
            RouteStrategy::ConsistentHash => {
                let ring = Arc::clone(
                    self.rings
                        .lock()
                        .expect("ring cache lock")
                        .entry(partitions)
                        .or_insert_with(|| Arc::new(build_ring(partitions))),
                );
                on_ring(&ring, job)
            }
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
                    RouteStrategy::Round => round(&mut state, job, partitions),
                    RouteStrategy::LeastFrequentlyUsed => {
                        least_frequently_used(&mut state, job, partitions)
                    }
                    _ => least_recently_used(&mut state, job, partitions),
                }
            }
        }
    }
}

fn round(state: &mut RouterState, job: JobId, partitions: i32) -> i32 {
    let count = match state.round.get(&job) {
        Some(&count) if count <= ROUND_RESET_AFTER => count + 1,
        // First use (or past the reset): start at a random value so that jobs created
        // together do not all begin on partition 0.
        _ => rand::rng().random_range(0..100),
    };
    state.round.insert(job, count);
    (count % partitions as u64) as i32
}

fn least_frequently_used(state: &mut RouterState, job: JobId, partitions: i32) -> i32 {
    let counts = state.use_counts.entry(job).or_default();
    if counts.len() != partitions as usize {
        // New job or new partition count: start each partition at a small random count, as
        // XXL-JOB does, so jobs do not all pick partition 0 first.
        *counts = (0..partitions)
            .map(|_| rand::rng().random_range(0..partitions as u64))
            .collect();
    }
    let (least, _) = counts
        .iter()
        .enumerate()
        .min_by_key(|(_, count)| **count)
        .expect("at least one partition");
    counts[least] += 1;
    least as i32
}

fn least_recently_used(state: &mut RouterState, job: JobId, partitions: i32) -> i32 {
    let order = state.recency.entry(job).or_default();
    order.retain(|partition| *partition < partitions);
    for partition in 0..partitions {
        if !order.contains(&partition) {
            order.push_back(partition);
        }
    }
    let eldest = order.pop_front().expect("at least one partition");
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
        assert_eq!(router.choose(job(1), RouteStrategy::First, 6, 0), 0);
        assert_eq!(router.choose(job(1), RouteStrategy::Last, 6, 0), 5);
        assert_eq!(router.choose(job(1), RouteStrategy::Last, 1, 0), 0);
    }

    #[test]
    fn random_covers_every_partition_and_stays_in_range() {
        let router = Router::new();
        let mut seen = [0u32; 4];
        for _ in 0..4_000 {
            seen[router.choose(job(1), RouteStrategy::Random, 4, 0) as usize] += 1;
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
                router.choose(job(7), RouteStrategy::ConsistentHash, 6, 0),
                3,
                "always the same"
            );
        }
    }

    #[test]
    fn round_cycles_from_a_random_start_per_job() {
        let router = Router::new();
        let first = router.choose(job(1), RouteStrategy::Round, 4, 0);
        for step in 1..=8 {
            assert_eq!(
                router.choose(job(1), RouteStrategy::Round, 4, 0),
                (first + step) % 4
            );
        }
    }

    #[test]
    fn least_frequently_used_balances_each_job() {
        let router = Router::new();
        let mut hits = [0u32; 3];
        for _ in 0..300 {
            hits[router.choose(job(9), RouteStrategy::LeastFrequentlyUsed, 3, 0) as usize] += 1;
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
            .map(|_| router.choose(job(5), RouteStrategy::LeastRecentlyUsed, 3, 0))
            .collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2]);
        // A day later the history is gone and the order starts again.
        router.choose(job(5), RouteStrategy::LeastRecentlyUsed, 3, 0);
        assert_eq!(
            router.choose(
                job(5),
                RouteStrategy::LeastRecentlyUsed,
                3,
                STATE_LIFETIME_MS
            ),
            0
        );
    }
}
