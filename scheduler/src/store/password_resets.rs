//! One-time password reset tokens: [`PasswordResets`], which every [`Store`](super::Store)
//! also implements (table `password_reset_tokens`). An imported user has no password until
//! they redeem the token the import gave them; an admin may issue a new one to any user. Only
//! the SHA-256 of a token is kept (as for API tokens, see `crate::operations::auth`); a token works once,
//! and issuing a new one to a user voids the user's earlier unused ones.

use super::{NewResetToken, StoreError};
use crate::domain::model::User;

/// Reset tokens.
#[async_trait::async_trait]
pub trait PasswordResets: Send + Sync {
    /// Records a reset token for user `user_id`, voiding the user's unused ones; false if
    /// the user does not exist.
    async fn issue_reset_token(
        &self,
        user_id: i64,
        token: &NewResetToken,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Redeems the token whose hash is `token_hash` if it is unused and unexpired at
    /// `now_ms`: in one transaction it is marked used, the user's password becomes
    /// `password_hash` and every session of the user is revoked. The user, or `None` when
    /// the token is unknown, used or expired (nothing changes then).
    async fn redeem_reset_token(
        &self,
        token_hash: &str,
        password_hash: &str,
        now_ms: i64,
    ) -> Result<Option<User>, StoreError>;
}
