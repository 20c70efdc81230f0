//! The pure mapping of an XXL-JOB snapshot onto Kadence: [`plan`] says, for every group, job
//! and user, what the import creates, skips (imported before), reuses (an app of that name
//! exists) or refuses and why, and lists every difference in behaviour it knows of. It reads
//! nothing and writes nothing: the API gives it what Kadence has ([`Known`]) and the job
//! API's checks ([`Validate`]), and writes the plan in one transaction.

use std::collections::{HashMap, HashSet};

use chrono_tz::Tz;
use kadence_schemas::{AppName, GlueType, JobId};

use super::chains::refuse_broken_chains;
use super::general::general_differences;
use super::groups::plan_groups;
use super::jobs::{JobDraft, TargetApp, child_ids, draft_job, local_time_ms};
use super::report::{Action, Difference, MappingRow, SourceKind};
use super::snapshot::{ImportOptions, XxlJob, XxlSnapshot, fingerprint};
use super::users::plan_users;
use crate::model::{Access, App, GlueVersion, NewJob, Role};
use crate::store::{ImportedId, ImportedKind};

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
}

/// The job API's checks of a definition: the job it describes, or why it is refused.
pub type Validate<'a> = &'a dyn Fn(&JobDraft) -> Result<NewJob, String>;

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

/// Maps `snapshot` onto what Kadence has: see the module docs.
pub fn plan(
    snapshot: &XxlSnapshot,
    options: &ImportOptions,
    zone: Tz,
    known: &Known,
    validate: Validate<'_>,
) -> Plan {
    let imported: HashMap<(ImportedKind, i64), &ImportedId> = known
        .imported
        .iter()
        .map(|row| ((row.kind, row.source_id), row))
        .collect();
    let mut plan = Plan {
        differences: general_differences(snapshot, options, zone),
        ..Plan::default()
    };
    let groups = plan_groups(&mut plan, snapshot, options, known, &imported);
    plan_jobs(
        &mut plan,
        (snapshot, options, zone),
        &groups,
        &imported,
        validate,
    );
    plan_users(&mut plan, snapshot, options, known, &groups, &imported);
    plan
}

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

fn plan_jobs(
    plan: &mut Plan,
    (snapshot, options, zone): (&XxlSnapshot, &ImportOptions, Tz),
    groups: &HashMap<i64, GroupApp>,
    imported: &HashMap<(ImportedKind, i64), &ImportedId>,
    validate: Validate<'_>,
) {
    let mut sorted: Vec<&XxlJob> = snapshot.jobs.iter().collect();
    sorted.sort_by_key(|job| job.id);
    let in_snapshot: HashSet<i64> = sorted.iter().map(|job| job.id).collect();
    let mut existing: HashMap<i64, JobId> = HashMap::new();
    let mut refusals: HashMap<i64, String> = HashMap::new();
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    for job in sorted {
        let print = fingerprint(job);
        if let Some(earlier) = imported.get(&(ImportedKind::Job, job.id)) {
            if let Ok(id) = earlier.kadence_id.parse::<JobId>() {
                existing.insert(job.id, id);
            }
            let key = (SourceKind::Job, job.id, job.job_desc.as_str());
            already_imported(
                plan,
                key,
                earlier,
                &print,
                format!("job {}", earlier.kadence_id),
            );
            continue;
        }
        match candidate(job, print, zone, groups, validate) {
            Ok(found) => candidates.push(found),
            Err(reason) => {
                refusals.insert(job.id, reason);
            }
        }
    }
    refuse_broken_chains(&mut candidates, &mut refusals, &in_snapshot, &existing);
    for (id, reason) in &refusals {
        let name = snapshot.jobs.iter().find(|job| job.id == *id);
        let name = name.map(|job| job.job_desc.as_str()).unwrap_or_default();
        plan.rows
            .push(refused(SourceKind::Job, *id, name, reason.clone()));
    }
    for found in candidates {
        let context = (snapshot, options.keep_state, zone);
        let planned = planned_job(plan, found, context, &in_snapshot, &existing);
        plan.jobs.push(planned);
    }
    plan.rows
        .sort_by_key(|row| (row.kind != SourceKind::Group, row.source_id));
}

/// A job's own checks: its group, its settings, the job API's rules, its child list.
fn candidate<'a>(
    job: &'a XxlJob,
    print: String,
    zone: Tz,
    groups: &HashMap<i64, GroupApp>,
    validate: Validate<'_>,
) -> Result<Candidate<'a>, String> {
    let (app, partitions) = match groups.get(&job.job_group) {
        None => {
            return Err(format!(
                "its executor group {} does not exist in XXL-JOB",
                job.job_group
            ));
        }
        Some(Err(reason)) => {
            return Err(format!(
                "its executor group {} is refused: {reason}",
                job.job_group
            ));
        }
        Some(Ok(app)) => app,
    };
    let target = TargetApp {
        name: app.as_str(),
        partitions: *partitions,
    };
    let (draft, notes) = draft_job(job, &target, zone)?;
    let spec = validate(&draft).map_err(|error| format!("Kadence refuses it: {error}"))?;
    let children = child_ids(job.child_jobid.as_deref())?;
    Ok(Candidate {
        job,
        print,
        spec,
        children,
        notes,
    })
}

