//! The [`FireBatches`] implementation: table `fire_batches`, the same SQL on every backend;
//! reserving log ids is the backend's ([`SqlBackend::reserve_log_ids`]). Also the parts of the
//! pre-read scan and of the dispatched marks that touch batches: a scan's batches written per
//! shard, the run rows of acknowledged batch fires, settling. Written once for every backend.

use std::collections::{HashMap, HashSet};

use kadence_schemas::JobId;

use super::backend::{SqlBackend, SqlStore};
use super::dialect::Dialect;
use super::statement::{IntoSqlValue as _, Statement};
use super::store::prefer_keyed_joins;
use super::unkept_runs::unkept_log_ids;
use super::writes::expand_broadcasts;
use super::{INSERT_CHUNK, UPDATE_CHUNK};
use crate::domain::model::{Completion, PendingFire, RunState};
use crate::store::rows::{CompletedRunRow, fire_values};
use crate::store::unkept_run_set::UnkeptRun;
use crate::store::{
    BatchProgress, DispatchAck, FireBatches, FireCancellation, NewFireBatch, PreReadRequest,
    ScanBatch, StoreError, StoredBatch, fire_batch,
};

/// Writes `batch` in `tx`; returns its id.
async fn insert_batch<B: SqlBackend>(
    tx: &mut B::Connection,
    batch: NewFireBatch<'_>,
) -> Result<i64, StoreError> {
    let pending_from = (batch.fires.iter())
        .map(|fire| fire.fire_at_ms)
        .min()
        .unwrap_or(batch.now_ms);
    let first_log_id = (batch.fires.iter()).map(|fire| fire.log_id).min();
    let first_log_id = first_log_id.unwrap_or(i64::MAX);
    (Statement::insert_into(
        "fire_batches",
        [
            ("shard", i64::from(batch.shard).into_sql_value()),
            ("owner_node", batch.node_id.into_sql_value()),
            ("fire_count", (batch.fires.len() as i64).into_sql_value()),
            ("pending_from_ms", pending_from.into_sql_value()),
            // A misfire fired now is due before the scan: its lease runs from now.
            (
                "lease_until_ms",
                (pending_from.max(batch.now_ms) + batch.lease_ms).into_sql_value(),
            ),
            ("fires", fire_batch::encode(batch.fires).into_sql_value()),
            ("created_at_ms", batch.now_ms.into_sql_value()),
            // No run of a lower id is folded while the batch may still write its row (see
            // `run_counts`).
            ("first_log_id", first_log_id.into_sql_value()),
        ],
    )
    .insert_returning_id::<B>(tx))
    .await
    .map_err(StoreError::query("write a fire batch"))
}

/// Writes the fires a pre-read scan planned (broadcasts expanded) as one batch per schedule
/// shard, with reserved log ids; returns them (grouped by batch) and where each batch's are.
pub(crate) async fn write_scan_batches<B: SqlBackend>(
    store: &SqlStore<B>,
    tx: &mut B::Connection,
    fires: Vec<PendingFire>,
    shard_of: &HashMap<i64, u32>,
    request: &PreReadRequest,
) -> Result<(Vec<PendingFire>, Vec<ScanBatch>), StoreError> {
    let mut fires = expand_broadcasts::<B>(tx, fires).await?;
    let shard = |fire: &PendingFire| shard_of.get(&fire.job_id.get()).copied().unwrap_or(0);
    // Cached: the shard is a map lookup, and a comparison sort would do it n log n times.
    fires.sort_by_cached_key(|fire| (shard(fire), fire.fire_at_ms));
    let ids = store.reserve_log_ids_in(tx, fires.len()).await?;
    for (fire, id) in fires.iter_mut().zip(ids) {
        fire.log_id = id;
    }
    let mut batches = Vec::new();
    let mut start = 0;
    while start < fires.len() {
        let this_shard = shard(&fires[start]);
        let end = start
            + (fires[start..].iter())
                .take_while(|fire| shard(fire) == this_shard)
                .count();
        let batch = NewFireBatch {
            shard: this_shard,
            node_id: &request.node_id,
            fires: &fires[start..end],
            now_ms: request.now_ms,
            lease_ms: request.lease_ms,
        };
        let id = insert_batch::<B>(tx, batch).await?;
        batches.push(ScanBatch {
            id,
            fires: start..end,
        });
        start = end;
    }
    Ok((fires, batches))
}

