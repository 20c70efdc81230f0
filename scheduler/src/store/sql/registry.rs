//! The `executors` table (the registry from beats), and the runs the lost-run monitor looks
//! at: written once for every backend ([`SqlBackend`]), each statement once per dialect where
//! the dialects differ.

use kadence_schemas::{AppName, TriggerId};

use super::backend::{SqlBackend, SqlStore};
use super::dialect::Dialect;
use super::statement::Statement;
use crate::domain::model::ExecutorEntry;
use crate::store::rows::{EXECUTOR_COLUMNS, ExecutorRow, convert_all, executor_values};
use crate::store::{AppScope, ExecutorRegistry, PageRequest, StoreError, UnfinishedRun};

/// Only a newer beat replaces an executor's row: beats read late (several scheduler nodes, a
/// replayed topic) never roll an executor back. Its first sighting stays as it was.
fn upsert_executor<B: SqlBackend>(entry: &ExecutorEntry) -> Statement<'_> {
    let values = executor_values(entry);
    let updated: Vec<&str> = (values.iter())
        .map(|(column, _)| *column)
        .filter(|column| {
            !matches!(
                *column,
                "executor_id" | "first_seen_at_ms" | "last_beat_at_ms"
            )
        })
        .collect();
    let mut statement = Statement::insert_into("executors", values);
    match B::DIALECT {
        Dialect::Ansi => {
            let assignments: Vec<String> = (updated.into_iter().chain(["last_beat_at_ms"]))
                .map(|column| format!("{column} = excluded.{column}"))
                .collect();
            statement.push(&format!(
                " ON CONFLICT (executor_id) DO UPDATE SET {} \
                 WHERE executors.last_beat_at_ms <= excluded.last_beat_at_ms",
                assignments.join(", ")
            ));
        }
        // Each column keeps its value unless the beat is newer; the beat time itself is set
        // last, since MySQL reads the assignments in order.
        Dialect::MySql => {
            let assignments: Vec<String> = (updated.into_iter())
                .map(|column| {
                    format!(
                        "{column} = IF(last_beat_at_ms <= VALUES(last_beat_at_ms), \
                         VALUES({column}), {column})"
                    )
                })
                .chain([
                    "last_beat_at_ms = GREATEST(last_beat_at_ms, VALUES(last_beat_at_ms))"
                        .to_owned(),
                ])
                .collect();
            statement.push(&format!(
                " ON DUPLICATE KEY UPDATE {}",
                assignments.join(", ")
            ));
        }
    }
    statement
}

#[async_trait::async_trait]
impl<B: SqlBackend> ExecutorRegistry for SqlStore<B> {
    async fn upsert_executors(&self, entries: &[ExecutorEntry]) -> Result<(), StoreError> {
        const OPERATION: &str = "record executor beats";
        if entries.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_write(OPERATION).await?;
        // One text for the batch; each entry binds its values in the same columns' order.
        let upsert = upsert_executor::<B>(&entries[0]);
        for entry in entries {
            let values = executor_values(entry).into_iter().map(|(_, value)| value);
            (upsert.rebound(values).execute::<B>(&mut tx).await)
                .map_err(StoreError::query(OPERATION))?;
        }
        tx.commit().await.map_err(StoreError::query(OPERATION))
    }

