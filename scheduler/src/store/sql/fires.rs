//! The [`Fires`] implementation: the pre-read scan (its fires written as batches, see
//! [`batches`](super::batches)), manual fires and retries, the claim of pending fires whose
//! lease ended, and dispatched marks. Written once for every backend ([`SqlBackend`]).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::UPDATE_CHUNK;
use super::backend::{SqlBackend, SqlStore};
use super::batches::{insert_dispatched_runs, settle_in, write_scan_batches};
use super::fire_updates::{advance_jobs, claim_expired_fires, mark_runs_dispatched};
use super::planning::plan_rows;
use super::shards::fence_scan;
use super::statement::Statement;
use super::store::prefer_keyed_joins;
use super::writes::{FireLease, insert_fires};
use crate::domain::model::{Job, PendingFire};
use crate::store::rows::{JOB_COLUMNS, JobRow, convert_all};
use crate::store::{
    DispatchAck, DispatchMarks, FireCancellation, Fires, NewFire, PreReadOutcome, PreReadRequest,
    StoreError,
};

#[async_trait::async_trait]
impl<B: SqlBackend> Fires for SqlStore<B> {
    async fn recent_cancellations(&self, now_ms: i64) -> Result<Vec<FireCancellation>, StoreError> {
        super::cancellations::recent_cancellations(self, now_ms).await
    }

    async fn insert_fire(&self, job: &Job, fire: &NewFire) -> Result<Vec<PendingFire>, StoreError> {
        const OPERATION: &str = "write a fire";
        let draft = PendingFire {
            params: fire.params.clone(),
            route_partitions: fire.partitions.clone(),
            ..PendingFire::of_job(
                job,
                fire.trigger_id.clone(),
                fire.trigger_type,
                fire.scheduled_at_ms,
            )
        };
        let lease = FireLease {
            node_id: &fire.node_id,
            lease_ms: fire.lease_until_ms - fire.scheduled_at_ms,
            now_ms: fire.scheduled_at_ms,
        };
        let mut tx = self.begin_write(OPERATION).await?;
        let written = insert_fires(self, &mut tx, vec![draft], lease).await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(written)
    }

    async fn pre_read(&self, request: &PreReadRequest) -> Result<PreReadOutcome, StoreError> {
        pre_read(self, request).await
    }

    async fn claim_expired_fires(
        &self,
        node_id: &str,
        now_ms: i64,
        lease_until_ms: i64,
        limit: u32,
    ) -> Result<Vec<PendingFire>, StoreError> {
        let rows = claim_expired_fires(self, node_id, now_ms, lease_until_ms, limit).await?;
        let mut fires: Vec<PendingFire> = convert_all(rows)?;
        fires.sort_by_key(|fire| (fire.fire_at_ms, fire.log_id));
        Ok(fires)
    }

    async fn mark_dispatched(&self, marks: &DispatchMarks<'_>) -> Result<(), StoreError> {
        const OPERATION: &str = "mark triggers dispatched";
        let (new_runs, existing): (Vec<&DispatchAck>, Vec<&DispatchAck>) =
            marks.acks.iter().partition(|ack| ack.fire.is_some());
        let new_runs: Vec<(&DispatchAck, &PendingFire)> = (new_runs.into_iter())
            .filter_map(|ack| Some((ack, ack.fire.as_deref()?)))
            .collect();
        let mut tx = self.begin_write(OPERATION).await?;
        prefer_keyed_joins::<B>(&mut tx).await?;
        insert_dispatched_runs::<B>(&mut tx, &new_runs).await?;
        settle_in::<B>(&mut tx, marks.node_id, marks.batches, marks.lease_ms).await?;
        for chunk in existing.chunks(UPDATE_CHUNK) {
            mark_runs_dispatched::<B>(&mut tx, chunk).await?;
        }
        tx.commit().await.map_err(StoreError::query(OPERATION))
    }

