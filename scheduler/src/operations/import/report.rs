//! What an import (or its dry run, or its undo) answers: the mapping table, every
//! difference in behaviour the import knows of, and the reset tokens of the users it created.

use serde::{Deserialize, Serialize};

use crate::domain::enums::string_enum;

string_enum!(
    /// What a source row is.
    SourceKind, "source kind", {
        /// An executor group (`xxl_job_group`): an app.
        Group => "GROUP",
        /// A job (`xxl_job_info`).
        Job => "JOB",
        /// A user (`xxl_job_user`).
        User => "USER",
    }
);

string_enum!(
    /// What the import does (or did) with a source row.
    Action, "import action", {
        /// Created in Kadence.
        Create => "CREATE",
        /// An app of that name exists in Kadence already (not made by an import): its jobs go
        /// into it.
        Reuse => "REUSE",
        /// Imported by an earlier run: nothing is written again.
        Skip => "SKIP",
        /// Not imported: the reason says why.
        Refuse => "REFUSE",
        /// Removed by the undo.
        Remove => "REMOVE",
        /// Kept by the undo: the reason says why.
        Keep => "KEEP",
    }
);

/// One row of the mapping table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MappingRow {
    /// Group, job or user.
    pub kind: SourceKind,
    /// Its id in XXL-JOB.
    pub source_id: i64,
    /// Its name there: the group's AppName, the job's description, the user's name.
    pub source_name: String,
    /// What happens to it.
    pub action: Action,
    /// What it is (or would be) in Kadence: `app NAME`, `job ID` (`new job` in a dry run),
    /// `user NAME`.
    pub kadence: Option<String>,
    /// Why it is refused, skipped, reused or kept.
    pub reason: Option<String>,
}

/// A way Kadence will behave differently from XXL-JOB, for one row or for the whole import.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Difference {
    /// The row concerned; none for the whole import.
    pub kind: Option<SourceKind>,
    /// Its id in XXL-JOB.
    pub source_id: Option<i64>,
    /// What differs, and what to do about it if anything.
    pub note: String,
}

impl Difference {
    /// A difference of the whole import.
    pub fn general(note: impl Into<String>) -> Self {
        Difference {
            kind: None,
            source_id: None,
            note: note.into(),
        }
    }

    /// A difference of one row.
    pub fn of(kind: SourceKind, source_id: i64, note: impl Into<String>) -> Self {
        Difference {
            kind: Some(kind),
            source_id: Some(source_id),
            note: note.into(),
        }
    }
}

/// A reset token handed out for a user the import created: shown once, here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IssuedResetToken {
    /// The user's login name.
    pub user: String,
    /// The token: the user redeems it (console, or `POST /api/auth/password-reset`) to set a
    /// password.
    pub token: String,
    /// It stops working at this instant, ms since the epoch.
    pub expires_at_ms: i64,
}

/// The answer of an import, a dry run or an undo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ImportReport {
    /// The source's name, which `imported_ids` is keyed by.
    pub source: String,
    /// Nothing was written.
    pub dry_run: bool,
    /// Every source row and what happens (or happened) to it.
    pub rows: Vec<MappingRow>,
    /// Every difference in behaviour the import knows of.
    pub differences: Vec<Difference>,
    /// One per user created (empty in a dry run).
    pub reset_tokens: Vec<IssuedResetToken>,
}

impl ImportReport {
    /// How many rows have `action`.
    pub fn count(&self, action: Action) -> usize {
        self.rows.iter().filter(|row| row.action == action).count()
    }
}