    async fn list_executors(
        &self,
        app: Option<&AppName>,
    ) -> Result<Vec<ExecutorEntry>, StoreError> {
        const OPERATION: &str = "list executors";
        let app = app.map(AppName::as_str);
        let rows: Vec<ExecutorRow> = Statement::new(format!(
            "SELECT {EXECUTOR_COLUMNS} FROM executors WHERE ($1 IS NULL OR app = $2) \
             ORDER BY app, executor_id"
        ))
        .bind(app)
        .bind(app)
        .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?)
        .await
        .map_err(StoreError::query(OPERATION))?;
        convert_all(rows)
    }

    async fn list_executors_page(
        &self,
        apps: AppScope<'_>,
        page: &PageRequest<(String, String)>,
    ) -> Result<Vec<ExecutorEntry>, StoreError> {
        const OPERATION: &str = "list executors";
        let mut query = Statement::new(format!(
            "SELECT {EXECUTOR_COLUMNS} FROM executors WHERE true"
        ));
        query.push_app_scope("app", apps);
        if let Some((app, executor)) = &page.after {
            query.push(" AND (app > ").push_bind(app);
            query.push(" OR (app = ").push_bind(app);
            query
                .push(" AND executor_id > ")
                .push_bind(executor)
                .push("))");
        }
        query
            .push(" ORDER BY app, executor_id LIMIT ")
            .push_bind(i64::from(page.limit));
        let rows: Vec<ExecutorRow> = (query
            .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        convert_all(rows)
    }

    async fn mark_dead_executors(&self, stale_before_ms: i64) -> Result<Vec<String>, StoreError> {
        const OPERATION: &str = "mark executors dead";
        let ids: Vec<(String,)> = match B::DIALECT {
            Dialect::Ansi => {
                let mut connection = self.connection(OPERATION).await?;
                (Statement::new(
                    "UPDATE executors SET state = 'DEAD' \
                     WHERE state <> 'DEAD' AND last_beat_at_ms < $1 RETURNING executor_id",
                )
                .bind(stale_before_ms)
                .fetch_all::<B, _>(&mut connection))
                .await
                .map_err(StoreError::query(OPERATION))?
            }
            // No RETURNING: the rows are locked as they are read, then updated.
            Dialect::MySql => {
                let mut tx = self.begin_write(OPERATION).await?;
                // Rows a beat is writing are passed over: that executor is alive.
                let ids: Vec<(String,)> = (Statement::new(
                    "SELECT executor_id FROM executors \
                     WHERE state <> 'DEAD' AND last_beat_at_ms < $1 FOR UPDATE SKIP LOCKED",
                )
                .bind(stale_before_ms)
                .fetch_all::<B, _>(&mut tx))
                .await
                .map_err(StoreError::query(OPERATION))?;
                for chunk in ids.chunks(super::UPDATE_CHUNK) {
                    let mut update =
                        Statement::new("UPDATE executors SET state = 'DEAD' WHERE executor_id");
                    update.push_in_list(chunk.iter().map(|(id,)| id));
                    (update.execute::<B>(&mut tx).await).map_err(StoreError::query(OPERATION))?;
                }
                tx.commit().await.map_err(StoreError::query(OPERATION))?;
                ids
            }
        };
        Ok(ids.into_iter().map(|(id,)| id).collect())
    }

    async fn forget_executors(&self, dead_before_ms: i64) -> Result<u64, StoreError> {
        const OPERATION: &str = "forget dead executors";
        (Statement::new("DELETE FROM executors WHERE state = 'DEAD' AND last_beat_at_ms < $1")
            .bind(dead_before_ms)
            .execute::<B>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))
    }
}

/// Up to `limit` runs dispatched before `dispatched_before_ms` to a known executor and still
/// without a result, oldest first (see [`crate::store::Runs::unfinished_runs`]).
pub(crate) async fn unfinished_runs<B: SqlBackend>(
    store: &SqlStore<B>,
    dispatched_before_ms: i64,
    limit: u32,
) -> Result<Vec<UnfinishedRun>, StoreError> {
    const OPERATION: &str = "read unfinished runs";
    let rows: Vec<(String, String, String, i64)> = (Statement::new(
        "SELECT trigger_id, app, executor_id, dispatched_at_ms FROM job_logs \
         WHERE state = 'DISPATCHED' AND executor_id IS NOT NULL \
         AND dispatched_at_ms < $1 ORDER BY dispatched_at_ms LIMIT $2",
    )
    .bind(dispatched_before_ms)
    .bind(i64::from(limit))
    .fetch_all::<B, _>(&mut *store.connection(OPERATION).await?))
    .await
    .map_err(StoreError::query(OPERATION))?;
    rows.into_iter()
        .map(|(trigger_id, app, executor_id, dispatched_at_ms)| {
            let corrupt = |reason: String| StoreError::CorruptRow {
                what: format!("run {trigger_id}"),
                reason,
            };
            let trigger =
                TriggerId::parse(&trigger_id).map_err(|error| corrupt(error.to_string()))?;
            Ok(UnfinishedRun {
                job_id: trigger.job_id(),
                trigger_id: trigger,
                app: AppName::parse(&app).map_err(|error| corrupt(error.to_string()))?,
                executor_id,
                dispatched_at_ms,
            })
        })
        .collect()
}
