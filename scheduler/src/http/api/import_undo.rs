//! `POST /api/imports/xxl-job/undo` (admin): removes what the imports of a source created,
//! as `imported_ids` lists it, and nothing else.
//!
//! Refused as a whole (409, naming them) while any imported job is RUNNING: stop them first,
//! so that no job is removed while it fires. Then, job by job through
//! [`Console::remove_job`](crate::store::Console::remove_job) (each with its runs, log lines,
//! script versions and report rows, as `DELETE /api/jobs/{id}` removes it), parents before
//! their children; a job that a job the import did not create lists as a child is kept, and
//! said why. Then the apps the import created, unless a job it did not create is in them
//! (their trigger topics stay in Kafka: delete them with your Kafka tools when nothing reads
//! them). Then the users it created, each as `DELETE /api/users/{name}` deletes one (with
//! their grants, tokens and sessions, at once) and under its guards: the last enabled admin
//! and the admin undoing are kept, and said why; the undo's audit entry names each user
//! deleted with their role and status. Each row of `imported_ids` is forgotten once its
//! entity is gone, so an undo cut short, or that kept a user, is finished by running it
//! again (by another admin, or once another admin is enabled). A dry run answers the same
//! table and removes nothing.

use std::collections::HashSet;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use kadence_schemas::{AppName, JobId};
use serde::{Deserialize, Serialize};

use super::MAX_PAGE_SIZE;
use super::audit::AuditNote;
use super::body::ApiJson;
use super::caller::Caller;
use super::error::{ApiError, ErrorBody};
use super::{ApiState, bad_request, users};
use crate::domain::model::{JobStatus, Role, User, UserStatus};
use crate::operations::import::{Action, Difference, ImportReport, MappingRow, SourceKind};
use crate::store::{
    ImportedId, ImportedKind, JobFilter, JobRemoval, PageRequest, StoreError, UserChange,
    UserChangeOutcome, UserStanding,
};

/// Body of `POST /api/imports/xxl-job/undo`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct XxlUndoRequest {
    /// The source whose import to undo (as the import named it).
    pub source: String,
    /// Answer what would be removed and remove nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// Removes what the imports of a source created, or reports what it would (admin).
