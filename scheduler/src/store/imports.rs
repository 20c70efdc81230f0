//! The half of the store that imports from other schedulers use: [`Imports`], which every
//! [`Store`](super::Store) also implements (table `imported_ids`, and the apps, jobs, script
//! versions, users, grants and reset tokens an import writes). What an import maps and why is
//! told in [`crate::operations::import`].
//!
//! An import is written in one transaction ([`Imports::write_import`]): either everything the
//! plan creates exists afterwards, with a row in `imported_ids` for each, or nothing does.
//! The undo works entity by entity instead (through [`Console::remove_job`](super::Console)
//! for jobs, so that a job goes with its runs exactly as a `DELETE /api/jobs/{id}` takes it,
//! and [`Accounts::change_user`](super::Accounts::change_user) for users, so that a user goes
//! as a `DELETE /api/users/{name}` takes one, under the same guards), forgetting each row as
//! it goes: an undo that stops half-way is finished by running it again.

use kadence_schemas::{AppName, JobId};

use super::StoreError;
use crate::domain::enums::string_enum;
use crate::domain::model::{Access, App, GlueVersion, JobStatus, NewJob, Role};

string_enum!(
    /// What kind of source entity an `imported_ids` row maps.
    ImportedKind, "imported kind", {
        /// An executor group, made an app (`kadence_id` is the app's name).
        App => "APP",
        /// A job (`kadence_id` is the job's id).
        Job => "JOB",
        /// A user (`kadence_id` is the user's id).
        User => "USER",
    }
);

/// One row of `imported_ids`: a source entity and what the import made of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedId {
    /// Group, job or user.
    pub kind: ImportedKind,
    /// Its id in the source.
    pub source_id: i64,
    /// The app name, job id or user id in Kadence.
    pub kadence_id: String,
    /// A digest of the source row as it was imported (see `crate::operations::import`).
    pub fingerprint: String,
    /// When, ms.
    pub imported_at_ms: i64,
}

/// Everything one import creates, written in one transaction.
#[derive(Debug, Clone, Default)]
pub struct ImportWrite {
    /// The source's name (e.g. `xxl-job:db.example:3306/xxl_job`): `imported_ids` is keyed by it.
    pub source: String,
    /// Apps to create (their trigger topics exist already).
    pub apps: Vec<ImportedApp>,
    /// Jobs to create.
    pub jobs: Vec<ImportedJob>,
    /// Users to create, without a password, each with a reset token.
    pub users: Vec<ImportedUser>,
}

/// An app an import creates.
#[derive(Debug, Clone)]
pub struct ImportedApp {
    /// The source group's id.
    pub source_id: i64,
    /// Digest of the source row.
    pub fingerprint: String,
    /// The app.
    pub app: App,
}

/// A job an import creates.
#[derive(Debug, Clone)]
pub struct ImportedJob {
    /// The source job's id.
    pub source_id: i64,
    /// Digest of the source row.
    pub fingerprint: String,
    /// The definition; its `child_job_ids` hold the children that exist in Kadence already
    /// (imported by an earlier run).
    pub spec: NewJob,
    /// Children created by this same write, by source id: their Kadence ids are added to
    /// `child_job_ids` once every job of the write has its id.
    pub child_sources: Vec<i64>,
    /// RUNNING only when the import keeps the source's state.
    pub status: JobStatus,
    /// The first fire, for a RUNNING job.
    pub next_fire_ms: Option<i64>,
    /// Script versions to keep, oldest first (the newest is the job's current script).
    pub glue_versions: Vec<GlueVersion>,
    /// When the script last changed, ms.
    pub glue_updated_at_ms: Option<i64>,
}

/// A user an import creates: no password (no hash matches), a one-time reset token.
#[derive(Debug, Clone)]
pub struct ImportedUser {
    /// The source user's id.
    pub source_id: i64,
    /// Digest of the source row (never its password).
    pub fingerprint: String,
    /// Login name.
    pub name: String,
    /// Admin or member.
    pub role: Role,
    /// A member's grants, on apps that exist once the write's apps are created.
    pub grants: Vec<(AppName, Access)>,
    /// The reset token the user sets a password with.
    pub reset: NewResetToken,
}

/// A password reset token to record; only its hash is stored.
#[derive(Debug, Clone)]
pub struct NewResetToken {
    /// SHA-256 of the token, hex.
    pub token_hash: String,
    /// Not accepted from this instant, ms.
    pub expires_at_ms: i64,
    /// Who issued it: the admin's name.
    pub issued_by: String,
}

/// The ids an import's write gave out, by source id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportIds {
    /// Jobs: (source id, Kadence id).
    pub jobs: Vec<(i64, JobId)>,
    /// Users: (source id, Kadence user id).
    pub users: Vec<(i64, i64)>,
}

/// What the import feature reads and writes.
#[async_trait::async_trait]
pub trait Imports: Send + Sync {
    /// Every `imported_ids` row of `source`.
    async fn imported_ids(&self, source: &str) -> Result<Vec<ImportedId>, StoreError>;

    /// Creates everything `write` holds and records each in `imported_ids`, in one
    /// transaction. [`StoreError::AppExists`] / [`StoreError::UserExists`] when a name was
    /// taken since the plan was made (nothing is written then).
    async fn write_import(&self, write: &ImportWrite, now_ms: i64)
    -> Result<ImportIds, StoreError>;

    /// Forgets one `imported_ids` row (after the undo removed its entity).
    async fn forget_imported(
        &self,
        source: &str,
        kind: ImportedKind,
        source_id: i64,
    ) -> Result<(), StoreError>;

    /// Deletes app `name` and the grants on it, unless a job is in it; false if a job is (or
    /// the app is gone). Its trigger topic is left to the operator.
    async fn remove_app_without_jobs(&self, name: &AppName) -> Result<bool, StoreError>;
}
