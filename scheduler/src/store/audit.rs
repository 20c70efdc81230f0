//! The audit trail's half of the store: [`AuditTrail`], which every
//! [`Store`](super::Store) also implements (table `audit_log`).

use kadence_schemas::AppName;

use super::{PageRequest, StoreError};
use crate::domain::model::{AuditEntry, NewAuditEntry};

/// Which entries a listing shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// `None`: every entry; `Some`: only entries of these apps (so none without an app).
    pub apps: Option<Vec<AppName>>,
    /// Only this user's entries.
    pub user_name: Option<String>,
    /// Only entries on this path or below it (e.g. `/api/jobs/12`).
    pub target: Option<String>,
    /// Only entries at or after this instant, ms.
    pub from_ms: Option<i64>,
    /// Only entries before this instant, ms.
    pub to_ms: Option<i64>,
}

/// The record of writes.
#[async_trait::async_trait]
pub trait AuditTrail: Send + Sync {
    /// Records an entry; returns its id.
    async fn record_audit(&self, entry: &NewAuditEntry) -> Result<i64, StoreError>;

    /// Replaces the details of entry `id`: an entry that stands for a flood of refusals
    /// counts the ones that came after it was recorded (see `crate::http::api` `refusals`).
    /// Returns whether the entry exists.
    async fn set_audit_details(
        &self,
        id: i64,
        details: &serde_json::Value,
    ) -> Result<bool, StoreError>;

    /// A page of entries, newest first; the key is the id (the next page is older).
    async fn list_audit(
        &self,
        filter: &AuditFilter,
        page: &PageRequest<i64>,
    ) -> Result<Vec<AuditEntry>, StoreError>;

    /// Deletes up to `limit` entries older than `before_ms`; returns how many.
    async fn delete_old_audit(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError>;
}