///
/// Admin only. Only what the imports of `source` created is touched: refused as a whole
/// (409, naming them) while any imported job is RUNNING; then the jobs, each with its runs
/// as `DELETE /api/jobs/{id}` removes it (one that another job names as a child is kept,
/// and said why); then the apps the import created, unless another job is in them (their
/// trigger topics stay in Kafka); then the users, as `DELETE /api/users/{name}` deletes
/// them, keeping the last enabled admin and the caller. Each row is forgotten once removed,
/// so an undo cut short is finished by running it again. 404 when nothing was imported from
/// `source`. A dry run answers the same table and removes nothing.
#[utoipa::path(
    post, path = "/api/imports/xxl-job/undo", tag = "imports", request_body = XxlUndoRequest,
    responses(
        (status = 200, description = "What was (or would be) removed, and what was kept and why (among users: the last enabled admin and the caller themselves)", body = ImportReport),
        (status = 404, description = "Nothing imported from this source", body = ErrorBody),
        (status = 409, description = "Imported jobs are RUNNING: stop them first", body = ErrorBody),
    ),
)]
pub(super) async fn undo_xxl_import(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiJson(request): ApiJson<XxlUndoRequest>,
) -> Result<(AuditNote, Json<ImportReport>), ApiError> {
    caller.require_admin()?;
    let source = request.source.trim().to_owned();
    let imported = state.store.imported_ids(&source).await?;
    if imported.is_empty() {
        return Err(ApiError::NotFound(format!(
            "nothing was imported from {source:?}"
        )));
    }
    let of = |kind| imported.iter().filter(move |row| row.kind == kind);
    let mut jobs = Vec::new();
    for row in of(ImportedKind::Job) {
        let id = row.kadence_id.parse::<JobId>().map_err(bad_request)?;
        jobs.push((row, id, state.store.get_job(id).await?));
    }
    let running: Vec<String> = jobs
        .iter()
        .filter(|(_, _, job)| {
            job.as_ref()
                .is_some_and(|job| job.status == JobStatus::Running)
        })
        .map(|(_, id, _)| id.to_string())
        .collect();
    if !running.is_empty() && !request.dry_run {
        return Err(ApiError::Conflict(format!(
            "imported jobs {} are RUNNING: stop them first (kadence job stop ID), then undo",
            running.join(", ")
        )));
    }
    let mut report = ImportReport {
        source: source.clone(),
        dry_run: request.dry_run,
        rows: Vec::new(),
        differences: Vec::new(),
        reset_tokens: Vec::new(),
    };
    let mut kept_apps = undo_jobs(&state, &source, &jobs, request.dry_run, &mut report).await?;
    if request.dry_run {
        let imported_jobs: HashSet<JobId> = jobs.iter().map(|(_, id, _)| *id).collect();
        for row in of(ImportedKind::App) {
            let app = AppName::parse(&row.kadence_id).map_err(bad_request)?;
            if has_other_jobs(&state, &app, &imported_jobs).await? {
                kept_apps.insert(app);
            }
        }
    }
    undo_apps(
        &state,
        &source,
        of(ImportedKind::App),
        &kept_apps,
        request.dry_run,
        &mut report,
    )
    .await?;
    let users_deleted = undo_users(
        &state,
        &caller,
        &source,
        of(ImportedKind::User),
        request.dry_run,
        &mut report,
    )
    .await?;
    let note = AuditNote::default().with(serde_json::json!({
        "source": source,
        "dry_run": request.dry_run,
        "removed": report.count(Action::Remove),
        "kept": report.count(Action::Keep),
        "users_deleted": users_deleted,
    }));
    Ok((note, Json(report)))
}

/// Whether a job the import did not create is in `app` (a dry run's guess of what the
/// removal of the app will find).
async fn has_other_jobs(
    state: &ApiState,
    app: &AppName,
    imported: &HashSet<JobId>,
) -> Result<bool, ApiError> {
    let filter = JobFilter {
        apps: Some(vec![app.clone()]),
        ..JobFilter::default()
    };
    let mut page = PageRequest::first(MAX_PAGE_SIZE);
    loop {
        let jobs = state.store.list_jobs(&filter, &page).await?;
        if jobs.iter().any(|job| !imported.contains(&job.id)) {
            return Ok(true);
        }
        match jobs.last() {
            Some(last) if jobs.len() == MAX_PAGE_SIZE as usize => page.after = Some(last.id),
            _ => return Ok(false),
        }
    }
}

/// Removes the imported users as `DELETE /api/users/{name}` does, through
/// [`Accounts::change_user`](crate::store::Accounts::change_user): each goes with their
/// grants, tokens and sessions at once, but the last enabled admin and the caller themselves
/// are kept, their rows saying why (and staying in `imported_ids`, so that an undo run again,
/// by another admin or once another is enabled, removes them). A dry run predicts the same
/// from the users as they are. Returns the audit details of each user deleted.
async fn undo_users(
    state: &ApiState,
    caller: &Caller,
    source: &str,
    users: impl Iterator<Item = &ImportedId>,
    dry_run: bool,
    report: &mut ImportReport,
) -> Result<Vec<serde_json::Value>, ApiError> {
    let mut enabled_admins = HashSet::new();
    if dry_run {
        let all = state.store.list_users().await?;
        let admins = all.iter().filter(|user| is_enabled_admin(user));
        enabled_admins.extend(admins.map(|user| user.id));
    }
    let now = state.clock.now_ms();
    let mut deleted = Vec::new();
    for row in users {
        let id = row.kadence_id.parse::<i64>().map_err(bad_request)?;
        let user = state.store.get_user(id).await?;
        let name = user
            .as_ref()
            .map_or_else(|| row.kadence_id.clone(), |user| user.name.clone());
        let outcome = match &user {
            None => UserChangeOutcome::NoSuchUser,
            Some(user) if dry_run => predicted_deletion(user, caller.user.id, &mut enabled_admins),
            Some(_) => {
                let change = state
                    .store
                    .change_user(id, UserChange::Delete, caller.user.id, now);
                change.await?
            }
        };
        let (action, reason) = match outcome {
            UserChangeOutcome::Changed(before) => {
                if !dry_run {
                    deleted.push(serde_json::json!({
                        "user": name, "role": before.role, "status": before.status(),
                    }));
                }
                (Action::Remove, None)
            }
            UserChangeOutcome::NoSuchUser => (Action::Remove, Some("already deleted".to_owned())),
            refused => (
                Action::Keep,
                Some(users::refusal(UserChange::Delete, &name, refused)),
            ),
        };
        if action == Action::Remove && !dry_run {
            state
                .store
                .forget_imported(source, ImportedKind::User, row.source_id)
                .await?;
        }
        let kadence = format!("user {name}");
        report.rows.push(undo_row(
            SourceKind::User,
            row,
            &name,
            action,
            kadence,
            reason,
        ));
    }
    Ok(deleted)
}

