//! The [`SigningKeys`](crate::store::SigningKeys) implementation: table `signing_keys`, the
//! same SQL on both backends. Changes of the key set take the `signing_keys` row of
//! `schedule_lock` first (see [`crate::store::SigningKeys`]'s module for why).

/// Implements [`SigningKeys`](crate::store::SigningKeys) for a backend type with a `pool`
/// field.
macro_rules! impl_sql_signing {
    ($store:ty, $db:ty, $dialect:ident) => {
        mod signing {
            use secrecy::{ExposeSecret, SecretString};

            use super::*;
            use $crate::store::{
                NewSigningKey, RetireOutcome, SigningKeyInfo, SigningKeys, StoredSigningKey,
            };

            type KeyRow = (String, String, String, i64, Option<i64>);

            const KEY_COLUMNS: &str =
                "key_id, public_key, private_key, created_at_ms, retired_at_ms";

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
            async fn begin_key_change<'s>(
                store: &'s $store,
                operation: &'static str,
            ) -> Result<sqlx::Transaction<'s, $db>, StoreError> {
                let mut tx = store.begin_write(operation).await?;
                // Writing the row locks it on PostgreSQL until the transaction ends.
                sqlx::query(&backend_sql(
                    "UPDATE schedule_lock SET name = name WHERE name = 'signing_keys'",
                ))
                .execute(&mut *tx)
                .await
                .map_err(StoreError::query(operation))?;
                Ok(tx)
            }

            async fn newest_in<'e>(
                executor: impl sqlx::Executor<'e, Database = $db>,
                operation: &'static str,
            ) -> Result<Option<StoredSigningKey>, StoreError> {
                let row: Option<KeyRow> = sqlx::query_as(&backend_sql(&format!(
                    "SELECT {KEY_COLUMNS} FROM signing_keys WHERE retired_at_ms IS NULL \
                     ORDER BY id DESC LIMIT 1"
                )))
                .fetch_optional(executor)
                .await
                .map_err(StoreError::query(operation))?;
                Ok(row.map(stored))
            }

            async fn insert_in(
                tx: &mut sqlx::Transaction<'_, $db>,
                key: &NewSigningKey,
                now_ms: i64,
                operation: &'static str,
            ) -> Result<(), StoreError> {
                sqlx::query(&backend_sql(
                    "INSERT INTO signing_keys (key_id, public_key, private_key, created_at_ms) \
                     VALUES ($1, $2, $3, $4)",
                ))
                .bind(&key.key_id)
                .bind(&key.public_key)
                .bind(key.private_key.expose_secret())
                .bind(now_ms)
                .execute(&mut **tx)
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
            impl SigningKeys for $store {
                async fn ensure_signing_key(
                    &self,
                    candidate: &NewSigningKey,
                    now_ms: i64,
                ) -> Result<StoredSigningKey, StoreError> {
                    const OPERATION: &str = "create the first signing key";
                    let mut tx = begin_key_change(self, OPERATION).await?;
                    if let Some(existing) = newest_in(&mut *tx, OPERATION).await? {
                        return Ok(existing);
                    }
                    insert_in(&mut tx, candidate, now_ms, OPERATION).await?;
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
                    insert_in(&mut tx, key, now_ms, OPERATION).await?;
                    tx.commit().await.map_err(StoreError::query(OPERATION))?;
                    Ok(info_of(key, now_ms))
                }

                async fn newest_signing_key(&self) -> Result<Option<StoredSigningKey>, StoreError> {
                    newest_in(&self.pool, "read the newest signing key").await
                }

                async fn list_signing_keys(&self) -> Result<Vec<SigningKeyInfo>, StoreError> {
                    let rows: Vec<KeyRow> = sqlx::query_as(&backend_sql(&format!(
                        "SELECT {KEY_COLUMNS} FROM signing_keys ORDER BY id DESC"
                    )))
                    .fetch_all(&self.pool)
                    .await
                    .map_err(StoreError::query("list signing keys"))?;
                    Ok(rows.into_iter().map(|row| stored(row).info).collect())
                }

                async fn retire_signing_key(
                    &self,
                    key_id: &str,
                    now_ms: i64,
                ) -> Result<RetireOutcome, StoreError> {
                    const OPERATION: &str = "retire a signing key";
                    let mut tx = begin_key_change(self, OPERATION).await?;
                    let row: Option<KeyRow> = sqlx::query_as(&backend_sql(&format!(
                        "SELECT {KEY_COLUMNS} FROM signing_keys WHERE key_id = $1"
                    )))
                    .bind(key_id)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    let Some(mut info) = row.map(|row| stored(row).info) else {
                        return Ok(RetireOutcome::NotFound);
                    };
                    if info.retired_at_ms.is_some() {
                        return Ok(RetireOutcome::AlreadyRetired(info));
                    }
                    let (active,): (i64,) = sqlx::query_as(&backend_sql(
                        "SELECT COUNT(*) FROM signing_keys WHERE retired_at_ms IS NULL",
                    ))
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    if active <= 1 {
                        return Ok(RetireOutcome::OnlyActiveKey);
                    }
                    sqlx::query(&backend_sql(
                        "UPDATE signing_keys SET retired_at_ms = $1 WHERE key_id = $2",
                    ))
                    .bind(now_ms)
                    .bind(key_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::query(OPERATION))?;
                    tx.commit().await.map_err(StoreError::query(OPERATION))?;
                    info.retired_at_ms = Some(now_ms);
                    Ok(RetireOutcome::Retired(info))
                }
            }
        }
    };
}
pub(crate) use impl_sql_signing;
