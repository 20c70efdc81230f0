//! The one way into the time wheel: every fire, whatever made it, is written durably, owned by
//! this node under a lease, and only then handed to the wheel. Scheduled fires are written as
//! batches, one row per scan and schedule shard ([`crate::store::fire_batch`]), registered in
//! this node's [`OpenBatches`] until they are acknowledged; the others as pending job-log
//! rows.
//!
//! Fires come from seven places, each a [`FireSource`]:
//! - **Schedule**: the pre-read scan plans a batch of the node's schedule shards
//!   ([`FireIntake::plan_due`], called by [`crate::engine::preread`]);
//! - **Claim**: batches and pending rows whose owner's lease expired are taken over, their
//!   fires emitted with their trigger ids ([`FireIntake::claim_expired`], called by
//!   [`crate::engine::claims`]);
//! - **Manual**: `POST /api/jobs/{id}/trigger` ([`FireIntake::fire_now`]);
//! - **Retry** and **Child**: the follow-up monitor after a run finished
//!   ([`FireIntake::retry`], [`FireIntake::fire_now`]);
//! - **Replay** and **Backfill**: an operator's replay or backfill, recorded with its fires
//!   ([`FireIntake::record_operation`], called by [`crate::operations::replay`]).
//!
//! Each write is a different store operation (a scan, a claim, an insert), but what follows is
//! the same and lives here once: the fires go to the wheel through [`FireIntake::admit`], which
//! waits when the wheel is full (backpressure, never a drop) and stops handing over when it is
//! gone (shutdown: the rows stay pending and a claim emits them after their lease). What every
//! fire needs (metrics by source) hooks in there.
//!
//! An intake writes through the connection pool of its caller ([`FireIntake::using`]): the API
//! writes manual fires on its own pool so that a busy API never takes the scheduling pool's
//! connections.

use std::sync::Arc;
use std::time::Duration;

use kadence_schemas::{TriggerId, TriggerType};
use tokio::sync::mpsc;

use crate::clock::millis;
use crate::domain::model::{Job, PendingFire};
use crate::engine::acks::AckLedger;
use crate::engine::open_batches::OpenBatches;
use crate::metrics::SchedulerMetrics;
use crate::store::{
    BatchProgress, FireMaker, FireOwner, NewFire, NewOperation, Operation, OwnedShard,
    PreReadRequest, Store, StoreError,
};

/// What made a fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireSource {
    /// Planned by the pre-read scan from the job's schedule (also misfires).
    Schedule,
    /// Taken over after its owner's lease expired.
    Claim,
    /// Triggered by hand (API, CLI).
    Manual,
    /// A failed run's retry.
    Retry,
    /// A child job fired by its parent's success.
    Child,
    /// An operator's replay of past triggers (see [`crate::operations::replay`]).
    Replay,
    /// An operator's backfill of fires that never fired.
    Backfill,
}

impl FireSource {
    /// The source as a metric label.
    pub fn label(self) -> &'static str {
        match self {
            FireSource::Schedule => "schedule",
            FireSource::Claim => "claim",
            FireSource::Manual => "manual",
            FireSource::Retry => "retry",
            FireSource::Child => "child",
            FireSource::Replay => "replay",
            FireSource::Backfill => "backfill",
        }
    }
}

/// A fire to write now, outside the schedule: a manual trigger or a child job.
#[derive(Debug, Clone)]
pub struct FireNow {
    /// Its trigger id (fresh for a manual trigger, derived from the parent for a child).
    pub trigger_id: TriggerId,
    /// Why it fires.
    pub trigger_type: TriggerType,
    /// Parameters for this run.
    pub params: String,
    /// Partitions to route among instead of all of the app's (checked by the caller).
    pub partitions: Option<Vec<i32>>,
}

/// What one pre-read scan read and wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlannedBatch {
    /// Due jobs read.
    pub jobs_read: usize,
    /// Fires written (in batches) and handed to the wheel.
    pub fires_written: usize,
    /// When the earliest of them is due (its `fire_at`): how far ahead the scan planned
    /// (see [`crate::engine::pressure`]).
    pub earliest_fire_at_ms: Option<i64>,
    /// Shards the scan was refused: another node owns them now (see [`crate::engine::shards`]).
    pub fenced_out: Vec<u32>,
}

/// Writes fires durably, owned by this node, and hands them to the wheel.
#[derive(Clone)]
pub struct FireIntake {
    store: Arc<dyn Store>,
    wheel: mpsc::Sender<PendingFire>,
    node_id: String,
    lease_ms: i64,
    batches: Arc<OpenBatches>,
    metrics: Arc<SchedulerMetrics>,
}

