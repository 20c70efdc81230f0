//! Schedule shards: how several scheduler nodes share the schedule without a global lock.
//!
//! Every job belongs to one of a fixed number of shards (`jobs.shard = id % shards`, the
//! number set by `[schedule] shards` when the first node starts on a database, and fixed from
//! then on). A shard is owned by one node at a time under a lease; the pre-read scan of a
//! node reads and writes the jobs of its own shards only, so nodes scan side by side where
//! XXL-JOB's nodes queue on one lock row.
//!
//! **Leases.** Each node runs a [`ShardLeaser`]: every third of `[schedule] shard_lease` (5 s)
//! its step
//! ([`ShardLeaser::lease_once`], one transaction) records the node as alive, renews the leases
//! of its shards, and evens out ownership: below its share `ceil(shards / live nodes)` it
//! takes free or expired shards, then the highest-numbered shards of live nodes above their
//! share (a rebalance: the shard goes straight from one owner to the other under a new
//! fence, so no moment passes in which nobody scans it; a node never gives shards away
//! itself). One node owns everything by default; a second one takes half at its first step;
//! the shares are uneven only by the rounding (16 shards on 3 nodes: 6, 6, 4); a node that
//! dies leaves its shards
//! to the others once its lease runs out (`kadence_scheduler_shard_takeover_gap_seconds`
//! measures how long they went unscanned; [`check_shard_lease`] keeps that shorter than the
//! time a dead node's jobs were planned ahead plus the pre-read window, so their fires come
//! late, never missed); a node stopping gracefully releases its shards at once.
//!
//! **Fences.** Taking a shard increments its `fence`. A node keeps the fence it took each
//! shard with ([`ShardOwnership`]); every pre-read scan checks, in its own transaction, that
//! its shards still carry those fences and locks them until it commits (see
//! [`PreReadRequest::shards`](crate::store::PreReadRequest::shards)). A node that was paused
//! past its lease (a SIGSTOP, a long GC-like stall, a network partition from the database)
//! and wakes up still believing it owns a shard writes nothing for it: the check fails, the
//! shard is dropped, `kadence_scheduler_shards_lost_total` counts it. Locally a node also
//! stops scanning once its lease has run out by its own clock without a renewal.
//!
//! What a shard's scan wrote before its owner died is not lost: pending fires stay owned by
//! their node under their own lease and are claimed by another node after it (see
//! [`crate::engine::claims`]), with the same trigger ids.
//!
//! Leases compare the clocks of different nodes: keep them synchronised (NTP). A skew makes a
//! takeover earlier or later by that much, never unsafe: the fence decides.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kadence_kafka::{FailureLog, Severity};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, millis};
use crate::metrics::SchedulerMetrics;
use crate::store::{
    Acquisition, OwnedShard, ScheduleShards, ShardLease, ShardLeaseRequest, StoreError,
};

/// Most schedule shards a database may be split into: more than nodes anyone runs, few
/// enough that a scan's shard list stays short.
pub const MAX_SHARDS: u32 = 1024;

/// Why the schedule shards could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ShardSetupError {
    /// `[schedule] shards` is out of range.
    #[error("schedule.shards is {0}; it must be between 1 and {MAX_SHARDS}")]
    OutOfRange(u32),
    /// `[schedule] shard_lease` is so long that a dead node's jobs could wait past the pre-read
    /// window for another node.
    #[error(
        "schedule.shard_lease {lease:?} is too long: a dead node's shards are taken over within \
         4/3 of it, and that must stay under {limit:?} (the read-ahead plus the pre-read window), \
         or their fires would be missed rather than late"
    )]
    LeaseTooLong {
        /// The configured lease.
        lease: Duration,
        /// What 4/3 of it must stay under.
        limit: Duration,
    },
    /// The database refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Refuses a shard lease under which a dead node's jobs could go unscanned longer than they
