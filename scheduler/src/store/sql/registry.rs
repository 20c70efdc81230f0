//! The `executors` table (the registry from beats) and the runs the lost-run monitor
//! looks at.

/// Generates, in the backend's file, the module `registry` of functions on `$store` that the
/// [`Store`](crate::store::Store) implementation calls.
macro_rules! sql_registry {
    ($store:ty, $db:ty, $dialect:ident) => {
        mod registry {
            use super::*;

            pub(super) async fn upsert_executors(
                store: &$store,
                entries: &[$crate::domain::model::ExecutorEntry],
            ) -> Result<(), StoreError> {
                use $crate::store::rows::join_list;
                const OPERATION: &str = "record executor beats";
                if entries.is_empty() {
                    return Ok(());
                }
                let mut tx = store.begin_write(OPERATION).await?;
                for entry in entries {
                    // Only a newer beat replaces the row: beats read late (several scheduler
                    // nodes, a replayed topic) never roll an executor back.
                    sqlx::query(&backend_sql($crate::store::sql::dialect::dialect!($dialect,
                        ansi => "INSERT INTO executors (executor_id, app, host, version, handlers, \
                         owned_partitions, running_jobs, queued_jobs, state, first_seen_at_ms, \
                         last_beat_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                         ON CONFLICT (executor_id) DO UPDATE SET app = excluded.app, \
                         host = excluded.host, version = excluded.version, \
                         handlers = excluded.handlers, owned_partitions = excluded.owned_partitions, \
                         running_jobs = excluded.running_jobs, queued_jobs = excluded.queued_jobs, \
                         state = excluded.state, last_beat_at_ms = excluded.last_beat_at_ms \
                         WHERE executors.last_beat_at_ms <= excluded.last_beat_at_ms",
                        // Each column keeps its value unless the beat is newer; the beat time
                        // itself is set last, since MySQL reads the assignments in order.
                        mysql => "INSERT INTO executors (executor_id, app, host, version, handlers, \
                         owned_partitions, running_jobs, queued_jobs, state, first_seen_at_ms, \
                         last_beat_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                         ON DUPLICATE KEY UPDATE \
                         app = IF(last_beat_at_ms <= VALUES(last_beat_at_ms), VALUES(app), app), \
                         host = IF(last_beat_at_ms <= VALUES(last_beat_at_ms), VALUES(host), host), \
                         version = IF(last_beat_at_ms <= VALUES(last_beat_at_ms), VALUES(version), version), \
                         handlers = IF(last_beat_at_ms <= VALUES(last_beat_at_ms), VALUES(handlers), handlers), \
                         owned_partitions = IF(last_beat_at_ms <= VALUES(last_beat_at_ms), \
                             VALUES(owned_partitions), owned_partitions), \
                         running_jobs = IF(last_beat_at_ms <= VALUES(last_beat_at_ms), VALUES(running_jobs), running_jobs), \
                         queued_jobs = IF(last_beat_at_ms <= VALUES(last_beat_at_ms), VALUES(queued_jobs), queued_jobs), \
                         state = IF(last_beat_at_ms <= VALUES(last_beat_at_ms), VALUES(state), state), \
                         last_beat_at_ms = GREATEST(last_beat_at_ms, VALUES(last_beat_at_ms))",
                    )))
                    .bind(&entry.executor_id)
                    .bind(entry.app.as_str())
                    .bind(&entry.host)
                    .bind(&entry.version)
                    .bind(join_list(&entry.handlers))
                    .bind(join_list(&entry.owned_partitions))
                    .bind(join_list(&entry.running_jobs))
                    .bind(join_list(&entry.queued_jobs))
                    .bind(entry.state.as_str())
                    .bind(entry.last_beat_at_ms)
                    .bind(entry.last_beat_at_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))
            }

            pub(super) async fn mark_dead_executors(
                store: &$store,
                stale_before_ms: i64,
            ) -> Result<Vec<String>, StoreError> {
                const OPERATION: &str = "mark executors dead";
                $crate::store::sql::dialect::dialect!($dialect,
                    ansi => {
                        let rows: Vec<(String,)> = sqlx::query_as(&backend_sql(
                            "UPDATE executors SET state = 'DEAD' \
                             WHERE state <> 'DEAD' AND last_beat_at_ms < $1 RETURNING executor_id",
                        ))
                        .bind(stale_before_ms)
                        .fetch_all(&store.pool)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                        Ok(rows.into_iter().map(|(id,)| id).collect())
                    },
                    // No RETURNING: the rows are locked as they are read, then updated.
                    mysql => {
                        let mut tx = store.begin_write(OPERATION).await?;
                        let rows: Vec<(String,)> = sqlx::query_as(&backend_sql(
                            // Rows a beat is writing are passed over: that executor is alive.
                            "SELECT executor_id FROM executors \
                             WHERE state <> 'DEAD' AND last_beat_at_ms < $1 FOR UPDATE SKIP LOCKED",
                        ))
                        .bind(stale_before_ms)
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(StoreError::query(OPERATION))?;
                        let ids: Vec<String> = rows.into_iter().map(|(id,)| id).collect();
                        for chunk in ids.chunks($crate::store::sql::UPDATE_CHUNK) {
                            let mut update = sqlx::QueryBuilder::<$db>::new(
                                "UPDATE executors SET state = 'DEAD' WHERE executor_id",
                            );
                            $crate::store::sql::push_in_list!(update, chunk.iter().cloned());
                            update.build().execute(&mut *tx).await.map_err(StoreError::query(OPERATION))?;
                        }
                        tx.commit().await.map_err(StoreError::query(OPERATION))?;
                        Ok(ids)
                    },
                )
            }

            pub(super) async fn list_executors_page(
                store: &$store,
                apps: $crate::store::AppScope<'_>,
                page: &PageRequest<(String, String)>,
            ) -> Result<Vec<$crate::domain::model::ExecutorEntry>, StoreError> {
                let mut query = sqlx::QueryBuilder::<$db>::new(format!(
                    "SELECT {} FROM executors WHERE true",
                    $crate::store::rows::EXECUTOR_COLUMNS
                ));
                $crate::store::sql::push_app_scope!(query, "app", apps);
                if let Some((app, executor)) = &page.after {
                    query
                        .push(" AND (app > ")
                        .push_bind(app.clone())
                        .push(" OR (app = ")
                        .push_bind(app.clone())
                        .push(" AND executor_id > ")
                        .push_bind(executor.clone())
                        .push("))");
                }
                query.push(" ORDER BY app, executor_id LIMIT ").push_bind(i64::from(page.limit));
                let rows: Vec<$crate::store::rows::ExecutorRow> = query
                    .build_query_as()
                    .fetch_all(&store.pool)
                    .await
                    .map_err(StoreError::query("list executors"))?;
                convert_all(rows)
            }

            pub(super) async fn unfinished_runs(
                store: &$store,
                dispatched_before_ms: i64,
                limit: u32,
            ) -> Result<Vec<$crate::store::UnfinishedRun>, StoreError> {
                const OPERATION: &str = "read unfinished runs";
                let rows: Vec<(String, String, String, i64)> = sqlx::query_as(
                    &backend_sql("SELECT trigger_id, app, executor_id, dispatched_at_ms FROM job_logs \
                     WHERE state = 'DISPATCHED' AND executor_id IS NOT NULL \
                     AND dispatched_at_ms < $1 ORDER BY dispatched_at_ms LIMIT $2",)
                )
                .bind(dispatched_before_ms)
                .bind(i64::from(limit))
                .fetch_all(&store.pool)
                .await
                .map_err(StoreError::query(OPERATION))?;
                rows.into_iter()
                    .map(|(trigger_id, app, executor_id, dispatched_at_ms)| {
                        let corrupt = |reason: String| StoreError::CorruptRow {
                            what: format!("run {trigger_id}"),
                            reason,
                        };
                        let trigger = kadence_schemas::TriggerId::parse(&trigger_id)
                            .map_err(|error| corrupt(error.to_string()))?;
                        Ok($crate::store::UnfinishedRun {
                            job_id: trigger.job_id(),
                            trigger_id: trigger,
                            app: AppName::parse(&app).map_err(|error| corrupt(error.to_string()))?,
                            executor_id,
                            dispatched_at_ms,
                        })
                    })
                    .collect()
            }
        }
    };
}

pub(crate) use sql_registry;