fn is_enabled_admin(user: &User) -> bool {
    user.role == Role::Admin && user.status() == UserStatus::Enabled
}

/// What deleting `user` for the admin `by` would do, judged as
/// [`Accounts::change_user`](crate::store::Accounts::change_user) judges it, given the
/// `enabled_admins` left by the deletions predicted before (which it updates).
fn predicted_deletion(
    user: &User,
    by: i64,
    enabled_admins: &mut HashSet<i64>,
) -> UserChangeOutcome {
    let last_admin = enabled_admins.len() == 1 && enabled_admins.contains(&user.id);
    if last_admin {
        return UserChangeOutcome::LastEnabledAdmin;
    }
    if user.id == by {
        return UserChangeOutcome::OwnAccount;
    }
    enabled_admins.remove(&user.id);
    UserChangeOutcome::Changed(UserStanding {
        role: user.role,
        disabled_at_ms: user.disabled_at_ms,
    })
}

fn undo_row(
    kind: SourceKind,
    row: &ImportedId,
    name: &str,
    action: Action,
    kadence: String,
    reason: Option<String>,
) -> MappingRow {
    MappingRow {
        kind,
        source_id: row.source_id,
        source_name: name.to_owned(),
        action,
        kadence: Some(kadence),
        reason,
    }
}

/// An imported job, as the undo found it: its row, its id, the job if it still exists.
type ImportedJobEntry<'a> = (&'a ImportedId, JobId, Option<crate::domain::model::Job>);

/// What the undo does with one job: removed (with a note), kept (with the reason), or tried
/// again after its imported parents.
enum JobUndo {
    Removed(Option<String>),
    Kept(String),
    AfterParents,
}

/// Removes one imported job (or, in a dry run, says whether it would be).
async fn undo_job(
    state: &ApiState,
    (id, job): (JobId, Option<&crate::domain::model::Job>),
    imported: &HashSet<JobId>,
    dry_run: bool,
) -> Result<JobUndo, ApiError> {
    let gone = || JobUndo::Removed(Some("already deleted".to_owned()));
    let Some(job) = job else { return Ok(gone()) };
    if dry_run {
        return Ok(if job.status == JobStatus::Running {
            JobUndo::Kept("RUNNING: stop it first".to_owned())
        } else {
            JobUndo::Removed(None)
        });
    }
    Ok(match state.store.remove_job(id).await {
        Ok(JobRemoval::Removed { .. }) => JobUndo::Removed(None),
        Err(StoreError::JobNotFound(_)) => gone(),
        Err(other) => return Err(other.into()),
        Ok(JobRemoval::Running) => {
            JobUndo::Kept("started meanwhile: stop it, then undo again".to_owned())
        }
        Ok(JobRemoval::ChildOf(parents)) if parents.iter().all(|p| imported.contains(p)) => {
            JobUndo::AfterParents
        }
        Ok(JobRemoval::ChildOf(parents)) => {
            let shown: Vec<String> = parents.iter().map(ToString::to_string).collect();
            JobUndo::Kept(format!(
                "job {} (not imported) lists it as a child",
                shown.join(", ")
            ))
        }
    })
}

