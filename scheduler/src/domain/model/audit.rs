//! The audit trail's entries: one per write through the API.

use kadence_schemas::AppName;
use serde::{Deserialize, Serialize};

/// An entry to record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NewAuditEntry {
    /// When the request was answered, ms since the epoch.
    pub at_ms: i64,
    /// Who made it (none for a refused login or a write refused for its credentials).
    pub user_id: Option<i64>,
    /// Their login name (the name tried, for a login; empty for a write refused for its
    /// credentials; `*` for refusals of many names or tokens counted together).
    pub user_name: String,
    /// The route: method and path template, e.g. `PATCH /api/jobs/{id}`.
    pub action: String,
    /// The path asked for, e.g. `/api/jobs/12`.
    pub target: String,
    /// The app concerned, when the route knows it.
    pub app: Option<AppName>,
    /// The HTTP status answered.
    pub status: u16,
    /// What changed, when the route says (a job edit: the definition before and after). For
    /// refused attempts, which are recorded a flood at a time: `address`, `reason`, `count`
    /// (the refusals the entry stands for, within a minute of the first), `last_at_ms`, and
    /// `token` (a fingerprint, `sha256:` and 12 hex digits) when a token was presented.
    pub details: Option<serde_json::Value>,
}

/// A recorded entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditEntry {
    /// Its id; newer entries have larger ids.
    pub id: i64,
    /// The entry.
    #[serde(flatten)]
    pub entry: NewAuditEntry,
}
