//! The `executors` table (the registry from beats) and the runs the lost-run monitor
//! looks at.

/// Generates, in the backend's file, the module `registry` of functions on `$store` that the
/// [`Store`](crate::store::Store) implementation calls.
macro_rules! sql_registry {
    ($store:ty, $db:ty) => {
        mod registry {
            use super::*;

            pub(super) async fn upsert_executors(
                store: &$store,
                entries: &[$crate::model::ExecutorEntry],
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
                    sqlx::query(
                        "INSERT INTO executors (executor_id, app, host, version, handlers, \
                         owned_partitions, running_jobs, queued_jobs, state, first_seen_at_ms, \
                         last_beat_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) \
                         ON CONFLICT (executor_id) DO UPDATE SET app = excluded.app, \
                         host = excluded.host, version = excluded.version, \
                         handlers = excluded.handlers, owned_partitions = excluded.owned_partitions, \
                         running_jobs = excluded.running_jobs, queued_jobs = excluded.queued_jobs, \
                         state = excluded.state, last_beat_at_ms = excluded.last_beat_at_ms \
                         WHERE executors.last_beat_at_ms <= excluded.last_beat_at_ms",
                    )
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
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))
            }

            pub(super) async fn list_executors_page(
                store: &$store,
                apps: $crate::store::AppScope<'_>,
                page: &PageRequest<(String, String)>,
            ) -> Result<Vec<$crate::model::ExecutorEntry>, StoreError> {
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
                    "SELECT trigger_id, app, executor_id, dispatched_at_ms FROM job_logs \
                     WHERE state = 'DISPATCHED' AND executor_id IS NOT NULL \
                     AND dispatched_at_ms < $1 ORDER BY dispatched_at_ms LIMIT $2",
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
