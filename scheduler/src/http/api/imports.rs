//! Imports from XXL-JOB (admin only; see `crate::operations::import` for what is mapped and why):
//!
//! - `POST /api/imports/xxl-job` (`{source, snapshot, options, dry_run}`): maps the snapshot
//!   the CLI read, checks every job with the job API's own rules, and — unless `dry_run` —
//!   creates the trigger topics of the new apps, then writes apps, jobs, script versions,
//!   users, grants and reset tokens in one transaction. The answer is the report: the mapping
//!   table, the differences, the reset tokens (shown only here).
//! - `POST /api/imports/xxl-job/undo` (`{source, dry_run}`): removes what the import of
//!   `source` created (see [`super::import_undo`]).
//!
//! A snapshot carries every job with up to 30 script versions each (a script is at most
//! 256 KiB), so these routes take bodies up to [`IMPORT_BODY_LIMIT_BYTES`] (64 MiB) rather
//! than the API's 512 KiB: large enough for thousands of jobs with their histories, while a
//! bigger installation is rare and would be imported app by app anyway. What such a body may
//! cost the node is bounded:
//!
//! - Only an admin can send one: the role is checked in front of the handler
//!   (`caller::admins_only`), so a member's import is refused before its body is read.
//! - At most `api.max_concurrent_imports` (2) are under way at once; one more is 503, before
//!   its body is read (`limits`).
//! - The body is parsed straight into [`XxlImportRequest`] ([`LargeJson`]), not through a
//!   `serde_json::Value` tree, which takes many times the body whatever it holds (a 60 MB
//!   list of numbers in an unknown field took a node from 115 MB to 1.4 GB before it was
//!   refused; now to 230 MB): reading and parsing hold about twice the body. The snapshot is
//!   dropped once the plan is made. Planning costs most for many small jobs, each with its
//!   row in the report: a 60 MB dry run of 140 000 jobs peaked about 420 MB above the idle
//!   node (debug build), some seven times its body; so two imports at once stay under 1 GB.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::audit::AuditNote;
use super::body::LargeJson;
use super::caller::Caller;
use super::error::{ApiError, ErrorBody};
use super::password_resets::{check_hours, new_reset_token};
use super::{ApiState, MAX_PARTITIONS, bad_request};
use crate::domain::model::limits::{IMPORT_SOURCE, TIME_ZONE};
use crate::domain::model::{App, JobStatus};
use crate::domain::schedule::parse_time_zone;
use crate::engine::kafka::TopicError;
use crate::operations::import::{
    Action, ChildRef, ImportOptions, ImportReport, IssuedResetToken, Known, Plan, SourceKind,
    XxlSnapshot, plan,
};
use crate::store::{ImportWrite, ImportedApp, ImportedJob, ImportedUser};

/// Largest body of an import request (see the module docs).
pub const IMPORT_BODY_LIMIT_BYTES: usize = 64 * 1024 * 1024;

/// Body of `POST /api/imports/xxl-job`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct XxlImportRequest {
    /// The source's name (the CLI derives it from the URL: `xxl-job:host:port/database`),
    /// 1 to 200 characters; a second import of the same source skips what the first created.
    #[schema(min_length = 1, max_length = 200)]
    pub source: String,
    /// The rows read from XXL-JOB.
    pub snapshot: XxlSnapshot,
    /// How to map what cannot be taken over as it is.
    #[serde(default)]
    pub options: ImportOptions,
    /// Answer the report and write nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// Imports an XXL-JOB snapshot's apps, jobs and users, or reports what it would (admin).
