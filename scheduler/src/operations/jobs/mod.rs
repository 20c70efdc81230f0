//! Job operations: the rules of a job's life, in one place between the callers that change
//! jobs and the engine that fires them. The HTTP API calls them (and so do the console and
//! the CLI, which work through it); the XXL-JOB import checks its jobs and plans their first
//! fires by them. Who may do what stays with the caller (the API checks the caller's grants
//! before it calls); what a change means for the fires does not:
//!
//! - a definition is read with XXL-JOB's defaults ([`definition`]); when it is saved its cron
//!   must fire again, its alarm webhook must point where webhooks may, and its child jobs must
//!   exist and never lead back to it;
//! - starting a job plans its first fire after now plus the pre-read window (XXL-JOB's
//!   start), so that the pre-read loop never finds a brand-new job late;
//! - stopping a job cancels its planned fires from `emit_lead + cancel_poll_interval` on: on
//!   this node at once, on the others through the store (see [`crate::engine::cancellations`]);
//! - editing a running job's schedule replaces its planned fires the same way, and wakes the
//!   pre-read loop to plan the new ones;
//! - a job is deleted only while it is stopped and no other job names it as a child.

use std::fmt::Display;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::clock::Clock;
use crate::domain::model::limits::OverLimit;
use crate::domain::model::{Job, JobStatus, NewJob};
use crate::domain::schedule::{ScheduleSpec, preview_shortfall};
use crate::engine::cancellations::CancelledFires;
use crate::monitors::webhook_target::WebhookTargets;
use crate::store::{JobChange, JobRemoval, Store, StoreError};

mod children;
pub mod definition;

pub use definition::{NewJobRequest, check_params, parse_new_job};

/// Why a job operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The definition or the change is not valid; `field` names the field at fault, when one
    /// is (as the API's body names it: `schedule_conf`).
    #[error("{message}")]
    Invalid {
        /// The field at fault.
        field: Option<&'static str>,
        /// What is wrong.
        message: String,
    },
    /// The change does not fit the job's state (it is RUNNING, other jobs name it as a child).
    #[error("{0}")]
    Conflict(String),
    /// The database failed or refused (an unknown app, a job that does not exist).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl JobError {
    /// An invalid definition or change, not tied to one field.
    pub fn invalid(message: impl Display) -> JobError {
        JobError::Invalid {
            field: None,
            message: message.to_string(),
        }
    }

    /// Ties an invalid definition to `field` (`.map_err(JobError::at("x"))`); other errors
    /// pass unchanged.
    pub fn at(field: &'static str) -> impl FnOnce(JobError) -> JobError {
        move |error| match error {
            JobError::Invalid {
                field: None,
                message,
            } => JobError::Invalid {
                field: Some(field),
                message,
            },
            other => other,
        }
    }
}

impl From<OverLimit> for JobError {
    fn from(over: OverLimit) -> Self {
        JobError::Invalid {
            field: Some(over.limit.field),
            message: over.to_string(),
        }
    }
}

/// When a change to a job takes effect, from the node's `[schedule]` settings.
#[derive(Debug, Clone, Copy)]
pub struct JobTiming {
    /// `schedule.pre_read_window`, ms: a started job's first fire is the first after now plus
    /// this.
    pub pre_read_window_ms: i64,
    /// `schedule.emit_lead + schedule.cancel_poll_interval`, ms: a stop or a schedule edit
    /// cancels the fires due from this long after now on (sooner ones may be on their way to
    /// the broker already).
    pub change_settle_ms: i64,
}

/// The job operations of one node.
pub struct JobOperations {
    store: Arc<dyn Store>,
    /// Fires this node must not emit: a stop or an edit served here records its cancellation
    /// at once (other nodes read it from the store).
    cancelled: Arc<CancelledFires>,
    /// Wakes this node's pre-read loop after an edit gave a running job a new schedule.
    pre_read_waker: Arc<Notify>,
    clock: Arc<dyn Clock>,
    timing: JobTiming,
    /// Where alarm webhooks may point.
    webhook_targets: WebhookTargets,
}

impl JobOperations {
    /// The operations over `store`, recording cancellations in `cancelled` and waking the
    /// pre-read loop with `pre_read_waker`.
    pub fn new(
        store: Arc<dyn Store>,
        (cancelled, pre_read_waker): (Arc<CancelledFires>, Arc<Notify>),
        clock: Arc<dyn Clock>,
        timing: JobTiming,
        webhook_targets: WebhookTargets,
    ) -> JobOperations {
        JobOperations {
            store,
            cancelled,
            pre_read_waker,
            clock,
            timing,
            webhook_targets,
        }
    }

