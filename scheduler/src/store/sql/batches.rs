//! The [`FireBatches`](crate::store::FireBatches) implementation: table `fire_batches`, the
//! same SQL on both backends; reserving log ids is the backend's (`reserve_log_ids_in`).

/// Implements [`FireBatches`](crate::store::FireBatches) for a backend type with a `pool`
/// field, `begin_write`, `SKIP_LOCKED` and `reserve_log_ids_in(tx, count)`.
macro_rules! impl_sql_batches {
    ($store:ty, $db:ty) => {
        mod batches {
            use super::*;
            use $crate::store::fire_batch;
            use $crate::store::{BatchProgress, FireBatches, NewFireBatch, StoredBatch};

            /// Writes `batch` in `tx`; returns its id.
            pub(super) async fn insert_batch(
                tx: &mut sqlx::Transaction<'_, $db>,
                batch: NewFireBatch<'_>,
            ) -> Result<i64, StoreError> {
                let pending_from = batch
                    .fires
                    .iter()
                    .map(|fire| fire.scheduled_at_ms)
                    .min()
                    .unwrap_or(batch.now_ms);
                let (id,): (i64,) = sqlx::query_as(
                    "INSERT INTO fire_batches (shard, owner_node, fire_count, pending_from_ms, \
                     lease_until_ms, fires, created_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
                )
                .bind(i64::from(batch.shard))
                .bind(batch.node_id)
                .bind(batch.fires.len() as i64)
                .bind(pending_from)
                .bind(pending_from + batch.lease_ms)
                .bind(fire_batch::encode(batch.fires))
                .bind(batch.now_ms)
                .fetch_one(&mut **tx)
                .await
                .map_err(StoreError::query("write a fire batch"))?;
                Ok(id)
            }

            #[async_trait::async_trait]
            impl FireBatches for $store {
                async fn reserve_log_ids(&self, count: usize) -> Result<Vec<i64>, StoreError> {
                    const OPERATION: &str = "reserve job-log ids";
                    let mut tx = self.begin_write(OPERATION).await?;
                    let ids = <$store>::reserve_log_ids_in(&mut tx, count).await?;
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
                    // Compare-and-set: the condition is repeated outside the subquery, so a
                    // batch two nodes picked at once goes to one of them.
                    let rows: Vec<(i64, i64, i64, Vec<u8>)> = sqlx::query_as(&format!(
                        "UPDATE fire_batches SET owner_node = $1, lease_until_ms = $2 \
                         WHERE id IN (SELECT id FROM fire_batches WHERE lease_until_ms < $3 \
                         ORDER BY lease_until_ms LIMIT $4{}) AND lease_until_ms < $3 \
                         RETURNING id, shard, pending_from_ms, fires",
                        <$store>::SKIP_LOCKED
                    ))
                    .bind(node_id)
                    .bind(now_ms + lease_ms)
                    .bind(now_ms)
                    .bind(i64::from(limit))
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    let mut claimed = Vec::with_capacity(rows.len());
                    for (id, shard, pending_from_ms, bytes) in rows {
                        match fire_batch::decode(&bytes) {
                            Ok(fires) => claimed.push(StoredBatch {
                                id,
                                shard: shard as u32,
                                pending_from_ms,
                                fires,
                            }),
                            Err(error) => {
                                // Set aside for an operator: claimed by nobody, ever again.
                                tracing::error!(batch = id, %error,
                                    "a fire batch cannot be read; its fires are not emitted, the row is kept");
                                sqlx::query(
                                    "UPDATE fire_batches SET owner_node = 'unreadable', \
                                     lease_until_ms = 9223372036854775807 WHERE id = $1",
                                )
                                .bind(id)
                                .execute(&mut *tx)
                                .await
                                .map_err(StoreError::query(OPERATION))?;
                            }
                        }
                    }
                    tx.commit().await.map_err(StoreError::query(OPERATION))?;
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
                    let (done, moving): (Vec<&BatchProgress>, Vec<&BatchProgress>) =
                        progress.iter().partition(|batch| batch.pending_from_ms.is_none());
                    let mut tx = self.begin_write(OPERATION).await?;
                    <$store>::prefer_keyed_joins(&mut tx).await?;
                    for chunk in done.chunks($crate::store::sql::UPDATE_CHUNK) {
                        let mut delete = sqlx::QueryBuilder::<$db>::new(
                            "DELETE FROM fire_batches WHERE owner_node = ",
                        );
                        delete.push_bind(node_id).push(" AND id IN (");
                        let mut ids = delete.separated(", ");
                        for batch in chunk {
                            ids.push_bind(batch.id);
                        }
                        ids.push_unseparated(")");
                        delete.build().execute(&mut *tx).await.map_err(StoreError::query(OPERATION))?;
                    }
                    for chunk in moving.chunks($crate::store::sql::UPDATE_CHUNK) {
                        let mut update = sqlx::QueryBuilder::<$db>::new("WITH v(id, pending_from) AS (");
                        update.push_values(chunk, |mut values, batch| {
                            values.push_bind(batch.id).push_bind(batch.pending_from_ms);
                        });
                        update
                            .push(
                                ") UPDATE fire_batches SET pending_from_ms = v.pending_from, \
                                 lease_until_ms = v.pending_from + ",
                            )
                            .push_bind(lease_ms)
                            .push(" FROM v WHERE fire_batches.id = v.id AND fire_batches.owner_node = ")
                            .push_bind(node_id);
                        update.build().execute(&mut *tx).await.map_err(StoreError::query(OPERATION))?;
                    }
                    tx.commit().await.map_err(StoreError::query(OPERATION))
                }
            }
        }
    };
}

pub(crate) use impl_sql_batches;
