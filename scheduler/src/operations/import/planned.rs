//! What a plan is made of: the entities to create, the mapping table and differences, and
//! the helpers the parts of the mapping share (`mapping` for jobs, `groups`, `users`,
//! `chains`).

use kadence_schemas::{AppName, JobId};

use super::report::{Action, Difference, MappingRow, SourceKind};
use super::snapshot::XxlJob;
use crate::domain::model::{Access, App, GlueVersion, NewJob, Role};
use crate::store::ImportedId;

/// Script versions kept per job, as XXL-JOB keeps them.
pub const GLUE_VERSIONS_KEPT: usize = 30;

/// What Kadence has already.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// The `imported_ids` rows of this source.
    pub imported: Vec<ImportedId>,
    /// Every app.
    pub apps: Vec<App>,
    /// Every user's name.
    pub users: Vec<String>,
    /// When the import is planned, ms: the next fires its report lists count from it, and the
    /// clock changes it looks at are the following year's.
    pub now_ms: i64,
}

/// An app to create.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedApp {
    /// The group's id.
    pub source_id: i64,
    /// Digest of the group's row.
    pub fingerprint: String,
    /// `app_name`.
    pub name: AppName,
    /// `title`.
    pub title: String,
    /// The import's partition count.
    pub partitions: i32,
}

/// A child of a job to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildRef {
    /// Imported by an earlier run.
    Existing(JobId),
    /// Created by this import: its XXL-JOB id.
    Planned(i64),
}

/// A job to create.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedJob {
    /// The job's id in XXL-JOB.
    pub source_id: i64,
    /// Digest of its row.
    pub fingerprint: String,
    /// The definition, checked; `child_job_ids` empty (see `children`).
    pub spec: NewJob,
    /// Its children.
    pub children: Vec<ChildRef>,
    /// Start it (RUNNING in XXL-JOB, and the import keeps states).
    pub start: bool,
    /// Script versions, oldest first, at most [`GLUE_VERSIONS_KEPT`].
    pub glue_versions: Vec<GlueVersion>,
    /// When its script last changed, ms.
    pub glue_updated_at_ms: Option<i64>,
}

/// A user to create.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedUser {
    /// The user's id in XXL-JOB.
    pub source_id: i64,
    /// Digest of the row (without the password, which is never read).
    pub fingerprint: String,
    /// `username`.
    pub name: String,
    /// `role` 1: admin; 0: member.
    pub role: Role,
    /// A member's grants, one per group of `permission`.
    pub grants: Vec<(AppName, Access)>,
}

/// What an import would do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Apps to create.
    pub apps: Vec<PlannedApp>,
    /// Jobs to create.
    pub jobs: Vec<PlannedJob>,
    /// Users to create.
    pub users: Vec<PlannedUser>,
    /// The mapping table: groups, jobs, users, each by id.
    pub rows: Vec<MappingRow>,
    /// Every difference in behaviour known.
    pub differences: Vec<Difference>,
}

/// The group's app: its name and partition count, or why the group is refused.
pub(super) type GroupApp = Result<(AppName, i32), String>;

/// The row of a source entity imported before, and the difference if it changed since.
pub(super) fn already_imported(
    plan: &mut Plan,
    (kind, source_id, source_name): (SourceKind, i64, &str),
    earlier: &ImportedId,
    fingerprint: &str,
    kadence: String,
) {
    plan.rows.push(MappingRow {
        kind,
        source_id,
        source_name: source_name.to_owned(),
        action: Action::Skip,
        kadence: Some(kadence),
        reason: Some("imported by an earlier run".to_owned()),
    });
    if earlier.fingerprint != fingerprint {
        plan.differences.push(Difference::of(
            kind,
            source_id,
            "changed in XXL-JOB since it was imported; not updated (an import never \
             overwrites what it made: edit it in Kadence, or undo and import again)",
        ));
    }
}

pub(super) fn row(
    kind: SourceKind,
    id: i64,
    name: &str,
    action: Action,
    kadence: Option<String>,
) -> MappingRow {
    MappingRow {
        kind,
        source_id: id,
        source_name: name.to_owned(),
        action,
        kadence,
        reason: None,
    }
}

pub(super) fn refused(kind: SourceKind, id: i64, name: &str, reason: String) -> MappingRow {
    MappingRow {
        reason: Some(reason),
        ..row(kind, id, name, Action::Refuse, None)
    }
}

/// A job that passed its own checks, before its children are resolved.
pub(super) struct Candidate<'a> {
    /// The row.
    pub job: &'a XxlJob,
    /// Its digest.
    pub print: String,
    /// Its definition, checked.
    pub spec: NewJob,
    /// Its children's XXL-JOB ids.
    pub children: Vec<i64>,
    /// Its differences.
    pub notes: Vec<String>,
}