///
/// Admin only, checked before the body (up to 64 MiB) is read; at most
/// `api.max_concurrent_imports` imports run at once (503 beyond). `kadence import xxl-job`
/// reads XXL-JOB's tables and sends them here; XXL-JOB's database is never written. Every
/// job is checked with the job API's own rules. Unless `dry_run`, the new apps' trigger
/// topics are created, then apps, jobs (STOPPED unless `options.keep_state`), script
/// versions, users, grants and reset tokens are written in one transaction.
///
/// The answer is the report: each row created, reused, skipped or refused and why, every
/// difference in behaviour from XXL-JOB, and the reset tokens of the users created, shown
/// only here. A second import of the same `source` creates only what is new; it never
/// overwrites what a first one created.
#[utoipa::path(
    post, path = "/api/imports/xxl-job", tag = "imports", request_body = XxlImportRequest,
    responses(
        (status = 200, description = "The report: what was (or, in a dry run, would be) created, skipped, reused or refused and why, every difference in behaviour, the reset tokens of the users created", body = ImportReport),
        (status = 409, description = "An app or user of the plan was created meanwhile, or an app's trigger topic exists with another partition count", body = ErrorBody),
        (status = 413, description = "The body is over 64 MiB", body = ErrorBody),
        (status = 503, description = "The node is busy: another import is under way, or too many requests at once; retry after Retry-After seconds", body = ErrorBody),
    ),
)]
pub(super) async fn import_xxl_job(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    LargeJson(request): LargeJson<XxlImportRequest>,
) -> Result<(AuditNote, Json<ImportReport>), ApiError> {
    caller.require_admin()?;
    let source = check_source(&request.source)?;
    let options = &request.options;
    let zone = check_options(options)?;
    check_unique_ids(&request.snapshot)?;
    let now = state.clock.now_ms();
    let known = Known {
        now_ms: now,
        imported: state.store.imported_ids(&source).await?,
        apps: state.store.list_apps().await?,
        users: state
            .store
            .list_users()
            .await?
            .into_iter()
            .map(|user| user.name)
            .collect(),
    };
    let plan = plan(&request.snapshot, options, zone, &known);
    // The plan holds what it takes from the snapshot: no need to keep both.
    drop(request.snapshot);
    let mut report = ImportReport {
        source: source.clone(),
        dry_run: request.dry_run,
        rows: plan.rows.clone(),
        differences: plan.differences.clone(),
        reset_tokens: Vec::new(),
    };
    if !request.dry_run {
        report.reset_tokens = write(&state, &caller, &source, plan, options, &mut report).await?;
    }
    let note = AuditNote::default().with(serde_json::json!({
        "source": source,
        "dry_run": request.dry_run,
        "created": report.count(Action::Create),
        "skipped": report.count(Action::Skip),
        "refused": report.count(Action::Refuse),
    }));
    Ok((note, Json(report)))
}

fn check_source(source: &str) -> Result<String, ApiError> {
    let source = source.trim();
    if source.is_empty() {
        return Err(ApiError::at("source")(bad_request(
            "source must name the XXL-JOB database (xxl-job:host:port/database)",
        )));
    }
    IMPORT_SOURCE.check(source)?;
    Ok(source.to_owned())
}

/// Each group, job, script version and user once: ids are what `imported_ids` keys on.
fn check_unique_ids(snapshot: &XxlSnapshot) -> Result<(), ApiError> {
    let lists: [(&str, Vec<i64>); 4] = [
        (
            "group",
            snapshot.groups.iter().map(|group| group.id).collect(),
        ),
        ("job", snapshot.jobs.iter().map(|job| job.id).collect()),
        (
            "script version",
            snapshot
                .glue_versions
                .iter()
                .map(|version| version.id)
                .collect(),
        ),
        ("user", snapshot.users.iter().map(|user| user.id).collect()),
    ];
    for (what, ids) in lists {
        let mut seen = std::collections::HashSet::new();
        if let Some(twice) = ids.into_iter().find(|id| !seen.insert(*id)) {
            return Err(ApiError::at("snapshot")(bad_request(format!(
                "the snapshot lists {what} {twice} twice: ids are unique in XXL-JOB's tables"
            ))));
        }
    }
    Ok(())
}

fn check_options(options: &ImportOptions) -> Result<chrono_tz::Tz, ApiError> {
    if !(1..=MAX_PARTITIONS).contains(&options.partitions) {
        return Err(ApiError::at("partitions")(bad_request(format!(
            "partitions must be between 1 and {MAX_PARTITIONS}, not {}",
            options.partitions
        ))));
    }
    check_hours(options.reset_token_hours).map_err(ApiError::at("reset_token_hours"))?;
    TIME_ZONE.check(&options.time_zone)?;
    parse_time_zone(&options.time_zone)
        .map_err(bad_request)
        .map_err(ApiError::at("time_zone"))
}