    async fn insert_retry(
        &self,
        fire: &PendingFire,
        first_log_id: i64,
        node_id: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Option<PendingFire>, StoreError> {
        const OPERATION: &str = "write a retry";
        let lease = FireLease {
            node_id,
            lease_ms,
            now_ms,
        };
        let mut tx = self.begin_write(OPERATION).await?;
        let written = insert_fires(self, &mut tx, vec![fire.clone()], lease).await?;
        for retry in &written {
            (Statement::new("UPDATE job_logs SET first_log_id = $1 WHERE id = $2")
                .bind(first_log_id)
                .bind(retry.log_id)
                .execute::<B>(&mut tx))
            .await
            .map_err(StoreError::query(OPERATION))?;
        }
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(written.into_iter().next())
    }
}

/// The pre-read scan (see [`Fires::pre_read`]): in one transaction, the fence check of the
/// request's shards, the due jobs of the shards that passed, their advance, and their fires
/// written as batches.
async fn pre_read<B: SqlBackend>(
    store: &SqlStore<B>,
    request: &PreReadRequest,
) -> Result<PreReadOutcome, StoreError> {
    const OPERATION: &str = "pre-read due jobs";
    let waiting = Instant::now();
    let mut tx = store.begin_write(OPERATION).await?;
    // The fence check locks the scan's shards until commit: a node that took one of them
    // meanwhile makes it fail here, and nothing is written for it.
    let shards =
        fence_scan::<B>(&mut tx, &request.node_id, &request.shards, request.now_ms).await?;
    let lock_wait = waiting.elapsed();
    let fenced_out: Vec<u32> = (request.shards.iter())
        .map(|owned| owned.shard)
        .filter(|shard| shards.binary_search(shard).is_err())
        .collect();
    if shards.is_empty() {
        tx.rollback().await.map_err(StoreError::query(OPERATION))?;
        return Ok(PreReadOutcome {
            lock_wait,
            fenced_out,
            ..PreReadOutcome::default()
        });
    }
    prefer_keyed_joins::<B>(&mut tx).await?;
    let shard_list: Vec<String> = shards.iter().map(u32::to_string).collect();
    let rows: Vec<JobRow> = (Statement::new(format!(
        "SELECT {JOB_COLUMNS}, shard FROM jobs WHERE status = 'RUNNING' AND next_fire_ms <= $1 \
         AND shard IN ({}) ORDER BY next_fire_ms LIMIT $2",
        shard_list.join(", ")
    ))
    .bind(request.now_ms + request.read_ahead_ms.min(request.window_ms))
    .bind(i64::from(request.batch_size))
    .fetch_all::<B, _>(&mut tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    let jobs_read = rows.len();
    let shard_of: HashMap<i64, u32> = rows.iter().map(|row| (row.id(), row.shard())).collect();
    let planned = plan_rows(rows, request);
    // Jobs first, fires after, and only for the jobs whose advance applied: a job stopped or
    // edited while this scan ran gets no fire from it. On PostgreSQL the advance also locks
    // the job's row, so a stop that comes later waits for this scan and then cancels what it
    // wrote.
    let mut advanced = HashSet::with_capacity(planned.advances.len());
    // All next-fire times in one statement per chunk: one round trip, not one per job.
    for chunk in planned.advances.chunks(UPDATE_CHUNK) {
        advanced.extend(advance_jobs::<B>(&mut tx, chunk).await?);
    }
    let fires: Vec<PendingFire> = (planned.fires.into_iter())
        .filter(|fire| advanced.contains(&fire.job_id.get()))
        .collect();
    let (fires, batches) = write_scan_batches(store, &mut tx, fires, &shard_of, request).await?;
    tx.commit().await.map_err(StoreError::query(OPERATION))?;
    let misfires = (planned.misfires.into_iter())
        .filter(|misfire| advanced.contains(&misfire.job_id.get()))
        .collect();
    Ok(PreReadOutcome {
        jobs_read,
        fires,
        batches,
        misfires,
        lock_wait,
        fenced_out,
    })
}
