//! Fires written as pending `job_logs` rows outside the scan's batches (manual, API, retry,
//! child and replay fires): written once by trigger id, broadcasts expanded, cancelled ones
//! replaced. Written once for every backend ([`SqlBackend`]).

use std::collections::{HashMap, HashSet};

use super::backend::{SqlBackend, SqlStore};
use super::dialect::Dialect;
use super::statement::{IntoSqlValue as _, Statement};
use super::{INSERT_CHUNK, UPDATE_CHUNK};
use crate::domain::model::{PendingFire, RouteStrategy, RunState};
use crate::store::StoreError;
use crate::store::rows::fire_values;

/// Replaces each SHARDING_BROADCAST fire by its shards ([`PendingFire::into_shards`]),
/// reading the partition counts of the apps concerned in the same transaction.
pub(crate) async fn expand_broadcasts<B: SqlBackend>(
    tx: &mut B::Connection,
    drafts: Vec<PendingFire>,
) -> Result<Vec<PendingFire>, StoreError> {
    let broadcast = |fire: &PendingFire| fire.route_strategy == RouteStrategy::ShardingBroadcast;
    if !drafts.iter().any(broadcast) {
        return Ok(drafts);
    }
    let rows: Vec<(String, i64)> = (Statement::new("SELECT name, partitions FROM apps")
        .fetch_all::<B, _>(tx))
    .await
    .map_err(StoreError::query("read partition counts for a broadcast"))?;
    let partitions: HashMap<String, i64> = rows.into_iter().collect();
    let mut expanded = Vec::with_capacity(drafts.len());
    for fire in drafts {
        let count = partitions.get(fire.app.as_str()).copied().unwrap_or(1);
        expanded.extend(fire.into_shards(i32::try_from(count).unwrap_or(1)));
    }
    Ok(expanded)
}

/// Writes fires as pending job-log rows owned by `node_id`, skipping trigger ids that exist
/// already (a fire is written once, whoever writes it), and returns the written ones with
/// their row ids.
///
/// A trigger id that exists only as a cancelled fire is written again: the new schedule fires
/// at an instant the old one had planned too, and the new fire replaces the cancelled one. It
/// gets a new row id, above the cancellation's, so the copy of the cancelled fire that a wheel
/// may hold is still recognised and dropped.
pub(crate) async fn insert_fires<B: SqlBackend>(
    store: &SqlStore<B>,
    tx: &mut B::Connection,
    drafts: Vec<PendingFire>,
    owner: FireLease<'_>,
) -> Result<Vec<PendingFire>, StoreError> {
    let drafts = expand_broadcasts::<B>(tx, drafts).await?;
    let (mut written, existing) = insert_new_fires(store, tx, drafts, owner).await?;
    if existing.is_empty() {
        return Ok(written);
    }
    let replaced = delete_cancelled_fires::<B>(tx, &existing).await?;
    let (again, still_existing): (Vec<PendingFire>, Vec<PendingFire>) =
        (existing.into_iter()).partition(|fire| replaced.contains(fire.trigger_id.as_str()));
    for fire in &still_existing {
        tracing::warn!(trigger_id = %fire.trigger_id, "fire exists already; not writing it twice");
    }
    let (rewritten, _) = insert_new_fires(store, tx, again, owner).await?;
    written.extend(rewritten);
    Ok(written)
}

/// Who holds the fires written by [`insert_fires`], and until when: `node_id` until
/// `lease_ms` after the later of a fire's time and `now_ms`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FireLease<'a> {
    pub(crate) node_id: &'a str,
    pub(crate) lease_ms: i64,
    pub(crate) now_ms: i64,
}

