//! The [`ExecutorKeys`](crate::store::ExecutorKeys) implementation: table `executor_keys`, the
//! same SQL on every backend.

/// Implements [`ExecutorKeys`](crate::store::ExecutorKeys) for a backend type with a `pool`
/// field.
macro_rules! impl_sql_executor_keys {
    ($store:ty, $db:ty, $dialect:ident) => {
        mod executor_keys {
            use secrecy::{ExposeSecret, SecretString};

            use super::*;
            use $crate::store::{ExecutorKeyInfo, ExecutorKeys, NewExecutorKey, StoredExecutorKey};

            type InfoRow = (String, String, String, i64, Option<i64>);

            const INFO_COLUMNS: &str = "key_id, app, created_by, created_at_ms, revoked_at_ms";

            fn info((key_id, app, created_by, created_at_ms, revoked_at_ms): InfoRow) -> ExecutorKeyInfo {
                ExecutorKeyInfo { key_id, app, created_by, created_at_ms, revoked_at_ms }
            }

            async fn key_info<'e>(
                executor: impl sqlx::Executor<'e, Database = $db>,
                key_id: &str,
                operation: &'static str,
            ) -> Result<Option<ExecutorKeyInfo>, StoreError> {
                let row: Option<InfoRow> = sqlx::query_as(&backend_sql(&format!(
                    "SELECT {INFO_COLUMNS} FROM executor_keys WHERE key_id = $1"
                )))
                .bind(key_id)
                .fetch_optional(executor)
                .await
                .map_err(StoreError::query(operation))?;
                Ok(row.map(info))
            }

            #[async_trait::async_trait]
            impl ExecutorKeys for $store {
                async fn add_executor_key(
                    &self,
                    key: &NewExecutorKey,
                    now_ms: i64,
                ) -> Result<ExecutorKeyInfo, StoreError> {
                    sqlx::query(&backend_sql(
                        "INSERT INTO executor_keys (key_id, app, secret, created_by, created_at_ms) \
                         VALUES ($1, $2, $3, $4, $5)",
                    ))
                    .bind(&key.key_id)
                    .bind(&key.app)
                    .bind(key.secret.expose_secret())
                    .bind(&key.created_by)
                    .bind(now_ms)
                    .execute(&self.pool)
                    .await
                    .map_err(StoreError::query("add an executor key"))?;
                    Ok(ExecutorKeyInfo {
                        key_id: key.key_id.clone(),
                        app: key.app.clone(),
                        created_by: key.created_by.clone(),
                        created_at_ms: now_ms,
                        revoked_at_ms: None,
                    })
                }

                async fn list_executor_keys(
                    &self,
                    app: Option<&str>,
                ) -> Result<Vec<ExecutorKeyInfo>, StoreError> {
                    let rows: Vec<InfoRow> = sqlx::query_as(&backend_sql(&format!(
                        "SELECT {INFO_COLUMNS} FROM executor_keys WHERE ($1 IS NULL OR app = $2) \
                         ORDER BY id DESC"
                    )))
                    .bind(app)
                    .bind(app)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(StoreError::query("list executor keys"))?;
                    Ok(rows.into_iter().map(info).collect())
                }

                async fn active_executor_keys(&self) -> Result<Vec<StoredExecutorKey>, StoreError> {
                    let rows: Vec<(String, String, String)> = sqlx::query_as(&backend_sql(
                        "SELECT key_id, app, secret FROM executor_keys WHERE revoked_at_ms IS NULL",
                    ))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(StoreError::query("read the executor keys"))?;
                    Ok(rows
                        .into_iter()
                        .map(|(key_id, app, secret)| StoredExecutorKey {
                            key_id,
                            app,
                            secret: SecretString::from(secret),
                        })
                        .collect())
                }

                async fn revoke_executor_key(
                    &self,
                    key_id: &str,
                    now_ms: i64,
                ) -> Result<Option<ExecutorKeyInfo>, StoreError> {
                    const OPERATION: &str = "revoke an executor key";
                    sqlx::query(&backend_sql(
                        "UPDATE executor_keys SET revoked_at_ms = $1 \
                         WHERE key_id = $2 AND revoked_at_ms IS NULL",
                    ))
                    .bind(now_ms)
                    .bind(key_id)
                    .execute(&self.pool)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    key_info(&self.pool, key_id, OPERATION).await
                }
            }
        }
    };
}

pub(crate) use impl_sql_executor_keys;