/// Creates the new apps' topics, then writes the plan in one transaction; fills the new
/// jobs' ids into `report` and returns the reset tokens.
async fn write(
    state: &ApiState,
    caller: &Caller,
    source: &str,
    plan: Plan,
    options: &ImportOptions,
    report: &mut ImportReport,
) -> Result<Vec<IssuedResetToken>, ApiError> {
    let now = state.clock.now_ms();
    // Topics first, as `POST /api/apps` does: an app must never exist without its topic.
    for app in &plan.apps {
        state
            .admin
            .ensure_topic(&state.topics.triggers(&app.name), app.partitions, &[])
            .await
            .map_err(|error| match error {
                TopicError::PartitionMismatch { .. } => ApiError::Conflict(error.to_string()),
                TopicError::NotVisible { .. } => ApiError::Unavailable(error.to_string()),
                other => ApiError::Internal(other.into()),
            })?;
    }
    let mut tokens = Vec::new();
    let write = ImportWrite {
        source: source.to_owned(),
        apps: plan.apps.iter().map(|app| imported_app(app, now)).collect(),
        jobs: plan
            .jobs
            .iter()
            .map(|job| imported_job(state, job, now))
            .collect(),
        users: imported_users(&plan, caller, now, options.reset_token_hours, &mut tokens),
    };
    let ids = state
        .store
        .write_import(&write, now)
        .await
        .map_err(|error| match error {
            crate::store::StoreError::AppExists(_) | crate::store::StoreError::UserExists(_) => {
                ApiError::Conflict(format!(
                    "{error}: created since the plan was made; run the import again"
                ))
            }
            other => other.into(),
        })?;
    for app in &plan.apps {
        state.partitions.remember(app.name.clone(), app.partitions);
    }
    if plan.jobs.iter().any(|job| job.start) {
        state.jobs.plan_started_jobs();
    }
    let jobs: HashMap<i64, i64> = ids
        .jobs
        .iter()
        .map(|(source, id)| (*source, id.get()))
        .collect();
    for row in &mut report.rows {
        if row.kind == SourceKind::Job && row.action == Action::Create {
            row.kadence = jobs.get(&row.source_id).map(|id| format!("job {id}"));
        }
    }
    Ok(tokens)
}

/// The users to create, each with a reset token (pushed onto `tokens`, shown once).
fn imported_users(
    plan: &Plan,
    caller: &Caller,
    now_ms: i64,
    hours: u32,
    tokens: &mut Vec<IssuedResetToken>,
) -> Vec<ImportedUser> {
    plan.users
        .iter()
        .map(|user| {
            let (token, reset) = new_reset_token(&caller.user.name, now_ms, hours);
            tokens.push(IssuedResetToken {
                user: user.name.clone(),
                token,
                expires_at_ms: reset.expires_at_ms,
            });
            ImportedUser {
                source_id: user.source_id,
                fingerprint: user.fingerprint.clone(),
                name: user.name.clone(),
                role: user.role,
                grants: user.grants.clone(),
                reset,
            }
        })
        .collect()
}

fn imported_app(app: &crate::operations::import::PlannedApp, now_ms: i64) -> ImportedApp {
    ImportedApp {
        source_id: app.source_id,
        fingerprint: app.fingerprint.clone(),
        app: App {
            name: app.name.clone(),
            title: app.title.clone(),
            partitions: app.partitions,
            created_at_ms: now_ms,
        },
    }
}

fn imported_job(
    state: &ApiState,
    job: &crate::operations::import::PlannedJob,
    now_ms: i64,
) -> ImportedJob {
    let mut spec = job.spec.clone();
    let mut child_sources = Vec::new();
    for child in &job.children {
        match child {
            ChildRef::Existing(id) => spec.child_job_ids.push(*id),
            ChildRef::Planned(source) => child_sources.push(*source),
        }
    }
    // Started as the job API starts a job; without a future fire it stays STOPPED.
    let next_fire_ms = (job.start)
        .then(|| state.jobs.first_fire_when_started(&spec, now_ms))
        .flatten();
    ImportedJob {
        source_id: job.source_id,
        fingerprint: job.fingerprint.clone(),
        status: if next_fire_ms.is_some() {
            JobStatus::Running
        } else {
            JobStatus::Stopped
        },
        next_fire_ms,
        spec,
        child_sources,
        glue_versions: job.glue_versions.clone(),
        glue_updated_at_ms: job.glue_updated_at_ms,
    }
}