/// Deletes the cancelled runs among the trigger ids of `fires`; returns their trigger ids.
async fn delete_cancelled_fires<B: SqlBackend>(
    tx: &mut B::Connection,
    fires: &[PendingFire],
) -> Result<HashSet<String>, StoreError> {
    const OPERATION: &str = "replace cancelled fires";
    let mut replaced = HashSet::new();
    for chunk in fires.chunks(UPDATE_CHUNK) {
        let trigger_ids = || chunk.iter().map(|fire| fire.trigger_id.as_str());
        let rows: Vec<(String,)> = match B::DIALECT {
            Dialect::Ansi => {
                let mut delete =
                    Statement::new("DELETE FROM job_logs WHERE state = 'CANCELLED' AND trigger_id");
                delete
                    .push_in_list(trigger_ids())
                    .push(" RETURNING trigger_id");
                (delete.fetch_all::<B, _>(tx).await).map_err(StoreError::query(OPERATION))?
            }
            Dialect::MySql => {
                let mut select = Statement::new(
                    "SELECT trigger_id FROM job_logs FORCE INDEX (job_logs_trigger) \
                     WHERE state = 'CANCELLED' AND trigger_id",
                );
                select.push_in_list(trigger_ids()).push(" FOR UPDATE");
                let rows: Vec<(String,)> = (select.fetch_all::<B, _>(&mut *tx).await)
                    .map_err(StoreError::query(OPERATION))?;
                if !rows.is_empty() {
                    let mut delete = Statement::new("DELETE FROM job_logs WHERE trigger_id");
                    delete.push_in_list(rows.iter().map(|(trigger,)| trigger.as_str()));
                    (delete.execute::<B>(&mut *tx).await).map_err(StoreError::query(OPERATION))?;
                }
                rows
            }
        };
        replaced.extend(rows.into_iter().map(|(trigger,)| trigger));
    }
    Ok(replaced)
}

/// Inserts fires whose trigger ids are new; returns the written ones with their row ids, and
/// the ones whose trigger id exists already.
async fn insert_new_fires<B: SqlBackend>(
    store: &SqlStore<B>,
    tx: &mut B::Connection,
    drafts: Vec<PendingFire>,
    owner: FireLease<'_>,
) -> Result<(Vec<PendingFire>, Vec<PendingFire>), StoreError> {
    let mut written = Vec::with_capacity(drafts.len());
    let mut existing = Vec::new();
    for chunk in drafts.chunks(INSERT_CHUNK) {
        let ids = insert_fire_rows(store, tx, chunk, owner).await?;
        for fire in chunk {
            match ids.get(fire.trigger_id.as_str()) {
                Some(&log_id) => written.push(PendingFire {
                    log_id,
                    ..fire.clone()
                }),
                None => existing.push(fire.clone()),
            }
        }
    }
    Ok((written, existing))
}

/// Inserts the rows of `fires` whose trigger ids are new, as SCHEDULED runs of the lease's
/// node; returns the row id of each written, by trigger id.
async fn insert_fire_rows<B: SqlBackend>(
    store: &SqlStore<B>,
    tx: &mut B::Connection,
    fires: &[PendingFire],
    owner: FireLease<'_>,
) -> Result<HashMap<String, i64>, StoreError> {
    const OPERATION: &str = "write pending fires";
    // MySQL has no RETURNING: the rows get reserved ids, and the ids that are there afterwards
    // are the rows written (a trigger id that existed kept its row).
    let reserved = match B::DIALECT {
        Dialect::Ansi => Vec::new(),
        Dialect::MySql => store.reserve_log_ids_in(tx, fires.len()).await?,
    };
    let rows = fires.iter().enumerate().map(|(index, fire)| {
        let held = [
            ("state", RunState::Scheduled.as_str().into_sql_value()),
            ("owner_node", owner.node_id.into_sql_value()),
            (
                "lease_until_ms",
                (fire.fire_at_ms.max(owner.now_ms) + owner.lease_ms).into_sql_value(),
            ),
            ("created_at_ms", owner.now_ms.into_sql_value()),
        ];
        let id = reserved.get(index).map(|id| ("id", id.into_sql_value()));
        fire_values(fire).into_iter().chain(held).chain(id)
    });
    let mut insert = Statement::insert_batch::<B>("job_logs", rows);
    let rows: Vec<(i64, String)> = match B::DIALECT {
        Dialect::Ansi => {
            insert.push(" ON CONFLICT (trigger_id) DO NOTHING RETURNING id, trigger_id");
            (insert.fetch_all::<B, _>(tx).await).map_err(StoreError::query(OPERATION))?
        }
        Dialect::MySql => {
            insert.push(" ON DUPLICATE KEY UPDATE id = id");
            (insert.execute::<B>(&mut *tx).await).map_err(StoreError::query(OPERATION))?;
            let mut select = Statement::new("SELECT id, trigger_id FROM job_logs WHERE id");
            select.push_in_list(reserved.iter().copied());
            (select.fetch_all::<B, _>(tx).await).map_err(StoreError::query(OPERATION))?
        }
    };
    Ok(rows
        .into_iter()
        .map(|(id, trigger)| (trigger, id))
        .collect())
}