fn planned_job(
    plan: &mut Plan,
    found: Candidate<'_>,
    (snapshot, keep_state, zone): (&XxlSnapshot, bool, Tz),
    in_snapshot: &HashSet<i64>,
    existing: &HashMap<i64, JobId>,
) -> PlannedJob {
    let job = found.job;
    let mut notes = found.notes;
    let mut children = Vec::new();
    for child in found.children {
        if let Some(id) = existing.get(&child) {
            children.push(ChildRef::Existing(*id));
        } else if in_snapshot.contains(&child) {
            children.push(ChildRef::Planned(child));
        } else {
            notes.push(format!(
                "child job {child} does not exist in XXL-JOB (it cannot fire there either): left out"
            ));
        }
    }
    let runs = job.trigger_status == 1;
    let start = runs && keep_state && found.spec.schedule != crate::schedule::ScheduleSpec::None;
    notes.extend(state_note(runs, start, keep_state));
    let (glue_versions, glue_updated_at_ms) =
        glue_history(job, &found.spec, snapshot, zone, &mut notes);
    let kadence = Some("new job".to_owned());
    plan.rows.push(row(
        SourceKind::Job,
        job.id,
        &job.job_desc,
        Action::Create,
        kadence,
    ));
    for note in notes {
        plan.differences
            .push(Difference::of(SourceKind::Job, job.id, note));
    }
    PlannedJob {
        source_id: job.id,
        fingerprint: found.print,
        spec: found.spec,
        children,
        start,
        glue_versions,
        glue_updated_at_ms,
    }
}

fn state_note(runs: bool, start: bool, keep_state: bool) -> Option<String> {
    match (runs, keep_state, start) {
        (false, _, _) => None,
        (true, true, true) => Some(
            "RUNNING in XXL-JOB: started in Kadence too (--keep-state); stop it in XXL-JOB, or \
             both will fire it"
                .to_owned(),
        ),
        (true, true, false) => Some(
            "RUNNING in XXL-JOB with schedule type NONE: Kadence cannot start a job that never \
             fires on its own; imported STOPPED"
                .to_owned(),
        ),
        (true, false, _) => Some(
            "RUNNING in XXL-JOB: imported STOPPED; start it (kadence job start ID) once XXL-JOB \
             no longer fires it"
                .to_owned(),
        ),
    }
}

/// The job's script versions, oldest first: the newest [`GLUE_VERSIONS_KEPT`] of
/// `xxl_job_logglue`, ending with the current script.
fn glue_history(
    job: &XxlJob,
    spec: &NewJob,
    snapshot: &XxlSnapshot,
    zone: Tz,
    notes: &mut Vec<String>,
) -> (Vec<GlueVersion>, Option<i64>) {
    let updated_at = local_time_ms(job.glue_updatetime.as_deref(), zone);
    let mut rows: Vec<_> = snapshot
        .glue_versions
        .iter()
        .filter(|row| row.job_id == job.id)
        .collect();
    rows.sort_by_key(|row| std::cmp::Reverse(row.id));
    rows.truncate(GLUE_VERSIONS_KEPT);
    let total = usize::try_from(job.glue_versions_total)
        .unwrap_or_default()
        .max(rows.len());
    let mut versions = Vec::new();
    for row in rows.into_iter().rev() {
        let glue_type = row
            .glue_type
            .as_deref()
            .unwrap_or(spec.glue.glue_type.as_str());
        let Ok(glue_type) = glue_type.parse::<GlueType>() else {
            notes.push(format!(
                "script version {} is of type {glue_type}, which Kadence cannot run: not imported",
                row.id
            ));
            continue;
        };
        versions.push(GlueVersion {
            glue_type,
            source: row.glue_source.clone().unwrap_or_default(),
            remark: row.glue_remark.clone(),
            created_at_ms: local_time_ms(row.add_time.as_deref(), zone)
                .or(updated_at)
                .unwrap_or(0),
        });
    }
    if let Some(current) = &spec.glue.source {
        let newest_is_current = versions
            .last()
            .is_some_and(|last| &last.source == current && last.glue_type == spec.glue.glue_type);
        if !newest_is_current {
            versions.push(GlueVersion {
                glue_type: spec.glue.glue_type,
                source: current.clone(),
                remark: spec.glue.remark.clone(),
                created_at_ms: updated_at.unwrap_or(0),
            });
        }
    }
    if versions.len() > GLUE_VERSIONS_KEPT {
        versions.remove(0);
    }
    if total > GLUE_VERSIONS_KEPT {
        notes.push(format!(
            "{total} script versions in XXL-JOB: the newest {GLUE_VERSIONS_KEPT} are imported \
             (Kadence keeps {GLUE_VERSIONS_KEPT}, as XXL-JOB does)"
        ));
    }
    (versions, updated_at)
}
