//! The [`ScheduleShards`](crate::store::ScheduleShards) implementation: tables
//! `schedule_shards` and `scheduler_nodes`, the same SQL on both backends.
//!
//! Locks, on PostgreSQL: a node locks the rows of the shards it owns in shard order (here and
//! in the pre-read scan's fence check, `ROW_LOCK`), and takes free or expired shards with
//! `SKIP LOCKED`, so nodes never wait on each other's shards and a node's lease step and its
//! own scan cannot deadlock. On SQLite `BEGIN IMMEDIATE` serialises every write anyway.

/// Implements [`ScheduleShards`](crate::store::ScheduleShards) for a backend type with a
/// `pool` field, `begin_write`, and the constants `ROW_LOCK` and `SKIP_LOCKED`.
macro_rules! impl_sql_shards {
    ($store:ty, $db:ty) => {
        mod shards {
            use super::*;
            use $crate::store::{
                AcquiredShard, Acquisition, OwnedShard, ScheduleShards, ShardLease,
                ShardLeaseRequest, ShardOwner,
            };

            /// A node not seen for this many leases is forgotten.
            const FORGET_AFTER_LEASES: i64 = 10;

            fn owned(rows: Vec<(i64, i64)>) -> Vec<OwnedShard> {
                rows.into_iter()
                    .map(|(shard, fence)| OwnedShard {
                        shard: shard as u32,
                        fence,
                    })
                    .collect()
            }

            fn shard_list(shards: &[u32]) -> String {
                shards
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            }

            /// Takes up to `wanted` free or expired shards for the request's node.
            async fn acquire(
                tx: &mut sqlx::Transaction<'_, $db>,
                request: &ShardLeaseRequest,
                wanted: usize,
            ) -> Result<Vec<AcquiredShard>, StoreError> {
                const OPERATION: &str = "take schedule shards";
                let candidates: Vec<(i64, Option<String>, i64, i64)> = sqlx::query_as(&format!(
                    "SELECT shard, owner_node, lease_until_ms, scanned_at_ms FROM schedule_shards \
                     WHERE owner_node IS NULL OR lease_until_ms < $1 ORDER BY shard LIMIT $2{}",
                    <$store>::SKIP_LOCKED
                ))
                .bind(request.now_ms)
                .bind(wanted as i64)
                .fetch_all(&mut **tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                if candidates.is_empty() {
                    return Ok(Vec::new());
                }
                let shards: Vec<u32> = candidates.iter().map(|row| row.0 as u32).collect();
                let taken: Vec<(i64, i64)> = sqlx::query_as(&format!(
                    "UPDATE schedule_shards SET owner_node = $1, lease_until_ms = $2, fence = fence + 1 \
                     WHERE shard IN ({}) AND (owner_node IS NULL OR lease_until_ms < $3) \
                     RETURNING shard, fence",
                    shard_list(&shards)
                ))
                .bind(&request.node_id)
                .bind(request.now_ms + request.lease_ms)
                .bind(request.now_ms)
                .fetch_all(&mut **tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                Ok(owned(taken)
                    .into_iter()
                    .filter_map(|shard| {
                        let (_, owner, _, scanned_at_ms) = candidates
                            .iter()
                            .find(|row| row.0 == i64::from(shard.shard))?;
                        Some(AcquiredShard {
                            owned: shard,
                            how: if owner.is_some() { Acquisition::Takeover } else { Acquisition::Free },
                            from: owner.clone(),
                            scanned_at_ms: *scanned_at_ms,
                        })
                    })
                    .collect())
            }

            /// Takes up to `wanted` shards from live nodes owning more than `share`, their
            /// highest-numbered first, never leaving one below the share. Rows a scan holds
            /// are passed over (taken at a later step).
            async fn rebalance(
                tx: &mut sqlx::Transaction<'_, $db>,
                request: &ShardLeaseRequest,
                share: usize,
                wanted: usize,
            ) -> Result<Vec<AcquiredShard>, StoreError> {
                const OPERATION: &str = "take schedule shards from nodes above their share";
                let owners: Vec<(String, i64)> = sqlx::query_as(
                    "SELECT owner_node, COUNT(*) FROM schedule_shards WHERE owner_node IS NOT NULL \
                     AND owner_node <> $1 AND lease_until_ms >= $2 GROUP BY owner_node \
                     ORDER BY COUNT(*) DESC, owner_node",
                )
                .bind(&request.node_id)
                .bind(request.now_ms)
                .fetch_all(&mut **tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                let mut taken = Vec::new();
                for (owner, count) in owners {
                    let excess = (count as usize).saturating_sub(share).min(wanted - taken.len());
                    if excess == 0 {
                        continue;
                    }
                    let candidates: Vec<(i64, i64)> = sqlx::query_as(&format!(
                        "SELECT shard, scanned_at_ms FROM schedule_shards WHERE owner_node = $1 \
                         AND lease_until_ms >= $2 ORDER BY shard DESC LIMIT $3{}",
                        <$store>::SKIP_LOCKED
                    ))
                    .bind(&owner)
                    .bind(request.now_ms)
                    .bind(excess as i64)
                    .fetch_all(&mut **tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    if candidates.is_empty() {
                        continue;
                    }
                    let shards: Vec<u32> = candidates.iter().map(|row| row.0 as u32).collect();
                    let moved: Vec<(i64, i64)> = sqlx::query_as(&format!(
                        "UPDATE schedule_shards SET owner_node = $1, lease_until_ms = $2, fence = fence + 1 \
                         WHERE shard IN ({}) AND owner_node = $3 RETURNING shard, fence",
                        shard_list(&shards)
                    ))
                    .bind(&request.node_id)
                    .bind(request.now_ms + request.lease_ms)
                    .bind(&owner)
                    .fetch_all(&mut **tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    for shard in owned(moved) {
                        let scanned_at_ms = candidates
                            .iter()
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

            #[async_trait::async_trait]
            impl ScheduleShards for $store {
                async fn ensure_shards(&self, count: u32) -> Result<u32, StoreError> {
                    const OPERATION: &str = "create the schedule shards";
                    let mut tx = self.begin_write(OPERATION).await?;
                    // Nodes starting at once take turns on the lock row, so one creates.
                    sqlx::query("UPDATE schedule_lock SET name = name WHERE name = 'schedule'")
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                    let (existing,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM schedule_shards")
                        .fetch_one(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                    if existing > 0 {
                        tx.rollback().await.map_err(StoreError::query(OPERATION))?;
                        return Ok(existing as u32);
                    }
                    let count = count.max(1);
                    let mut insert = sqlx::QueryBuilder::<$db>::new("INSERT INTO schedule_shards (shard) ");
                    insert.push_values(0..count, |mut values, shard| {
                        values.push_bind(i64::from(shard));
                    });
                    insert
                        .build()
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                    sqlx::query("UPDATE jobs SET shard = id % $1")
                        .bind(i64::from(count))
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                    tx.commit().await.map_err(StoreError::query(OPERATION))?;
                    Ok(count)
                }

                async fn lease_shards(&self, request: &ShardLeaseRequest) -> Result<ShardLease, StoreError> {
                    const OPERATION: &str = "renew schedule shard leases";
                    let mut tx = self.begin_write(OPERATION).await?;
                    sqlx::query(
                        "INSERT INTO scheduler_nodes (node_id, seen_at_ms) VALUES ($1, $2) \
                         ON CONFLICT (node_id) DO UPDATE SET seen_at_ms = excluded.seen_at_ms",
                    )
                    .bind(&request.node_id)
                    .bind(request.now_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    let (live_nodes, total_shards): (i64, i64) = sqlx::query_as(
                        "SELECT (SELECT COUNT(*) FROM scheduler_nodes WHERE seen_at_ms >= $1), \
                         (SELECT COUNT(*) FROM schedule_shards)",
                    )
                    .bind(request.now_ms - request.lease_ms)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    // Locked in shard order, as the scan locks them: see the module docs.
                    let renewed: Vec<(i64, i64)> = sqlx::query_as(&format!(
                        "UPDATE schedule_shards SET lease_until_ms = $1 WHERE shard IN \
                         (SELECT shard FROM schedule_shards WHERE owner_node = $2 ORDER BY shard{}) \
                         AND owner_node = $2 RETURNING shard, fence",
                        <$store>::ROW_LOCK
                    ))
                    .bind(request.now_ms + request.lease_ms)
                    .bind(&request.node_id)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    let mut lease = ShardLease {
                        owned: owned(renewed),
                        live_nodes: live_nodes.max(1) as u32,
                        total_shards: total_shards as u32,
                        ..ShardLease::default()
                    };
                    lease.owned.sort_unstable();
                    let share = lease.total_shards.div_ceil(lease.live_nodes) as usize;
                    if lease.owned.len() < share {
                        lease.acquired = acquire(&mut tx, request, share - lease.owned.len()).await?;
                        let wanted = share - lease.owned.len() - lease.acquired.len();
                        // Only from nodes above the share: taking a node below it would make it
                        // take back in turn, for ever.
                        if wanted > 0 {
                            lease.acquired.extend(rebalance(&mut tx, request, share, wanted).await?);
                        }
                        lease.owned.extend(lease.acquired.iter().map(|acquired| acquired.owned));
                        lease.owned.sort_unstable();
                    }
                    sqlx::query("DELETE FROM scheduler_nodes WHERE seen_at_ms < $1")
                        .bind(request.now_ms - FORGET_AFTER_LEASES * request.lease_ms)
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                    tx.commit().await.map_err(StoreError::query(OPERATION))?;
                    Ok(lease)
                }

                async fn release_all_shards(&self, node_id: &str) -> Result<(), StoreError> {
                    const OPERATION: &str = "release schedule shards";
                    let mut tx = self.begin_write(OPERATION).await?;
                    sqlx::query(
                        "UPDATE schedule_shards SET owner_node = NULL, lease_until_ms = 0 \
                         WHERE owner_node = $1",
                    )
                    .bind(node_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    sqlx::query("DELETE FROM scheduler_nodes WHERE node_id = $1")
                        .bind(node_id)
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                    tx.commit().await.map_err(StoreError::query(OPERATION))
                }

                async fn shard_owners(&self) -> Result<Vec<ShardOwner>, StoreError> {
                    let rows: Vec<(i64, Option<String>, i64, i64, i64)> = sqlx::query_as(
                        "SELECT shard, owner_node, lease_until_ms, fence, scanned_at_ms \
                         FROM schedule_shards ORDER BY shard",
                    )
                    .fetch_all(&self.pool)
                    .await
                    .map_err(StoreError::query("read schedule shard owners"))?;
                    Ok(rows
                        .into_iter()
                        .map(|(shard, owner_node, lease_until_ms, fence, scanned_at_ms)| ShardOwner {
                            shard: shard as u32,
                            owner_node,
                            lease_until_ms,
                            fence,
                            scanned_at_ms,
                        })
                        .collect())
                }
            }

            /// Checks, inside a pre-read transaction, that `held` shards are still this node's
            /// under the same fences, locks them until the transaction ends and stamps their
            /// scan time; returns the shards that passed. The scan then reads and writes jobs
            /// of those shards only.
            pub(super) async fn fence_scan(
                tx: &mut sqlx::Transaction<'_, $db>,
                node_id: &str,
                held: &[OwnedShard],
                now_ms: i64,
            ) -> Result<Vec<u32>, StoreError> {
                const OPERATION: &str = "check the scan's shard fences";
                if held.is_empty() {
                    return Ok(Vec::new());
                }
                // Integers of this node's own state, written inline: no binds to count.
                let pairs: Vec<String> = held
                    .iter()
                    .map(|shard| format!("({}, {})", shard.shard, shard.fence))
                    .collect();
                let passed: Vec<(i64,)> = sqlx::query_as(&format!(
                    "UPDATE schedule_shards SET scanned_at_ms = $1 WHERE shard IN \
                     (SELECT shard FROM schedule_shards WHERE owner_node = $2 \
                      AND (shard, fence) IN (VALUES {}) ORDER BY shard{}) \
                     RETURNING shard",
                    pairs.join(", "),
                    <$store>::ROW_LOCK
                ))
                .bind(now_ms)
                .bind(node_id)
                .fetch_all(&mut **tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                let mut passed: Vec<u32> = passed.into_iter().map(|(shard,)| shard as u32).collect();
                passed.sort_unstable();
                Ok(passed)
            }
        }
    };
}

pub(crate) use impl_sql_shards;
