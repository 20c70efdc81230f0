//! The follow-up monitor (XXL-JOB's `JobFailMonitorHelper` and child triggering, in one
//! place): every finished run is followed up exactly once, whichever scheduler node claims it.
//!
//! [`FollowUp::follow_up_once`] claims a batch of finished runs (compare-and-set on the
//! run's `follow_up` column, with a lock that expires so a dead node's claims are taken over)
//! and, for each:
//! - **success**: fires the job's child jobs as PARENT triggers. For a sharded run, with the
//!   job's `child_trigger_mode` EACH_SHARD (XXL-JOB) every succeeded shard fires them; with
//!   ALL_SHARDS they fire once, when every shard of that fire has succeeded (in any attempt).
//! - **failure** with retries left: writes a RETRY fire — same shard, params, partitions and
//!   script — after the job's backoff (or the handler's "retry after", whichever is longer),
//!   as its own job-log row linked to the first attempt, with trigger id
//!   `{first attempt's id}-r{n}`.
//! - **failure**: sends one alarm per failed attempt on the job's channels (e-mail,
//!   webhook); the run's alarm status becomes SENT, FAILED or NOT_NEEDED, and each
//!   channel's failure is logged and recorded in the audit trail for admins, with its reason
//!   (see [`crate::monitors::alarm`]).
//!
//! **Alarms in flight.** A failed delivery is answered only when `alarm.timeout` is up (so
//! that when FAILED appears tells a member nothing, see [`crate::monitors::alarm`]), and a
//! batch's failures may all be slow: delivered one after the other, a batch of 200 failed
//! webhooks would hold the monitor for 200 × `alarm.timeout`, the next batch's child jobs
//! and retries with it. So a step does everything but the alarms, writes the status of the
//! runs that need none, and hands each alarm over as a [`PendingAlarm`] that writes its own
//! outcome (metrics, audit entries, status) when delivered. [`FollowUp::run`] delivers them
//! in the background, up to `monitors.batch_size` at once, and claims only as many runs as
//! there is room for: the claims of runs whose alarms waited for room would expire, and a
//! flood of failing alarms would grow without bound. Each delivery ends within
//! `alarm.timeout`, so at least `monitors.batch_size` alarms are delivered per
//! `alarm.timeout` however their receivers fail, and a claim (`monitors.lock`, well above
//! `alarm.timeout`) outlives its delivery. [`FollowUp::follow_up_once`], the step tests
//! call, delivers its batch's alarms side by side and returns once all are written.
//!
//! Child and retry trigger ids are deterministic (`{child}-p{parent log id}`, or
//! `{child}-p{parent fire}` for a join; `…-r{n}` for retries) and written once, so a node that
//! dies mid-way and is replaced never fires anything twice. Only an alarm may then be sent a
//! second time: at least once, never lost.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::{FailureLog, Severity};
use kadence_schemas::{JobId, TriggerId, TriggerType, result_code};
use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, millis};
use crate::config::MonitorConfig;
use crate::domain::model::{AlarmStatus, ChildTriggerMode, Job, PendingFire};
use crate::engine::intake::{FireIntake, FireNow, FireSource};
use crate::metrics::SchedulerMetrics;
use crate::monitors::alarm::{Alarm, Alarms, failure_audit_entry};
use crate::store::{FinishedRun, Store, StoreError};

/// What one step did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FollowUpSummary {
    /// Finished runs followed up.
    pub runs: usize,
    /// Retry fires written.
    pub retries: usize,
    /// Child-job fires written.
    pub children: usize,
    /// Runs whose alarm was delivered.
    pub alarms_sent: usize,
    /// Runs whose alarm failed.
    pub alarms_failed: usize,
}

impl FollowUpSummary {
    /// Counts a delivered alarm's status.
    fn count_alarm(&mut self, status: AlarmStatus) {
        match status {
            AlarmStatus::Sent => self.alarms_sent += 1,
            AlarmStatus::Failed => self.alarms_failed += 1,
            _ => {}
        }
    }
}

