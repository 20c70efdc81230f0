//! The keyed batch updates of `jobs` and `job_logs` on the fire path, and the claims of
//! rows by lease, in both dialects (see [`dialect`](super::dialect)): PostgreSQL and SQLite
//! update from a `VALUES` list and return what changed; MySQL locks the rows it reads, decides
//! in Rust which ones the compare-and-set applies to, and updates those by a join with a
//! derived table of the batch ([`push_mysql_rows`](super::dialect::push_mysql_rows)).

/// Generates, in the backend's file, the module `fire_updates` of functions the pre-read
/// scan, the dispatched marks, the results writer and the claims call.
macro_rules! sql_fire_updates {
    ($store:ty, $db:ty, $dialect:ident) => {
        mod fire_updates {
            use super::*;
            use $crate::store::sql::dialect::dialect;
            use $crate::store::sql::planning::JobAdvance;

            /// Advances the next-fire times of a scan's jobs; returns the ids of the jobs whose
            /// advance applied.
            ///
            /// Compare-and-set: a job stopped or edited while the scan ran (possible on
            /// PostgreSQL and MySQL, where the scan does not lock job rows) keeps the change;
            /// the scan must never restart a stopped job.
            pub(super) async fn advance_jobs(
                tx: &mut sqlx::Transaction<'_, $db>,
                chunk: &[JobAdvance],
            ) -> Result<Vec<i64>, StoreError> {
                const OPERATION: &str = "pre-read due jobs";
                dialect!($dialect,
                    ansi => {
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
                        update.push(
                            ") UPDATE jobs SET next_fire_ms = v.next_fire, \
                             last_fire_ms = COALESCE(v.last_fire, jobs.last_fire_ms), status = v.status \
                             FROM v WHERE jobs.id = v.id AND jobs.status = 'RUNNING' \
                             AND jobs.next_fire_ms = v.read_next_fire RETURNING jobs.id",
                        );
                        let ids: Vec<(i64,)> =
                            update.build_query_as().fetch_all(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                        Ok(ids.into_iter().map(|(id,)| id).collect())
                    },
                    mysql => {
                        // By primary key alone, so InnoDB locks these rows only (see
                        // `dialect`); the condition is checked here instead.
                        let mut select = sqlx::QueryBuilder::<$db>::new(
                            "SELECT id, status, next_fire_ms FROM jobs FORCE INDEX (PRIMARY) WHERE id",
                        );
                        $crate::store::sql::push_in_list!(select, chunk.iter().map(|advance| advance.job_id));
                        select.push(" FOR UPDATE");
                        let current: std::collections::HashMap<i64, (String, Option<i64>)> = select
                            .build_query_as::<(i64, String, Option<i64>)>()
                            .fetch_all(&mut **tx)
                            .await
                            .map_err(StoreError::query(OPERATION))?
                            .into_iter()
                            .map(|(id, status, next_fire)| (id, (status, next_fire)))
                            .collect();
                        let applying: Vec<&JobAdvance> = chunk
                            .iter()
                            .filter(|advance| {
                                current.get(&advance.job_id).is_some_and(|(status, next_fire)| {
                                    status == $crate::domain::model::JobStatus::Running.as_str()
                                        && next_fire.is_some()
                                        && *next_fire == advance.read_next_fire_ms
                                })
                            })
                            .collect();
                        if applying.is_empty() {
                            return Ok(Vec::new());
                        }
                        let mut update = sqlx::QueryBuilder::<$db>::new("UPDATE ");
                        $crate::store::sql::dialect::push_mysql_rows(
                            &mut update,
                            &["id", "next_fire", "last_fire", "status"],
                            &applying,
                            |mut values, advance| {
                                values
                                    .push_bind(advance.job_id)
                                    .push_bind(advance.next_fire_ms)
                                    .push_bind(advance.last_fire_ms)
                                    .push_bind(advance.status.as_str());
                            },
                        );
                        update.push(
                            " STRAIGHT_JOIN jobs ON jobs.id = v.id SET jobs.next_fire_ms = v.next_fire, \
                             jobs.last_fire_ms = COALESCE(v.last_fire, jobs.last_fire_ms), jobs.status = v.status",
                        );
                        update.build().execute(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                        Ok(applying.into_iter().map(|advance| advance.job_id).collect())
                    },
                )
            }

            /// Marks runs that have rows DISPATCHED with where they went. A run whose result
            /// arrived first keeps state FINISHED and the executor that ran it.
            pub(super) async fn mark_runs_dispatched(
                tx: &mut sqlx::Transaction<'_, $db>,
                chunk: &[&DispatchAck],
            ) -> Result<(), StoreError> {
                const OPERATION: &str = "mark triggers dispatched";
                let columns = ["id", "partition_no", "dispatched_at", "executor_id"];
                let push_ack = |mut values: sqlx::query_builder::Separated<'_, '_, $db, &'static str>, ack: &&DispatchAck| {
                    values
                        .push_bind(ack.log_id)
                        .push_bind(i64::from(ack.partition))
                        .push_bind(ack.dispatched_at_ms)
                        .push_bind(ack.executor_id.clone());
                };
                let mut update = sqlx::QueryBuilder::<$db>::new("");
                dialect!($dialect,
                    ansi => {
                        update.push(format!("WITH v({}) AS (", columns.join(", ")));
                        update.push_values(chunk, push_ack);
                        update.push(
                            ") UPDATE job_logs SET \
                             state = CASE WHEN job_logs.state = 'SCHEDULED' THEN 'DISPATCHED' ELSE job_logs.state END, \
                             executor_id = COALESCE(job_logs.executor_id, v.executor_id), \
                             partition_no = v.partition_no, dispatched_at_ms = v.dispatched_at, \
                             owner_node = NULL, lease_until_ms = NULL FROM v WHERE job_logs.id = v.id",
                        );
                    },
                    mysql => {
                        update.push("UPDATE ");
                        $crate::store::sql::dialect::push_mysql_rows(&mut update, &columns, chunk, push_ack);
                        update.push(
                            " STRAIGHT_JOIN job_logs ON job_logs.id = v.id SET \
                             job_logs.state = CASE WHEN job_logs.state = 'SCHEDULED' THEN 'DISPATCHED' ELSE job_logs.state END, \
                             job_logs.executor_id = COALESCE(job_logs.executor_id, v.executor_id), \
                             job_logs.partition_no = v.partition_no, job_logs.dispatched_at_ms = v.dispatched_at, \
                             job_logs.owner_node = NULL, job_logs.lease_until_ms = NULL",
                        );
                    },
                );
                update.build().execute(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                Ok(())
            }

            /// Completes the unfinished runs of `completions` (one result per trigger) in one
            /// statement; returns the runs completed.
            pub(super) async fn update_completions(
                tx: &mut sqlx::Transaction<'_, $db>,
                completions: &[&Completion],
                with_children: &std::collections::HashSet<i64>,
            ) -> Result<Vec<$crate::store::rows::CompletedRunRow>, StoreError> {
                const OPERATION: &str = "record results";
                // A success of a job without children needs no follow-up (nothing to retry,
                // tell or fire): it is done here, which spares the follow-up monitor two
                // writes per run.
                let done = |completion: &Completion| {
                    completion.code == kadence_schemas::result_code::SUCCESS
                        && !with_children.contains(&completion.trigger_id.job_id().get())
                };
                // `app`: the run is completed only if it is of the result's app (NULL: the
                // scheduler's own completion, which checked the run).
                let columns = ["trigger_id", "app", "executor_id", "code", "msg", "started", "finished", "retry_after", "done"];
                let push_completion = |mut values: sqlx::query_builder::Separated<'_, '_, $db, &'static str>, completion: &&Completion| {
                    values
                        .push_bind(completion.trigger_id.as_str().to_owned())
                        .push_bind(completion.app.clone())
                        .push_bind(completion.executor_id.clone())
                        .push_bind(i64::from(completion.code))
                        .push_bind(completion.message.clone())
                        .push_bind(completion.started_at_ms)
                        .push_bind(completion.finished_at_ms)
                        .push_bind(completion.retry_after_ms)
                        .push_bind(i64::from(done(completion)));
                };
                // The run's trigger type is its first attempt's: a retry's own is RETRY.
                const RUN_TRIGGER_TYPE: &str = "COALESCE((SELECT first_attempt.trigger_type FROM job_logs first_attempt \
                     WHERE first_attempt.id = job_logs.first_log_id), job_logs.trigger_type)";
                dialect!($dialect,
                    ansi => {
                        let mut update = sqlx::QueryBuilder::<$db>::new(format!("WITH v({}) AS (", columns.join(", ")));
                        update.push_values(completions, push_completion);
                        // (SQLite's RETURNING may not name `v`: the new values are read back.)
                        update.push(format!(
                            ") UPDATE job_logs SET state = 'FINISHED', executor_id = v.executor_id, \
                             handle_code = v.code, handle_msg = v.msg, handle_started_at_ms = v.started, \
                             handle_at_ms = v.finished, retry_after_ms = v.retry_after, \
                             owner_node = NULL, lease_until_ms = NULL, \
                             follow_up = CASE WHEN v.done = 1 THEN 'DONE' ELSE job_logs.follow_up END, \
                             alarm_status = CASE WHEN v.done = 1 THEN 'NOT_NEEDED' ELSE job_logs.alarm_status END \
                             FROM v WHERE job_logs.trigger_id = v.trigger_id AND job_logs.handle_code IS NULL \
                             AND (v.app IS NULL OR job_logs.app = v.app) \
                             RETURNING job_logs.trigger_id, job_logs.job_id, {RUN_TRIGGER_TYPE} AS run_trigger_type, \
                             job_logs.attempt, job_logs.handle_code, job_logs.handle_at_ms",
                        ));
                        update.build_query_as().fetch_all(&mut **tx).await.map_err(StoreError::query(OPERATION))
                    },
                    mysql => {
                        let unfinished = lock_unfinished_runs(tx, completions, RUN_TRIGGER_TYPE).await?;
                        if unfinished.is_empty() {
                            return Ok(Vec::new());
                        }
                        let mut update = sqlx::QueryBuilder::<$db>::new("UPDATE ");
                        $crate::store::sql::dialect::push_mysql_rows(&mut update, &columns, completions, push_completion);
                        update.push(
                            " STRAIGHT_JOIN job_logs ON job_logs.trigger_id = v.trigger_id SET job_logs.state = 'FINISHED', \
                             job_logs.executor_id = v.executor_id, job_logs.handle_code = v.code, \
                             job_logs.handle_msg = v.msg, job_logs.handle_started_at_ms = v.started, \
                             job_logs.handle_at_ms = v.finished, job_logs.retry_after_ms = v.retry_after, \
                             job_logs.owner_node = NULL, job_logs.lease_until_ms = NULL, \
                             job_logs.follow_up = CASE WHEN v.done = 1 THEN 'DONE' ELSE job_logs.follow_up END, \
                             job_logs.alarm_status = CASE WHEN v.done = 1 THEN 'NOT_NEEDED' ELSE job_logs.alarm_status END \
                             WHERE job_logs.handle_code IS NULL AND (v.app IS NULL OR job_logs.app = v.app)",
                        );
                        update.build().execute(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                        Ok(completed_rows(unfinished, completions))
                    },
                )
            }

            /// Locks the unfinished runs of `completions` as they are read (MySQL): those are
            /// the ones the update completes, with the values it writes. Returns each one's
            /// trigger id, job, run trigger type (`run_trigger_type`, an expression) and attempt.
            #[allow(dead_code)] // MySQL's alone
            async fn lock_unfinished_runs(
                tx: &mut sqlx::Transaction<'_, $db>,
                completions: &[&Completion],
                run_trigger_type: &str,
            ) -> Result<Vec<(String, i64, String, i64, String)>, StoreError> {
                let mut select = sqlx::QueryBuilder::<$db>::new(format!(
                    "SELECT job_logs.trigger_id, job_logs.job_id, {run_trigger_type} AS run_trigger_type, \
                     job_logs.attempt, job_logs.app FROM job_logs FORCE INDEX (job_logs_trigger) \
                     WHERE job_logs.handle_code IS NULL AND job_logs.trigger_id"
                ));
                $crate::store::sql::push_in_list!(select, completions.iter().map(|completion| completion.trigger_id.as_str().to_owned()));
                select.push(" FOR UPDATE");
                select.build_query_as().fetch_all(&mut **tx).await.map_err(StoreError::query("record results"))
            }

            /// The completed runs of [`lock_unfinished_runs`]' rows, with their results.
            #[allow(dead_code)] // MySQL's alone
            fn completed_rows(
                unfinished: Vec<(String, i64, String, i64, String)>,
                completions: &[&Completion],
            ) -> Vec<$crate::store::rows::CompletedRunRow> {
                let by_trigger: std::collections::HashMap<&str, &Completion> =
                    completions.iter().map(|completion| (completion.trigger_id.as_str(), *completion)).collect();
                unfinished
                    .into_iter()
                    .filter_map(|(trigger_id, job_id, run_trigger_type, attempt, app)| {
                        let completion = by_trigger.get(trigger_id.as_str())?;
                        if completion.app.as_ref().is_some_and(|wanted| *wanted != app) {
                            return None;
                        }
                        Some($crate::store::rows::CompletedRunRow {
                            handle_code: i64::from(completion.code),
                            handle_at_ms: completion.finished_at_ms,
                            trigger_id,
                            job_id,
                            run_trigger_type,
                            attempt,
                        })
                    })
                    .collect()
            }

            /// Claims up to `limit` pending fires whose lease ended before `now_ms` for
            /// `node_id` until `lease_until_ms`, oldest lease first.
            pub(super) async fn claim_expired_fires(
                store: &$store,
                node_id: &str,
                now_ms: i64,
                lease_until_ms: i64,
                limit: u32,
            ) -> Result<Vec<FireRow>, StoreError> {
                const OPERATION: &str = "claim expired pending fires";
                dialect!($dialect,
                    ansi => sqlx::query_as(<$store>::claim_expired_sql())
                        .bind(node_id)
                        .bind(lease_until_ms)
                        .bind(now_ms)
                        .bind(now_ms)
                        .bind(i64::from(limit))
                        .fetch_all(&store.pool)
                        .await
                        .map_err(StoreError::query(OPERATION)),
                    mysql => {
                        let mut tx = store.begin_write(OPERATION).await?;
                        let ids: Vec<(i64,)> = sqlx::query_as(&backend_sql(
                            "SELECT id FROM job_logs WHERE state = 'SCHEDULED' AND lease_until_ms < $1 \
                             ORDER BY lease_until_ms LIMIT $2 FOR UPDATE SKIP LOCKED",
                        ))
                        .bind(now_ms)
                        .bind(i64::from(limit))
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                        let ids: Vec<i64> = ids.into_iter().map(|(id,)| id).collect();
                        if !ids.is_empty() {
                            let mut update = sqlx::QueryBuilder::<$db>::new("UPDATE job_logs SET owner_node = ");
                            update.push_bind(node_id.to_owned()).push(", lease_until_ms = ").push_bind(lease_until_ms).push(" WHERE id");
                            $crate::store::sql::push_in_list!(update, ids.iter().copied());
                            update.build().execute(&mut *tx).await.map_err(StoreError::query(OPERATION))?;
                        }
                        let rows = rows_by_id(&mut tx, $crate::store::rows::FIRE_COLUMNS, &ids, OPERATION).await?;
                        tx.commit().await.map_err(StoreError::query(OPERATION))?;
                        Ok(rows)
                    },
                )
            }

            /// Claims up to `limit` finished runs whose follow-up is pending or whose claim
            /// expired before `now_ms`, until `locked_until_ms`.
            pub(super) async fn claim_finished_runs(
                store: &$store,
                now_ms: i64,
                locked_until_ms: i64,
                limit: u32,
            ) -> Result<Vec<$crate::store::FinishedRun>, StoreError> {
                const OPERATION: &str = "claim finished runs";
                const CLAIMABLE: &str = "state = 'FINISHED' AND follow_up <> 'DONE' \
                     AND (follow_up = 'PENDING' OR follow_up_locked_until < $1)";
                let columns = format!(
                    "{}, handle_code, handle_msg, executor_id, handle_at_ms, first_log_id, retry_after_ms",
                    $crate::store::rows::FIRE_COLUMNS
                );
                let rows: Vec<$crate::store::rows::FinishedRunRow> = dialect!($dialect,
                    // Compare-and-set: the condition is repeated outside the subquery, so a
                    // row two nodes picked at once is claimed by one of them only.
                    ansi => sqlx::query_as(&format!(
                        "UPDATE job_logs SET {} WHERE id IN (SELECT id FROM job_logs WHERE {} ORDER BY id LIMIT $3) \
                         AND {} RETURNING {columns}",
                        "follow_up = 'LOCKED', follow_up_locked_until = $1, \
                         alarm_status = CASE WHEN handle_code = 200 THEN 'NOT_NEEDED' ELSE 'LOCKED' END",
                        CLAIMABLE.replace("$1", "$2"),
                        CLAIMABLE.replace("$1", "$4"),
                    ))
                    .bind(locked_until_ms)
                    .bind(now_ms)
                    .bind(i64::from(limit))
                    .bind(now_ms)
                    .fetch_all(&store.pool)
                    .await
                    .map_err(StoreError::query(OPERATION))?,
                    // The rows are locked as they are read; rows another node holds are
                    // passed over, so each row is claimed by one node.
                    mysql => {
                        let mut tx = store.begin_write(OPERATION).await?;
                        let ids: Vec<(i64,)> = sqlx::query_as(&backend_sql(&format!(
                            "SELECT id FROM job_logs WHERE {CLAIMABLE} ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED"
                        )))
                        .bind(now_ms)
                        .bind(i64::from(limit))
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                        let ids: Vec<i64> = ids.into_iter().map(|(id,)| id).collect();
                        if !ids.is_empty() {
                            let mut update = sqlx::QueryBuilder::<$db>::new(
                                "UPDATE job_logs SET follow_up = 'LOCKED', follow_up_locked_until = ",
                            );
                            update
                                .push_bind(locked_until_ms)
                                .push(", alarm_status = CASE WHEN handle_code = 200 THEN 'NOT_NEEDED' ELSE 'LOCKED' END WHERE id");
                            $crate::store::sql::push_in_list!(update, ids.iter().copied());
                            update.build().execute(&mut *tx).await.map_err(StoreError::query(OPERATION))?;
                        }
                        let rows = rows_by_id(&mut tx, &columns, &ids, OPERATION).await?;
                        tx.commit().await.map_err(StoreError::query(OPERATION))?;
                        rows
                    },
                );
                let mut runs: Vec<$crate::store::FinishedRun> = convert_all(rows)?;
                runs.sort_by_key(|run| run.fire.log_id);
                Ok(runs)
            }

            /// The rows of `job_logs` with `ids`, as `columns` (MySQL reads back what it
            /// updated: it has no RETURNING).
            #[allow(dead_code)] // MySQL's alone
            async fn rows_by_id<R>(
                tx: &mut sqlx::Transaction<'_, $db>,
                columns: &str,
                ids: &[i64],
                operation: &'static str,
            ) -> Result<Vec<R>, StoreError>
            where
                R: for<'r> sqlx::FromRow<'r, <$db as sqlx::Database>::Row> + Send + Unpin,
            {
                let mut rows = Vec::with_capacity(ids.len());
                for chunk in ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut select = sqlx::QueryBuilder::<$db>::new(format!("SELECT {columns} FROM job_logs WHERE id"));
                    $crate::store::sql::push_in_list!(select, chunk.iter().copied());
                    rows.extend(select.build_query_as::<R>().fetch_all(&mut **tx).await.map_err(StoreError::query(operation))?);
                }
                Ok(rows)
            }
        }
    };
}

pub(crate) use sql_fire_updates;
