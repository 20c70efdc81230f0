//! The [`PasswordResets`](crate::store::PasswordResets) implementation: table
//! `password_reset_tokens`, the same SQL on both backends.

use super::backend::{SqlBackend, SqlStore};
use super::statement::Statement;
use crate::store::StoreError;

use crate::domain::model::User;
use crate::store::{Accounts, NewResetToken, PasswordResets};

#[async_trait::async_trait]
impl<B: SqlBackend> PasswordResets for SqlStore<B> {
    async fn issue_reset_token(
        &self,
        user_id: i64,
        token: &NewResetToken,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        const OPERATION: &str = "issue a password reset token";
        let mut tx = self.begin_write(OPERATION).await?;
        let exists: Option<(i64,)> = Statement::new("SELECT id FROM users WHERE id = $1")
            .bind(user_id)
            .fetch_optional::<B, _>(&mut tx)
            .await
            .map_err(StoreError::query(OPERATION))?;
        if exists.is_none() {
            return Ok(false);
        }
        // A new token voids the older ones: only the latest one handed out works.
        Statement::new(
            "UPDATE password_reset_tokens SET used_at_ms = $1 \
             WHERE user_id = $2 AND used_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(user_id)
        .execute::<B>(&mut tx)
        .await
        .map_err(StoreError::query(OPERATION))?;
        Statement::new(
            "INSERT INTO password_reset_tokens (user_id, token_hash, issued_by, \
             created_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(user_id)
        .bind(&token.token_hash)
        .bind(&token.issued_by)
        .bind(now_ms)
        .bind(token.expires_at_ms)
        .execute::<B>(&mut tx)
        .await
        .map_err(StoreError::query(OPERATION))?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(true)
    }

    async fn redeem_reset_token(
        &self,
        token_hash: &str,
        password_hash: &str,
        now_ms: i64,
    ) -> Result<Option<User>, StoreError> {
        const OPERATION: &str = "redeem a password reset token";
        let mut tx = self.begin_write(OPERATION).await?;
        // Compare-and-set: of two redemptions at once, one marks it used.
        let claimed = Statement::new(
            "UPDATE password_reset_tokens SET used_at_ms = $1 \
             WHERE token_hash = $2 AND used_at_ms IS NULL AND expires_at_ms > $3",
        )
        .bind(now_ms)
        .bind(token_hash)
        .bind(now_ms)
        .execute::<B>(&mut tx)
        .await
        .map_err(StoreError::query(OPERATION))?;
        if claimed == 0 {
            return Ok(None);
        }
        let (user_id,): (i64,) =
            Statement::new("SELECT user_id FROM password_reset_tokens WHERE token_hash = $1")
                .bind(token_hash)
                .fetch_one::<B, _>(&mut tx)
                .await
                .map_err(StoreError::query(OPERATION))?;
        // Every session of the user ends: none is the redeemer's.
        super::accounts::set_password_in::<B>(
            &mut tx,
            user_id,
            password_hash,
            None,
            now_ms,
            OPERATION,
        )
        .await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        self.get_user(user_id).await
    }
}
