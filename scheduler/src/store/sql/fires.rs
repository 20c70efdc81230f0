//! Fires and runs in `job_logs`: the pre-read scan (its fires written as batches, see
//! `batches.rs`), manual fires and retries, dispatched marks, results (first wins) and the
//! claim of finished runs for their follow-up.

/// Generates, in the backend's file, the module `fires` of functions on `$store` that the
/// [`Store`](crate::store::Store) implementation calls.
macro_rules! sql_fires {
    ($store:ty, $db:ty) => {
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
                    insert_fires(&mut tx, vec![draft], &fire.node_id, fire.lease_until_ms - fire.scheduled_at_ms, fire.scheduled_at_ms)
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
                let rows: Vec<JobRow> = sqlx::query_as(&format!(
                    "SELECT {JOB_COLUMNS}, shard FROM jobs WHERE status = 'RUNNING' AND next_fire_ms <= $1 \
                     AND shard IN ({}) ORDER BY next_fire_ms LIMIT $2",
                    shard_list.join(", ")
                ))
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
                    let mut update = sqlx::QueryBuilder::<$db>::new(
                        "WITH v(id, next_fire, last_fire, status, read_next_fire) AS (",
                    );
                    update.push_values(chunk, |mut values, advance| {
                        values
                            .push_bind(advance.job_id)
                            .push_bind(advance.next_fire_ms)
                            .push_bind(advance.last_fire_ms)
                            .push_bind(advance.status.as_str())
                            .push_bind(advance.read_next_fire_ms);
                    });
                    // Compare-and-set: a job stopped or edited while this scan ran (possible on
                    // PostgreSQL, where the scan does not lock job rows) keeps the change; the
                    // scan must never restart a stopped job.
                    update.push(
                        ") UPDATE jobs SET next_fire_ms = v.next_fire, \
                         last_fire_ms = COALESCE(v.last_fire, jobs.last_fire_ms), status = v.status \
                         FROM v WHERE jobs.id = v.id AND jobs.status = 'RUNNING' \
                         AND jobs.next_fire_ms = v.read_next_fire RETURNING jobs.id",
                    );
                    let ids: Vec<(i64,)> = update
                        .build_query_as()
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                    advanced.extend(ids.into_iter().map(|(id,)| id));
                }
                let fires: Vec<PendingFire> = planned
                    .fires
                    .into_iter()
                    .filter(|fire| advanced.contains(&fire.job_id.get()))
                    .collect();
                let (fires, batches) = batches::write_scan_batches(&mut tx, fires, &shard_of, request).await?;
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
                    let mut update = sqlx::QueryBuilder::<$db>::new(
                        "WITH v(id, partition_no, dispatched_at, executor_id) AS (",
                    );
                    update.push_values(chunk, |mut values, ack| {
                        values
                            .push_bind(ack.log_id)
                            .push_bind(i64::from(ack.partition))
                            .push_bind(ack.dispatched_at_ms)
                            .push_bind(ack.executor_id.clone());
                    });
                    // A run whose result arrived first keeps state FINISHED and the executor
                    // that ran it.
                    update.push(
                        ") UPDATE job_logs SET \
                         state = CASE WHEN job_logs.state = 'SCHEDULED' THEN 'DISPATCHED' ELSE job_logs.state END, \
                         executor_id = COALESCE(job_logs.executor_id, v.executor_id), \
                         partition_no = v.partition_no, dispatched_at_ms = v.dispatched_at, \
                         owner_node = NULL, lease_until_ms = NULL FROM v WHERE job_logs.id = v.id",
                    );
                    update
                        .build()
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
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
                    let completed = update_completions(&mut tx, chunk, &with_children).await?;
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
                        if first && applied.contains(trigger_id) {
                            CompletionOutcome::Applied
                        } else if applied.contains(trigger_id) || known.contains(trigger_id) {
                            CompletionOutcome::Duplicate
                        } else {
                            CompletionOutcome::UnknownTrigger
                        }
                    })
                    .collect())
            }

            /// Completes the unfinished runs of `completions` (one result per trigger) in one
            /// statement; returns the runs completed.
            async fn update_completions(
                tx: &mut sqlx::Transaction<'_, $db>,
                completions: &[&Completion],
                with_children: &std::collections::HashSet<i64>,
            ) -> Result<Vec<$crate::store::rows::CompletedRunRow>, StoreError> {
                let mut update = sqlx::QueryBuilder::<$db>::new(
                    "WITH v(trigger_id, executor_id, code, msg, started, finished, retry_after, done) AS (",
                );
                update.push_values(completions, |mut values, completion| {
                    // A success of a job without children needs no follow-up (nothing to
                    // retry, tell or fire): it is done here, which spares the follow-up
                    // monitor two writes per run.
                    let done = completion.code == kadence_schemas::result_code::SUCCESS
                        && !with_children.contains(&completion.trigger_id.job_id().get());
                    values
                        .push_bind(completion.trigger_id.as_str().to_owned())
                        .push_bind(completion.executor_id.clone())
                        .push_bind(i64::from(completion.code))
                        .push_bind(completion.message.clone())
                        .push_bind(completion.started_at_ms)
                        .push_bind(completion.finished_at_ms)
                        .push_bind(completion.retry_after_ms)
                        .push_bind(i64::from(done));
                });
                // The run's trigger type is its first attempt's: a retry's own is RETRY.
                // (SQLite's RETURNING may not name `v`: the new values are read back.)
                update.push(
                    ") UPDATE job_logs SET state = 'FINISHED', executor_id = v.executor_id, \
                     handle_code = v.code, handle_msg = v.msg, handle_started_at_ms = v.started, \
                     handle_at_ms = v.finished, retry_after_ms = v.retry_after, \
                     owner_node = NULL, lease_until_ms = NULL, \
                     follow_up = CASE WHEN v.done = 1 THEN 'DONE' ELSE job_logs.follow_up END, \
                     alarm_status = CASE WHEN v.done = 1 THEN 'NOT_NEEDED' ELSE job_logs.alarm_status END \
                     FROM v WHERE job_logs.trigger_id = v.trigger_id AND job_logs.handle_code IS NULL \
                     RETURNING job_logs.trigger_id, job_logs.job_id, \
                     COALESCE((SELECT first_attempt.trigger_type FROM job_logs first_attempt \
                     WHERE first_attempt.id = job_logs.first_log_id), job_logs.trigger_type) AS run_trigger_type, \
                     job_logs.attempt, job_logs.handle_code, job_logs.handle_at_ms",
                );
                update
                    .build_query_as()
                    .fetch_all(&mut **tx)
                    .await
                    .map_err(StoreError::query("record results"))
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
                        "UPDATE jobs SET next_fire_ms = $1 + CAST(schedule_conf AS BIGINT) * 1000 \
                         WHERE id = $2 AND schedule_type = 'FIX_DELAY' AND status = 'RUNNING' \
                         AND next_fire_ms IS NULL AND ($3 OR $4 >= retry_count)",
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

            /// Which of `trigger_ids` have a run.
            async fn known_triggers(
                tx: &mut sqlx::Transaction<'_, $db>,
                trigger_ids: &[&str],
            ) -> Result<std::collections::HashSet<String>, StoreError> {
                let mut known = std::collections::HashSet::new();
                for chunk in trigger_ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut query =
                        sqlx::QueryBuilder::<$db>::new("SELECT trigger_id FROM job_logs WHERE trigger_id");
                    $crate::store::sql::push_in_list!(query, chunk.iter().map(|trigger_id| trigger_id.to_string()));
                    let rows: Vec<(String,)> = query
                        .build_query_as()
                        .fetch_all(&mut **tx)
                        .await
                        .map_err(StoreError::query("record results"))?;
                    known.extend(rows.into_iter().map(|(trigger_id,)| trigger_id));
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

            pub(super) async fn claim_finished_runs(
                store: &$store,
                now_ms: i64,
                locked_until_ms: i64,
                limit: u32,
            ) -> Result<Vec<$crate::store::FinishedRun>, StoreError> {
                // Compare-and-set: the condition is repeated outside the subquery, so a row
                // two nodes picked at once is claimed by one of them only.
                let rows: Vec<$crate::store::rows::FinishedRunRow> = sqlx::query_as(&format!(
                    "UPDATE job_logs SET follow_up = 'LOCKED', follow_up_locked_until = $1, \
                     alarm_status = CASE WHEN handle_code = 200 THEN 'NOT_NEEDED' ELSE 'LOCKED' END \
                     WHERE id IN (SELECT id FROM job_logs WHERE state = 'FINISHED' \
                         AND follow_up <> 'DONE' \
                         AND (follow_up = 'PENDING' OR follow_up_locked_until < $2) \
                         ORDER BY id LIMIT $3) \
                     AND follow_up <> 'DONE' AND (follow_up = 'PENDING' OR follow_up_locked_until < $2) \
                     RETURNING {}, handle_code, handle_msg, executor_id, handle_at_ms, first_log_id, \
                     retry_after_ms",
                    $crate::store::rows::FIRE_COLUMNS
                ))
                .bind(locked_until_ms)
                .bind(now_ms)
                .bind(i64::from(limit))
                .fetch_all(&store.pool)
                .await
                .map_err(StoreError::query("claim finished runs"))?;
                let mut runs: Vec<$crate::store::FinishedRun> = convert_all(rows)?;
                runs.sort_by_key(|run| run.fire.log_id);
                Ok(runs)
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
                let written = insert_fires(&mut tx, vec![fire.clone()], node_id, lease_ms, now_ms).await?;
                for retry in &written {
                    sqlx::query("UPDATE job_logs SET first_log_id = $1 WHERE id = $2")
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