/// were planned ahead plus the pre-read window: a dead node planned each job at least
/// `read_ahead` ahead, its shards are taken over within `4/3 × lease` (the lease plus one
/// renewal interval), and a fire later than the window follows its misfire strategy (with
/// DO_NOTHING it would be lost).
pub fn check_shard_lease(
    lease: Duration,
    read_ahead: Duration,
    window: Duration,
) -> Result<(), ShardSetupError> {
    let limit = read_ahead + window;
    if lease + lease / 3 < limit {
        Ok(())
    } else {
        Err(ShardSetupError::LeaseTooLong { lease, limit })
    }
}

/// Creates the schedule shards on a database's first start; returns how many there are. A
/// database split otherwise keeps its number, with a warning: changing it would move jobs
/// between shards under their owners' feet.
pub async fn ensure_schedule_shards(
    store: &dyn ScheduleShards,
    configured: u32,
) -> Result<u32, ShardSetupError> {
    if !(1..=MAX_SHARDS).contains(&configured) {
        return Err(ShardSetupError::OutOfRange(configured));
    }
    let shards = store.ensure_shards(configured).await?;
    if shards != configured {
        tracing::warn!(
            configured,
            shards,
            "this database was split into another number of schedule shards when its first node started; using that"
        );
    }
    Ok(shards)
}

/// The shards this node holds, with their fences, and until when its lease lets it use them
/// by its own clock.
pub struct ShardOwnership {
    node_id: String,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    shards: Vec<OwnedShard>,
    valid_until_ms: i64,
}

impl ShardOwnership {
    /// Nothing held yet, for `node_id`.
    pub fn new(node_id: impl Into<String>) -> ShardOwnership {
        ShardOwnership {
            node_id: node_id.into(),
            held: Mutex::default(),
        }
    }

    /// The node.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The shards a scan at `now_ms` may cover: none once the lease ran out unrenewed.
    pub fn usable(&self, now_ms: i64) -> Vec<OwnedShard> {
        let held = self.held.lock().expect("shard ownership lock");
        if now_ms <= held.valid_until_ms {
            held.shards.clone()
        } else {
            Vec::new()
        }
    }

    /// How many shards are held.
    pub fn count(&self) -> usize {
        self.held.lock().expect("shard ownership lock").shards.len()
    }

    /// Replaces what is held after a lease step at `now_ms`; usable until `valid_until_ms`.
    /// Returns the shards held before and not now (see [`Gone`]). A shard the step holds
    /// under a new fence was gone too: another node owned it in between (a node woken after
    /// its lease ran out can take back the very shards it lost, in its first step).
    fn replace(&self, lease: &ShardLease, now_ms: i64, valid_until_ms: i64) -> Gone {
        let mut held = self.held.lock().expect("shard ownership lock");
        let gone: Vec<u32> = (held.shards.iter())
            .filter(|owned| !lease.owned.contains(owned))
            .map(|owned| owned.shard)
            .collect();
        let gone = Gone::classify(gone, now_ms <= held.valid_until_ms);
        held.shards = lease.owned.clone();
        held.valid_until_ms = valid_until_ms;
        gone
    }

    /// Drops the `fenced_out` shards a scan at `now_ms` found owned by another node.
    pub fn drop_fenced(&self, fenced_out: &[u32], now_ms: i64) -> Gone {
        let mut held = self.held.lock().expect("shard ownership lock");
        let gone: Vec<u32> = held
            .shards
            .iter()
            .map(|owned| owned.shard)
            .filter(|shard| fenced_out.contains(shard))
            .collect();
        held.shards
            .retain(|owned| !fenced_out.contains(&owned.shard));
        Gone::classify(gone, now_ms <= held.valid_until_ms)
    }
}

/// Shards a node found another node owning.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Gone {
    /// Taken while this node's lease on them still ran: a node short of its share took them
    /// (a rebalance, nothing wrong).
    pub handed_over: Vec<u32>,
    /// Taken after this node's lease ran out unrenewed: it was frozen or cut off, and any
    /// write it still tried for them was refused.
    pub lost: Vec<u32>,
}

