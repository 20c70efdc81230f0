//! Fires and runs in `job_logs`: the pre-read scan (its fires written as batches, see
//! `batches.rs`), manual fires and retries, dispatched marks, results (first wins) and the
//! claim of finished runs for their follow-up.

/// Generates, in the backend's file, the module `fires` of functions on `$store` that the
/// [`Store`](crate::store::Store) implementation calls.
macro_rules! sql_fires {
    ($store:ty, $db:ty, $dialect:ident) => {
        mod fires {
            use super::*;

            pub(super) async fn insert_fire(store: &$store, job: &Job, fire: &NewFire) -> Result<Vec<PendingFire>, StoreError> {
                let draft = PendingFire {
                    params: fire.params.clone(),
                    route_partitions: fire.partitions.clone(),
                    ..PendingFire::of_job(job, fire.trigger_id.clone(), fire.trigger_type, fire.scheduled_at_ms)
                };
                let mut tx = store.begin_write("write a fire").await?;
                let written =
                    insert_fires(store, &mut tx, vec![draft], &fire.node_id, fire.lease_until_ms - fire.scheduled_at_ms, fire.scheduled_at_ms)
                        .await?;
                tx.commit().await.map_err(StoreError::query("write a fire"))?;
                Ok(written)
            }

            pub(super) async fn pre_read(store: &$store, request: &PreReadRequest) -> Result<PreReadOutcome, StoreError> {
                const OPERATION: &str = "pre-read due jobs";
                let waiting = std::time::Instant::now();
                let mut tx = store.begin_write(OPERATION).await?;
                // The fence check locks the scan's shards until commit: a node that took one
                // of them meanwhile makes it fail here, and nothing is written for it.
                let shards = shards::fence_scan(&mut tx, &request.node_id, &request.shards, request.now_ms).await?;
                let lock_wait = waiting.elapsed();
                let fenced_out: Vec<u32> =
                    request.shards.iter().map(|owned| owned.shard).filter(|shard| shards.binary_search(shard).is_err()).collect();
                if shards.is_empty() {
                    tx.rollback().await.map_err(StoreError::query(OPERATION))?;
                    return Ok(PreReadOutcome { lock_wait, fenced_out, ..PreReadOutcome::default() });
                }
                <$store>::prefer_keyed_joins(&mut tx).await?;
                let shard_list: Vec<String> = shards.iter().map(u32::to_string).collect();
                let rows: Vec<JobRow> = sqlx::query_as(&backend_sql(&format!(
                    "SELECT {JOB_COLUMNS}, shard FROM jobs WHERE status = 'RUNNING' AND next_fire_ms <= $1 \
                     AND shard IN ({}) ORDER BY next_fire_ms LIMIT $2",
                    shard_list.join(", ")
                )))
                .bind(request.now_ms + request.read_ahead_ms.min(request.window_ms))
                .bind(i64::from(request.batch_size))
                .fetch_all(&mut *tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                let jobs_read = rows.len();
                let shard_of: std::collections::HashMap<i64, u32> =
                    rows.iter().map(|row| (row.id(), row.shard())).collect();
                let planned = plan_rows(rows, request);
                // Jobs first, fires after, and only for the jobs whose advance applied: a job
                // stopped or edited while this scan ran gets no fire from it. On PostgreSQL
                // the advance also locks the job's row, so a stop that comes later waits for
                // this scan and then cancels what it wrote.
                let mut advanced = std::collections::HashSet::with_capacity(planned.advances.len());
                // All next-fire times in one statement per chunk: one round trip, not one per job.
                for chunk in planned.advances.chunks($crate::store::sql::UPDATE_CHUNK) {
                    advanced.extend(fire_updates::advance_jobs(&mut tx, chunk).await?);
                }
                let fires: Vec<PendingFire> = planned
                    .fires
                    .into_iter()
                    .filter(|fire| advanced.contains(&fire.job_id.get()))
                    .collect();
                let (fires, batches) = batches::write_scan_batches(store, &mut tx, fires, &shard_of, request).await?;
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                let misfires = planned
                    .misfires
                    .into_iter()
                    .filter(|misfire| advanced.contains(&misfire.job_id.get()))
                    .collect();
                Ok(PreReadOutcome { jobs_read, fires, batches, misfires, lock_wait, fenced_out })
            }

            pub(super) async fn mark_dispatched(store: &$store, marks: &DispatchMarks<'_>) -> Result<(), StoreError> {
                const OPERATION: &str = "mark triggers dispatched";
                let (new_runs, existing): (Vec<&DispatchAck>, Vec<&DispatchAck>) =
                    marks.acks.iter().partition(|ack| ack.fire.is_some());
                let new_runs: Vec<(&DispatchAck, &PendingFire)> = new_runs
                    .into_iter()
                    .filter_map(|ack| Some((ack, ack.fire.as_deref()?)))
                    .collect();
                let mut tx = store.begin_write(OPERATION).await?;
                <$store>::prefer_keyed_joins(&mut tx).await?;
                batches::insert_dispatched_runs(&mut tx, &new_runs).await?;
                batches::settle_in(&mut tx, marks.node_id, marks.batches, marks.lease_ms).await?;
                for chunk in existing.chunks($crate::store::sql::UPDATE_CHUNK) {
                    fire_updates::mark_runs_dispatched(&mut tx, chunk).await?;
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))
            }

            pub(super) async fn complete_runs(
                store: &$store,
                completions: &[Completion],
            ) -> Result<Vec<CompletionOutcome>, StoreError> {
                const OPERATION: &str = "record results";
                let mut tx = store.begin_write(OPERATION).await?;
                <$store>::prefer_keyed_joins(&mut tx).await?;
                let with_children = jobs_with_children(&mut tx, completions).await?;
                // The first result of a trigger in the batch is the one tried: a later one
                // is a repeat, as is a result for a run that has one already.
                let mut seen = std::collections::HashSet::new();
                let first: Vec<bool> = completions
                    .iter()
                    .map(|completion| seen.insert(completion.trigger_id.as_str()))
                    .collect();
                let firsts: Vec<&Completion> = completions
                    .iter()
                    .zip(&first)
                    .filter_map(|(completion, &first)| first.then_some(completion))
                    .collect();
                let mut applied = std::collections::HashSet::new();
                for chunk in firsts.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let completed = fire_updates::update_completions(&mut tx, chunk, &with_children).await?;
                    advance_fix_delay(&mut tx, &completed).await?;
                    applied.extend(completed.into_iter().map(|run| run.trigger_id));
                }
                let unapplied: Vec<&str> = firsts
                    .iter()
                    .map(|completion| completion.trigger_id.as_str())
                    .filter(|trigger_id| !applied.contains(*trigger_id))
                    .collect();
                let known = known_triggers(&mut tx, &unapplied).await?;
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(completions
                    .iter()
                    .zip(first)
                    .map(|(completion, first)| {
                        let trigger_id = completion.trigger_id.as_str();
                        let run_app = known.get(trigger_id);
                        if first && applied.contains(trigger_id) {
                            CompletionOutcome::Applied
                        } else if let Some(run_app) = run_app.filter(|run_app| {
                            completion.app.as_ref().is_some_and(|app| app != *run_app)
                        }) {
                            CompletionOutcome::OtherApp { run_app: run_app.clone() }
                        } else if applied.contains(trigger_id) || run_app.is_some() {
                            CompletionOutcome::Duplicate
                        } else {
                            CompletionOutcome::UnknownTrigger
                        }
                    })
                    .collect())
            }

            /// FIX_DELAY: once the run the schedule fired has ended for good, the next fire is
            /// due `delay` after its end (only while the job still waits). A failure the
            /// follow-up monitor will retry has not ended: the job waits for its last
            /// attempt, so a retry never overlaps the next fire.
            async fn advance_fix_delay(
                tx: &mut sqlx::Transaction<'_, $db>,
                completed: &[$crate::store::rows::CompletedRunRow],
            ) -> Result<(), StoreError> {
                let scheduled = completed
                    .iter()
                    .filter(|run| matches!(run.run_trigger_type.as_str(), "FIX_DELAY" | "MISFIRE"));
                for run in scheduled {
                    // The same rule as the follow-up monitor's: a failure is retried while
                    // its attempt number is below the job's retry count.
                    sqlx::query(
                        &backend_sql(&format!("UPDATE jobs SET next_fire_ms = $1 + CAST(schedule_conf AS {}) * 1000 \
                         WHERE id = $2 AND schedule_type = 'FIX_DELAY' AND status = 'RUNNING' \
                         AND next_fire_ms IS NULL AND ($3 OR $4 >= retry_count)",
                        BIGINT,
                    ))
                    )
                    .bind(run.handle_at_ms)
                    .bind(run.job_id)
                    .bind(run.handle_code == i64::from(kadence_schemas::result_code::SUCCESS))
                    .bind(run.attempt)
                    .execute(&mut **tx)
                    .await
                    .map_err(StoreError::query("record results"))?;
                }
                Ok(())
            }

            /// Which of `trigger_ids` have a run, and each one's app.
            async fn known_triggers(
                tx: &mut sqlx::Transaction<'_, $db>,
                trigger_ids: &[&str],
            ) -> Result<std::collections::HashMap<String, String>, StoreError> {
                let mut known = std::collections::HashMap::new();
                for chunk in trigger_ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut query =
                        sqlx::QueryBuilder::<$db>::new("SELECT trigger_id, app FROM job_logs WHERE trigger_id");
                    $crate::store::sql::push_in_list!(query, chunk.iter().map(|trigger_id| trigger_id.to_string()));
                    let rows: Vec<(String, String)> = query
                        .build_query_as()
                        .fetch_all(&mut **tx)
                        .await
                        .map_err(StoreError::query("record results"))?;
                    known.extend(rows);
                }
                Ok(known)
            }

            /// Which of the jobs of `completions` have child jobs (a deleted job has none).
            async fn jobs_with_children(
                tx: &mut sqlx::Transaction<'_, $db>,
                completions: &[Completion],
            ) -> Result<std::collections::HashSet<i64>, StoreError> {
                let job_ids: std::collections::BTreeSet<i64> =
                    completions.iter().map(|completion| completion.trigger_id.job_id().get()).collect();
                let mut with_children = std::collections::HashSet::new();
                let job_ids: Vec<i64> = job_ids.into_iter().collect();
                for chunk in job_ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut query = sqlx::QueryBuilder::<$db>::new(
                        "SELECT id FROM jobs WHERE child_job_ids <> '' AND id",
                    );
                    $crate::store::sql::push_in_list!(query, chunk.iter().copied());
                    let rows: Vec<(i64,)> = query
                        .build_query_as()
                        .fetch_all(&mut **tx)
                        .await
                        .map_err(StoreError::query("read the jobs of results"))?;
                    with_children.extend(rows.into_iter().map(|(id,)| id));
                }
                Ok(with_children)
            }

            pub(super) async fn insert_retry(
                store: &$store,
                fire: &PendingFire,
                first_log_id: i64,
                node_id: &str,
                lease_ms: i64,
                now_ms: i64,
            ) -> Result<Option<PendingFire>, StoreError> {
                const OPERATION: &str = "write a retry";
                let mut tx = store.begin_write(OPERATION).await?;
                let written = insert_fires(store, &mut tx, vec![fire.clone()], node_id, lease_ms, now_ms).await?;
                for retry in &written {
                    sqlx::query(&backend_sql("UPDATE job_logs SET first_log_id = $1 WHERE id = $2"))
                        .bind(first_log_id)
                        .bind(retry.log_id)
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(written.into_iter().next())
            }
        }
    };
}

pub(crate) use sql_fires;