impl FireIntake {
    /// An intake writing through `store` as `node_id`, each fire leased for `lease` past its
    /// time, feeding `wheel`.
    pub fn new(
        store: Arc<dyn Store>,
        wheel: mpsc::Sender<PendingFire>,
        node_id: String,
        lease: Duration,
    ) -> FireIntake {
        let lease_ms = millis(lease);
        FireIntake {
            store,
            wheel,
            batches: Arc::new(OpenBatches::new(node_id.clone(), lease_ms)),
            node_id,
            lease_ms,
            metrics: Arc::default(),
        }
    }

    /// The batches whose fires this intake handed to the wheel, for the
    /// [`AckWriter`](crate::engine::acks::AckWriter) that settles them.
    pub fn open_batches(&self) -> &Arc<OpenBatches> {
        &self.batches
    }

    /// The same intake counting into `metrics`.
    pub fn with_metrics(self, metrics: Arc<SchedulerMetrics>) -> FireIntake {
        FireIntake { metrics, ..self }
    }

    /// The metrics this intake counts into.
    pub fn metrics(&self) -> &Arc<SchedulerMetrics> {
        &self.metrics
    }

    /// The same intake writing through another connection pool.
    pub fn using(&self, store: Arc<dyn Store>) -> FireIntake {
        FireIntake {
            store,
            ..self.clone()
        }
    }

    /// The node that owns the fires this intake writes.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// One pre-read scan at `now_ms` (see [`crate::engine::preread`]): plans and writes the fires of
    /// up to `batch_size` jobs of `shards` due within `read_ahead_ms` through `window_ms`,
    /// then admits them.
    pub async fn plan_due(
        &self,
        now_ms: i64,
        (window_ms, read_ahead_ms): (i64, i64),
        batch_size: u32,
        shards: Vec<OwnedShard>,
    ) -> Result<PlannedBatch, StoreError> {
        let outcome = self
            .store
            .pre_read(&PreReadRequest {
                now_ms,
                window_ms,
                read_ahead_ms,
                batch_size,
                node_id: self.node_id.clone(),
                lease_ms: self.lease_ms,
                shards,
            })
            .await?;
        self.metrics
            .schedule_lock_wait
            .observe(outcome.lock_wait.as_secs_f64());
        let planned = PlannedBatch {
            jobs_read: outcome.jobs_read,
            fires_written: outcome.fires.len(),
            earliest_fire_at_ms: outcome.fires.iter().map(|fire| fire.fire_at_ms).min(),
            fenced_out: outcome.fenced_out,
        };
        // One warning per scan, not per job: an overloaded node misses thousands at once,
        // and a line each would add to the overload. Each job's is at debug level.
        if let Some(first) = outcome.misfires.first() {
            tracing::warn!(misfires = outcome.misfires.len(), first_job_id = %first.job_id,
                "fires missed by more than the pre-read window; misfire strategies applied");
        }
        for misfire in &outcome.misfires {
            tracing::debug!(job_id = %misfire.job_id, strategy = misfire.strategy.as_str(),
                "fire missed by more than the pre-read window; misfire strategy applied");
            self.metrics
                .misfires
                .with_label_values(&[misfire.app.as_str(), misfire.strategy.as_str()])
                .inc();
        }
        for batch in &outcome.batches {
            self.batches
                .open(batch.id, &outcome.fires[batch.fires.clone()]);
        }
        self.admit(FireSource::Schedule, outcome.fires).await;
        Ok(planned)
    }

    /// Takes over up to `limit` batches and up to `limit` pending rows whose lease expired
    /// before `now_ms` and admits their fires with their original trigger ids, except those
    /// the broker already acknowledged whose mark `ledger` is still writing (emitting them
    /// again would duplicate a run). Returns how many batches and rows were claimed.
    pub async fn claim_expired(
        &self,
        now_ms: i64,
        limit: u32,
        ledger: &AckLedger,
    ) -> Result<usize, StoreError> {
        let batches = self.claim_expired_batches(now_ms, limit, ledger).await?;
        let fires = self
            .store
            .claim_expired_fires(&self.node_id, now_ms, now_ms + self.lease_ms, limit)
            .await?;
        let claimed = fires.len();
        self.metrics.lease_claims.inc_by(claimed as u64);
        let (acknowledged, fires): (Vec<PendingFire>, Vec<PendingFire>) = fires
            .into_iter()
            .partition(|fire| ledger.is_unwritten(fire.log_id));
        if !acknowledged.is_empty() {
            tracing::info!(
                acknowledged = acknowledged.len(),
                "claimed fires already acknowledged by the broker; not emitting them again, their marks are being written"
            );
        }
        if !fires.is_empty() {
            tracing::warn!(claimed = fires.len(), node_id = %self.node_id,
                "claimed pending fires whose lease expired; emitting them with their original trigger ids");
        }
        self.admit(FireSource::Claim, fires).await;
        Ok(claimed.max(batches))
    }