/// Removes the imported jobs, parents before their children (a pass removes what it can,
/// the next what that freed); returns the apps of the jobs kept.
async fn undo_jobs(
    state: &ApiState,
    source: &str,
    jobs: &[ImportedJobEntry<'_>],
    dry_run: bool,
    report: &mut ImportReport,
) -> Result<HashSet<AppName>, ApiError> {
    let imported: HashSet<JobId> = jobs.iter().map(|(_, id, _)| *id).collect();
    let mut remaining: Vec<&ImportedJobEntry<'_>> = jobs.iter().collect();
    let mut kept = HashSet::new();
    let mut rows: Vec<MappingRow> = Vec::new();
    while !remaining.is_empty() {
        let mut next = Vec::new();
        for entry @ (row, id, job) in remaining.iter().copied() {
            let name = job.as_ref().map_or("", |job| job.spec.name.as_str());
            let kadence = format!("job {id}");
            let (action, reason) =
                match undo_job(state, (*id, job.as_ref()), &imported, dry_run).await? {
                    JobUndo::AfterParents => {
                        next.push(entry);
                        continue;
                    }
                    JobUndo::Removed(note) => {
                        if !dry_run {
                            state
                                .store
                                .forget_imported(source, ImportedKind::Job, row.source_id)
                                .await?;
                        }
                        (Action::Remove, note)
                    }
                    JobUndo::Kept(reason) => {
                        kept.extend(job.as_ref().map(|job| job.spec.app.clone()));
                        (Action::Keep, Some(reason))
                    }
                };
            rows.push(undo_row(
                SourceKind::Job,
                row,
                name,
                action,
                kadence,
                reason,
            ));
        }
        if next.len() == remaining.len() {
            // No progress: their imported parents are kept, so they are too.
            for (row, id, job) in next {
                kept.extend(job.as_ref().map(|job| job.spec.app.clone()));
                let reason = Some("a job kept lists it as a child".to_owned());
                rows.push(undo_row(
                    SourceKind::Job,
                    row,
                    "",
                    Action::Keep,
                    format!("job {id}"),
                    reason,
                ));
            }
            break;
        }
        remaining = next;
    }
    rows.sort_by_key(|row| row.source_id);
    report.rows.extend(rows);
    Ok(kept)
}

async fn undo_apps(
    state: &ApiState,
    source: &str,
    apps: impl Iterator<Item = &ImportedId>,
    kept_jobs: &HashSet<AppName>,
    dry_run: bool,
    report: &mut ImportReport,
) -> Result<(), ApiError> {
    let mut topics = Vec::new();
    for row in apps {
        let app = AppName::parse(&row.kadence_id).map_err(bad_request)?;
        let kadence = format!("app {app}");
        let removed = if kept_jobs.contains(&app) {
            false
        } else if dry_run {
            true
        } else {
            state.store.remove_app_without_jobs(&app).await?
        };
        if removed {
            if !dry_run {
                state
                    .store
                    .forget_imported(source, ImportedKind::App, row.source_id)
                    .await?;
            }
            topics.push(state.topics.triggers(&app));
            report.rows.push(undo_row(
                SourceKind::Group,
                row,
                app.as_str(),
                Action::Remove,
                kadence,
                None,
            ));
        } else {
            let reason = Some("jobs are still in it (kept, or not imported)".to_owned());
            report.rows.push(undo_row(
                SourceKind::Group,
                row,
                app.as_str(),
                Action::Keep,
                kadence,
                reason,
            ));
        }
    }
    if !topics.is_empty() {
        report.differences.push(Difference::general(format!(
            "the trigger topics of the apps removed stay in Kafka: {}; delete them with your \
             Kafka tools once nothing reads them",
            topics.join(", ")
        )));
    }
    Ok(())
}
