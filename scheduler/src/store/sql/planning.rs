//! Turning the due rows a pre-read scan read into fires and job advances: pure, no SQL.

use crate::domain::model::{Job, JobStatus, PendingFire};
use crate::domain::planning::{DueJob, NextFire, plan_job};
use crate::store::rows::JobRow;
use crate::store::{Misfire, PreReadRequest};

/// A job's next-fire bookkeeping after a scan.
pub(crate) struct JobAdvance {
    pub(crate) job_id: i64,
    /// The next fire the scan read: the advance applies only if it is still current.
    pub(crate) read_next_fire_ms: Option<i64>,
    pub(crate) next_fire_ms: Option<i64>,
    pub(crate) last_fire_ms: Option<i64>,
    pub(crate) status: JobStatus,
}

/// Fires and job updates planned from the due rows of one scan.
pub(crate) struct PlannedScan {
    pub(crate) fires: Vec<PendingFire>,
    pub(crate) advances: Vec<JobAdvance>,
    /// Jobs whose misfire strategy applied.
    pub(crate) misfires: Vec<Misfire>,
}

/// Plans every due row (see [`plan_job`]). A row that cannot be read stops its job, loudly,
/// rather than blocking the scan for every other job.
pub(crate) fn plan_rows(rows: Vec<JobRow>, request: &PreReadRequest) -> PlannedScan {
    let mut scan = PlannedScan {
        fires: Vec::new(),
        advances: Vec::with_capacity(rows.len()),
        misfires: Vec::new(),
    };
    for row in rows {
        let row_id = row.id();
        let read_next_fire_ms = row.next_fire_ms();
        let job = match Job::try_from(row) {
            Ok(job) => job,
            Err(error) => {
                tracing::error!(job_id = row_id, %error, "cannot schedule job; stopping it");
                scan.advances.push(JobAdvance {
                    job_id: row_id,
                    read_next_fire_ms,
                    next_fire_ms: None,
                    last_fire_ms: None,
                    status: JobStatus::Stopped,
                });
                continue;
            }
        };
        let Some(next_fire_ms) = job.next_fire_ms else {
            continue;
        };
        let due = DueJob {
            id: job.id,
            schedule: job.spec.schedule.clone(),
            time_zone: job.spec.time_zone,
            misfire_strategy: job.spec.misfire_strategy,
            next_fire_ms,
        };
        let plan = plan_job(&due, request.now_ms, request.window_ms);
        if plan.missed {
            scan.misfires.push(Misfire {
                job_id: job.id,
                app: job.spec.app.clone(),
                strategy: job.spec.misfire_strategy,
            });
        }
        let next_fire_ms = plan.next.at();
        let last_fire_ms = plan.fires.last().map(|fire| fire.scheduled_at_ms);
        scan.fires.extend(plan.fires.iter().map(|fire| PendingFire {
            fire_at_ms: fire.fire_at_ms,
            ..PendingFire::of_job(
                &job,
                kadence_schemas::TriggerId::scheduled(job.id, fire.scheduled_at_ms),
                fire.trigger_type,
                fire.scheduled_at_ms,
            )
        }));
        let status = if plan.next == NextFire::Never {
            tracing::info!(job_id = %job.id, "schedule has no future fire; stopping the job");
            JobStatus::Stopped
        } else {
            JobStatus::Running
        };
        scan.advances.push(JobAdvance {
            job_id: job.id.get(),
            read_next_fire_ms,
            next_fire_ms,
            last_fire_ms,
            status,
        });
    }
    scan
}