    /// Creates `spec`, STOPPED, or started at once when `start` is true. Refused: a schedule
    /// that never fires ([`require_a_fire`]), a webhook target the alarm settings do not
    /// allow, or child jobs that do not exist.
    pub async fn create(&self, spec: &NewJob, start: bool) -> Result<Job, JobError> {
        let now = self.clock.now_ms();
        require_a_fire(spec, now)?;
        self.check_webhook_target(spec)?;
        children::check_children(self.store.as_ref(), None, &spec.child_job_ids).await?;
        let job = self.store.create_job(spec, now).await?;
        if start {
            self.start(job).await
        } else {
            Ok(job)
        }
    }

    /// Replaces `current`'s definition with `spec`. A running job whose schedule (or time
    /// zone) changes has the fires planned under the old schedule cancelled and replaced from
    /// `change_settle_ms` after now on: its next fire is the new schedule's first after that,
    /// and the pre-read loop is woken to plan it. (XXL-JOB counts from now + 5 s because its
    /// ring may still hold old fires; cancelling them makes most of that gap unnecessary.)
    ///
    /// Refused: what [`create`](Self::create) refuses, child jobs that would lead back to the
    /// job, and schedule type NONE for a running job (stop it first).
    pub async fn edit(&self, current: &Job, spec: &NewJob) -> Result<Job, JobError> {
        self.check_webhook_target(spec)?;
        children::check_children(self.store.as_ref(), Some(current.id), &spec.child_job_ids)
            .await?;
        let schedule_changed =
            spec.schedule != current.spec.schedule || spec.time_zone != current.spec.time_zone;
        let now = self.clock.now_ms();
        if schedule_changed {
            require_a_fire(spec, now)?;
        }
        let settled = now + self.timing.change_settle_ms;
        let next_fire_ms = match (current.status, schedule_changed) {
            (JobStatus::Running, true) => {
                if spec.schedule == ScheduleSpec::None {
                    return Err(JobError::invalid(
                        "a running job cannot get schedule type NONE; stop it first",
                    ));
                }
                let next = (spec.schedule.next_after(settled, spec.time_zone))
                    .ok_or_else(|| JobError::invalid("the new schedule has no future fire"))?;
                Some(next)
            }
            _ => current.next_fire_ms,
        };
        let replan = (schedule_changed && current.status == JobStatus::Running).then_some(settled);
        // Until the store has the cancellation, this node's dispatch holds the job's fires
        // from `settled` on, so none slips out in between.
        let _in_flight = replan.map(|from_ms| self.cancelled.provisional(current.id, from_ms));
        let change = (self.store)
            .update_job(current.id, spec, current.status, next_fire_ms, replan, now)
            .await?;
        if replan.is_some() {
            self.pre_read_waker.notify_one();
        }
        Ok(self.applied(change))
    }

    /// Schedules `job`: it fires on its schedule from its first fire after now plus the
    /// pre-read window on. A RUNNING job is returned as it is. Refused: schedule type NONE
    /// (such a job runs only when triggered), and a schedule with no future fire.
    pub async fn start(&self, job: Job) -> Result<Job, JobError> {
        if job.status == JobStatus::Running {
            return Ok(job);
        }
        let now = self.clock.now_ms();
        if job.spec.schedule == ScheduleSpec::None {
            return Err(JobError::invalid(format!(
                "job {} has schedule type NONE: it runs only when triggered, so it cannot be \
                 started",
                job.id
            )));
        }
        let next = self
            .first_fire_when_started(&job.spec, now)
            .ok_or_else(|| {
                JobError::invalid(format!("job {}'s schedule has no future fire", job.id))
            })?;
        let change = (self.store)
            .set_job_status(job.id, JobStatus::Running, Some(next), now, now)
            .await?;
        Ok(self.applied(change))
    }

    /// Unschedules `job` and cancels its fires due from `change_settle_ms` after now on, on
    /// every node. Stopping a STOPPED job changes nothing. Runs already sent go on, and the
    /// job can still be triggered by hand or fire as another job's child.
    pub async fn stop(&self, job: &Job) -> Result<Job, JobError> {
        let now = self.clock.now_ms();
        let cancel_from = now + self.timing.change_settle_ms;
        let _in_flight = self.cancelled.provisional(job.id, cancel_from);
        let change = (self.store)
            .set_job_status(job.id, JobStatus::Stopped, None, cancel_from, now)
            .await?;
        Ok(self.applied(change))
    }

