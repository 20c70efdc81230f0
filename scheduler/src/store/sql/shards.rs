//! The [`ScheduleShards`] implementation: tables `schedule_shards` and `scheduler_nodes`, and
//! the fence check of the pre-read scan. Written once for every backend ([`SqlBackend`]).
//!
//! Locks, on PostgreSQL: a node locks the rows of the shards it owns in shard order (here and
//! in the pre-read scan's fence check, `ROW_LOCK`), and takes free or expired shards with
//! `SKIP LOCKED`, so nodes never wait on each other's shards and a node's lease step and its
//! own scan cannot deadlock. On SQLite `BEGIN IMMEDIATE` serialises every write anyway. MySQL
//! locks shard rows by primary key alone ([`lock_shards`]).

use super::backend::{SqlBackend, SqlStore};
use super::dialect::Dialect;
use super::statement::{IntoSqlValue as _, Statement};
use crate::store::{
    AcquiredShard, Acquisition, OwnedShard, ScheduleShards, ShardLease, ShardLeaseRequest,
    ShardOwner, StoreError,
};

/// A node not seen for this many leases is forgotten.
const FORGET_AFTER_LEASES: i64 = 10;

fn owned(rows: Vec<(i64, i64)>) -> Vec<OwnedShard> {
    (rows.into_iter())
        .map(|(shard, fence)| OwnedShard {
            shard: shard as u32,
            fence,
        })
        .collect()
}

