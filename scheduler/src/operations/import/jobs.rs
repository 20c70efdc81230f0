//! One XXL-JOB job as a Kadence job definition (a [`NewJobRequest`], what `POST /api/jobs`
//! takes, so that it is checked by the job operations' own rules), with every difference in
//! behaviour known for its settings, or the reason it cannot be imported.

use chrono::{NaiveDateTime, TimeZone};
use chrono_tz::Tz;

use super::schedules::CronImport;
use super::snapshot::XxlJob;
use crate::operations::jobs::NewJobRequest;

/// What a job's mapping needs to know about its group's app.
pub(super) struct TargetApp<'a> {
    /// The app's name.
    pub name: &'a str,
    /// Its partition count (new or existing).
    pub partitions: i32,
}

/// `job` as a definition for `app` and the differences of its settings, or why it cannot be
/// imported. Cron expressions are read by `crons`, in its zone.
pub(super) fn draft_job(
    job: &XxlJob,
    app: &TargetApp<'_>,
    crons: &mut CronImport,
) -> Result<(NewJobRequest, Vec<String>), String> {
    let mut notes = Vec::new();
    let zone = crons.zone();
    let (schedule_type, schedule_conf) = schedule(job, crons, &mut notes)?;
    let route_strategy = route(job.executor_route_strategy.as_deref(), app, &mut notes)?;
    let (glue_type, glue_source) = glue(job, &mut notes)?;
    let handler = match text(&job.executor_handler) {
        handler if !handler.is_empty() => handler,
        _ if glue_type == "BEAN" => {
            return Err("a BEAN job without a handler name: XXL-JOB cannot run it either".into());
        }
        _ => {
            notes.push(format!(
                "a script job without a handler name: its handler is named {glue_type} \
                 (executors run the script, not a handler)"
            ));
            glue_type.clone()
        }
    };
    let request = NewJobRequest {
        app: app.name.to_owned(),
        name: Some(job.job_desc.trim().to_owned()),
        schedule_type: Some(schedule_type),
        schedule_conf: Some(schedule_conf),
        time_zone: Some(zone.name().to_owned()),
        misfire_strategy: Some(misfire(job.misfire_strategy.as_deref(), &mut notes)),
        route_strategy: Some(route_strategy),
        handler,
        params: Some(job.executor_param.clone().unwrap_or_default()),
        block_strategy: Some(block(job.executor_block_strategy.as_deref(), &mut notes)),
        timeout_seconds: Some(u32::try_from(job.executor_timeout.max(0)).unwrap_or(u32::MAX)),
        author: Some(text(&job.author)),
        alarm_emails: Some(
            text(&job.alarm_email)
                .split(',')
                .map(str::trim)
                .filter(|email| !email.is_empty())
                .map(str::to_owned)
                .collect(),
        ),
        alarm_webhook: None,
        retry_count: Some(u32::try_from(job.executor_fail_retry_count.max(0)).unwrap_or(u32::MAX)),
        retry_backoff: None,
        retry_backoff_seconds: None,
        retry_backoff_cap_seconds: None,
        glue_type: Some(glue_type),
        glue_source,
        glue_remark: Some(text(&job.glue_remark)),
        // Children are linked once every job of the snapshot has its id (see `ChildRef`).
        child_job_ids: None,
        child_trigger_mode: None,
        history: None,
        start: false,
    };
    Ok((request, notes))
}

/// A text column, trimmed; empty when NULL.
fn text(value: &Option<String>) -> String {
    value.as_deref().unwrap_or_default().trim().to_owned()
}

fn schedule(
    job: &XxlJob,
    crons: &mut CronImport,
    notes: &mut Vec<String>,
) -> Result<(String, String), String> {
    let kind = text(&job.schedule_type).to_ascii_uppercase();
    let conf = text(&job.schedule_conf);
    match kind.as_str() {
        "CRON" => {
            let imported = crons.import(&conf);
            notes.extend(imported.notes);
            Ok((kind, imported.conf))
        }
        "FIX_RATE" => {
            notes.push(format!(
                "FIX_RATE {conf} s: the first fire is {conf} s after the job is started (plus \
                 the pre-read window, 5 s), then every {conf} s from it to the millisecond; \
                 XXL-JOB rounds each fire up to a whole second"
            ));
            Ok((kind, conf))
        }
        "FIX_DELAY" | "NONE" => Ok((kind, conf)),
        "" => Err("no schedule type".into()),
        other => Err(format!(
            "unknown schedule type {other:?}: Kadence has CRON, FIX_RATE, FIX_DELAY and NONE"
        )),
    }
}

fn misfire(raw: Option<&str>, notes: &mut Vec<String>) -> String {
    let value = raw.unwrap_or_default().trim().to_ascii_uppercase();
    match value.as_str() {
        "DO_NOTHING" | "FIRE_ONCE_NOW" => value,
        "" => "DO_NOTHING".to_owned(),
        other => {
            notes.push(format!(
                "unknown misfire strategy {other:?}: XXL-JOB falls back to DO_NOTHING, and so \
                 does the import"
            ));
            "DO_NOTHING".to_owned()
        }
    }
}