/// Follows up finished runs (see the module docs).
pub struct FollowUp {
    store: Arc<dyn Store>,
    alarms: Arc<Alarms>,
    /// Writes retries and child fires and hands them to the wheel.
    intake: FireIntake,
    config: MonitorConfig,
}

impl FollowUp {
    /// A monitor reading runs from `store` and writing fires through `intake` (which should
    /// write through the same pool).
    pub fn new(
        store: Arc<dyn Store>,
        alarms: Arc<Alarms>,
        intake: FireIntake,
        config: MonitorConfig,
    ) -> FollowUp {
        FollowUp {
            store,
            alarms,
            intake,
            config,
        }
    }

    /// One step at `now_ms`: claims a batch, follows each run up, delivers the batch's
    /// alarms side by side and returns once every outcome is written.
    pub async fn follow_up_once(&self, now_ms: i64) -> Result<FollowUpSummary, StoreError> {
        let (mut summary, alarms) = self
            .claim_and_follow_up(now_ms, self.config.batch_size)
            .await?;
        let delivered = futures::future::join_all(alarms.into_iter().map(PendingAlarm::deliver));
        for status in delivered.await {
            summary.count_alarm(status?);
        }
        Ok(summary)
    }

    /// Claims up to `limit` finished runs and follows each up but for its alarm: the step's
    /// summary so far, and the alarms still to deliver (see the module docs).
    async fn claim_and_follow_up(
        &self,
        now_ms: i64,
        limit: u32,
    ) -> Result<(FollowUpSummary, Vec<PendingAlarm>), StoreError> {
        let runs = self
            .store
            .claim_finished_runs(now_ms, now_ms + millis(self.config.lock), limit)
            .await?;
        let mut summary = FollowUpSummary {
            runs: runs.len(),
            ..FollowUpSummary::default()
        };
        let mut alarms = Vec::new();
        let mut jobs: HashMap<JobId, Option<Job>> = HashMap::new();
        for run in runs {
            let job = match jobs.get(&run.fire.job_id) {
                Some(job) => job.clone(),
                None => {
                    let job = self.store.get_job(run.fire.job_id).await?;
                    jobs.insert(run.fire.job_id, job.clone());
                    job
                }
            };
            match job {
                Some(job) if run.code != result_code::SUCCESS => {
                    if self.retry(&job, &run, now_ms).await? {
                        summary.retries += 1;
                    }
                    alarms.push(PendingAlarm {
                        store: Arc::clone(&self.store),
                        alarms: Arc::clone(&self.alarms),
                        metrics: Arc::clone(self.intake.metrics()),
                        alarm: Alarm::for_run(&job, &run),
                        job,
                        log_id: run.fire.log_id,
                        began_ms: now_ms,
                    });
                    continue;
                }
                Some(job) => summary.children += self.fire_children(&job, &run, now_ms).await?,
                // The job was deleted: nothing to retry, fire or tell.
                None => {}
            }
            self.store
                .finish_follow_up(run.fire.log_id, AlarmStatus::NotNeeded)
                .await?;
        }
        Ok((summary, alarms))
    }

