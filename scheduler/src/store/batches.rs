//! Fire batches in the store (table `fire_batches`): the durable promise of a pre-read scan of
//! one schedule shard, one row per scan and shard instead of one per fire (the compact form
//! is [`super::fire_batch`]).
//!
//! A batch's fires carry job-log ids reserved when they were planned
//! ([`FireBatches::reserve_log_ids`]: a sequence on PostgreSQL, SQLite's AUTOINCREMENT
//! counter), so trigger records keep their `log_id` although no run row exists before the
//! trigger is emitted: the row is written with that id once the broker acknowledged it.
//!
//! Lifecycle: written by its node ([`FireBatches::write_fire_batch`]); as the broker
//! acknowledges its fires, the node moves its `pending_from_ms` (the earliest fire not yet
//! acknowledged) and with it its lease, and deletes it once every fire is acknowledged
//! ([`FireBatches::settle_fire_batches`]); if the node dies, another claims it once the lease
//! ended and emits its fires from `pending_from_ms` on again, with the same trigger ids
//! ([`FireBatches::claim_expired_batches`]).

use crate::domain::model::PendingFire;

use super::{DispatchAck, StoreError};

/// A batch to write.
#[derive(Debug, Clone, Copy)]
pub struct NewFireBatch<'a> {
    /// The schedule shard its jobs belong to.
    pub shard: u32,
    /// The node that will emit its fires.
    pub node_id: &'a str,
    /// Its fires, with their reserved log ids.
    pub fires: &'a [PendingFire],
    /// Now, ms.
    pub now_ms: i64,
    /// The batch stays the node's until its earliest fire + this, ms.
    pub lease_ms: i64,
}

/// Where the fires of one batch a pre-read scan wrote are in
/// [`PreReadOutcome::fires`](super::PreReadOutcome::fires).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanBatch {
    /// The batch.
    pub id: i64,
    /// Its fires' positions.
    pub fires: std::ops::Range<usize>,
}

/// A batch read back: claimed from a dead node.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredBatch {
    /// Its id.
    pub id: i64,
    /// Its schedule shard.
    pub shard: u32,
    /// Fires due (to be emitted) before this were all acknowledged, ms.
    pub pending_from_ms: i64,
    /// Every fire it was written with.
    pub fires: Vec<PendingFire>,
    /// Log ids of fires from `pending_from_ms` on that need no emission: their run row
    /// exists or they are unkept runs (acknowledged before their node stopped), or a stop or
    /// an edit cancelled them.
    pub settled: std::collections::HashSet<i64>,
}

impl StoredBatch {
    /// The fires still to emit: due at or after `pending_from_ms`, not settled.
    pub fn pending_fires(&self) -> impl Iterator<Item = &PendingFire> {
        self.fires.iter().filter(|fire| {
            fire.fire_at_ms >= self.pending_from_ms && !self.settled.contains(&fire.log_id)
        })
    }
}

/// How far a node got with one of its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchProgress {
    /// The batch.
    pub id: i64,
    /// When the earliest fire not yet acknowledged is to be emitted, ms; `None` once every
    /// fire is acknowledged (or needs no emission).
    pub pending_from_ms: Option<i64>,
}

/// Acknowledged triggers to record in one transaction, with the progress of the batches
/// their fires came from (see [`crate::engine::acks`]).
#[derive(Debug, Clone, Copy)]
pub struct DispatchMarks<'a> {
    /// The node recording them: only its own batches are settled.
    pub node_id: &'a str,
    /// The acknowledgements.
    pub acks: &'a [DispatchAck],
    /// Where the batches concerned stand now.
    pub batches: &'a [BatchProgress],
    /// A batch stays the node's until its earliest unacknowledged fire + this, ms.
    pub lease_ms: i64,
}

/// Fire batches and the job-log ids their fires are given.
#[async_trait::async_trait]
pub trait FireBatches: Send + Sync {
    /// Reserves `count` job-log ids, in increasing order, for fires whose rows are written
    /// after the broker acknowledged them.
    async fn reserve_log_ids(&self, count: usize) -> Result<Vec<i64>, StoreError>;

    /// Writes a batch owned by its node; returns its id.
    async fn write_fire_batch(&self, batch: NewFireBatch<'_>) -> Result<i64, StoreError>;

    /// Takes over up to `limit` batches whose lease ended before `now_ms`, giving them to
    /// `node_id` for `lease_ms`. A batch that cannot be read is set aside (never claimed
    /// again, logged) rather than blocking the claims behind it.
    async fn claim_expired_batches(
        &self,
        node_id: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<StoredBatch>, StoreError>;

    /// Records `node_id`'s progress, in one transaction: deletes the batches whose fires were
    /// all acknowledged, moves the others' `pending_from_ms` and lease. A batch another node
    /// claimed meanwhile is left alone.
    async fn settle_fire_batches(
        &self,
        node_id: &str,
        progress: &[BatchProgress],
        lease_ms: i64,
    ) -> Result<(), StoreError>;
}
