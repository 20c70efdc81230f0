//! The [`SigningKeys`] half: table `signing_keys`, the same SQL on every backend. Changes of
//! the key set take the `signing_keys` row of `schedule_lock` first (see
//! [`crate::store::SigningKeys`]'s module for why).

use secrecy::{ExposeSecret, SecretString};
use sqlx::Transaction;

use super::backend::{SqlBackend, SqlStore};
use super::statement::{IntoSqlValue as _, Statement};
use crate::store::{
    NewSigningKey, RetireOutcome, SigningKeyInfo, SigningKeys, StoreError, StoredSigningKey,
};

/// A row of `signing_keys`, in [`KEY_COLUMNS`] order.
type KeyRow = (String, String, String, i64, Option<i64>);

const KEY_COLUMNS: &str = "key_id, public_key, private_key, created_at_ms, retired_at_ms";

fn stored(row: KeyRow) -> StoredSigningKey {
    let (key_id, public_key, private_key, created_at_ms, retired_at_ms) = row;
    StoredSigningKey {
        info: SigningKeyInfo {
            key_id,
            public_key,
            created_at_ms,
            retired_at_ms,
        },
        private_key: SecretString::from(private_key),
    }
}

/// A write transaction holding the key-set lock until it ends.
async fn begin_key_change<B: SqlBackend>(
    store: &SqlStore<B>,
    operation: &'static str,
) -> Result<Transaction<'static, B>, StoreError> {
    let mut tx = store.begin_write(operation).await?;
    // Writing the row locks it on PostgreSQL until the transaction ends.
    (Statement::new("UPDATE schedule_lock SET name = name WHERE name = 'signing_keys'")
        .execute::<B>(&mut tx))
    .await
    .map_err(StoreError::query(operation))?;
    Ok(tx)
}

async fn newest_in<B: SqlBackend>(
    connection: &mut B::Connection,
    operation: &'static str,
) -> Result<Option<StoredSigningKey>, StoreError> {
    let row: Option<KeyRow> = (Statement::new(format!(
        "SELECT {KEY_COLUMNS} FROM signing_keys WHERE retired_at_ms IS NULL \
         ORDER BY id DESC LIMIT 1"
    ))
    .fetch_optional::<B, _>(connection))
    .await
    .map_err(StoreError::query(operation))?;
    Ok(row.map(stored))
}

async fn insert_in<B: SqlBackend>(
    tx: &mut B::Connection,
    key: &NewSigningKey,
    now_ms: i64,
    operation: &'static str,
) -> Result<(), StoreError> {
    (Statement::insert_into(
        "signing_keys",
        [
            ("key_id", key.key_id.as_str().into_sql_value()),
            ("public_key", key.public_key.as_str().into_sql_value()),
            (
                "private_key",
                key.private_key.expose_secret().into_sql_value(),
            ),
            ("created_at_ms", now_ms.into_sql_value()),
        ],
    )
    .execute::<B>(tx))
    .await
    .map_err(StoreError::query(operation))?;
    Ok(())
}

fn info_of(key: &NewSigningKey, now_ms: i64) -> SigningKeyInfo {
    SigningKeyInfo {
        key_id: key.key_id.clone(),
        public_key: key.public_key.clone(),
        created_at_ms: now_ms,
        retired_at_ms: None,
    }
}

#[async_trait::async_trait]
impl<B: SqlBackend> SigningKeys for SqlStore<B> {
    async fn ensure_signing_key(
        &self,
        candidate: &NewSigningKey,
        now_ms: i64,
    ) -> Result<StoredSigningKey, StoreError> {
        const OPERATION: &str = "create the first signing key";
        let mut tx = begin_key_change(self, OPERATION).await?;
        if let Some(existing) = newest_in::<B>(&mut tx, OPERATION).await? {
            return Ok(existing);
        }
        insert_in::<B>(&mut tx, candidate, now_ms, OPERATION).await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(StoredSigningKey {
            info: info_of(candidate, now_ms),
            private_key: candidate.private_key.clone(),
        })
    }

    async fn add_signing_key(
        &self,
        key: &NewSigningKey,
        now_ms: i64,
    ) -> Result<SigningKeyInfo, StoreError> {
        const OPERATION: &str = "add a signing key";
        let mut tx = begin_key_change(self, OPERATION).await?;
        insert_in::<B>(&mut tx, key, now_ms, OPERATION).await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(info_of(key, now_ms))
    }

    async fn newest_signing_key(&self) -> Result<Option<StoredSigningKey>, StoreError> {
        const OPERATION: &str = "read the newest signing key";
        newest_in::<B>(&mut *self.connection(OPERATION).await?, OPERATION).await
    }

    async fn list_signing_keys(&self) -> Result<Vec<SigningKeyInfo>, StoreError> {
        const OPERATION: &str = "list signing keys";
        let rows: Vec<KeyRow> = (Statement::new(format!(
            "SELECT {KEY_COLUMNS} FROM signing_keys ORDER BY id DESC"
        ))
        .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        Ok(rows.into_iter().map(|row| stored(row).info).collect())
    }

    async fn retire_signing_key(
        &self,
        key_id: &str,
        now_ms: i64,
    ) -> Result<RetireOutcome, StoreError> {
        const OPERATION: &str = "retire a signing key";
        let mut tx = begin_key_change(self, OPERATION).await?;
        let row: Option<KeyRow> = (Statement::new(format!(
            "SELECT {KEY_COLUMNS} FROM signing_keys WHERE key_id = $1"
        ))
        .bind(key_id)
        .fetch_optional::<B, _>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        let Some(mut info) = row.map(|row| stored(row).info) else {
            return Ok(RetireOutcome::NotFound);
        };
        if info.retired_at_ms.is_some() {
            return Ok(RetireOutcome::AlreadyRetired(info));
        }
        let (active,): (i64,) =
            (Statement::new("SELECT COUNT(*) FROM signing_keys WHERE retired_at_ms IS NULL")
                .fetch_one::<B, _>(&mut tx))
            .await
            .map_err(StoreError::query(OPERATION))?;
        if active <= 1 {
            return Ok(RetireOutcome::OnlyActiveKey);
        }
        (Statement::new("UPDATE signing_keys SET retired_at_ms = $1 WHERE key_id = $2")
            .bind(now_ms)
            .bind(key_id)
            .execute::<B>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        info.retired_at_ms = Some(now_ms);
        Ok(RetireOutcome::Retired(info))
    }
}
