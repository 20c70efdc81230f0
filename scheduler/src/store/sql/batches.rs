//! The [`FireBatches`](crate::store::FireBatches) implementation: table `fire_batches`, the
//! same SQL on both backends; reserving log ids is the backend's (`reserve_log_ids_in`).
//! Also the parts of the pre-read scan and of the dispatched marks that touch batches: a
//! scan's batches written per shard, the run rows of acknowledged batch fires, settling.

/// Implements [`FireBatches`](crate::store::FireBatches) for a backend type with a `pool`
/// field, `begin_write`, `SKIP_LOCKED` and `reserve_log_ids_in(tx, count)`.
macro_rules! impl_sql_batches {
    ($store:ty, $db:ty, $dialect:ident) => {
        mod batches {
            use super::*;
            use $crate::store::fire_batch;
            use $crate::store::{BatchProgress, DispatchAck, FireBatches, NewFireBatch, StoredBatch};

            /// Writes `batch` in `tx`; returns its id.
            pub(super) async fn insert_batch(
                tx: &mut sqlx::Transaction<'_, $db>,
                batch: NewFireBatch<'_>,
            ) -> Result<i64, StoreError> {
                let pending_from = batch
                    .fires
                    .iter()
                    .map(|fire| fire.fire_at_ms)
                    .min()
                    .unwrap_or(batch.now_ms);
                let sql = returning_id(
                    "INSERT INTO fire_batches (shard, owner_node, fire_count, pending_from_ms, \
                     lease_until_ms, fires, created_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                );
                let insert = sqlx::query(&sql)
                .bind(i64::from(batch.shard))
                .bind(batch.node_id)
                .bind(batch.fires.len() as i64)
                .bind(pending_from)
                // A misfire fired now is due before the scan: its lease runs from now.
                .bind(pending_from.max(batch.now_ms) + batch.lease_ms)
                .bind(fire_batch::encode(batch.fires))
                .bind(batch.now_ms);
                inserted_id(&mut **tx, insert).await.map_err(StoreError::query("write a fire batch"))
            }

            /// Writes the fires a pre-read scan planned (broadcasts expanded) as one batch per
            /// schedule shard, with reserved log ids; returns them (grouped by batch) and where
            /// each batch's are.
            pub(super) async fn write_scan_batches(
                store: &$store,
                tx: &mut sqlx::Transaction<'_, $db>,
                fires: Vec<PendingFire>,
                shard_of: &std::collections::HashMap<i64, u32>,
                request: &$crate::store::PreReadRequest,
            ) -> Result<(Vec<PendingFire>, Vec<$crate::store::ScanBatch>), StoreError> {
                let mut fires = expand_broadcasts(tx, fires).await?;
                let shard = |fire: &PendingFire| shard_of.get(&fire.job_id.get()).copied().unwrap_or(0);
                fires.sort_by_key(|fire| (shard(fire), fire.fire_at_ms));
                let ids = store.reserve_log_ids_in(tx, fires.len()).await?;
                for (fire, id) in fires.iter_mut().zip(ids) {
                    fire.log_id = id;
                }
                let mut batches = Vec::new();
                let mut start = 0;
                while start < fires.len() {
                    let this_shard = shard(&fires[start]);
                    let end = start + fires[start..].iter().take_while(|fire| shard(fire) == this_shard).count();
                    let id = insert_batch(tx, NewFireBatch {
                        shard: this_shard,
                        node_id: &request.node_id,
                        fires: &fires[start..end],
                        now_ms: request.now_ms,
                        lease_ms: request.lease_ms,
                    })
                    .await?;
                    batches.push($crate::store::ScanBatch { id, fires: start..end });
                    start = end;
                }
                Ok((fires, batches))
            }

            /// Writes the run rows of acknowledged fires of batches, already DISPATCHED. A
            /// row that exists (written by a node that emitted the fire before) is kept.
            pub(super) async fn insert_dispatched_runs(
                tx: &mut sqlx::Transaction<'_, $db>,
                acks: &[(&DispatchAck, &PendingFire)],
            ) -> Result<(), StoreError> {
                for chunk in acks.chunks($crate::store::sql::INSERT_CHUNK) {
                    let mut insert = sqlx::QueryBuilder::<$db>::new(format!(
                        "INSERT INTO job_logs ({FIRE_INSERT_COLUMNS}, id, state, created_at_ms, \
                         partition_no, dispatched_at_ms, executor_id) "
                    ));
                    insert.push_values(chunk, |mut values, (ack, fire)| {
                        push_fire_values(&mut values, fire);
                        values
                            .push_bind(fire.log_id)
                            .push_bind($crate::domain::model::RunState::Dispatched.as_str())
                            .push_bind(ack.dispatched_at_ms)
                            .push_bind(i64::from(ack.partition))
                            .push_bind(ack.dispatched_at_ms)
                            .push_bind(ack.executor_id.clone());
                    });
                    // No conflict target: the id (a claimer emitted the fire again) and the
                    // trigger id are both unique, and either way the first row stays.
                    insert.push($crate::store::sql::dialect::dialect!($dialect,
                        ansi => " ON CONFLICT DO NOTHING",
                        mysql => " ON DUPLICATE KEY UPDATE id = job_logs.id",
                    ));
                    insert.build().execute(&mut **tx).await.map_err(StoreError::query("write dispatched runs"))?;
                }
                Ok(())
            }

            /// Records `node_id`'s progress with its batches in `tx` (see
            /// [`FireBatches::settle_fire_batches`]).
            pub(super) async fn settle_in(
                tx: &mut sqlx::Transaction<'_, $db>,
                node_id: &str,
                progress: &[BatchProgress],
                lease_ms: i64,
            ) -> Result<(), StoreError> {
                const OPERATION: &str = "settle fire batches";
                let (done, moving): (Vec<&BatchProgress>, Vec<&BatchProgress>) =
                    progress.iter().partition(|batch| batch.pending_from_ms.is_none());
                for chunk in done.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut delete = sqlx::QueryBuilder::<$db>::new(
                        "DELETE FROM fire_batches WHERE owner_node = ",
                    );
                    delete.push_bind(node_id).push(" AND id");
                    $crate::store::sql::push_in_list!(delete, chunk.iter().map(|batch| batch.id));
                    delete.build().execute(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                }
                for chunk in moving.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let push_batch = |mut values: sqlx::query_builder::Separated<'_, '_, $db, &'static str>, batch: &&BatchProgress| {
                        values.push_bind(batch.id).push_bind(batch.pending_from_ms);
                    };
                    let mut update = sqlx::QueryBuilder::<$db>::new("");
                    $crate::store::sql::dialect::dialect!($dialect,
                        ansi => {
                            update.push("WITH v(id, pending_from) AS (");
                            update.push_values(chunk, push_batch);
                            update.push(
                                ") UPDATE fire_batches SET pending_from_ms = v.pending_from, \
                                 lease_until_ms = v.pending_from + ",
                            )
                            .push_bind(lease_ms)
                            .push(" FROM v WHERE fire_batches.id = v.id AND fire_batches.owner_node = ")
                            .push_bind(node_id);
                        },
                        mysql => {
                            update.push("UPDATE ");
                            $crate::store::sql::dialect::push_mysql_rows(&mut update, &["id", "pending_from"], chunk, push_batch);
                            update
                                .push(
                                    " STRAIGHT_JOIN fire_batches ON fire_batches.id = v.id SET fire_batches.pending_from_ms = v.pending_from, \
                                     fire_batches.lease_until_ms = v.pending_from + ",
                                )
                                .push_bind(lease_ms)
                                .push(" WHERE fire_batches.owner_node = ")
                                .push_bind(node_id);
                        },
                    );
                    update.build().execute(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                }
                Ok(())
            }

            /// The log ids among `batches`' pending fires that need no emission: a run row
            /// has them (acknowledged before their node stopped), or a stop or a schedule
            /// change cancelled them (table `fire_cancellations`).
            async fn settled_fires(
                tx: &mut sqlx::Transaction<'_, $db>,
                batches: &[StoredBatch],
            ) -> Result<std::collections::HashSet<i64>, StoreError> {
                const OPERATION: &str = "claim expired fire batches";
                let pending: Vec<&PendingFire> = batches.iter().flat_map(StoredBatch::pending_fires).collect();
                let mut settled = std::collections::HashSet::new();
                for chunk in pending.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut select = sqlx::QueryBuilder::<$db>::new("SELECT id FROM job_logs WHERE id");
                    $crate::store::sql::push_in_list!(select, chunk.iter().map(|fire| fire.log_id));
                    let rows: Vec<(i64,)> = select.build_query_as().fetch_all(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                    settled.extend(rows.into_iter().map(|(id,)| id));
                }
                let cancellations: Vec<(i64, i64, i64)> =
                    sqlx::query_as(&backend_sql("SELECT job_id, up_to_log_id, from_ms FROM fire_cancellations"))
                        .fetch_all(&mut **tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                let mut by_job: std::collections::HashMap<i64, Vec<$crate::store::FireCancellation>> =
                    std::collections::HashMap::new();
                for (job_id, up_to_log_id, from_ms) in cancellations {
                    if let Ok(id) = kadence_schemas::JobId::new(job_id) {
                        by_job.entry(job_id).or_default().push($crate::store::FireCancellation {
                            job_id: id,
                            up_to_log_id,
                            from_ms,
                            until_ms: i64::MAX,
                        });
                    }
                }
                settled.extend(
                    pending
                        .iter()
                        .filter(|fire| {
                            by_job.get(&fire.job_id.get()).is_some_and(|cancellations| {
                                cancellations.iter().any(|cancelled| cancelled.covers(fire))
                            })
                        })
                        .map(|fire| fire.log_id),
                );
                Ok(settled)
            }

            /// Takes up to `limit` batches whose lease ended before `now_ms` for `node_id`;
            /// returns their id, shard, pending-from time and fires.
            async fn claim_batch_rows(
                tx: &mut sqlx::Transaction<'_, $db>,
                node_id: &str,
                now_ms: i64,
                lease_ms: i64,
                limit: u32,
            ) -> Result<Vec<(i64, i64, i64, Vec<u8>)>, StoreError> {
                const OPERATION: &str = "claim expired fire batches";
                $crate::store::sql::dialect::dialect!($dialect,
                    // Compare-and-set: the condition is repeated outside the subquery, so a
                    // batch two nodes picked at once goes to one of them.
                    ansi => sqlx::query_as(&backend_sql(&format!(
                        "UPDATE fire_batches SET owner_node = $1, lease_until_ms = $2 \
                         WHERE id IN (SELECT id FROM fire_batches WHERE lease_until_ms < $3 \
                         ORDER BY lease_until_ms LIMIT $4{}) AND lease_until_ms < $5 \
                         RETURNING id, shard, pending_from_ms, fires",
                        <$db as $crate::store::sql::backend::SqlBackend>::SKIP_LOCKED
                    )))
                    .bind(node_id)
                    .bind(now_ms + lease_ms)
                    .bind(now_ms)
                    .bind(i64::from(limit))
                    .bind(now_ms)
                    .fetch_all(&mut **tx)
                    .await
                    .map_err(StoreError::query(OPERATION)),
                    // The rows are locked as they are read, passing over those another node
                    // holds: each batch goes to one node.
                    mysql => {
                        let rows: Vec<(i64, i64, i64, Vec<u8>)> = sqlx::query_as(&backend_sql(
                            "SELECT id, shard, pending_from_ms, fires FROM fire_batches WHERE lease_until_ms < $1 \
                             ORDER BY lease_until_ms LIMIT $2 FOR UPDATE SKIP LOCKED",
                        ))
                        .bind(now_ms)
                        .bind(i64::from(limit))
                        .fetch_all(&mut **tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                        if !rows.is_empty() {
                            let mut update = sqlx::QueryBuilder::<$db>::new("UPDATE fire_batches SET owner_node = ");
                            update.push_bind(node_id.to_owned()).push(", lease_until_ms = ").push_bind(now_ms + lease_ms).push(" WHERE id");
                            $crate::store::sql::push_in_list!(update, rows.iter().map(|row| row.0));
                            update.build().execute(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                        }
                        Ok(rows)
                    },
                )
            }

            #[async_trait::async_trait]
            impl FireBatches for $store {
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
                    let id = insert_batch(&mut tx, batch).await?;
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
                    let rows = claim_batch_rows(&mut tx, node_id, now_ms, lease_ms, limit).await?;
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
                                sqlx::query(
                                    &backend_sql("UPDATE fire_batches SET owner_node = 'unreadable', \
                                     lease_until_ms = 9223372036854775807 WHERE id = $1",)
                                )
                                .bind(id)
                                .execute(&mut *tx)
                                .await
                                .map_err(StoreError::query(OPERATION))?;
                            }
                        }
                    }
                    let settled = settled_fires(&mut tx, &claimed).await?;
                    tx.commit().await.map_err(StoreError::query(OPERATION))?;
                    for batch in &mut claimed {
                        let done = batch.pending_fires().map(|fire| fire.log_id).filter(|id| settled.contains(id)).collect();
                        batch.settled = done;
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
                    <$store>::prefer_keyed_joins(&mut tx).await?;
                    settle_in(&mut tx, node_id, progress, lease_ms).await?;
                    tx.commit().await.map_err(StoreError::query(OPERATION))
                }
            }
        }
    };
}

pub(crate) use impl_sql_batches;
