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
    ($store:ty, $db:ty, $dialect:ident) => {
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

            /// Runs `update` (an `UPDATE schedule_shards SET …` of the rows of `shards`, ending
            /// in ` RETURNING shard, fence` on the ANSI backends) and returns the shard and fence
            /// of every row of `shards` that `node_id` now owns. MySQL, which has no RETURNING,
            /// reads them after the update: the caller has locked those rows, so nobody else
            /// changed them since.
            async fn update_shards<'q>(
                tx: &mut sqlx::Transaction<'_, $db>,
                update: sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments<'q>>,
                shards: &[u32],
                node_id: &str,
                operation: &'static str,
            ) -> Result<Vec<(i64, i64)>, StoreError> {
                $crate::store::sql::dialect::dialect!($dialect,
                    ansi => {
                        let _ = (shards, node_id); // RETURNING names the rows already
                        update
                            .fetch_all(&mut **tx)
                            .await
                            .map_err(StoreError::query(operation))?
                            .iter()
                            .map(|row| Ok((sqlx::Row::try_get(row, 0)?, sqlx::Row::try_get(row, 1)?)))
                            .collect::<Result<_, sqlx::Error>>()
                            .map_err(StoreError::query(operation))
                    },
                    mysql => {
                        update.execute(&mut **tx).await.map_err(StoreError::query(operation))?;
                        sqlx::query_as(&backend_sql(&format!(
                            "SELECT shard, fence FROM schedule_shards WHERE shard IN ({}) AND owner_node = $1 ORDER BY shard",
                            shard_list(shards)
                        )))
                        .bind(node_id)
                        .fetch_all(&mut **tx)
                        .await
                        .map_err(StoreError::query(operation))
                    },
                )
            }

            /// Locks the rows of `shards` in shard order, by primary key alone, and returns
            /// each with its owner and fence (MySQL). InnoDB locks every row a locking read
            /// scans, and waits for those another transaction holds, before it applies the
            /// condition: a condition on the owner would make a node wait on (and deadlock
            /// with) the shards other nodes are scanning, so the caller filters instead.
            #[allow(dead_code)] // MySQL's alone
            async fn lock_shards(
                tx: &mut sqlx::Transaction<'_, $db>,
                shards: &[u32],
                operation: &'static str,
            ) -> Result<Vec<(u32, Option<String>, i64)>, StoreError> {
                if shards.is_empty() {
                    return Ok(Vec::new());
                }
                let rows: Vec<(i64, Option<String>, i64)> = sqlx::query_as(&format!(
                    "SELECT shard, owner_node, fence FROM schedule_shards WHERE shard IN ({}) ORDER BY shard FOR UPDATE",
                    shard_list(shards)
                ))
                .fetch_all(&mut **tx)
                .await
                .map_err(StoreError::query(operation))?;
                Ok(rows.into_iter().map(|(shard, owner, fence)| (shard as u32, owner, fence)).collect())
            }

            /// Takes up to `wanted` free or expired shards for the request's node.
            async fn acquire(
                tx: &mut sqlx::Transaction<'_, $db>,
                request: &ShardLeaseRequest,
                wanted: usize,
            ) -> Result<Vec<AcquiredShard>, StoreError> {
                const OPERATION: &str = "take schedule shards";
                let candidates: Vec<(i64, Option<String>, i64, i64)> = sqlx::query_as(&backend_sql(&format!(
                    "SELECT shard, owner_node, lease_until_ms, scanned_at_ms FROM schedule_shards \
                     WHERE owner_node IS NULL OR lease_until_ms < $1 ORDER BY shard LIMIT $2{}",
                    <$db as $crate::store::sql::backend::SqlBackend>::SKIP_LOCKED
                )))
                .bind(request.now_ms)
                .bind(wanted as i64)
                .fetch_all(&mut **tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                if candidates.is_empty() {
                    return Ok(Vec::new());
                }
                let shards: Vec<u32> = candidates.iter().map(|row| row.0 as u32).collect();
                let sql = format!(
                    "UPDATE schedule_shards SET owner_node = $1, lease_until_ms = $2, fence = fence + 1 \
                     WHERE shard IN ({}) AND (owner_node IS NULL OR lease_until_ms < $3){}",
                    shard_list(&shards),
                    $crate::store::sql::dialect::dialect!($dialect, ansi => " RETURNING shard, fence", mysql => ""),
                );
                let sql = backend_sql(&sql).into_owned();
                let update = sqlx::query(&sql)
                    .bind(&request.node_id)
                    .bind(request.now_ms + request.lease_ms)
                    .bind(request.now_ms);
                let taken = update_shards(tx, update, &shards, &request.node_id, OPERATION).await?;
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
                    &backend_sql("SELECT owner_node, COUNT(*) FROM schedule_shards WHERE owner_node IS NOT NULL \
                     AND owner_node <> $1 AND lease_until_ms >= $2 GROUP BY owner_node \
                     ORDER BY COUNT(*) DESC, owner_node",)
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
                    let candidates: Vec<(i64, i64)> = sqlx::query_as(&backend_sql(&format!(
                        "SELECT shard, scanned_at_ms FROM schedule_shards WHERE owner_node = $1 \
                         AND lease_until_ms >= $2 ORDER BY shard DESC LIMIT $3{}",
                        <$db as $crate::store::sql::backend::SqlBackend>::SKIP_LOCKED
                    )))
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
                    let sql = format!(
                        "UPDATE schedule_shards SET owner_node = $1, lease_until_ms = $2, fence = fence + 1 \
                         WHERE shard IN ({}) AND owner_node = $3{}",
                        shard_list(&shards),
                        $crate::store::sql::dialect::dialect!($dialect, ansi => " RETURNING shard, fence", mysql => ""),
                    );
                    let sql = backend_sql(&sql).into_owned();
                let update = sqlx::query(&sql)
                        .bind(&request.node_id)
                        .bind(request.now_ms + request.lease_ms)
                        .bind(&owner);
                    let moved = update_shards(tx, update, &shards, &request.node_id, OPERATION).await?;
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

            /// Renews the leases of the shards the request's node owns; returns them with
            /// their fences. Locked in shard order, as the scan locks them: see the module docs.
            async fn renew_leases(
                tx: &mut sqlx::Transaction<'_, $db>,
                request: &ShardLeaseRequest,
            ) -> Result<Vec<(i64, i64)>, StoreError> {
                const OPERATION: &str = "renew schedule shard leases";
                $crate::store::sql::dialect::dialect!($dialect,
                    ansi => sqlx::query_as(&backend_sql(&format!(
                        "UPDATE schedule_shards SET lease_until_ms = $1 WHERE shard IN \
                         (SELECT shard FROM schedule_shards WHERE owner_node = $2 ORDER BY shard{}) \
                         AND owner_node = $3 RETURNING shard, fence",
                        <$db as $crate::store::sql::backend::SqlBackend>::ROW_LOCK
                    )))
                    .bind(request.now_ms + request.lease_ms)
                    .bind(&request.node_id)
                    .bind(&request.node_id)
                    .fetch_all(&mut **tx)
                    .await
                    .map_err(StoreError::query(OPERATION)),
                    mysql => {
                        let mine: Vec<(i64,)> =
                            sqlx::query_as(&backend_sql("SELECT shard FROM schedule_shards WHERE owner_node = $1"))
                                .bind(&request.node_id)
                                .fetch_all(&mut **tx)
                                .await
                                .map_err(StoreError::query(OPERATION))?;
                        let mine: Vec<u32> = mine.iter().map(|(shard,)| *shard as u32).collect();
                        let shards: Vec<u32> = lock_shards(tx, &mine, OPERATION)
                            .await?
                            .into_iter()
                            .filter(|(_, owner, _)| owner.as_deref() == Some(request.node_id.as_str()))
                            .map(|(shard, _, _)| shard)
                            .collect();
                        if shards.is_empty() {
                            return Ok(Vec::new());
                        }
                        let sql = format!(
                            "UPDATE schedule_shards SET lease_until_ms = $1 WHERE shard IN ({}) AND owner_node = $2",
                            shard_list(&shards)
                        );
                        let sql = backend_sql(&sql).into_owned();
                let update = sqlx::query(&sql).bind(request.now_ms + request.lease_ms).bind(&request.node_id);
                        update_shards(tx, update, &shards, &request.node_id, OPERATION).await
                    },
                )
            }

            /// Forgets the nodes not seen since `before_ms`: found first, then deleted by key.
            /// A `DELETE` by the time alone would, on MySQL, lock and wait on every node's row
            /// as it scans, while each node's lease step holds its own row from its first
            /// statement: two lease steps deadlocked on each other at every step.
            async fn forget_nodes(tx: &mut sqlx::Transaction<'_, $db>, before_ms: i64) -> Result<(), StoreError> {
                const OPERATION: &str = "forget scheduler nodes";
                let stale: Vec<(String,)> =
                    sqlx::query_as(&backend_sql("SELECT node_id FROM scheduler_nodes WHERE seen_at_ms < $1"))
                        .bind(before_ms)
                        .fetch_all(&mut **tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                if stale.is_empty() {
                    return Ok(());
                }
                let mut delete = sqlx::QueryBuilder::<$db>::new("DELETE FROM scheduler_nodes WHERE seen_at_ms < ");
                delete.push_bind(before_ms).push(" AND node_id");
                $crate::store::sql::push_in_list!(delete, stale.into_iter().map(|(node,)| node));
                delete.build().execute(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                Ok(())
            }

            #[async_trait::async_trait]
            impl ScheduleShards for $store {
                async fn ensure_shards(&self, count: u32) -> Result<u32, StoreError> {
                    const OPERATION: &str = "create the schedule shards";
                    let mut tx = self.begin_write(OPERATION).await?;
                    // Nodes starting at once take turns on the lock row, so one creates.
                    sqlx::query(&backend_sql("UPDATE schedule_lock SET name = name WHERE name = 'schedule'"))
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                    let (existing,): (i64,) = sqlx::query_as(&backend_sql("SELECT COUNT(*) FROM schedule_shards"))
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
                    sqlx::query(&backend_sql("UPDATE jobs SET shard = id % $1"))
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
                        &backend_sql($crate::store::sql::dialect::dialect!($dialect,
                            ansi => "INSERT INTO scheduler_nodes (node_id, seen_at_ms) VALUES ($1, $2) \
                             ON CONFLICT (node_id) DO UPDATE SET seen_at_ms = excluded.seen_at_ms",
                            mysql => "INSERT INTO scheduler_nodes (node_id, seen_at_ms) VALUES ($1, $2) \
                             ON DUPLICATE KEY UPDATE seen_at_ms = VALUES(seen_at_ms)",
                        ))
                    )
                    .bind(&request.node_id)
                    .bind(request.now_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    let (live_nodes, total_shards): (i64, i64) = sqlx::query_as(
                        &backend_sql("SELECT (SELECT COUNT(*) FROM scheduler_nodes WHERE seen_at_ms >= $1), \
                         (SELECT COUNT(*) FROM schedule_shards)",)
                    )
                    .bind(request.now_ms - request.lease_ms)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    let renewed = renew_leases(&mut tx, request).await?;
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
                    forget_nodes(&mut tx, request.now_ms - FORGET_AFTER_LEASES * request.lease_ms).await?;
                    tx.commit().await.map_err(StoreError::query(OPERATION))?;
                    Ok(lease)
                }

                async fn release_all_shards(&self, node_id: &str) -> Result<(), StoreError> {
                    const OPERATION: &str = "release schedule shards";
                    let mut tx = self.begin_write(OPERATION).await?;
                    sqlx::query(
                        &backend_sql("UPDATE schedule_shards SET owner_node = NULL, lease_until_ms = 0 \
                         WHERE owner_node = $1",)
                    )
                    .bind(node_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    sqlx::query(&backend_sql("DELETE FROM scheduler_nodes WHERE node_id = $1"))
                        .bind(node_id)
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                    tx.commit().await.map_err(StoreError::query(OPERATION))
                }

                async fn shard_owners(&self) -> Result<Vec<ShardOwner>, StoreError> {
                    let rows: Vec<(i64, Option<String>, i64, i64, i64)> = sqlx::query_as(
                        &backend_sql("SELECT shard, owner_node, lease_until_ms, fence, scanned_at_ms \
                         FROM schedule_shards ORDER BY shard",)
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
                let passed: Vec<(i64,)> = $crate::store::sql::dialect::dialect!($dialect,
                    ansi => sqlx::query_as(&backend_sql(&format!(
                        "UPDATE schedule_shards SET scanned_at_ms = $1 WHERE shard IN \
                         (SELECT shard FROM schedule_shards WHERE owner_node = $2 \
                          AND (shard, fence) IN (VALUES {}) ORDER BY shard{}) \
                         RETURNING shard",
                        // Integers of this node's own state, written inline: no binds to count.
                        held.iter().map(|shard| format!("({}, {})", shard.shard, shard.fence)).collect::<Vec<_>>().join(", "),
                        <$db as $crate::store::sql::backend::SqlBackend>::ROW_LOCK
                    )))
                    .bind(now_ms)
                    .bind(node_id)
                    .fetch_all(&mut **tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?,
                    mysql => {
                        let held_shards: Vec<u32> = held.iter().map(|owned| owned.shard).collect();
                        let passed: Vec<(i64,)> = lock_shards(tx, &held_shards, OPERATION)
                            .await?
                            .into_iter()
                            .filter(|(shard, owner, fence)| {
                                owner.as_deref() == Some(node_id)
                                    && held.iter().any(|owned| owned.shard == *shard && owned.fence == *fence)
                            })
                            .map(|(shard, _, _)| (i64::from(shard),))
                            .collect();
                        if !passed.is_empty() {
                            let shards: Vec<u32> = passed.iter().map(|(shard,)| *shard as u32).collect();
                            sqlx::query(&backend_sql(&format!(
                                "UPDATE schedule_shards SET scanned_at_ms = $1 WHERE shard IN ({})",
                                shard_list(&shards)
                            )))
                            .bind(now_ms)
                            .execute(&mut **tx)
                            .await
                            .map_err(StoreError::query(OPERATION))?;
                        }
                        passed
                    },
                );
                let mut passed: Vec<u32> = passed.into_iter().map(|(shard,)| shard as u32).collect();
                passed.sort_unstable();
                Ok(passed)
            }
        }
    };
}

pub(crate) use impl_sql_shards;