    /// Deletes a stopped `job` with its runs, log lines, script versions and reports, in one
    /// transaction; returns how many runs went with it. Refused while the job is RUNNING (a
    /// scheduled job would fire during the removal) and while other jobs name it as a child.
    pub async fn delete(&self, job: &Job) -> Result<u64, JobError> {
        let stop_first = || {
            JobError::Conflict(format!(
                "job {} is RUNNING: stop it first (POST /api/jobs/{}/stop), then delete it",
                job.id, job.id
            ))
        };
        if job.status == JobStatus::Running {
            return Err(stop_first());
        }
        match self.store.remove_job(job.id).await? {
            JobRemoval::Removed { runs } => Ok(runs),
            // Started since it was read.
            JobRemoval::Running => Err(stop_first()),
            JobRemoval::ChildOf(parents) => {
                let names: Vec<String> = parents.iter().map(ToString::to_string).collect();
                Err(JobError::Conflict(format!(
                    "job {} is a child of job{} {}: remove it from their child_job_ids first",
                    job.id,
                    if parents.len() == 1 { "" } else { "s" },
                    names.join(", ")
                )))
            }
        }
    }

    /// The first fire of `spec` if it were started at `now_ms` (XXL-JOB's start: the first
    /// after now plus the pre-read window), or `None` when its schedule has none.
    pub fn first_fire_when_started(&self, spec: &NewJob, now_ms: i64) -> Option<i64> {
        (spec.schedule).next_after(now_ms + self.timing.pre_read_window_ms, spec.time_zone)
    }

    /// Wakes the pre-read loop for jobs started by a write of their own (the import writes
    /// its jobs, started ones with their [`first fire`](Self::first_fire_when_started), in
    /// one transaction of the store's `Imports` half), so that their first fires are planned
    /// now rather than at the next scan.
    pub fn plan_started_jobs(&self) {
        self.pre_read_waker.notify_one();
    }

    /// Refuses a job whose alarm webhook is a literal address webhooks may not reach
    /// (loopback, private, link-local…, unless `alarm.webhook_allowed_networks` names it),
    /// naming `alarm_webhook`, the address's range and the setting. Names are checked as they
    /// are resolved, at delivery (see [`crate::monitors::webhook_target`]).
    fn check_webhook_target(&self, spec: &NewJob) -> Result<(), JobError> {
        let Some(url) = &spec.alarm_webhook else {
            return Ok(());
        };
        (self.webhook_targets.parse_url(url))
            .map(|_| ())
            .map_err(|error| JobError::invalid(format!("alarm webhook refused: {error}")))
            .map_err(JobError::at("alarm_webhook"))
    }

    /// Makes a stop's or an edit's cancellation known to this node's dispatch at once (other
    /// nodes read it from the store within `schedule.cancel_poll_interval`).
    fn applied(&self, change: JobChange) -> Job {
        if let Some(cancelled) = change.cancelled {
            self.cancelled.record(cancelled);
        }
        change.job
    }
}

/// Refuses a cron expression with no fire after `now_ms`, naming `schedule_conf`. Checked
/// when a schedule is saved, not when it is read back, so a job whose last year has passed
/// still loads and lists.
pub fn require_a_fire(spec: &NewJob, now_ms: i64) -> Result<(), JobError> {
    let ScheduleSpec::Cron(_) = spec.schedule else {
        return Ok(());
    };
    match spec.schedule.next_after(now_ms, spec.time_zone) {
        Some(_) => Ok(()),
        None => Err(JobError::at("schedule_conf")(JobError::invalid(
            preview_shortfall(&spec.schedule, spec.time_zone, now_ms, &[], 1)
                .unwrap_or_else(|| "the schedule never fires".to_owned()),
        ))),
    }
}

/// The job `request` describes, as it would be saved at `now_ms`: read with XXL-JOB's
/// defaults, and with a cron that fires again. What the import checks each XXL-JOB job
/// against (the store's own checks, and those needing the node, come when it is written).
pub fn checked_definition(request: NewJobRequest, now_ms: i64) -> Result<NewJob, JobError> {
    let spec = parse_new_job(request)?;
    require_a_fire(&spec, now_ms)?;
    Ok(spec)
}
