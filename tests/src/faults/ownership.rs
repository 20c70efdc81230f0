//! Which partitions each executor owns, from the `owns <partitions>` lines the test executor
//! prints on every change of its assignment (`none` for none): whether the group shares every
//! partition, and when one executor came to own them all (a handover). The lines are the
//! executor's own word on what its group assigned; the counts a scenario reports still come
//! from the topics and the API.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use super::api::PARTITIONS;
use crate::now_ms;

/// The partitions the executor logging to `log` owns by its latest `owns` line, looking only
/// past its first `skip` bytes (empty before its first assignment there).
pub fn owned(log: &Path, skip: u64) -> BTreeSet<i32> {
    let text = std::fs::read(log).unwrap_or_default();
    let fresh = text
        .get(usize::try_from(skip).unwrap_or(usize::MAX)..)
        .unwrap_or_default();
    let fresh = String::from_utf8_lossy(fresh);
    let latest = fresh
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("owns "));
    latest
        .unwrap_or_default()
        .split(',')
        .filter_map(|partition| partition.parse().ok())
        .collect()
}

/// How much `log` holds now: where lines written from now on start, for [`owned`] and
/// [`owns_all_within`].
pub fn log_length(log: &Path) -> u64 {
    std::fs::metadata(log).map_or(0, |meta| meta.len())
}

/// Whether, within `limit`, the executors logging to `logs` each own at least one partition
/// and every partition between them: a group formed with work for every member.
pub async fn shared_within(logs: &[&Path], limit: Duration) -> bool {
    let until = tokio::time::Instant::now() + limit;
    loop {
        let owned: Vec<BTreeSet<i32>> = logs.iter().map(|log| owned(log, 0)).collect();
        let all: BTreeSet<i32> = owned.iter().flatten().copied().collect();
        if owned.iter().all(|one| !one.is_empty()) && all.len() == PARTITIONS as usize {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// When (ms since the epoch) the executor logging to `log` said it owned every partition,
/// looking only past its first `skip` bytes, within `limit`; `None` if it did not.
pub async fn owns_all_within(log: &Path, skip: u64, limit: Duration) -> Option<i64> {
    let until = tokio::time::Instant::now() + limit;
    loop {
        if owned(log, skip).len() == PARTITIONS as usize {
            return Some(now_ms());
        }
        if tokio::time::Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
