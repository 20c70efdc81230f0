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
//! them). Then the users it created, with their grants and tokens. Each row of
//! `imported_ids` is forgotten once its entity is gone, so an undo cut short is finished by
//! running it again. A dry run answers the same table and removes nothing.

use std::collections::{HashMap, HashSet};
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
use super::{ApiState, bad_request};
use crate::import::{Action, Difference, ImportReport, MappingRow, SourceKind};
use crate::model::JobStatus;
use crate::store::{ImportedId, ImportedKind, JobFilter, JobRemoval, PageRequest, StoreError};

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

#[utoipa::path(
    post, path = "/api/imports/xxl-job/undo", tag = "imports", request_body = XxlUndoRequest,
    responses(
        (status = 200, description = "What was (or would be) removed, and what was kept and why", body = ImportReport),
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
    for row in of(ImportedKind::User) {
        let id = row.kadence_id.parse::<i64>().map_err(bad_request)?;
        let name = state
            .store
            .get_user(id)
            .await?
            .map_or_else(|| row.kadence_id.clone(), |user| user.name);
        if !request.dry_run {
            state.store.remove_user(id).await?;
            state
                .store
                .forget_imported(&source, ImportedKind::User, row.source_id)
                .await?;
        }
        report.rows.push(undo_row(
            SourceKind::User,
            row,
            &name,
            Action::Remove,
            format!("user {name}"),
            None,
        ));
    }
    let note = AuditNote::default().with(serde_json::json!({
        "source": source,
        "dry_run": request.dry_run,
        "removed": report.count(Action::Remove),
        "kept": report.count(Action::Keep),
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

/// Removes the imported jobs, parents first; returns the apps of the jobs kept.
async fn undo_jobs(
    state: &ApiState,
    source: &str,
    jobs: &[(&ImportedId, JobId, Option<crate::model::Job>)],
    dry_run: bool,
    report: &mut ImportReport,
) -> Result<HashSet<AppName>, ApiError> {
    let imported: HashSet<JobId> = jobs.iter().map(|(_, id, _)| *id).collect();
    let mut remaining: Vec<_> = jobs.iter().collect();
    let mut kept = HashSet::new();
    let mut rows: HashMap<JobId, MappingRow> = HashMap::new();
    loop {
        let mut progress = false;
        let mut next = Vec::new();
        for entry @ (row, id, job) in remaining {
            let name = job.as_ref().map_or("", |job| job.spec.name.as_str());
            let outcome = match (job, dry_run) {
                (None, _) => Ok(Some("already deleted".to_owned())),
                (Some(job), true) if job.status == JobStatus::Running => {
                    Err("RUNNING: stop it first".to_owned())
                }
                (Some(_), true) => Ok(None),
                (Some(_), false) => match state.store.remove_job(*id).await {
                    Ok(JobRemoval::Removed { .. }) => Ok(None),
                    Err(StoreError::JobNotFound(_)) => Ok(Some("already deleted".to_owned())),
                    Ok(JobRemoval::Running) => {
                        Err("started meanwhile: stop it, then undo again".to_owned())
                    }
                    Ok(JobRemoval::ChildOf(parents))
                        if parents.iter().all(|parent| imported.contains(parent)) =>
                    {
                        next.push(entry); // its imported parents go first
                        continue;
                    }
                    Ok(JobRemoval::ChildOf(parents)) => {
                        let shown: Vec<String> = parents.iter().map(ToString::to_string).collect();
                        Err(format!(
                            "job {} (not imported) lists it as a child",
                            shown.join(", ")
                        ))
                    }
                    Err(other) => return Err(other.into()),
                },
            };
            progress = true;
            let row = match outcome {
                Ok(reason) => {
                    if !dry_run {
                        state
                            .store
                            .forget_imported(source, ImportedKind::Job, row.source_id)
                            .await?;
                    }
                    undo_row(
                        SourceKind::Job,
                        row,
                        name,
                        Action::Remove,
                        format!("job {id}"),
                        reason,
                    )
                }
                Err(reason) => {
                    if let Some(job) = job {
                        kept.insert(job.spec.app.clone());
                    }
                    undo_row(
                        SourceKind::Job,
                        row,
                        name,
                        Action::Keep,
                        format!("job {id}"),
                        Some(reason),
                    )
                }
            };
            rows.insert(*id, row);
        }
        remaining = next;
        if remaining.is_empty() || !progress {
            break;
        }
    }
    for (row, id, job) in remaining {
        // Imported parents that could not go keep these.
        if let Some(job) = job {
            kept.insert(job.spec.app.clone());
        }
        let reason = Some("a job kept lists it as a child".to_owned());
        rows.insert(
            *id,
            undo_row(
                SourceKind::Job,
                row,
                "",
                Action::Keep,
                format!("job {id}"),
                reason,
            ),
        );
    }
    let mut rows: Vec<MappingRow> = rows.into_values().collect();
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
