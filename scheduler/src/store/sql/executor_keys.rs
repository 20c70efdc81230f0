//! The [`ExecutorKeys`] half: table `executor_keys`, the same SQL on every backend.

use secrecy::{ExposeSecret, SecretString};

use super::backend::{SqlBackend, SqlStore};
use super::statement::{IntoSqlValue as _, Statement};
use crate::store::rows::{KEY_INFO_COLUMNS, KeyInfoRow};
use crate::store::{ExecutorKeyInfo, ExecutorKeys, NewExecutorKey, StoreError, StoredExecutorKey};

fn info((key_id, app, created_by, created_at_ms, revoked_at_ms): KeyInfoRow) -> ExecutorKeyInfo {
    ExecutorKeyInfo {
        key_id,
        app,
        created_by,
        created_at_ms,
        revoked_at_ms,
    }
}

#[async_trait::async_trait]
impl<B: SqlBackend> ExecutorKeys for SqlStore<B> {
    async fn add_executor_key(
        &self,
        key: &NewExecutorKey,
        now_ms: i64,
    ) -> Result<ExecutorKeyInfo, StoreError> {
        const OPERATION: &str = "add an executor key";
        (Statement::insert_into(
            "executor_keys",
            [
                ("key_id", key.key_id.as_str().into_sql_value()),
                ("app", key.app.as_str().into_sql_value()),
                ("secret", key.secret.expose_secret().into_sql_value()),
                ("created_by", key.created_by.as_str().into_sql_value()),
                ("created_at_ms", now_ms.into_sql_value()),
            ],
        )
        .execute::<B>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
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
        const OPERATION: &str = "list executor keys";
        let rows: Vec<KeyInfoRow> = (Statement::new(format!(
            "SELECT {KEY_INFO_COLUMNS} FROM executor_keys WHERE ($1 IS NULL OR app = $2) \
             ORDER BY id DESC"
        ))
        .bind(app)
        .bind(app)
        .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        Ok(rows.into_iter().map(info).collect())
    }

    async fn active_executor_keys(&self) -> Result<Vec<StoredExecutorKey>, StoreError> {
        const OPERATION: &str = "read the executor keys";
        let rows: Vec<(String, String, String)> = (Statement::new(
            "SELECT key_id, app, secret FROM executor_keys WHERE revoked_at_ms IS NULL",
        )
        .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
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
        let mut connection = self.connection(OPERATION).await?;
        (Statement::new(
            "UPDATE executor_keys SET revoked_at_ms = $1 \
             WHERE key_id = $2 AND revoked_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(key_id)
        .execute::<B>(&mut connection))
        .await
        .map_err(StoreError::query(OPERATION))?;
        let row: Option<KeyInfoRow> = (Statement::new(format!(
            "SELECT {KEY_INFO_COLUMNS} FROM executor_keys WHERE key_id = $1"
        ))
        .bind(key_id)
        .fetch_optional::<B, _>(&mut connection))
        .await
        .map_err(StoreError::query(OPERATION))?;
        Ok(row.map(info))
    }
}