/// Shard numbers as the text of an `IN (…)` list: integers of the node's own state, written
/// inline, so no binds need counting.
fn shard_list(shards: &[u32]) -> String {
    shards
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs `update` (an `UPDATE schedule_shards SET …` of the rows of `shards`) and returns the
/// shard and fence of every row of `shards` that `node_id` now owns: the ANSI backends return
/// them (` RETURNING shard, fence` is added here); MySQL, which has no RETURNING, reads them
/// after the update: the caller has locked those rows, so nobody else changed them since.
async fn update_shards<B: SqlBackend>(
    tx: &mut B::Connection,
    mut update: Statement<'_>,
    shards: &[u32],
    node_id: &str,
    operation: &'static str,
) -> Result<Vec<(i64, i64)>, StoreError> {
    match B::DIALECT {
        Dialect::Ansi => {
            update.push(" RETURNING shard, fence");
            (update.fetch_all::<B, _>(tx).await).map_err(StoreError::query(operation))
        }
        Dialect::MySql => {
            (update.execute::<B>(&mut *tx).await).map_err(StoreError::query(operation))?;
            (Statement::new(format!(
                "SELECT shard, fence FROM schedule_shards WHERE shard IN ({}) \
                 AND owner_node = $1 ORDER BY shard",
                shard_list(shards)
            ))
            .bind(node_id)
            .fetch_all::<B, _>(tx))
            .await
            .map_err(StoreError::query(operation))
        }
    }
}

/// Locks the rows of `shards` in shard order, by primary key alone, and returns each with its
/// owner and fence (MySQL). InnoDB locks every row a locking read scans, and waits for those
/// another transaction holds, before it applies the condition: a condition on the owner would
/// make a node wait on (and deadlock with) the shards other nodes are scanning, so the caller
/// filters instead.
async fn lock_shards<B: SqlBackend>(
    tx: &mut B::Connection,
    shards: &[u32],
    operation: &'static str,
) -> Result<Vec<(u32, Option<String>, i64)>, StoreError> {
    if shards.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<(i64, Option<String>, i64)> = (Statement::new(format!(
        "SELECT shard, owner_node, fence FROM schedule_shards WHERE shard IN ({}) \
         ORDER BY shard FOR UPDATE",
        shard_list(shards)
    ))
    .fetch_all::<B, _>(tx))
    .await
    .map_err(StoreError::query(operation))?;
    Ok((rows.into_iter())
        .map(|(shard, owner, fence)| (shard as u32, owner, fence))
        .collect())
}

/// Takes up to `wanted` free or expired shards for the request's node.
async fn acquire<B: SqlBackend>(
    tx: &mut B::Connection,
    request: &ShardLeaseRequest,
    wanted: usize,
) -> Result<Vec<AcquiredShard>, StoreError> {
    const OPERATION: &str = "take schedule shards";
    let candidates: Vec<(i64, Option<String>, i64, i64)> = (Statement::new(format!(
        "SELECT shard, owner_node, lease_until_ms, scanned_at_ms FROM schedule_shards \
         WHERE owner_node IS NULL OR lease_until_ms < $1 ORDER BY shard LIMIT $2{}",
        B::SKIP_LOCKED
    ))
    .bind(request.now_ms)
    .bind(wanted as i64)
    .fetch_all::<B, _>(&mut *tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let shards: Vec<u32> = candidates.iter().map(|row| row.0 as u32).collect();
    let update = Statement::new(format!(
        "UPDATE schedule_shards SET owner_node = $1, lease_until_ms = $2, fence = fence + 1 \
         WHERE shard IN ({}) AND (owner_node IS NULL OR lease_until_ms < $3)",
        shard_list(&shards),
    ))
    .bind(request.node_id.as_str())
    .bind(request.now_ms + request.lease_ms)
    .bind(request.now_ms);
    let taken = update_shards::<B>(tx, update, &shards, &request.node_id, OPERATION).await?;
    Ok((owned(taken).into_iter())
        .filter_map(|shard| {
            let (_, owner, _, scanned_at_ms) =
                (candidates.iter()).find(|row| row.0 == i64::from(shard.shard))?;
            Some(AcquiredShard {
                owned: shard,
                how: if owner.is_some() {
                    Acquisition::Takeover
                } else {
                    Acquisition::Free
                },
                from: owner.clone(),
                scanned_at_ms: *scanned_at_ms,
            })
        })
        .collect())
}

/// Takes up to `wanted` shards from live nodes owning more than `share`, their highest-numbered
/// first, never leaving one below the share. Rows a scan holds are passed over (taken at a
/// later step).
async fn rebalance<B: SqlBackend>(
    tx: &mut B::Connection,
    request: &ShardLeaseRequest,
    share: usize,
    wanted: usize,
) -> Result<Vec<AcquiredShard>, StoreError> {
    const OPERATION: &str = "take schedule shards from nodes above their share";
    let owners: Vec<(String, i64)> = (Statement::new(
        "SELECT owner_node, COUNT(*) FROM schedule_shards WHERE owner_node IS NOT NULL \
         AND owner_node <> $1 AND lease_until_ms >= $2 GROUP BY owner_node \
         ORDER BY COUNT(*) DESC, owner_node",
    )
    .bind(request.node_id.as_str())
    .bind(request.now_ms)
    .fetch_all::<B, _>(&mut *tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    let mut taken = Vec::new();
    for (owner, count) in owners {
        let excess = (count as usize)
            .saturating_sub(share)
            .min(wanted - taken.len());
        if excess == 0 {
            continue;
        }
        let candidates: Vec<(i64, i64)> = (Statement::new(format!(
            "SELECT shard, scanned_at_ms FROM schedule_shards WHERE owner_node = $1 \
             AND lease_until_ms >= $2 ORDER BY shard DESC LIMIT $3{}",
            B::SKIP_LOCKED
        ))
        .bind(owner.as_str())
        .bind(request.now_ms)
        .bind(excess as i64)
        .fetch_all::<B, _>(&mut *tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        if candidates.is_empty() {
            continue;
        }
        let shards: Vec<u32> = candidates.iter().map(|row| row.0 as u32).collect();
        let update = Statement::new(format!(
            "UPDATE schedule_shards SET owner_node = $1, lease_until_ms = $2, fence = fence + 1 \
             WHERE shard IN ({}) AND owner_node = $3",
            shard_list(&shards),
        ))
        .bind(request.node_id.as_str())
        .bind(request.now_ms + request.lease_ms)
        .bind(owner.as_str());
        let moved =
            update_shards::<B>(&mut *tx, update, &shards, &request.node_id, OPERATION).await?;
        for shard in owned(moved) {
            let scanned_at_ms = (candidates.iter())
                .find(|row| row.0 == i64::from(shard.shard))
                .map_or(0, |row| row.1);
            taken.push(AcquiredShard {
                owned: shard,
                how: Acquisition::Rebalance,
                from: Some(owner.clone()),
                scanned_at_ms,
            });
        }
        if taken.len() >= wanted {
            break;
        }
    }
    Ok(taken)
}

/// Renews the leases of the shards the request's node owns; returns them with their fences.
/// Locked in shard order, as the scan locks them: see the module docs.
async fn renew_leases<B: SqlBackend>(
    tx: &mut B::Connection,
    request: &ShardLeaseRequest,
) -> Result<Vec<(i64, i64)>, StoreError> {
    const OPERATION: &str = "renew schedule shard leases";
    let lease_until_ms = request.now_ms + request.lease_ms;
    let node_id = request.node_id.as_str();
    match B::DIALECT {
        Dialect::Ansi => (Statement::new(format!(
            "UPDATE schedule_shards SET lease_until_ms = $1 WHERE shard IN \
             (SELECT shard FROM schedule_shards WHERE owner_node = $2 ORDER BY shard{}) \
             AND owner_node = $3 RETURNING shard, fence",
            B::ROW_LOCK
        ))
        .bind(lease_until_ms)
        .bind(node_id)
        .bind(node_id)
        .fetch_all::<B, _>(tx))
        .await
        .map_err(StoreError::query(OPERATION)),
        Dialect::MySql => {
            let mine: Vec<(i64,)> =
                (Statement::new("SELECT shard FROM schedule_shards WHERE owner_node = $1")
                    .bind(node_id)
                    .fetch_all::<B, _>(&mut *tx))
                .await
                .map_err(StoreError::query(OPERATION))?;
            let mine: Vec<u32> = mine.iter().map(|(shard,)| *shard as u32).collect();
            let shards: Vec<u32> = (lock_shards::<B>(&mut *tx, &mine, OPERATION).await?)
                .into_iter()
                .filter(|(_, owner, _)| owner.as_deref() == Some(node_id))
                .map(|(shard, _, _)| shard)
                .collect();
            if shards.is_empty() {
                return Ok(Vec::new());
            }
            let update = Statement::new(format!(
                "UPDATE schedule_shards SET lease_until_ms = $1 WHERE shard IN ({}) \
                 AND owner_node = $2",
                shard_list(&shards)
            ))
            .bind(lease_until_ms)
            .bind(node_id);
            update_shards::<B>(tx, update, &shards, node_id, OPERATION).await
        }
    }
}

/// Forgets the nodes not seen since `before_ms`: found first, then deleted by key. A `DELETE`
/// by the time alone would, on MySQL, lock and wait on every node's row as it scans, while
/// each node's lease step holds its own row from its first statement: two lease steps
/// deadlocked on each other at every step.
async fn forget_nodes<B: SqlBackend>(
    tx: &mut B::Connection,
    before_ms: i64,
) -> Result<(), StoreError> {
    const OPERATION: &str = "forget scheduler nodes";
    let stale: Vec<(String,)> =
        (Statement::new("SELECT node_id FROM scheduler_nodes WHERE seen_at_ms < $1")
            .bind(before_ms)
            .fetch_all::<B, _>(&mut *tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
    if stale.is_empty() {
        return Ok(());
    }
    let mut delete = Statement::new("DELETE FROM scheduler_nodes WHERE seen_at_ms < ");
    delete.push_bind(before_ms).push(" AND node_id");
    delete.push_in_list(stale.iter().map(|(node,)| node.as_str()));
    (delete.execute::<B>(tx).await).map_err(StoreError::query(OPERATION))?;
    Ok(())
}

#[async_trait::async_trait]
impl<B: SqlBackend> ScheduleShards for SqlStore<B> {
    async fn ensure_shards(&self, count: u32) -> Result<u32, StoreError> {
        const OPERATION: &str = "create the schedule shards";
        let mut tx = self.begin_write(OPERATION).await?;
        // Nodes starting at once take turns on the lock row, so one creates.
        (Statement::new("UPDATE schedule_lock SET name = name WHERE name = 'schedule'")
            .execute::<B>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        let (existing,): (i64,) = (Statement::new("SELECT COUNT(*) FROM schedule_shards")
            .fetch_one::<B, _>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        if existing > 0 {
            tx.rollback().await.map_err(StoreError::query(OPERATION))?;
            return Ok(existing as u32);
        }
        let count = count.max(1);
        let rows = (0..count).map(|shard| [("shard", i64::from(shard).into_sql_value())]);
        (Statement::insert_rows("schedule_shards", rows).execute::<B>(&mut tx))
            .await
            .map_err(StoreError::query(OPERATION))?;
        (Statement::new("UPDATE jobs SET shard = id % $1")
            .bind(i64::from(count))
            .execute::<B>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(count)
    }

    async fn lease_shards(&self, request: &ShardLeaseRequest) -> Result<ShardLease, StoreError> {
        const OPERATION: &str = "renew schedule shard leases";
        let mut tx = self.begin_write(OPERATION).await?;
        (Statement::new(match B::DIALECT {
            Dialect::Ansi => {
                "INSERT INTO scheduler_nodes (node_id, seen_at_ms) VALUES ($1, $2) \
                 ON CONFLICT (node_id) DO UPDATE SET seen_at_ms = excluded.seen_at_ms"
            }
            Dialect::MySql => {
                "INSERT INTO scheduler_nodes (node_id, seen_at_ms) VALUES ($1, $2) \
                 ON DUPLICATE KEY UPDATE seen_at_ms = VALUES(seen_at_ms)"
            }
        })
        .bind(request.node_id.as_str())
        .bind(request.now_ms)
        .execute::<B>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        let (live_nodes, total_shards): (i64, i64) = (Statement::new(
            "SELECT (SELECT COUNT(*) FROM scheduler_nodes WHERE seen_at_ms >= $1), \
             (SELECT COUNT(*) FROM schedule_shards)",
        )
        .bind(request.now_ms - request.lease_ms)
        .fetch_one::<B, _>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        let renewed = renew_leases::<B>(&mut tx, request).await?;
        let mut lease = ShardLease {
            owned: owned(renewed),
            live_nodes: live_nodes.max(1) as u32,
            total_shards: total_shards as u32,
            ..ShardLease::default()
        };
        lease.owned.sort_unstable();
        let share = lease.total_shards.div_ceil(lease.live_nodes) as usize;
        if lease.owned.len() < share {
            lease.acquired = acquire::<B>(&mut tx, request, share - lease.owned.len()).await?;
            let wanted = share - lease.owned.len() - lease.acquired.len();
            // Only from nodes above the share: taking a node below it would make it take back
            // in turn, for ever.
            if wanted > 0 {
                let rebalanced = rebalance::<B>(&mut tx, request, share, wanted).await?;
                lease.acquired.extend(rebalanced);
            }
            (lease.owned).extend(lease.acquired.iter().map(|acquired| acquired.owned));
            lease.owned.sort_unstable();
        }
        let forget_before_ms = request.now_ms - FORGET_AFTER_LEASES * request.lease_ms;
        forget_nodes::<B>(&mut tx, forget_before_ms).await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(lease)
    }

    async fn release_all_shards(&self, node_id: &str) -> Result<(), StoreError> {
        const OPERATION: &str = "release schedule shards";
        let mut tx = self.begin_write(OPERATION).await?;
        (Statement::new(
            "UPDATE schedule_shards SET owner_node = NULL, lease_until_ms = 0 \
             WHERE owner_node = $1",
        )
        .bind(node_id)
        .execute::<B>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        (Statement::new("DELETE FROM scheduler_nodes WHERE node_id = $1")
            .bind(node_id)
            .execute::<B>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        tx.commit().await.map_err(StoreError::query(OPERATION))
    }

    async fn shard_owners(&self) -> Result<Vec<ShardOwner>, StoreError> {
        const OPERATION: &str = "read schedule shard owners";
        let rows: Vec<(i64, Option<String>, i64, i64, i64)> = (Statement::new(
            "SELECT shard, owner_node, lease_until_ms, fence, scanned_at_ms \
             FROM schedule_shards ORDER BY shard",
        )
        .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        Ok((rows.into_iter())
            .map(
                |(shard, owner_node, lease_until_ms, fence, scanned_at_ms)| ShardOwner {
                    shard: shard as u32,
                    owner_node,
                    lease_until_ms,
                    fence,
                    scanned_at_ms,
                },
            )
            .collect())
    }
}

/// Checks, inside a pre-read transaction, that `held` shards are still this node's under the
/// same fences, locks them until the transaction ends and stamps their scan time; returns the
/// shards that passed. The scan then reads and writes jobs of those shards only.
pub(crate) async fn fence_scan<B: SqlBackend>(
    tx: &mut B::Connection,
    node_id: &str,
    held: &[OwnedShard],
    now_ms: i64,
) -> Result<Vec<u32>, StoreError> {
    const OPERATION: &str = "check the scan's shard fences";
    if held.is_empty() {
        return Ok(Vec::new());
    }
    let mut passed: Vec<u32> = match B::DIALECT {
        Dialect::Ansi => {
            // Integers of this node's own state, written inline: no binds to count.
            let fences: Vec<String> = (held.iter())
                .map(|shard| format!("({}, {})", shard.shard, shard.fence))
                .collect();
            let passed: Vec<(i64,)> = (Statement::new(format!(
                "UPDATE schedule_shards SET scanned_at_ms = $1 WHERE shard IN \
                 (SELECT shard FROM schedule_shards WHERE owner_node = $2 \
                  AND (shard, fence) IN (VALUES {}) ORDER BY shard{}) \
                 RETURNING shard",
                fences.join(", "),
                B::ROW_LOCK
            ))
            .bind(now_ms)
            .bind(node_id)
            .fetch_all::<B, _>(tx))
            .await
            .map_err(StoreError::query(OPERATION))?;
            passed.into_iter().map(|(shard,)| shard as u32).collect()
        }
        Dialect::MySql => {
            let held_shards: Vec<u32> = held.iter().map(|owned| owned.shard).collect();
            let passed: Vec<u32> = (lock_shards::<B>(&mut *tx, &held_shards, OPERATION).await?)
                .into_iter()
                .filter(|(shard, owner, fence)| {
                    owner.as_deref() == Some(node_id)
                        && (held.iter()).any(|owned| owned.shard == *shard && owned.fence == *fence)
                })
                .map(|(shard, _, _)| shard)
                .collect();
            if !passed.is_empty() {
                (Statement::new(format!(
                    "UPDATE schedule_shards SET scanned_at_ms = $1 WHERE shard IN ({})",
                    shard_list(&passed)
                ))
                .bind(now_ms)
                .execute::<B>(tx))
                .await
                .map_err(StoreError::query(OPERATION))?;
            }
            passed
        }
    };
    passed.sort_unstable();
    Ok(passed)
}