/// Writes the run rows of acknowledged fires of batches, already DISPATCHED. A row that
/// exists (written by a node that emitted the fire before) is kept.
pub(crate) async fn insert_dispatched_runs<B: SqlBackend>(
    tx: &mut B::Connection,
    acks: &[(&DispatchAck, &PendingFire)],
) -> Result<(), StoreError> {
    for chunk in acks.chunks(INSERT_CHUNK) {
        let rows = chunk.iter().map(|(ack, fire)| {
            let dispatched = [
                ("id", fire.log_id.into_sql_value()),
                ("state", RunState::Dispatched.as_str().into_sql_value()),
                ("created_at_ms", ack.dispatched_at_ms.into_sql_value()),
                ("partition_no", ack.partition.into_sql_value()),
                ("dispatched_at_ms", ack.dispatched_at_ms.into_sql_value()),
                ("executor_id", ack.executor_id.as_deref().into_sql_value()),
            ];
            fire_values(fire).into_iter().chain(dispatched)
        });
        let mut insert = Statement::insert_batch::<B>("job_logs", rows);
        // No conflict target: the id (a claimer emitted the fire again) and the trigger id
        // are both unique, and either way the first row stays.
        insert.push(match B::DIALECT {
            Dialect::Ansi => " ON CONFLICT DO NOTHING",
            Dialect::MySql => " ON DUPLICATE KEY UPDATE id = job_logs.id",
        });
        (insert.execute::<B>(&mut *tx).await)
            .map_err(StoreError::query("write dispatched runs"))?;
    }
    Ok(())
}

/// An acknowledged fire of a batch whose row waited for its run's result (see
/// [`crate::engine::held_runs`]), with that result.
pub(crate) struct FinishedFire<'a> {
    pub(crate) ack: &'a DispatchAck,
    pub(crate) fire: &'a PendingFire,
    pub(crate) completion: &'a Completion,
    /// The run needs no follow-up (a success of a job without children).
    pub(crate) done: bool,
}

impl FinishedFire<'_> {
    /// The run completed, as the update of results returns it, for the rules that follow a
    /// completion.
    pub(crate) fn completed(&self) -> CompletedRunRow {
        CompletedRunRow {
            trigger_id: self.fire.trigger_id.as_str().to_owned(),
            job_id: self.fire.job_id.get(),
            // A batch fire is a first attempt: its own type is its run's.
            run_trigger_type: self.fire.trigger_type.as_str().to_owned(),
            attempt: i64::from(self.fire.attempt),
            handle_code: i64::from(self.completion.code),
            handle_at_ms: self.completion.finished_at_ms,
        }
    }

    /// The run as one of a set of unkept runs, with when it ended.
    pub(crate) fn unkept(&self) -> (UnkeptRun, i64) {
        let run = UnkeptRun {
            log_id: self.fire.log_id,
            trigger_id: self.fire.trigger_id.clone(),
            app: self.fire.app.clone(),
            scheduled_at_ms: self.fire.scheduled_at_ms,
        };
        (run, self.completion.finished_at_ms)
    }
}

