//! The [`Replays`](crate::store::Replays) implementation: tables `replays` and
//! `shadow_results`, and the replay links of `job_logs`; the same SQL on both backends.

/// Implements [`Replays`](crate::store::Replays) for a backend type with a `pool` field and
/// the write helpers of [`sql_writes`](super::writes::sql_writes).
macro_rules! impl_sql_replays {
    ($store:ty, $db:ty, $dialect:ident) => {
        mod replays {
            use std::collections::{HashMap, HashSet};

            use kadence_schemas::{AppName, JobId, TriggerId};

            use super::*;
            use $crate::store::{
                AppScope, FireMaker, FireOwner, NewOperation, Operation, OperationKind, Replays,
                RunOutcome, ShadowPair, ShadowResult,
            };

            /// Columns of `replays`, in [`OperationRow`] order.
            const OPERATION_COLUMNS: &str = "id, kind, app, target_app, job_id, selection, from_ms, \
                 to_ms, rate_per_second, forced, triggers, requested_by, requested_at_ms";

            type OperationRow = (
                i64, String, String, String, Option<i64>, String, Option<i64>,
                Option<i64>, i64, i64, i64, String, i64,
            );

            fn operation_from(row: OperationRow) -> Result<Operation, StoreError> {
                let (id, kind, app, target_app, job_id, selection, from_ms, to_ms, rate, forced, triggers, requested_by, requested_at_ms) = row;
                let corrupt = |reason: String| StoreError::CorruptRow { what: format!("replay {id}"), reason };
                Ok(Operation {
                    id,
                    request: NewOperation {
                        kind: kind.parse::<OperationKind>().map_err(|error| corrupt(error.to_string()))?,
                        app: AppName::parse(&app).map_err(|error| corrupt(error.to_string()))?,
                        target_app: AppName::parse(&target_app).map_err(|error| corrupt(error.to_string()))?,
                        job_id: job_id.map(JobId::new).transpose().map_err(|error| corrupt(error.to_string()))?,
                        selection: serde_json::from_str(&selection).map_err(|error| corrupt(error.to_string()))?,
                        from_ms,
                        to_ms,
                        rate_per_second: u32::try_from(rate).map_err(|error| corrupt(error.to_string()))?,
                        forced: forced != 0,
                        requested_by,
                        requested_at_ms,
                    },
                    triggers,
                })
            }

            /// The earlier replays of the triggers `fires` replay: (count, an example with its
            /// replay, every replay concerned ascending), or `None` when there are none.
            async fn replayed_before(
                tx: &mut sqlx::Transaction<'_, $db>,
                fires: &[PendingFire],
            ) -> Result<Option<(usize, TriggerId, i64, Vec<i64>)>, StoreError> {
                let originals: Vec<String> = fires
                    .iter()
                    .filter_map(|fire| fire.replay_of.as_ref().map(|id| id.as_str().to_owned()))
                    .collect();
                let mut seen: HashMap<String, i64> = HashMap::new();
                for chunk in originals.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut query = sqlx::QueryBuilder::<$db>::new(
                        "SELECT replay_of, operation_id FROM job_logs WHERE operation_id IS NOT NULL AND replay_of",
                    );
                    $crate::store::sql::push_in_list!(query, chunk.iter().cloned());
                    let rows: Vec<(String, i64)> = query
                        .build_query_as()
                        .fetch_all(&mut **tx)
                        .await
                        .map_err(StoreError::query("look for earlier replays"))?;
                    seen.extend(rows);
                }
                let Some((example, &replay_id)) = seen.iter().min_by_key(|(original, _)| original.as_str()) else {
                    return Ok(None);
                };
                let example = TriggerId::parse(example).map_err(|error| StoreError::CorruptRow {
                    what: format!("replay link of run of replay {replay_id}"),
                    reason: error.to_string(),
                })?;
                let replay_ids: std::collections::BTreeSet<i64> = seen.values().copied().collect();
                Ok(Some((seen.len(), example, replay_id, replay_ids.into_iter().collect())))
            }

            fn outcome_of(state: &str, code: Option<i64>) -> RunOutcome {
                match (state, code) {
                    (_, Some(200)) => RunOutcome::Succeeded,
                    (_, Some(_)) => RunOutcome::Failed,
                    ("CANCELLED", None) => RunOutcome::Failed,
                    _ => RunOutcome::Unfinished,
                }
            }

            #[async_trait::async_trait]
            impl Replays for $store {
                async fn run_outcomes(
                    &self,
                    trigger_ids: &[TriggerId],
                ) -> Result<HashMap<TriggerId, RunOutcome>, StoreError> {
                    let mut outcomes = HashMap::with_capacity(trigger_ids.len());
                    for chunk in trigger_ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                        let mut query = sqlx::QueryBuilder::<$db>::new(
                            "SELECT trigger_id, state, handle_code FROM job_logs WHERE trigger_id",
                        );
                        $crate::store::sql::push_in_list!(query, chunk.iter().map(|id| id.as_str().to_owned()));
                        let rows: Vec<(String, String, Option<i64>)> = query
                            .build_query_as()
                            .fetch_all(&self.pool)
                            .await
                            .map_err(StoreError::query("read run outcomes"))?;
                        for (trigger_id, state, code) in rows {
                            let trigger_id = TriggerId::parse(&trigger_id).map_err(|error| StoreError::CorruptRow {
                                what: format!("run {trigger_id}"),
                                reason: error.to_string(),
                            })?;
                            outcomes.insert(trigger_id, outcome_of(&state, code));
                        }
                    }
                    Ok(outcomes)
                }

                async fn record_operation(
                    &self,
                    operation: &NewOperation,
                    make_fires: FireMaker,
                    owner: &FireOwner,
                    now_ms: i64,
                ) -> Result<(Operation, Vec<PendingFire>), StoreError> {
                    const OPERATION: &str = "record a replay";
                    let mut tx = self.begin_write(OPERATION).await?;
                    if !<$db as $crate::store::sql::backend::SqlBackend>::OPERATIONS_LOCK.is_empty() {
                        sqlx::query(<$db as $crate::store::sql::backend::SqlBackend>::OPERATIONS_LOCK)
                            .execute(&mut *tx)
                            .await
                            .map_err(StoreError::query(OPERATION))?;
                    }
                    let sql = returning_id(
                        "INSERT INTO replays (kind, app, target_app, job_id, selection, from_ms, to_ms, \
                         rate_per_second, forced, triggers, requested_by, requested_at_ms) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $10, $11)",
                    );
                    let insert = sqlx::query(&sql)
                    .bind(operation.kind.as_str())
                    .bind(operation.app.as_str())
                    .bind(operation.target_app.as_str())
                    .bind(operation.job_id.map(JobId::get))
                    .bind(operation.selection.to_string())
                    .bind(operation.from_ms)
                    .bind(operation.to_ms)
                    .bind(i64::from(operation.rate_per_second))
                    .bind(i64::from(operation.forced))
                    .bind(&operation.requested_by)
                    .bind(operation.requested_at_ms);
                    let id = inserted_id(&mut *tx, insert).await.map_err(StoreError::query(OPERATION))?;
                    let fires = make_fires(id);
                    if operation.kind == OperationKind::Replay && !operation.forced {
                        if let Some((count, example, replay_id, replay_ids)) = replayed_before(&mut tx, &fires).await? {
                            return Err(StoreError::ReplayedBefore { count, example, replay_id, replay_ids });
                        }
                    }
                    let written = insert_fires(self, &mut tx, fires, &owner.node_id, owner.lease_ms, now_ms).await?;
                    sqlx::query(&backend_sql("UPDATE replays SET triggers = $1 WHERE id = $2"))
                        .bind(written.len() as i64)
                        .bind(id)
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                    tx.commit().await.map_err(StoreError::query(OPERATION))?;
                    let recorded = Operation { id, request: operation.clone(), triggers: written.len() as i64 };
                    Ok((recorded, written))
                }

                async fn get_operation(&self, id: i64) -> Result<Option<Operation>, StoreError> {
                    let row: Option<OperationRow> =
                        sqlx::query_as(&backend_sql(&format!("SELECT {OPERATION_COLUMNS} FROM replays WHERE id = $1")))
                            .bind(id)
                            .fetch_optional(&self.pool)
                            .await
                            .map_err(StoreError::query("read a replay"))?;
                    row.map(operation_from).transpose()
                }

                async fn list_operations(
                    &self,
                    apps: AppScope<'_>,
                    page: &PageRequest<i64>,
                ) -> Result<Vec<Operation>, StoreError> {
                    let mut query = sqlx::QueryBuilder::<$db>::new(format!(
                        "SELECT {OPERATION_COLUMNS} FROM replays WHERE true"
                    ));
                    if let Some(apps) = apps {
                        // Listed where it read or where it ran.
                        query.push(" AND (true");
                        $crate::store::sql::push_app_scope!(query, "app", Some(apps));
                        query.push(" OR true");
                        $crate::store::sql::push_app_scope!(query, "target_app", Some(apps));
                        query.push(")");
                    }
                    if let Some(after) = page.after {
                        query.push(" AND id < ").push_bind(after);
                    }
                    query.push(" ORDER BY id DESC LIMIT ").push_bind(i64::from(page.limit));
                    let rows: Vec<OperationRow> = query
                        .build_query_as()
                        .fetch_all(&self.pool)
                        .await
                        .map_err(StoreError::query("list replays"))?;
                    rows.into_iter().map(operation_from).collect()
                }

                async fn trigger_ids_scheduled(
                    &self,
                    job: JobId,
                    from_ms: i64,
                    to_ms: i64,
                ) -> Result<HashSet<String>, StoreError> {
                    let rows: Vec<(String,)> = sqlx::query_as(
                        &backend_sql("SELECT trigger_id FROM job_logs WHERE job_id = $1 \
                         AND scheduled_at_ms >= $2 AND scheduled_at_ms < $3",)
                    )
                    .bind(job.get())
                    .bind(from_ms)
                    .bind(to_ms)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(StoreError::query("read a job's trigger ids"))?;
                    Ok(rows.into_iter().map(|(id,)| id).collect())
                }

                async fn record_shadow_results(&self, results: &[ShadowResult]) -> Result<u64, StoreError> {
                    const OPERATION: &str = "record shadow results";
                    if results.is_empty() {
                        return Ok(0);
                    }
                    let now_ms = kadence_schemas::now_ms();
                    let mut tx = self.begin_write(OPERATION).await?;
                    let mut stored = 0;
                    for chunk in results.chunks($crate::store::sql::INSERT_CHUNK) {
                        // The first result of a trigger is kept; repeats are dropped by the key
                        // and not counted.
                        let mut insert = sqlx::QueryBuilder::<$db>::new(format!(
                            "{} INTO shadow_results (trigger_id, app, job_id, executor_id, code, message, \
                             started_at_ms, finished_at_ms, received_at_ms) ",
                            $crate::store::sql::dialect::dialect!($dialect, ansi => "INSERT", mysql => "INSERT IGNORE"),
                        ));
                        insert.push_values(chunk, |mut values, result| {
                            values
                                .push_bind(result.trigger_id.as_str().to_owned())
                                .push_bind(result.app.as_str().to_owned())
                                .push_bind(result.job_id.get())
                                .push_bind(result.executor_id.clone())
                                .push_bind(i64::from(result.code))
                                .push_bind(result.message.clone())
                                .push_bind(result.started_at_ms)
                                .push_bind(result.finished_at_ms)
                                .push_bind(now_ms);
                        });
                        insert.push($crate::store::sql::dialect::dialect!($dialect, ansi => " ON CONFLICT (trigger_id) DO NOTHING", mysql => ""));
                        stored += insert
                            .build()
                            .execute(&mut *tx)
                            .await
                            .map_err(StoreError::query(OPERATION))?
                            .rows_affected();
                    }
                    tx.commit().await.map_err(StoreError::query(OPERATION))?;
                    Ok(stored)
                }

                async fn delete_old_shadow_results(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError> {
                    let deleted = sqlx::query(
                        // The derived table lets MySQL delete from the table it reads, and
                        // take a LIMIT inside IN.
                        &backend_sql("DELETE FROM shadow_results WHERE trigger_id IN (SELECT trigger_id FROM \
                         (SELECT trigger_id FROM shadow_results WHERE received_at_ms < $1 LIMIT $2) AS old)",)
                    )
                    .bind(before_ms)
                    .bind(i64::from(limit))
                    .execute(&self.pool)
                    .await
                    .map_err(StoreError::query("delete old shadow results"))?;
                    Ok(deleted.rows_affected())
                }

                async fn shadow_pairs(
                    &self,
                    app: &AppName,
                    from_ms: i64,
                    to_ms: i64,
                    limit: u32,
                ) -> Result<Vec<ShadowPair>, StoreError> {
                    type PairRow = (
                        String, String, i64, String, i64, Option<String>, i64, i64,
                        Option<i64>, Option<String>, Option<i64>, Option<i64>,
                    );
                    let rows: Vec<PairRow> = sqlx::query_as(
                        &backend_sql("SELECT s.trigger_id, s.app, s.job_id, s.executor_id, s.code, s.message, \
                         s.started_at_ms, s.finished_at_ms, \
                         j.handle_code, j.handle_msg, j.handle_started_at_ms, j.handle_at_ms \
                         FROM shadow_results s LEFT JOIN job_logs j ON j.trigger_id = s.trigger_id \
                         WHERE s.app = $1 AND s.started_at_ms >= $2 AND s.started_at_ms < $3 \
                         ORDER BY CASE WHEN j.handle_code IS NULL OR j.handle_code <> s.code \
                         OR COALESCE(j.handle_msg, '') <> COALESCE(s.message, '') THEN 0 ELSE 1 END, \
                         s.started_at_ms, s.trigger_id LIMIT $4",)
                    )
                    .bind(app.as_str())
                    .bind(from_ms)
                    .bind(to_ms)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(StoreError::query("compare shadow results"))?;
                    rows.into_iter()
                        .map(|(trigger_id, app, job_id, executor_id, code, message, started, finished, p_code, p_msg, p_started, p_finished)| {
                            let corrupt = |reason: String| StoreError::CorruptRow {
                                what: format!("shadow result {trigger_id}"),
                                reason,
                            };
                            let narrow = |code: i64| i32::try_from(code).map_err(|error| corrupt(error.to_string()));
                            let production = match (p_code, p_finished) {
                                (Some(code), Some(finished)) => Some((narrow(code)?, p_msg, p_started, finished)),
                                _ => None,
                            };
                            Ok(ShadowPair {
                                shadow: ShadowResult {
                                    trigger_id: TriggerId::parse(&trigger_id).map_err(|error| corrupt(error.to_string()))?,
                                    app: AppName::parse(&app).map_err(|error| corrupt(error.to_string()))?,
                                    job_id: JobId::new(job_id).map_err(|error| corrupt(error.to_string()))?,
                                    executor_id,
                                    code: narrow(code)?,
                                    message,
                                    started_at_ms: started,
                                    finished_at_ms: finished,
                                },
                                production,
                            })
                        })
                        .collect()
                }
            }
        }
    };
}

pub(crate) use impl_sql_replays;
