//! The executor keys' half of the store: [`ExecutorKeys`], which every [`Store`](super::Store)
//! also implements (table `executor_keys`).
//!
//! An executor key is a secret an app's executors sign every record they write with, and the
//! scheduler checks (see `kadence_kafka::executor_signing` and [`crate::readers::executor_auth`]). An
//! app may have several active keys (a rotation: add one, move the executors, revoke the old
//! one). A revoked key keeps its row, for the listing and the audit trail, and is never active
//! again. The secret is stored as text (base64url of its 32 bytes) because checking an HMAC
//! needs it; whoever can read this table can sign as any app's executors, so guard database
//! access like the scheduler itself (which keeps its own signing key there too).

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::StoreError;

/// A key to record: made by the caller.
#[derive(Debug, Clone)]
pub struct NewExecutorKey {
    /// Its id (16 hex digits).
    pub key_id: String,
    /// The app whose executors sign with it.
    pub app: String,
    /// The secret, base64url of its 32 bytes. Never logged.
    pub secret: SecretString,
    /// Who made it.
    pub created_by: String,
}

/// An executor key as listed: everything but the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExecutorKeyInfo {
    /// Its id, as the `kadence.executor.key` header names it.
    pub key_id: String,
    /// The app whose executors sign with it.
    pub app: String,
    /// Who made it.
    pub created_by: String,
    /// When it was made, ms since the epoch.
    pub created_at_ms: i64,
    /// When it was revoked (records signed with it are refused from then on), ms; `null`
    /// while active.
    pub revoked_at_ms: Option<i64>,
}

/// An active executor key with its secret, for the nodes that check signatures.
#[derive(Debug, Clone)]
pub struct StoredExecutorKey {
    /// Its id.
    pub key_id: String,
    /// Its app.
    pub app: String,
    /// The secret, base64url of its 32 bytes. Never logged.
    pub secret: SecretString,
}

/// The keys executors sign what they write with.
#[async_trait::async_trait]
pub trait ExecutorKeys: Send + Sync {
    /// Records `key`, made at `now_ms`.
    async fn add_executor_key(
        &self,
        key: &NewExecutorKey,
        now_ms: i64,
    ) -> Result<ExecutorKeyInfo, StoreError>;

    /// The keys of `app` (every app's when `None`), revoked ones included, newest first.
    async fn list_executor_keys(
        &self,
        app: Option<&str>,
    ) -> Result<Vec<ExecutorKeyInfo>, StoreError>;

    /// Every key not revoked, with its secret.
    async fn active_executor_keys(&self) -> Result<Vec<StoredExecutorKey>, StoreError>;

    /// Revokes key `key_id` at `now_ms` (a revoked key stays revoked, at its first time).
    /// The key as it is now, `None` when no key has this id.
    async fn revoke_executor_key(
        &self,
        key_id: &str,
        now_ms: i64,
    ) -> Result<Option<ExecutorKeyInfo>, StoreError>;
}