    /// Writes the retry of a failed `run` if the job has retries left; true if written.
    async fn retry(&self, job: &Job, run: &FinishedRun, now_ms: i64) -> Result<bool, StoreError> {
        let attempt = run.fire.attempt.max(0) as u32;
        if attempt >= job.spec.retry.count {
            return Ok(false);
        }
        let next = attempt + 1;
        let delay_ms = job
            .spec
            .retry
            .backoff
            .delay_before(next)
            .max(run.retry_after_ms.unwrap_or(0));
        let first_id = first_attempt_id(&run.fire.trigger_id);
        let at_ms = now_ms + delay_ms;
        let fire = PendingFire {
            log_id: 0,
            trigger_id: first_id.retry(next),
            trigger_type: TriggerType::Retry,
            attempt: next as i32,
            scheduled_at_ms: at_ms,
            fire_at_ms: at_ms,
            ..run.fire.clone()
        };
        let first_log_id = run.first_log_id.unwrap_or(run.fire.log_id);
        let written = self.intake.retry(&fire, first_log_id, now_ms).await?;
        match written {
            Some(retry) => {
                tracing::info!(trigger_id = %retry.trigger_id, delay_ms, "failed run retried");
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Fires `job`'s children after its successful `run`; returns the fires written.
    async fn fire_children(
        &self,
        job: &Job,
        run: &FinishedRun,
        now_ms: i64,
    ) -> Result<usize, StoreError> {
        if job.spec.child_job_ids.is_empty() {
            return Ok(0);
        }
        let parent_key = if run.fire.shard_total > 1
            && job.spec.child_trigger_mode == ChildTriggerMode::AllShards
        {
            let fire_id = fire_of_shard(&run.fire.trigger_id);
            let succeeded = self.store.succeeded_shards(job.id, &fire_id).await?;
            if succeeded < i64::from(run.fire.shard_total) {
                return Ok(0);
            }
            // One key per parent fire (`{parent job}-{fire}`): whichever shard completes the
            // set fires the children, once.
            fire_id
        } else {
            run.fire.log_id.to_string()
        };
        let mut written = 0;
        for &child_id in &job.spec.child_job_ids {
            let Some(child) = self.store.get_job(child_id).await? else {
                tracing::warn!(parent = %job.id, child = %child_id, "child job does not exist; not fired");
                continue;
            };
            let Ok(trigger_id) = TriggerId::parse(&format!("{child_id}-p{parent_key}")) else {
                tracing::error!(parent = %job.id, child = %child_id, %parent_key,
                    "cannot build the child trigger id; not fired");
                continue;
            };
            let child_fire = FireNow {
                trigger_id,
                trigger_type: TriggerType::Parent,
                params: child.spec.params.clone(),
                partitions: None,
            };
            let fires = self
                .intake
                .fire_now(FireSource::Child, &child, child_fire, now_ms)
                .await?;
            written += fires.len();
        }
        Ok(written)
    }

    /// Runs steps until `shutdown`, delivering their alarms in the background (see the
    /// module docs); a busy step is followed at once by the next, unless the alarms in
    /// flight leave no room. On shutdown the deliveries in flight are finished (each ends
    /// within `alarm.timeout`), so that the node taking their claims over sends none again.
    pub async fn run(self, clock: Arc<dyn Clock>, shutdown: CancellationToken) {
        let mut steps = FailureLog::new("follow-up step", Severity::Warning);
        let mut outcomes = FailureLog::new("writing an alarm's outcome", Severity::Warning);
        let mut in_flight = JoinSet::new();
        let most = self.config.batch_size.max(1);
        loop {
            let busy = u32::try_from(in_flight.len()).unwrap_or(most);
            let room = most.saturating_sub(busy);
            let pause = if room == 0 {
                self.config.interval
            } else {
                let step = self.claim_and_follow_up(clock.now_ms(), room).await;
                let pause = match &step {
                    Ok((summary, _)) if summary.runs >= room as usize => Duration::ZERO,
                    Ok(_) => self.config.interval,
                    Err(_) => self.config.interval.max(Duration::from_secs(1)),
                };
                steps.record(&step.map(|(_, alarms)| {
                    for alarm in alarms {
                        in_flight.spawn(alarm.deliver());
                    }
                }));
                pause
            };
            // Full: the next step waits for room rather than for the pause.
            let full = in_flight.len() >= most as usize;
            let wake = tokio::time::sleep(pause);
            tokio::pin!(wake);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => {
                        while let Some(delivered) = in_flight.join_next().await {
                            outcomes.record(&written(delivered));
                        }
                        return;
                    }
                    _ = &mut wake => break,
                    Some(delivered) = in_flight.join_next() => {
                        outcomes.record(&written(delivered));
                        if full {
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// What became of a delivery run as a task: its status, or why its outcome is not written.
fn written(
    delivered: Result<Result<AlarmStatus, StoreError>, JoinError>,
) -> Result<AlarmStatus, String> {
    match delivered {
        Ok(written) => written.map_err(|error| error.to_string()),
        Err(error) => Err(format!("the alarm's delivery ended early: {error}")),
    }
}

/// A failed run's alarm, claimed and not yet delivered.
pub struct PendingAlarm {
    store: Arc<dyn Store>,
    alarms: Arc<Alarms>,
    metrics: Arc<SchedulerMetrics>,
    job: Job,
    alarm: Alarm,
    log_id: i64,
    /// When its follow-up began (its audit entries' time).
    began_ms: i64,
}

impl PendingAlarm {
    /// Delivers the alarm, then writes its outcome: the delivery metrics, an audit entry for
    /// admins per failed channel and the run's alarm status, all once [`Alarms::send`]
    /// answers, so that none of them shows a failure sooner than the status does.
    pub async fn deliver(self) -> Result<AlarmStatus, StoreError> {
        let delivery = self.alarms.send(&self.job, &self.alarm).await;
        let app = self.job.spec.app.as_str();
        for (channel, sent) in &delivery.outcomes {
            let outcome = if sent.is_ok() { "sent" } else { "failed" };
            (self.metrics.alarm_deliveries)
                .with_label_values(&[app, channel, outcome])
                .inc();
            if let Err(error) = sent {
                self.tell_admins(channel, &error.detail()).await;
            }
        }
        (self.metrics.alarms)
            .with_label_values(&[app, delivery.status.as_str()])
            .inc();
        self.store
            .finish_follow_up(self.log_id, delivery.status)
            .await?;
        Ok(delivery.status)
    }

    /// Records a failed delivery on `channel` in the audit trail, where only admins see it.
    /// A failure to record is logged (the delivery's own warning is logged already).
    async fn tell_admins(&self, channel: &str, detail: &str) {
        let entry = failure_audit_entry(&self.alarm, channel, detail, self.began_ms);
        if let Err(error) = self.store.record_audit(&entry).await {
            tracing::warn!(%error, trigger_id = %self.alarm.trigger_id,
                "alarm failure not recorded in the audit trail");
        }
    }
}

/// The trigger id of a run's first attempt: its own id without a `-r{n}` suffix.
pub fn first_attempt_id(trigger_id: &TriggerId) -> TriggerId {
    let text = trigger_id.as_str();
    match text.rsplit_once("-r") {
        Some((first, attempt))
            if !attempt.is_empty() && attempt.bytes().all(|b| b.is_ascii_digit()) =>
        {
            TriggerId::parse(first).unwrap_or_else(|_| trigger_id.clone())
        }
        _ => trigger_id.clone(),
    }
}

/// The id of the fire a shard belongs to: the first attempt's id without its `-{shard}`.
pub fn fire_of_shard(trigger_id: &TriggerId) -> String {
    let first = first_attempt_id(trigger_id);
    match first.as_str().rsplit_once('-') {
        Some((fire, shard)) if shard.bytes().all(|b| b.is_ascii_digit()) => fire.to_owned(),
        _ => first.as_str().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> TriggerId {
        TriggerId::parse(text).unwrap()
    }

    #[test]
    fn retries_link_to_the_first_attempt_and_shards_to_their_fire() {
        assert_eq!(first_attempt_id(&id("7-5000")), id("7-5000"));
        assert_eq!(first_attempt_id(&id("7-5000-r2")), id("7-5000"));
        assert_eq!(first_attempt_id(&id("7-5000-3-r12")), id("7-5000-3"));
        assert_eq!(
            first_attempt_id(&id("7-u0123456789abcdef0123456789abcdef")),
            id("7-u0123456789abcdef0123456789abcdef")
        );
        assert_eq!(id("7-5000").retry(1), id("7-5000-r1"));
        assert_eq!(fire_of_shard(&id("7-5000-3")), "7-5000");
        assert_eq!(fire_of_shard(&id("7-5000-3-r1")), "7-5000");
        assert_eq!(fire_of_shard(&id("7-uabc-0")), "7-uabc");
    }
}