fn block(raw: Option<&str>, notes: &mut Vec<String>) -> String {
    let value = raw.unwrap_or_default().trim().to_ascii_uppercase();
    match value.as_str() {
        "SERIAL_EXECUTION" | "DISCARD_LATER" | "COVER_EARLY" => value,
        "" => "SERIAL_EXECUTION".to_owned(),
        other => {
            notes.push(format!(
                "unknown block strategy {other:?}: XXL-JOB executors run it as \
                 SERIAL_EXECUTION, and so does the import"
            ));
            "SERIAL_EXECUTION".to_owned()
        }
    }
}

/// The route strategy and how its meaning changes when it chooses among partitions.
fn route(
    raw: Option<&str>,
    app: &TargetApp<'_>,
    notes: &mut Vec<String>,
) -> Result<String, String> {
    let value = raw.unwrap_or_default().trim().to_ascii_uppercase();
    let n = app.partitions;
    let note = match value.as_str() {
        "FIRST" => format!(
            "FIRST: partition 0 of the app's {n}, run by whichever executor owns it (XXL-JOB: \
             the first registered address)"
        ),
        "LAST" => format!(
            "LAST: partition {} (the last of {n}), run by whichever executor owns it \
             (XXL-JOB: the last registered address)",
            n - 1
        ),
        "ROUND" | "RANDOM" | "LEAST_FREQUENTLY_USED" | "LEAST_RECENTLY_USED" => format!(
            "{value}: chosen among the app's {n} partitions, not its executors: an executor \
             that owns several partitions gets a share for each"
        ),
        "CONSISTENT_HASH" => format!(
            "CONSISTENT_HASH: XXL-JOB's ring over the app's {n} partitions instead of executor \
             addresses: the job keeps one partition, so one executor while the group's \
             membership is stable"
        ),
        "FAILOVER" => "FAILOVER: the first partition whose owning executor's beat is fresh \
             (XXL-JOB calls each address in turn); a dead executor is noticed after \
             registry.dead_timeout (10 s)"
            .to_owned(),
        "BUSYOVER" => "BUSYOVER: the first partition whose owner reports the job idle in its \
             beats (XXL-JOB asks each executor); busy everywhere, Kadence takes FAILOVER's \
             choice where XXL-JOB fails the trigger"
            .to_owned(),
        "SHARDING_BROADCAST" => format!(
            "SHARDING_BROADCAST: one shard per partition, shard total {n} (the partition \
             count), not the number of executors online; an executor owning several \
             partitions runs several shards, executors beyond {n} get none"
        ),
        "" => {
            return Err(
                "no route strategy: XXL-JOB cannot route its triggers either (each fails)".into(),
            );
        }
        other => {
            return Err(format!(
                "unknown route strategy {other:?}: XXL-JOB cannot route its triggers either"
            ));
        }
    };
    notes.push(note);
    Ok(value)
}

/// The glue type and current script, or why Kadence cannot run it.
fn glue(job: &XxlJob, notes: &mut Vec<String>) -> Result<(String, Option<String>), String> {
    let glue_type = text(&job.glue_type).to_ascii_uppercase();
    let source = job
        .glue_source
        .clone()
        .filter(|source| !source.trim().is_empty());
    match glue_type.as_str() {
        "BEAN" => {
            if source.is_some() {
                notes.push(
                    "a BEAN job's glue_source is not used (by XXL-JOB either): not imported"
                        .to_owned(),
                );
            }
            return Ok((glue_type, None));
        }
        "GLUE_SHELL" | "GLUE_PYTHON" | "GLUE_NODEJS" | "GLUE_PHP" | "GLUE_POWERSHELL" => {}
        "GLUE_GROOVY" => {
            return Err(
                "GLUE_GROOVY (Java source compiled in the executor's JVM): Kadence \
                 executors have no Groovy interpreter; port it to a handler of a Kadence \
                 executor (or a script type) and keep it in XXL-JOB until then"
                    .into(),
            );
        }
        "GLUE_PYTHON2" => {
            return Err(
                "GLUE_PYTHON2: Kadence runs Python scripts with python3 only; port \
                 the script to Python 3 (GLUE_PYTHON) in XXL-JOB, then import it"
                    .into(),
            );
        }
        "" => return Err("no glue type".into()),
        other => return Err(format!("unknown glue type {other:?}")),
    }
    notes.push(format!(
        "{glue_type}: runs only on executors built with .scripts(true) and a trusted key (off \
         by default); writing its source needs the SCRIPTS grant"
    ));
    if glue_type == "GLUE_POWERSHELL" {
        notes.push(
            "GLUE_POWERSHELL runs with pwsh (PowerShell 7); XXL-JOB runs powershell".to_owned(),
        );
    }
    Ok((glue_type, source))
}

/// A `DATETIME` of XXL-JOB (its server's local time) as ms, read in `zone`.
pub(super) fn local_time_ms(value: Option<&str>, zone: Tz) -> Option<i64> {
    let naive = NaiveDateTime::parse_from_str(value?.trim(), "%Y-%m-%d %H:%M:%S").ok()?;
    zone.from_local_datetime(&naive)
        .earliest()
        .map(|at| at.timestamp_millis())
}

/// The ids in a `child_jobid` column, or the part that is not one.
pub(super) fn child_ids(raw: Option<&str>) -> Result<Vec<i64>, String> {
    raw.unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.parse::<i64>()
                .map_err(|_| format!("child_jobid holds {part:?}, which is not a job id"))
        })
        .collect()
}
