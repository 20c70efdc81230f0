//! The metrics of schedule shards (see [`crate::engine::shards`]): how many this node owns, how it got
//! them, how long a dead node's shards went unscanned, and shards lost to a fence.

use prometheus::core::Collector;
use prometheus::{Histogram, IntCounter, IntCounterVec, IntGauge};

use super::{LATENESS_BUCKETS, counter, counter_vec, histogram, seconds};

/// Schedule-shard metrics of one node.
pub struct ShardMetrics {
    /// Shards this node owns now.
    pub owned: IntGauge,
    /// Shards the database is split into (as of this node's last lease step): the sum of
    /// `owned` over the nodes should reach it.
    pub total: IntGauge,
    /// Shards this node took, by how: `free` (released or never owned), `takeover` (its
    /// owner's lease had run out) or `rebalance` (from a node above its share).
    pub acquired: IntCounterVec,
    /// For each takeover, the time from the dead owner's last scan of the shard to this
    /// node's taking it: how long the shard's jobs went unscanned.
    pub takeover_gap: Histogram,
    /// Shards this node held but found another node owning after its lease on them ran out
    /// unrenewed (paused, cut off from the database); nothing was written for them since.
    /// (Shards a node short of its share takes while the lease runs are not lost: handed over.)
    pub lost: IntCounter,
    /// Lease steps that failed (the database said no); the shards stay held until the lease
    /// runs out by this node's clock, then scanning them pauses.
    pub lease_failures: IntCounter,
}

impl ShardMetrics {
    pub(super) fn new() -> ShardMetrics {
        let acquired = counter_vec(
            "kadence_scheduler_shards_acquired_total",
            "Schedule shards this node took, by how: free (released or never owned), \
             takeover (the owner's lease had run out) or rebalance (from a node above its share).",
            &["how"],
        );
        for how in ["free", "takeover", "rebalance"] {
            acquired.with_label_values(&[how]);
        }
        ShardMetrics {
            owned: IntGauge::new(
                "kadence_scheduler_shards_owned",
                "Schedule shards this node owns.",
            )
            .expect("valid metric definition"),
            total: IntGauge::new(
                "kadence_scheduler_shards",
                "Schedule shards the database is split into, as of this node's last lease step.",
            )
            .expect("valid metric definition"),
            acquired,
            takeover_gap: histogram(
                "kadence_scheduler_shard_takeover_gap_seconds",
                "For each shard taken over from a node whose lease ran out: time from that \
                 node's last scan of it to the takeover.",
                LATENESS_BUCKETS,
            ),
            lost: counter(
                "kadence_scheduler_shards_lost_total",
                "Schedule shards this node held but found owned by another node (fenced out).",
            ),
            lease_failures: counter(
                "kadence_scheduler_shard_lease_failures_total",
                "Shard lease steps that failed; retried at the next step.",
            ),
        }
    }

    /// Counts a shard taken `how` (`free`, `takeover`, `rebalance`); for a takeover, also
    /// `unscanned_ms`, the time since its dead owner last scanned it.
    pub fn count_acquired(&self, how: &str, unscanned_ms: Option<i64>) {
        self.acquired.with_label_values(&[how]).inc();
        if let Some(unscanned_ms) = unscanned_ms {
            self.takeover_gap.observe(seconds(unscanned_ms));
        }
    }

    pub(super) fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![
            Box::new(self.owned.clone()),
            Box::new(self.total.clone()),
            Box::new(self.acquired.clone()),
            Box::new(self.takeover_gap.clone()),
            Box::new(self.lost.clone()),
            Box::new(self.lease_failures.clone()),
        ]
    }
}