/// Writes the run rows of `finished` once, already FINISHED with their results: one insert
/// per run where a result that comes after its row costs an insert and an update (neither
/// of which PostgreSQL can do in place).
///
/// A plain insert, unlike [`insert_dispatched_runs`]: the caller leaves out the runs whose
/// rows exist already (a node emitted the fire again and wrote that copy's row), which the
/// update completes instead. A row written in between by another node fails the whole write;
/// the caller then has the rows written DISPATCHED and completes them by the update, as any
/// result.
pub(crate) async fn insert_finished_runs<B: SqlBackend>(
    tx: &mut B::Connection,
    finished: &[&FinishedFire<'_>],
) -> Result<(), StoreError> {
    for chunk in finished.chunks(INSERT_CHUNK) {
        let rows = chunk.iter().map(|run| {
            let (ack, completion) = (run.ack, run.completion);
            let (follow_up, alarm_status) = if run.done {
                ("DONE", "NOT_NEEDED")
            } else {
                ("PENDING", "UNPROCESSED")
            };
            let result = [
                ("id", run.fire.log_id.into_sql_value()),
                ("state", RunState::Finished.as_str().into_sql_value()),
                ("created_at_ms", ack.dispatched_at_ms.into_sql_value()),
                ("partition_no", ack.partition.into_sql_value()),
                ("dispatched_at_ms", ack.dispatched_at_ms.into_sql_value()),
                (
                    "executor_id",
                    completion.executor_id.as_str().into_sql_value(),
                ),
                ("handle_code", completion.code.into_sql_value()),
                ("handle_msg", completion.message.as_deref().into_sql_value()),
                (
                    "handle_started_at_ms",
                    completion.started_at_ms.into_sql_value(),
                ),
                ("handle_at_ms", completion.finished_at_ms.into_sql_value()),
                ("retry_after_ms", completion.retry_after_ms.into_sql_value()),
                ("follow_up", follow_up.into_sql_value()),
                ("alarm_status", alarm_status.into_sql_value()),
            ];
            fire_values(run.fire).into_iter().chain(result)
        });
        (Statement::insert_batch::<B>("job_logs", rows)
            .execute::<B>(&mut *tx)
            .await)
            .map_err(StoreError::query("write finished runs"))?;
    }
    Ok(())
}

/// Records `node_id`'s progress with its batches in `tx` (see
/// [`FireBatches::settle_fire_batches`]).
pub(crate) async fn settle_in<B: SqlBackend>(
    tx: &mut B::Connection,
    node_id: &str,
    progress: &[BatchProgress],
    lease_ms: i64,
) -> Result<(), StoreError> {
    const OPERATION: &str = "settle fire batches";
    let (done, moving): (Vec<&BatchProgress>, Vec<&BatchProgress>) = progress
        .iter()
        .partition(|batch| batch.pending_from_ms.is_none());
    for chunk in done.chunks(UPDATE_CHUNK) {
        let mut delete = Statement::new("DELETE FROM fire_batches WHERE owner_node = ");
        delete.push_bind(node_id).push(" AND id");
        delete.push_in_list(chunk.iter().map(|batch| batch.id));
        (delete.execute::<B>(&mut *tx).await).map_err(StoreError::query(OPERATION))?;
    }
    for chunk in moving.chunks(UPDATE_CHUNK) {
        let rows = (chunk.iter()).map(|batch| {
            [
                batch.id.into_sql_value(),
                batch.pending_from_ms.into_sql_value(),
            ]
        });
        let mut update = Statement::new("");
        match B::DIALECT {
            Dialect::Ansi => {
                update.push("WITH v(id, pending_from) AS (");
                update.push_rows::<B>(rows);
                update.push(
                    ") UPDATE fire_batches SET pending_from_ms = v.pending_from, \
                     lease_until_ms = v.pending_from + ",
                );
                update.push_bind(lease_ms);
                update.push(" FROM v WHERE fire_batches.id = v.id AND fire_batches.owner_node = ");
                update.push_bind(node_id);
            }
            Dialect::MySql => {
                update.push("UPDATE ");
                update.push_mysql_rows(&["id", "pending_from"], rows);
                update.push(
                    " STRAIGHT_JOIN fire_batches ON fire_batches.id = v.id \
                     SET fire_batches.pending_from_ms = v.pending_from, \
                     fire_batches.lease_until_ms = v.pending_from + ",
                );
                update.push_bind(lease_ms);
                update.push(" WHERE fire_batches.owner_node = ");
                update.push_bind(node_id);
            }
        }
        (update.execute::<B>(&mut *tx).await).map_err(StoreError::query(OPERATION))?;
    }
    Ok(())
}

/// The log ids among `batches`' pending fires that need no emission: a run row has them or
/// they are unkept runs (acknowledged before their node stopped), or a stop or a schedule
/// change cancelled them (table `fire_cancellations`).
async fn settled_fires<B: SqlBackend>(
    tx: &mut B::Connection,
    batches: &[StoredBatch],
) -> Result<HashSet<i64>, StoreError> {
    const OPERATION: &str = "claim expired fire batches";
    let pending: Vec<&PendingFire> = batches
        .iter()
        .flat_map(StoredBatch::pending_fires)
        .collect();
    let with_rows: Vec<(i64,)> = Statement::fetch_in_chunks::<B, _, _, _>(
        &mut *tx,
        "SELECT id FROM job_logs WHERE id",
        &pending,
        |fire| fire.log_id,
    )
    .await
    .map_err(StoreError::query(OPERATION))?;
    let mut settled: HashSet<i64> = with_rows.into_iter().map(|(id,)| id).collect();
    let without_rows: Vec<&PendingFire> = (pending.iter().copied())
        .filter(|fire| !settled.contains(&fire.log_id))
        .collect();
    settled.extend(unkept_log_ids::<B>(&mut *tx, &without_rows).await?);
    let cancellations: Vec<(i64, i64, i64)> =
        (Statement::new("SELECT job_id, up_to_log_id, from_ms FROM fire_cancellations")
            .fetch_all::<B, _>(tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
    let mut by_job: HashMap<i64, Vec<FireCancellation>> = HashMap::new();
    for (job_id, up_to_log_id, from_ms) in cancellations {
        if let Ok(id) = JobId::new(job_id) {
            by_job.entry(job_id).or_default().push(FireCancellation {
                job_id: id,
                up_to_log_id,
                from_ms,
                until_ms: i64::MAX,
            });
        }
    }
    let cancelled = |fire: &&&PendingFire| {
        (by_job.get(&fire.job_id.get())).is_some_and(|cancellations| {
            cancellations.iter().any(|cancelled| cancelled.covers(fire))
        })
    };
    settled.extend(pending.iter().filter(cancelled).map(|fire| fire.log_id));
    Ok(settled)
}

/// A batch as its claim reads it: id, shard, pending-from time and the encoded fires.
type BatchRow = (i64, i64, i64, Vec<u8>);

/// Takes up to `limit` batches whose lease ended before `now_ms` for `node_id`.
async fn claim_batch_rows<B: SqlBackend>(
    tx: &mut B::Connection,
    node_id: &str,
    now_ms: i64,
    lease_ms: i64,
    limit: u32,
) -> Result<Vec<BatchRow>, StoreError> {
    const OPERATION: &str = "claim expired fire batches";
    match B::DIALECT {
        // Compare-and-set: the condition is repeated outside the subquery, so a batch two
        // nodes picked at once goes to one of them.
        Dialect::Ansi => (Statement::new(format!(
            "UPDATE fire_batches SET owner_node = $1, lease_until_ms = $2 \
             WHERE id IN (SELECT id FROM fire_batches WHERE lease_until_ms < $3 \
             ORDER BY lease_until_ms LIMIT $4{}) AND lease_until_ms < $5 \
             RETURNING id, shard, pending_from_ms, fires",
            B::SKIP_LOCKED
        ))
        .bind(node_id)
        .bind(now_ms + lease_ms)
        .bind(now_ms)
        .bind(i64::from(limit))
        .bind(now_ms)
        .fetch_all::<B, _>(tx))
        .await
        .map_err(StoreError::query(OPERATION)),
        // The rows are locked as they are read, passing over those another node holds: each
        // batch goes to one node.
        Dialect::MySql => {
            let rows: Vec<BatchRow> = (Statement::new(
                "SELECT id, shard, pending_from_ms, fires FROM fire_batches \
                 WHERE lease_until_ms < $1 ORDER BY lease_until_ms LIMIT $2 FOR UPDATE SKIP LOCKED",
            )
            .bind(now_ms)
            .bind(i64::from(limit))
            .fetch_all::<B, _>(&mut *tx))
            .await
            .map_err(StoreError::query(OPERATION))?;
            if !rows.is_empty() {
                let mut update = Statement::new("UPDATE fire_batches SET owner_node = ");
                update.push_bind(node_id);
                update
                    .push(", lease_until_ms = ")
                    .push_bind(now_ms + lease_ms);
                update
                    .push(" WHERE id")
                    .push_in_list(rows.iter().map(|row| row.0));
                (update.execute::<B>(tx).await).map_err(StoreError::query(OPERATION))?;
            }
            Ok(rows)
        }
    }
}

#[async_trait::async_trait]
impl<B: SqlBackend> FireBatches for SqlStore<B> {
    async fn reserve_log_ids(&self, count: usize) -> Result<Vec<i64>, StoreError> {
        const OPERATION: &str = "reserve job-log ids";
        let mut tx = self.begin_write(OPERATION).await?;
        let ids = self.reserve_log_ids_in(&mut tx, count).await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(ids)
    }

    async fn write_fire_batch(&self, batch: NewFireBatch<'_>) -> Result<i64, StoreError> {
        const OPERATION: &str = "write a fire batch";
        let mut tx = self.begin_write(OPERATION).await?;
        let id = insert_batch::<B>(&mut tx, batch).await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(id)
    }

    async fn claim_expired_batches(
        &self,
        node_id: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<StoredBatch>, StoreError> {
        const OPERATION: &str = "claim expired fire batches";
        let mut tx = self.begin_write(OPERATION).await?;
        let rows = claim_batch_rows::<B>(&mut tx, node_id, now_ms, lease_ms, limit).await?;
        let mut claimed = Vec::with_capacity(rows.len());
        for (id, shard, pending_from_ms, bytes) in rows {
            match fire_batch::decode(&bytes) {
                Ok(fires) => claimed.push(StoredBatch {
                    id,
                    shard: shard as u32,
                    pending_from_ms,
                    fires,
                    settled: Default::default(),
                }),
                Err(error) => {
                    // Set aside for an operator: claimed by nobody, ever again.
                    tracing::error!(batch = id, %error,
                        "a fire batch cannot be read; its fires are not emitted, the row is kept");
                    (Statement::new(
                        "UPDATE fire_batches SET owner_node = 'unreadable', \
                         lease_until_ms = 9223372036854775807 WHERE id = $1",
                    )
                    .bind(id)
                    .execute::<B>(&mut tx))
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                }
            }
        }
        let settled = settled_fires::<B>(&mut tx, &claimed).await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        for batch in &mut claimed {
            batch.settled = (batch.pending_fires())
                .map(|fire| fire.log_id)
                .filter(|id| settled.contains(id))
                .collect();
        }
        claimed.sort_by_key(|batch| batch.id);
        Ok(claimed)
    }

    async fn settle_fire_batches(
        &self,
        node_id: &str,
        progress: &[BatchProgress],
        lease_ms: i64,
    ) -> Result<(), StoreError> {
        const OPERATION: &str = "settle fire batches";
        let mut tx = self.begin_write(OPERATION).await?;
        prefer_keyed_joins::<B>(&mut tx).await?;
        settle_in::<B>(&mut tx, node_id, progress, lease_ms).await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))
    }
}

/// The highest job-log id given out so far, rows and reserved ids alike, as `connection` (a
/// transaction's) sees it: lines are stored for every id given out, and a scan's batches
/// record it.
pub(crate) async fn last_log_id_in<B: SqlBackend>(
    connection: &mut B::Connection,
) -> Result<i64, StoreError> {
    let (last,): (i64,) = (Statement::new(B::LAST_LOG_ID).fetch_one::<B, _>(connection))
        .await
        .map_err(StoreError::query("read the last job-log id"))?;
    Ok(last)
}
