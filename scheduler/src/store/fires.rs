//! The store's pending fires: written by the pre-read scan (see [`crate::engine::preread`]),
//! by manual, API and child triggers and by retries; taken over when their node's lease
//! expired; marked dispatched when the broker acknowledged their trigger; and the
//! cancellations that stops and edits leave for the nodes still holding planned fires.

use crate::domain::model::{Job, PendingFire};
use crate::store::{DispatchMarks, FireCancellation, OwnedShard, ScanBatch, StoreError};

/// Parameters of one pre-read scan (see [`crate::engine::preread`]).
#[derive(Debug, Clone)]
pub struct PreReadRequest {
    /// The scan's notion of now, ms.
    pub now_ms: i64,
    /// The pre-read window, ms: each job read is planned through `now_ms + window_ms`.
    pub window_ms: i64,
    /// Jobs whose next fire is within this of `now_ms` are read (at most `window_ms`).
    pub read_ahead_ms: i64,
    /// Maximum jobs read.
    pub batch_size: u32,
    /// The node writing the fires (their owner).
    pub node_id: String,
    /// A fire's lease runs until its fire time plus this, ms.
    pub lease_ms: i64,
    /// The schedule shards the node holds, with their fences: the scan reads only their
    /// jobs, and only those whose fence still matches in the scan's own transaction.
    pub shards: Vec<OwnedShard>,
}

/// What a pre-read scan wrote.
#[derive(Debug, Clone, Default)]
pub struct PreReadOutcome {
    /// Due jobs read.
    pub jobs_read: usize,
    /// Fires planned, with their reserved log ids, grouped by batch, in time order per job.
    pub fires: Vec<PendingFire>,
    /// The batches they were written in, one per schedule shard.
    pub batches: Vec<ScanBatch>,
    /// Jobs whose fire was missed by more than the window (the misfire strategy applied).
    pub misfires: Vec<Misfire>,
    /// How long the scan waited for its shards' rows (and a connection).
    pub lock_wait: std::time::Duration,
    /// Shards of the request whose fence no longer matched: another node took them, and
    /// nothing was written for them.
    pub fenced_out: Vec<u32>,
}

/// A job whose fire a scan found missed by more than the pre-read window.
#[derive(Debug, Clone)]
pub struct Misfire {
    /// The job.
    pub job_id: kadence_schemas::JobId,
    /// Its app.
    pub app: kadence_schemas::AppName,
    /// What was done: skipped (DO_NOTHING) or fired once now (FIRE_ONCE_NOW).
    pub strategy: crate::domain::schedule::MisfireStrategy,
}

/// A fire to write outside the pre-read scan (manual and API triggers).
#[derive(Debug, Clone)]
pub struct NewFire {
    /// Trigger id (fresh for manual triggers).
    pub trigger_id: kadence_schemas::TriggerId,
    /// Why it fires.
    pub trigger_type: kadence_schemas::TriggerType,
    /// Parameters for this run (may override the job's).
    pub params: String,
    /// Scheduled time, ms.
    pub scheduled_at_ms: i64,
    /// The node that will emit it.
    pub node_id: String,
    /// Lease end, ms.
    pub lease_until_ms: i64,
    /// The partitions to route among instead of all of the app's (XXL-JOB's address
    /// override); the caller checks they exist.
    pub partitions: Option<Vec<i32>>,
}

/// The broker acknowledged a trigger: mark its run dispatched.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchAck {
    /// Job-log row id.
    pub log_id: i64,
    /// Partition the record landed in.
    pub partition: i32,
    /// Acknowledgement time, ms.
    pub dispatched_at_ms: i64,
    /// The live executor that owned that partition, per the registry (none when no live
    /// executor owns it: the trigger waits there). The run's result later names the executor
    /// that actually ran it; until then the lost-run monitor watches this one.
    pub executor_id: Option<String>,
    /// The fire, when its run row is still to be written (a fire of a batch: inserted
    /// DISPATCHED); `None` when the row exists (manual, retry, child), which is updated.
    pub fire: Option<Box<PendingFire>>,
}

/// Pending fires (see the module docs).
#[async_trait::async_trait]
pub trait Fires: Send + Sync {
    /// Cancellations whose fires some node may still hold (their lease ends after `now_ms`).
    async fn recent_cancellations(&self, now_ms: i64) -> Result<Vec<FireCancellation>, StoreError>;

    /// Writes the pending fire of one trigger of `job` outside the pre-read scan (manual, API
    /// and child triggers): one row, or one per shard for a SHARDING_BROADCAST job. Returns
    /// nothing if a run with this trigger id exists already (each is written once).
    async fn insert_fire(&self, job: &Job, fire: &NewFire) -> Result<Vec<PendingFire>, StoreError>;

    /// One pre-read scan of the request's shards (see [`crate::engine::preread`]).
    async fn pre_read(&self, request: &PreReadRequest) -> Result<PreReadOutcome, StoreError>;

    /// Takes over up to `limit` pending fires whose lease expired before `now_ms` (their node
    /// died or could not reach the broker), giving them to `node_id` until `lease_until_ms`.
    async fn claim_expired_fires(
        &self,
        node_id: &str,
        now_ms: i64,
        lease_until_ms: i64,
        limit: u32,
    ) -> Result<Vec<PendingFire>, StoreError>;

    /// Records acknowledged triggers and the progress of their batches, in one transaction:
    /// existing runs are marked DISPATCHED (one that already has its result keeps state
    /// FINISHED), the runs of batch fires are written DISPATCHED, the batches settled.
    async fn mark_dispatched(&self, marks: &DispatchMarks<'_>) -> Result<(), StoreError>;

    /// Writes a retry fire linked to the run's first attempt; `None` if it exists already.
    async fn insert_retry(
        &self,
        fire: &PendingFire,
        first_log_id: i64,
        node_id: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Option<PendingFire>, StoreError>;
}
