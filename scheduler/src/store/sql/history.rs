//! What accumulates: run log lines, daily reports (with the counts of the runs a history
//! policy dropped), retention of old runs, and the dropping of runs their policy does not keep.

/// Generates, in the backend's file, the module `history` of functions on `$store` that the
/// [`Store`](crate::store::Store) implementation calls.
macro_rules! sql_history {
    ($store:ty, $db:ty, $dialect:ident) => {
        mod history {
            use super::*;

            pub(super) async fn run_apps(
                store: &$store,
                log_ids: &[i64],
            ) -> Result<std::collections::HashMap<i64, String>, StoreError> {
                let mut apps = std::collections::HashMap::with_capacity(log_ids.len());
                for chunk in log_ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut query = sqlx::QueryBuilder::<$db>::new("SELECT id, app FROM job_logs WHERE id");
                    $crate::store::sql::push_in_list!(query, chunk.iter().copied());
                    let rows: Vec<(i64, String)> = query
                        .build_query_as()
                        .fetch_all(&store.pool)
                        .await
                        .map_err(StoreError::query("read the apps of runs"))?;
                    apps.extend(rows);
                }
                Ok(apps)
            }

            pub(super) async fn append_log_lines(
                store: &$store,
                batches: &[$crate::store::LogLines],
                max_lines_per_run: i64,
            ) -> Result<u64, StoreError> {
                const OPERATION: &str = "store log lines";
                // (log id, run start, line number, line)
                type Line<'a> = (i64, i64, i64, &'a str);
                let lines: Vec<Line<'_>> = batches
                    .iter()
                    .flat_map(|batch| {
                        batch.lines.iter().enumerate().map(move |(index, line)| {
                            (batch.log_id, batch.run_started_at_ms, batch.first_line + index as i64, line.as_str())
                        })
                    })
                    .filter(|(_, _, line_no, _)| (1..=max_lines_per_run).contains(line_no))
                    .collect();
                let mut stored = 0;
                let mut tx = store.begin_write(OPERATION).await?;
                // A run's row is written once its trigger is acknowledged, and its first lines
                // may come sooner: lines are kept for every log id given out (a fire's is
                // reserved when it is planned), and dropped for ids never given out.
                let last_log_id = <$store>::last_log_id_in(&mut tx).await?;
                let lines: Vec<Line<'_>> =
                    lines.into_iter().filter(|(log_id, ..)| (1..=last_log_id).contains(log_id)).collect();
                for chunk in lines.chunks($crate::store::sql::INSERT_CHUNK) {
                    let push_line = |mut values: sqlx::query_builder::Separated<'_, '_, $db, &'static str>, line: &Line<'_>| {
                        values.push_bind(line.0).push_bind(line.1).push_bind(line.2).push_bind(line.3.to_string());
                    };
                    let mut insert = sqlx::QueryBuilder::<$db>::new("");
                    $crate::store::sql::dialect::dialect!($dialect,
                        ansi => {
                            insert.push("WITH v(log_id, run_started_at_ms, line_no, line) AS (");
                            insert.push_values(chunk, push_line);
                            // Repeats are dropped by the key: each run of a trigger keeps its
                            // own lines. (SQLite needs a WHERE before ON CONFLICT to parse
                            // INSERT … SELECT.)
                            insert.push(
                                ") INSERT INTO run_log_lines (log_id, run_started_at_ms, line_no, line) \
                                 SELECT v.log_id, v.run_started_at_ms, v.line_no, v.line FROM v WHERE true \
                                 ON CONFLICT (log_id, run_started_at_ms, line_no) DO NOTHING",
                            );
                        },
                        // Repeats are dropped by the key and not counted (an ON DUPLICATE KEY
                        // no-op would count them); lines are plain text of bounded length, so
                        // IGNORE turns nothing else into a warning.
                        mysql => {
                            insert.push("INSERT IGNORE INTO run_log_lines (log_id, run_started_at_ms, line_no, line) ");
                            insert.push_values(chunk, push_line);
                        },
                    );
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

            pub(super) async fn read_log_lines(
                store: &$store,
                log_id: i64,
                from_line: i64,
                limit: u32,
            ) -> Result<$crate::store::RunLogLines, StoreError> {
                const OPERATION: &str = "read log lines";
                // The runs of the trigger that have lines, latest first: few (one, unless it
                // was handed back or its executor died), and found on the key's prefix.
                let runs: Vec<(i64,)> = sqlx::query_as(&backend_sql(
                    "SELECT DISTINCT run_started_at_ms FROM run_log_lines WHERE log_id = $1 \
                     ORDER BY run_started_at_ms DESC",
                ))
                .bind(log_id)
                .fetch_all(&store.pool)
                .await
                .map_err(StoreError::query(OPERATION))?;
                let Some(&(latest,)) = runs.first() else {
                    return Ok($crate::store::RunLogLines::default());
                };
                let lines = sqlx::query_as(&backend_sql(
                    "SELECT line_no, line FROM run_log_lines \
                     WHERE log_id = $1 AND run_started_at_ms = $2 AND line_no >= $3 \
                     ORDER BY line_no LIMIT $4",
                ))
                .bind(log_id)
                .bind(latest)
                .bind(from_line)
                .bind(i64::from(limit))
                .fetch_all(&store.pool)
                .await
                .map_err(StoreError::query(OPERATION))?;
                Ok($crate::store::RunLogLines {
                    run_started_at_ms: Some(latest),
                    earlier_runs: u32::try_from(runs.len() - 1).unwrap_or(u32::MAX),
                    lines,
                })
            }

            pub(super) async fn refresh_reports(store: &$store, from_ms: i64, to_ms: i64) -> Result<u64, StoreError> {
                // One statement: the counts are recomputed from the runs (and the counts of
                // the runs a history policy dropped), never incremented, so a repeated or
                // concurrent refresh writes the same numbers.
                let done = sqlx::query(
                    &backend_sql(&format!("INSERT INTO job_reports (day_ms, app, job_id, running, succeeded, failed) \
                     SELECT day_ms, app, job_id, SUM(running), SUM(succeeded), SUM(failed) FROM ( \
                         SELECT scheduled_at_ms - scheduled_at_ms % 86400000 AS day_ms, app, job_id, \
                         CASE WHEN state IN ('SCHEDULED', 'DISPATCHED') THEN 1 ELSE 0 END AS running, \
                         CASE WHEN handle_code = 200 THEN 1 ELSE 0 END AS succeeded, \
                         CASE WHEN state = 'FINISHED' AND handle_code <> 200 THEN 1 ELSE 0 END AS failed \
                         FROM job_logs WHERE scheduled_at_ms >= $1 AND scheduled_at_ms < $2 \
                         UNION ALL \
                         SELECT day_ms, app, job_id, 0, succeeded, failed FROM run_counts \
                         WHERE day_ms >= $3 AND day_ms < $4 \
                     ) counted WHERE true GROUP BY day_ms, app, job_id {}",
                     $crate::store::sql::dialect::dialect!($dialect,
                         ansi => "ON CONFLICT (day_ms, app, job_id) DO UPDATE SET running = excluded.running, \
                             succeeded = excluded.succeeded, failed = excluded.failed",
                         mysql => "ON DUPLICATE KEY UPDATE running = VALUES(running), \
                             succeeded = VALUES(succeeded), failed = VALUES(failed)",
                     ),
                    ))
                )
                .bind(from_ms)
                .bind(to_ms)
                .bind(from_ms)
                .bind(to_ms)
                .execute(&store.pool)
                .await
                .map_err(StoreError::query("refresh daily reports"))?;
                Ok(done.rows_affected())
            }

            pub(super) async fn list_reports(
                store: &$store,
                from_ms: i64,
                to_ms: i64,
                apps: $crate::store::AppScope<'_>,
                page: &PageRequest<(i64, String, i64)>,
            ) -> Result<Vec<$crate::domain::model::DailyReport>, StoreError> {
                let mut query = sqlx::QueryBuilder::<$db>::new(
                    "SELECT day_ms, app, job_id, running, succeeded, failed FROM job_reports WHERE day_ms >= ",
                );
                query.push_bind(from_ms).push(" AND day_ms < ").push_bind(to_ms);
                $crate::store::sql::push_app_scope!(query, "app", apps);
                if let Some((day, app, job)) = &page.after {
                    // (day, app, job) > (after…), spelled out: both backends plan it on the key.
                    query
                        .push(" AND (day_ms > ")
                        .push_bind(*day)
                        .push(" OR (day_ms = ")
                        .push_bind(*day)
                        .push(" AND (app > ")
                        .push_bind(app.clone())
                        .push(" OR (app = ")
                        .push_bind(app.clone())
                        .push(" AND job_id > ")
                        .push_bind(*job)
                        .push("))))");
                }
                query.push(" ORDER BY day_ms, app, job_id LIMIT ").push_bind(i64::from(page.limit));
                query
                .build_query_as()
                .fetch_all(&store.pool)
                .await
                .map_err(StoreError::query("list daily reports"))
            }

            pub(super) async fn delete_old_runs(store: &$store, before_ms: i64, limit: u32) -> Result<u64, StoreError> {
                const OPERATION: &str = "delete old runs";
                let mut tx = store.begin_write(OPERATION).await?;
                let ids: Vec<(i64,)> = sqlx::query_as(
                    &backend_sql("SELECT id FROM job_logs WHERE scheduled_at_ms < $1 AND state IN ('FINISHED', 'CANCELLED') \
                     ORDER BY scheduled_at_ms LIMIT $2",)
                )
                .bind(before_ms)
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                let mut deleted = 0;
                for chunk in ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                    for table in ["run_log_lines WHERE log_id", "job_logs WHERE id"] {
                        let mut delete = sqlx::QueryBuilder::<$db>::new(format!("DELETE FROM {table}"));
                        $crate::store::sql::push_in_list!(delete, chunk.iter().map(|(id,)| *id));
                        let done = delete
                            .build()
                            .execute(&mut *tx)
                            .await
                            .map_err(StoreError::query(OPERATION))?;
                        if table.starts_with("job_logs") {
                            deleted += done.rows_affected();
                        }
                    }
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(deleted)
            }

            pub(super) async fn delete_old_reports(store: &$store, before_ms: i64, limit: u32) -> Result<u64, StoreError> {
                const OPERATION: &str = "delete old reports";
                let mut tx = store.begin_write(OPERATION).await?;
                let mut deleted = 0;
                for table in ["job_reports", "run_counts"] {
                    deleted += sqlx::query(&backend_sql(&format!(
                        // The derived table lets MySQL delete from the table it reads, and
                        // take a LIMIT inside IN.
                        "DELETE FROM {table} WHERE (day_ms, app, job_id) IN \
                         (SELECT day_ms, app, job_id FROM \
                         (SELECT day_ms, app, job_id FROM {table} WHERE day_ms < $1 LIMIT $2) AS old)",
                    )))
                    .bind(before_ms)
                    .bind(i64::from(limit))
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?
                    .rows_affected();
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(deleted)
            }

            pub(super) async fn drop_unkept_runs(
                store: &$store,
                finished_before_ms: i64,
                limit: u32,
            ) -> Result<u64, StoreError> {
                const OPERATION: &str = "drop runs their history policy does not keep";
                let mut tx = store.begin_write(OPERATION).await?;
                // Kept whatever the policy: a failed attempt while any of its retries is not
                // done (they read it: the FIX_DELAY rule, the retry chain), and the shards of
                // an ALL_SHARDS parent's fire (its join counts their successes). The jobs with
                // a policy other than ALL are few: the plan starts from them.
                let ids: Vec<(i64,)> = sqlx::query_as(
                    &backend_sql("SELECT l.id FROM jobs j JOIN job_logs l ON l.job_id = j.id \
                     WHERE j.history <> 'ALL' \
                     AND (j.history = 'NONE' OR l.handle_code = 200) \
                     AND l.state = 'FINISHED' AND l.follow_up = 'DONE' AND l.handle_at_ms < $1 \
                     AND NOT (j.child_trigger_mode = 'ALL_SHARDS' AND j.child_job_ids <> '' AND l.shard_total > 1) \
                     AND NOT EXISTS (SELECT 1 FROM job_logs r WHERE r.first_log_id = l.id \
                         AND (r.state <> 'FINISHED' OR r.follow_up <> 'DONE')) \
                     ORDER BY l.id LIMIT $2",)
                )
                .bind(finished_before_ms)
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                // (day, app, job) -> (succeeded, failed), of the rows this transaction deleted.
                let mut counts: std::collections::BTreeMap<(i64, String, i64), (i64, i64)> =
                    std::collections::BTreeMap::new();
                let mut dropped = 0;
                for chunk in ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                    let mut lines = sqlx::QueryBuilder::<$db>::new("DELETE FROM run_log_lines WHERE log_id");
                    $crate::store::sql::push_in_list!(lines, chunk.iter().map(|(id,)| *id));
                    lines.build().execute(&mut *tx).await.map_err(StoreError::query(OPERATION))?;
                    let gone = delete_finished_runs(&mut tx, chunk).await?;
                    dropped += gone.len() as u64;
                    for (scheduled_at_ms, app, job_id, code) in gone {
                        let day = $crate::clock::day_of(scheduled_at_ms);
                        let count = counts.entry((day, app, job_id)).or_default();
                        if code == Some(i64::from(kadence_schemas::result_code::SUCCESS)) {
                            count.0 += 1;
                        } else {
                            count.1 += 1;
                        }
                    }
                }
                add_run_counts(&mut tx, counts).await?;
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                Ok(dropped)
            }

            /// Deletes the finished runs among `ids`; returns the scheduled time, app, job and
            /// code of each deleted (by this transaction: two nodes never count one twice).
            async fn delete_finished_runs(
                tx: &mut sqlx::Transaction<'_, $db>,
                ids: &[(i64,)],
            ) -> Result<Vec<(i64, String, i64, Option<i64>)>, StoreError> {
                const OPERATION: &str = "drop runs their history policy does not keep";
                let ids = || ids.iter().map(|(id,)| *id);
                $crate::store::sql::dialect::dialect!($dialect,
                    ansi => {
                        let mut runs = sqlx::QueryBuilder::<$db>::new("DELETE FROM job_logs WHERE state = 'FINISHED' AND id");
                        $crate::store::sql::push_in_list!(runs, ids());
                        runs.push(" RETURNING scheduled_at_ms, app, job_id, handle_code");
                        runs.build_query_as().fetch_all(&mut **tx).await.map_err(StoreError::query(OPERATION))
                    },
                    // The rows are locked as they are read: another node's delete of the same
                    // rows waits, then finds them gone and counts nothing.
                    mysql => {
                        let mut select = sqlx::QueryBuilder::<$db>::new(
                            "SELECT id, scheduled_at_ms, app, job_id, handle_code FROM job_logs FORCE INDEX (PRIMARY) \
                             WHERE state = 'FINISHED' AND id",
                        );
                        $crate::store::sql::push_in_list!(select, ids());
                        select.push(" FOR UPDATE");
                        let rows: Vec<(i64, i64, String, i64, Option<i64>)> =
                            select.build_query_as().fetch_all(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                        if !rows.is_empty() {
                            let mut delete = sqlx::QueryBuilder::<$db>::new("DELETE FROM job_logs WHERE id");
                            $crate::store::sql::push_in_list!(delete, rows.iter().map(|row| row.0));
                            delete.build().execute(&mut **tx).await.map_err(StoreError::query(OPERATION))?;
                        }
                        Ok(rows.into_iter().map(|(_, scheduled, app, job, code)| (scheduled, app, job, code)).collect())
                    },
                )
            }

            /// Adds `counts` ((day, app, job) -> (succeeded, failed)) to `run_counts`.
            async fn add_run_counts(
                tx: &mut sqlx::Transaction<'_, $db>,
                counts: std::collections::BTreeMap<(i64, String, i64), (i64, i64)>,
            ) -> Result<(), StoreError> {
                let counts: Vec<_> = counts.into_iter().collect();
                for chunk in counts.chunks($crate::store::sql::INSERT_CHUNK) {
                    let mut upsert = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO run_counts (day_ms, app, job_id, succeeded, failed) ",
                    );
                    upsert.push_values(chunk, |mut values, ((day, app, job_id), (succeeded, failed))| {
                        values
                            .push_bind(*day)
                            .push_bind(app.clone())
                            .push_bind(*job_id)
                            .push_bind(*succeeded)
                            .push_bind(*failed);
                    });
                    upsert.push($crate::store::sql::dialect::dialect!($dialect,
                        ansi => " ON CONFLICT (day_ms, app, job_id) DO UPDATE SET \
                         succeeded = run_counts.succeeded + excluded.succeeded, \
                         failed = run_counts.failed + excluded.failed",
                        mysql => " ON DUPLICATE KEY UPDATE succeeded = succeeded + VALUES(succeeded), \
                         failed = failed + VALUES(failed)",
                    ));
                    upsert.build().execute(&mut **tx).await.map_err(StoreError::query("count dropped runs"))?;
                }
                Ok(())
            }
        }
    };
}

pub(crate) use sql_history;