impl Gone {
    fn classify(shards: Vec<u32>, lease_ran: bool) -> Gone {
        if lease_ran {
            Gone {
                handed_over: shards,
                lost: Vec::new(),
            }
        } else {
            Gone {
                handed_over: Vec::new(),
                lost: shards,
            }
        }
    }

    /// Counts and logs them.
    pub fn report(&self, metrics: &crate::metrics::ShardMetrics, node_id: &str) {
        if !self.handed_over.is_empty() {
            tracing::info!(shards = ?self.handed_over, node_id,
                "schedule shards handed over to a node short of its share");
        }
        if !self.lost.is_empty() {
            metrics.lost.inc_by(self.lost.len() as u64);
            tracing::warn!(shards = ?self.lost, node_id,
                "schedule shards taken by another node while this one did not renew them; nothing was written for them since");
        }
    }
}

/// Keeps this node's shard leases: renews them and takes its share.
pub struct ShardLeaser {
    store: Arc<dyn ScheduleShards>,
    ownership: Arc<ShardOwnership>,
    lease: Duration,
    metrics: Arc<SchedulerMetrics>,
    pre_read_waker: Arc<Notify>,
}

impl ShardLeaser {
    /// A leaser for `ownership`'s node with leases of `lease`, waking `pre_read_waker` when it
    /// took shards (their jobs are scanned at once, not at the next tick).
    pub fn new(
        store: Arc<dyn ScheduleShards>,
        ownership: Arc<ShardOwnership>,
        lease: Duration,
        pre_read_waker: Arc<Notify>,
    ) -> ShardLeaser {
        ShardLeaser {
            store,
            ownership,
            lease,
            metrics: Arc::default(),
            pre_read_waker,
        }
    }

    /// The same leaser counting into `metrics`.
    pub fn with_metrics(self, metrics: Arc<SchedulerMetrics>) -> ShardLeaser {
        ShardLeaser { metrics, ..self }
    }

    /// How often the loop steps: three times per lease, so one failed step loses nothing.
    pub fn interval(&self) -> Duration {
        (self.lease / 3).max(Duration::from_millis(50))
    }

    /// One lease step at `now_ms` (see the module docs).
    pub async fn lease_once(&self, now_ms: i64) -> Result<ShardLease, StoreError> {
        let lease_ms = millis(self.lease);
        let lease = self
            .store
            .lease_shards(&ShardLeaseRequest {
                node_id: self.ownership.node_id().to_owned(),
                now_ms,
                lease_ms,
            })
            .await
            .inspect_err(|_| self.metrics.shards.lease_failures.inc())?;
        let metrics = &self.metrics.shards;
        self.ownership
            .replace(&lease, now_ms, now_ms + lease_ms)
            .report(metrics, self.ownership.node_id());
        metrics.owned.set(lease.owned.len() as i64);
        metrics.total.set(i64::from(lease.total_shards));
        for acquired in &lease.acquired {
            let unscanned_ms = (acquired.how == Acquisition::Takeover
                && acquired.scanned_at_ms > 0)
                .then(|| now_ms - acquired.scanned_at_ms);
            metrics.count_acquired(acquired.how.label(), unscanned_ms);
            if acquired.how == Acquisition::Takeover {
                tracing::warn!(shard = acquired.owned.shard, from = ?acquired.from,
                    unscanned_ms = now_ms - acquired.scanned_at_ms,
                    "took over a schedule shard whose owner's lease ran out");
            }
        }
        if !lease.acquired.is_empty() {
            tracing::info!(
                acquired = ?lease.acquired.iter().map(|a| (a.owned.shard, a.how.label())).collect::<Vec<_>>(),
                owned = lease.owned.len(),
                live_nodes = lease.live_nodes,
                total = lease.total_shards,
                "schedule shards changed hands"
            );
        }
        if !lease.acquired.is_empty() {
            self.pre_read_waker.notify_one();
        }
        Ok(lease)
    }