    /// The batch half of [`claim_expired`](Self::claim_expired): each claimed batch's fires
    /// still to emit are registered as open and admitted; a batch with none left is deleted.
    async fn claim_expired_batches(
        &self,
        now_ms: i64,
        limit: u32,
        ledger: &AckLedger,
    ) -> Result<usize, StoreError> {
        let batches = self
            .store
            .claim_expired_batches(&self.node_id, now_ms, self.lease_ms, limit)
            .await?;
        let mut finished = Vec::new();
        for batch in &batches {
            // Acknowledged by this node, its row on its way: not emitted again, and the
            // writer that has it settles it (it was open here before the claim).
            let fires: Vec<PendingFire> = batch
                .pending_fires()
                .filter(|fire| !ledger.is_unwritten(fire.log_id))
                .cloned()
                .collect();
            self.metrics.lease_claims.inc_by(fires.len() as u64);
            tracing::warn!(batch = batch.id, shard = batch.shard, fires = fires.len(), node_id = %self.node_id,
                "claimed a fire batch whose lease expired; emitting its unacknowledged fires with their original trigger ids");
            if fires.is_empty() && batch.pending_fires().next().is_none() {
                finished.push(BatchProgress {
                    id: batch.id,
                    pending_from_ms: None,
                });
                continue;
            }
            self.batches.open(batch.id, batch.pending_fires());
            self.admit(FireSource::Claim, fires).await;
        }
        if !finished.is_empty() {
            self.store
                .settle_fire_batches(&self.node_id, &finished, self.lease_ms)
                .await?;
        }
        Ok(batches.len())
    }

    /// Writes `fire` of `job` due at `now_ms` (one row, or one per partition for
    /// SHARDING_BROADCAST) and admits it. Returns the fires written: none when a run with its
    /// trigger id exists already (a child fired twice, a manual id reused).
    pub async fn fire_now(
        &self,
        source: FireSource,
        job: &Job,
        fire: FireNow,
        now_ms: i64,
    ) -> Result<Vec<PendingFire>, StoreError> {
        let written = self
            .store
            .insert_fire(
                job,
                &NewFire {
                    trigger_id: fire.trigger_id,
                    trigger_type: fire.trigger_type,
                    params: fire.params,
                    scheduled_at_ms: now_ms,
                    node_id: self.node_id.clone(),
                    lease_until_ms: now_ms + self.lease_ms,
                    partitions: fire.partitions,
                },
            )
            .await?;
        self.admit(source, written.clone()).await;
        Ok(written)
    }

    /// Writes `retry` (the next attempt of the run whose first attempt is row `first_log_id`)
    /// and admits it; `None` when that attempt exists already.
    pub async fn retry(
        &self,
        retry: &PendingFire,
        first_log_id: i64,
        now_ms: i64,
    ) -> Result<Option<PendingFire>, StoreError> {
        let written = self
            .store
            .insert_retry(retry, first_log_id, &self.node_id, self.lease_ms, now_ms)
            .await?;
        if let Some(fire) = &written {
            self.admit(FireSource::Retry, vec![fire.clone()]).await;
        }
        Ok(written)
    }

    /// Records a replay or backfill with the fires `make_fires` gives for its id (see
    /// [`Replays::record_operation`](crate::store::Replays::record_operation)) and admits
    /// them; returns the operation and its fires.
    pub async fn record_operation(
        &self,
        source: FireSource,
        operation: &NewOperation,
        make_fires: FireMaker,
        now_ms: i64,
    ) -> Result<(Operation, Vec<PendingFire>), StoreError> {
        let owner = FireOwner {
            node_id: self.node_id.clone(),
            lease_ms: self.lease_ms,
        };
        let (recorded, fires) = self
            .store
            .record_operation(operation, make_fires, &owner, now_ms)
            .await?;
        self.admit(source, fires.clone()).await;
        Ok((recorded, fires))
    }

    /// Hands durable fires to the wheel, in order. A full wheel is backpressure from the wheel
    /// and dispatch: wait, never drop. A closed one means shutdown: the rows stay pending and
    /// a claim emits them after their lease.
    async fn admit(&self, source: FireSource, fires: Vec<PendingFire>) {
        if fires.is_empty() {
            return;
        }
        tracing::trace!(?source, fires = fires.len(), "fires admitted to the wheel");
        for fire in &fires {
            self.metrics
                .fires_planned
                .with_label_values(&[
                    fire.app.as_str(),
                    fire.trigger_type.as_str(),
                    source.label(),
                ])
                .inc();
        }
        for fire in fires {
            if self.wheel.send(fire).await.is_err() {
                tracing::debug!(
                    ?source,
                    "the wheel is gone; the rest stay pending for a claim"
                );
                return;
            }
        }
    }
}
