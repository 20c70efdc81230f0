//! The audit trail's entries: one per write through the API.

use kadence_schemas::AppName;
use serde::{Deserialize, Serialize};

/// An entry to record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NewAuditEntry {
    /// When the request was answered, ms since the epoch.
    pub at_ms: i64,
    /// Who made it (none for a failed login).
    pub user_id: Option<i64>,
    /// Their login name (the name tried, for a login).
    pub user_name: String,
    /// The route: method and path template, e.g. `PATCH /api/jobs/{id}`.
    pub action: String,
    /// The path asked for, e.g. `/api/jobs/12`.
    pub target: String,
    /// The app concerned, when the route knows it.
    pub app: Option<AppName>,
    /// The HTTP status answered.
    pub status: u16,
    /// What changed, when the route says (a job edit: the definition before and after).
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
