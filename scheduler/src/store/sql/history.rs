//! What accumulates: run log lines, daily reports, and retention of old runs.

/// Generates, in the backend's file, the module `history` of functions on `$store` that the
/// [`Store`](crate::store::Store) implementation calls.
macro_rules! sql_history {
    ($store:ty, $db:ty) => {
        mod history {
            use super::*;

            pub(super) async fn append_log_lines(
                store: &$store,
                batches: &[$crate::store::LogLines],
                max_lines_per_run: i64,
            ) -> Result<u64, StoreError> {
                const OPERATION: &str = "store log lines";
                let lines: Vec<(i64, i64, &str)> = batches
                    .iter()
                    .flat_map(|batch| {
                        batch.lines.iter().enumerate().map(move |(index, line)| {
                            (batch.log_id, batch.first_line + index as i64, line.as_str())
                        })
                    })
                    .filter(|(_, line_no, _)| (1..=max_lines_per_run).contains(line_no))
                    .collect();
                let mut stored = 0;
                let mut tx = store.begin_write(OPERATION).await?;
                // A run's row is written once its trigger is acknowledged, and its first lines
                // may come sooner: lines are kept for every log id given out (a fire's is
                // reserved when it is planned), and dropped for ids never given out.
                let last_log_id = <$store>::last_log_id_in(&mut tx).await?;
                let lines: Vec<(i64, i64, &str)> =
                    lines.into_iter().filter(|(log_id, _, _)| (1..=last_log_id).contains(log_id)).collect();
                for chunk in lines.chunks($crate::store::sql::INSERT_CHUNK) {
                    let mut insert =
                        sqlx::QueryBuilder::<$db>::new("WITH v(log_id, line_no, line) AS (");
                    insert.push_values(chunk, |mut values, (log_id, line_no, line)| {
                        values.push_bind(*log_id).push_bind(*line_no).push_bind(line.to_string());
                    });
                    // Repeats are dropped by the key. (SQLite needs a WHERE before ON CONFLICT
                    // to parse INSERT … SELECT.)
                    insert.push(
                        ") INSERT INTO run_log_lines (log_id, line_no, line) \
                         SELECT v.log_id, v.line_no, v.line FROM v WHERE true \
                         ON CONFLICT (log_id, line_no) DO NOTHING",
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

            pub(super) async fn refresh_reports(store: &$store, from_ms: i64, to_ms: i64) -> Result<u64, StoreError> {
                // One statement: the counts are recomputed from the runs, never incremented,
                // so a repeated or concurrent refresh writes the same numbers.
                let done = sqlx::query(
                    "INSERT INTO job_reports (day_ms, app, job_id, running, succeeded, failed) \
                     SELECT (scheduled_at_ms / 86400000) * 86400000, app, job_id, \
                     SUM(CASE WHEN state IN ('SCHEDULED', 'DISPATCHED') THEN 1 ELSE 0 END), \
                     SUM(CASE WHEN handle_code = 200 THEN 1 ELSE 0 END), \
                     SUM(CASE WHEN state = 'FINISHED' AND handle_code <> 200 THEN 1 ELSE 0 END) \
                     FROM job_logs WHERE scheduled_at_ms >= $1 AND scheduled_at_ms < $2 \
                     GROUP BY (scheduled_at_ms / 86400000) * 86400000, app, job_id \
                     ON CONFLICT (day_ms, app, job_id) DO UPDATE SET running = excluded.running, \
                     succeeded = excluded.succeeded, failed = excluded.failed",
                )
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
            ) -> Result<Vec<$crate::model::DailyReport>, StoreError> {
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
                    "SELECT id FROM job_logs WHERE scheduled_at_ms < $1 AND state IN ('FINISHED', 'CANCELLED') \
                     ORDER BY scheduled_at_ms LIMIT $2",
                )
                .bind(before_ms)
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
                let mut deleted = 0;
                for chunk in ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                    for table in ["run_log_lines WHERE log_id", "job_logs WHERE id"] {
                        let mut delete = sqlx::QueryBuilder::<$db>::new(format!("DELETE FROM {table} IN ("));
                        let mut separated = delete.separated(", ");
                        for (id,) in chunk {
                            separated.push_bind(*id);
                        }
                        delete.push(")");
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
        }
    };
}

pub(crate) use sql_history;
