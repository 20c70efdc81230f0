//! The pure mapping of an XXL-JOB snapshot onto Kadence: [`plan`] says, for every group, job
//! and user, what the import creates, skips (imported before), reuses (an app of that name
//! exists) or refuses and why, and lists every difference in behaviour it knows of. It reads
//! nothing and writes nothing: the API gives it what Kadence has ([`Known`](super::Known)),
//! each job is checked by the job operations' rules
//! ([`checked_definition`](crate::operations::jobs::checked_definition)), and the API writes
//! the plan in one transaction.

use std::collections::{HashMap, HashSet};

use chrono_tz::Tz;
use kadence_schemas::{GlueType, JobId};

use super::chains::refuse_broken_chains;
use super::general::general_differences;
use super::groups::plan_groups;
use super::jobs::{TargetApp, child_ids, draft_job, local_time_ms};
use super::planned::{
    Candidate, ChildRef, GLUE_VERSIONS_KEPT, GroupApp, Known, Plan, PlannedJob, already_imported,
    refused, row,
};
use super::report::{Action, Difference, SourceKind};
use super::schedules::CronImport;
use super::snapshot::{ImportOptions, XxlJob, XxlSnapshot, fingerprint};
use super::users::plan_users;
use crate::domain::model::limits::{CHILD_JOB_IDS, GLUE_REMARK, GLUE_SOURCE};
use crate::domain::model::{GlueVersion, NewJob};
use crate::operations::jobs::checked_definition;
use crate::store::{ImportedId, ImportedKind};

/// Maps `snapshot` onto what Kadence has: see the module docs.
pub fn plan(snapshot: &XxlSnapshot, options: &ImportOptions, zone: Tz, known: &Known) -> Plan {
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
        (snapshot, options, zone, known.now_ms),
        &groups,
        &imported,
    );
    plan_users(&mut plan, snapshot, options, known, &groups, &imported);
    plan
}

fn plan_jobs(
    plan: &mut Plan,
    (snapshot, options, zone, now_ms): (&XxlSnapshot, &ImportOptions, Tz, i64),
    groups: &HashMap<i64, GroupApp>,
    imported: &HashMap<(ImportedKind, i64), &ImportedId>,
) {
    let mut sorted: Vec<&XxlJob> = snapshot.jobs.iter().collect();
    sorted.sort_by_key(|job| job.id);
    let in_snapshot: HashSet<i64> = sorted.iter().map(|job| job.id).collect();
    let mut existing: HashMap<i64, JobId> = HashMap::new();
    let mut refusals: HashMap<i64, String> = HashMap::new();
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    let mut crons = CronImport::new(zone, now_ms);
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
        match candidate(job, print, &mut crons, groups, now_ms) {
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
    crons: &mut CronImport,
    groups: &HashMap<i64, GroupApp>,
    now_ms: i64,
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
    let (request, notes) = draft_job(job, &target, crons)?;
    let spec = checked_definition(request, now_ms)
        .map_err(|error| format!("Kadence refuses it: {error}"))?;
    let children = child_ids(job.child_jobid.as_deref())?;
    CHILD_JOB_IDS
        .check_count(children.len())
        .map_err(|over| format!("Kadence refuses it: {over}"))?;
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
    let start =
        runs && keep_state && found.spec.schedule != crate::domain::schedule::ScheduleSpec::None;
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
        let source = row.glue_source.clone().unwrap_or_default();
        // An old version is history, not what runs: one over a limit is left out, said so,
        // rather than refusing the job or storing it cut.
        let over = GLUE_SOURCE
            .check(&source)
            .and(GLUE_REMARK.check(&row.glue_remark));
        if let Err(over) = over {
            notes.push(format!("script version {} is not imported: {over}", row.id));
            continue;
        }
        versions.push(GlueVersion {
            glue_type,
            source,
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