    /// Steps until `shutdown`, then releases every shard so that the other nodes take them
    /// at their next step rather than after the lease.
    pub async fn run(self, clock: Arc<dyn Clock>, shutdown: CancellationToken) {
        let interval = self.interval();
        let mut failures = FailureLog::new("schedule shard lease step", Severity::Error);
        loop {
            failures.record(&self.lease_once(clock.now_ms()).await);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(interval) => {}
            }
        }
        self.ownership.replace(&ShardLease::default(), 0, 0);
        self.metrics.shards.owned.set(0);
        match self
            .store
            .release_all_shards(self.ownership.node_id())
            .await
        {
            Ok(()) => tracing::info!("schedule shards released"),
            Err(error) => tracing::warn!(%error,
                "could not release the schedule shards; other nodes take them when the lease ends"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(owned: &[(u32, i64)]) -> ShardLease {
        ShardLease {
            owned: owned
                .iter()
                .map(|&(shard, fence)| OwnedShard { shard, fence })
                .collect(),
            ..ShardLease::default()
        }
    }

    #[test]
    fn a_shard_lease_must_let_a_takeover_come_before_fires_are_missed() {
        let seconds = Duration::from_secs;
        assert!(check_shard_lease(seconds(5), seconds(3), seconds(5)).is_ok());
        let error = check_shard_lease(seconds(10), seconds(3), seconds(5)).unwrap_err();
        assert!(error.to_string().contains("too long"), "{error}");
    }

    #[test]
    fn held_shards_are_usable_only_while_the_lease_lasts_by_the_local_clock() {
        let ownership = ShardOwnership::new("node-a");
        assert!(ownership.usable(0).is_empty());
        ownership.replace(&lease(&[(0, 1), (1, 4)]), 0, 10_000);
        assert_eq!(ownership.usable(10_000).len(), 2);
        assert!(ownership.usable(10_001).is_empty(), "lapsed, unrenewed");
        assert_eq!(ownership.count(), 2);
    }

    #[test]
    fn a_shard_taken_while_the_lease_ran_was_handed_over_after_it_lost() {
        let ownership = ShardOwnership::new("node-a");
        ownership.replace(&lease(&[(0, 1), (1, 1), (2, 1), (3, 1)]), 0, 10_000);
        let gone = ownership.replace(&lease(&[(0, 1), (1, 1), (2, 1)]), 5_000, 15_000);
        assert_eq!(
            gone,
            Gone {
                handed_over: vec![3],
                lost: vec![]
            }
        );
        let gone = ownership.replace(&lease(&[(0, 1)]), 16_000, 26_000);
        assert_eq!(
            gone,
            Gone {
                handed_over: vec![],
                lost: vec![1, 2]
            }
        );
        assert_eq!(ownership.drop_fenced(&[0, 7], 30_000).lost, [0]);
        assert_eq!(ownership.count(), 0);
    }

    #[test]
    fn a_shard_taken_back_under_a_new_fence_was_lost_in_between() {
        let ownership = ShardOwnership::new("node-a");
        ownership.replace(&lease(&[(8, 1), (9, 1)]), 0, 10_000);
        let renewed = ownership.replace(&lease(&[(8, 1), (9, 1)]), 5_000, 15_000);
        assert_eq!(renewed, Gone::default(), "renewed under the same fences");
        // Frozen past its lease: another node took both (fence 2), and this node's first
        // step after it woke took them back (fence 3).
        let gone = ownership.replace(&lease(&[(8, 3), (9, 3)]), 40_000, 50_000);
        assert_eq!(
            gone,
            Gone {
                handed_over: vec![],
                lost: vec![8, 9]
            }
        );
    }
}
