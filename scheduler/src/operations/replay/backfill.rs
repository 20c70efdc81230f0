//! Backfill: the fires a job's schedule had in a past range that never fired.
//!
//! A scheduler that was down (or could not reach its database) longer than the pre-read
//! window applies the job's misfire strategy on return: DO_NOTHING skips what it missed,
//! FIRE_ONCE_NOW fires once. A backfill fills in the rest, afterwards and on purpose: it
//! lists the fires of the job's schedule (as the job is defined now) in `[from, to)`, leaves
//! out every fire whose trigger id is in the app's trigger topic or has a run in the store
//! (of any state: a fire cancelled by a stop was called off, not missed; a broadcast counts
//! when any of its shards is there), and emits the others under the trigger id the schedule
//! gives them (`{job}-{scheduled_ms}`), with trigger type `BACKFILL` and their original
//! scheduled time. Their ids being the schedule's, a fire can never run twice, however often
//! a range is backfilled.
//!
//! The range must end a while before now ([`Replayer::settling_after`]): fires due just
//! before now may still be on their way to the broker, in a wheel or a batch, and would
//! otherwise be emitted twice. CRON and FIX_RATE schedules can be backfilled; a fixed rate is
//! anchored on the fires of the job that are known (its period counted from them), and a
//! FIX_DELAY schedule has no fire times of its own (each follows the end of a run), so it
//! cannot.

use std::collections::HashSet;

use kadence_schemas::{JobId, TriggerId, TriggerType};

use super::topic_range::{self, RangeError, TopicRange};
use super::{OperationSummary, ReplayError, Replayer, summarize};
use crate::domain::model::{Job, PendingFire};
use crate::domain::schedule::ScheduleSpec;
use crate::engine::intake::FireSource;
use crate::store::{NewOperation, OperationKind};

/// A backfill to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackfillRequest {
    /// The job.
    pub job_id: JobId,
    /// Start of the range, ms (inclusive).
    pub from_ms: i64,
    /// End of the range, ms (exclusive).
    pub to_ms: i64,
    /// Triggers per second (default: the configured rate).
    pub rate_per_second: Option<u32>,
    /// Count only.
    pub dry_run: bool,
    /// Who asks.
    pub requested_by: String,
}

impl Replayer {
    /// Backfills (or counts, for a dry run) the missed fires `request` selects.
    pub async fn backfill(
        &self,
        request: BackfillRequest,
    ) -> Result<OperationSummary, ReplayError> {
        let job = self.store.get_job(request.job_id).await?.ok_or_else(|| {
            ReplayError::NotFound(format!("job {} does not exist", request.job_id))
        })?;
        let start_ms = self.clock.now_ms();
        self.check_range(&request, start_ms)?;
        let rate = self.rate(request.rate_per_second)?;
        let (emitted, read) = self.emitted_fires(&job, &request).await?;
        let due = schedule_fires(&job, &request, &emitted, self.config.max_triggers)?;
        let missing: Vec<i64> = due
            .into_iter()
            .filter(|at| !emitted.contains(&fire_base(job.id, *at)))
            .collect();
        let shares: Vec<(TriggerId, JobId, i64)> = missing
            .iter()
            .map(|&at| (TriggerId::scheduled(job.id, at), job.id, at))
            .collect();
        if request.dry_run {
            return Ok(summarize(&shares, read, None, start_ms, rate));
        }
        let operation = NewOperation {
            kind: OperationKind::Backfill,
            app: job.spec.app.clone(),
            target_app: job.spec.app.clone(),
            job_id: Some(job.id),
            selection: serde_json::json!({
                "job_id": job.id, "from_ms": request.from_ms, "to_ms": request.to_ms,
                "schedule": { "type": job.spec.schedule.schedule_type(), "conf": job.spec.schedule.conf() },
            }),
            from_ms: Some(request.from_ms),
            to_ms: Some(request.to_ms),
            rate_per_second: rate,
            forced: false,
            requested_by: request.requested_by.clone(),
            requested_at_ms: start_ms,
        };
        let make_fires = Box::new(move |operation_id: i64| {
            missing
                .iter()
                .enumerate()
                .map(|(position, &at)| {
                    PendingFire {
                        operation_id: Some(operation_id),
                        ..PendingFire::of_job(
                            &job,
                            TriggerId::scheduled(job.id, at),
                            TriggerType::Backfill,
                            at,
                        )
                    }
                    .paced(start_ms, position, rate)
                })
                .collect()
        });
        let (recorded, _) = self
            .intake
            .record_operation(FireSource::Backfill, &operation, make_fires, start_ms)
            .await?;
        tracing::info!(backfill = recorded.id, job_id = %request.job_id, triggers = recorded.triggers,
            by = %request.requested_by, "backfill recorded; its fires are on their way");
        Ok(summarize(&shares, read, Some(recorded), start_ms, rate))
    }

    /// Refuses an empty range, or one that reaches into the last
    /// [`settling_after`](Replayer::settling_after).
    fn check_range(&self, request: &BackfillRequest, now_ms: i64) -> Result<(), ReplayError> {
        if request.from_ms >= request.to_ms {
            return Err(ReplayError::Invalid(format!(
                "from_ms {} must be before to_ms {}",
                request.from_ms, request.to_ms
            )));
        }
        let latest_end = now_ms - self.settle_ms;
        if request.to_ms > latest_end {
            return Err(ReplayError::Invalid(format!(
                "a backfill fills the past: end the range at or before {} ({} s ago); fires due \
                 since then may still be on their way to the broker",
                super::format_ms(latest_end),
                self.settle_ms / 1000
            )));
        }
        Ok(())
    }

    /// The base ids (`{job}-{scheduled_ms}`) of `job`'s fires scheduled in the range that the
    /// app's trigger topic or the store holds, and what was read of the topic.
    async fn emitted_fires(
        &self,
        job: &Job,
        request: &BackfillRequest,
    ) -> Result<(HashSet<String>, topic_range::RangeRead), ReplayError> {
        let partitions = self.partition_count(&job.spec.app).await?;
        let keys = self.trusted_keys().await?;
        let (settings, topic) = (self.kafka.clone(), self.topics.triggers(&job.spec.app));
        let range = TopicRange::Time {
            from_ms: request.from_ms,
            to_ms: request.to_ms,
        };
        let job_id = job.id;
        let reading = tokio::task::spawn_blocking(move || {
            let mut seen = HashSet::new();
            let read =
                topic_range::read_range(&settings, &topic, partitions, &range, &keys, |trigger| {
                    if trigger.record.job_id == job_id {
                        seen.insert(trigger.record.trigger_id.as_str().to_owned());
                    }
                })?;
            Ok::<_, RangeError>((seen, read))
        });
        let (mut seen, read) = reading
            .await
            .map_err(|error| ReplayError::Invalid(format!("the topic reader failed: {error}")))??;
        seen.extend(
            self.store
                .trigger_ids_scheduled(job.id, request.from_ms, request.to_ms)
                .await?,
        );
        let bases = seen.iter().filter_map(|id| base_of(id)).collect();
        Ok((bases, read))
    }
}

/// `{job}-{scheduled_ms}`: the id of a scheduled fire, and the start of its shards', retries'
/// and replays' ids.
fn fire_base(job: JobId, at_ms: i64) -> String {
    TriggerId::scheduled(job, at_ms).as_str().to_owned()
}

/// The `{job}-{scheduled_ms}` an id starts with, if it is a scheduled fire's or derived from
/// one.
fn base_of(trigger_id: &str) -> Option<String> {
    let mut parts = trigger_id.splitn(3, '-');
    let (job, at) = (parts.next()?, parts.next()?);
    (!at.is_empty() && at.bytes().all(|b| b.is_ascii_digit())).then(|| format!("{job}-{at}"))
}

/// The fire times of `job`'s schedule in the request's range, at most `limit`. A fixed rate
/// counts its period from a fire of the job that is known (`emitted`), or from the range's
/// start.
fn schedule_fires(
    job: &Job,
    request: &BackfillRequest,
    emitted: &HashSet<String>,
    limit: usize,
) -> Result<Vec<i64>, ReplayError> {
    let (from, to) = (request.from_ms, request.to_ms);
    let mut fires = Vec::new();
    let mut push = |at: i64| -> Result<(), ReplayError> {
        if fires.len() == limit {
            return Err(ReplayError::Invalid(format!(
                "the range holds more than {limit} fires of job {}, the most one backfill may \
                 emit (replay.max_triggers): backfill it in parts",
                job.id
            )));
        }
        fires.push(at);
        Ok(())
    };
    match &job.spec.schedule {
        ScheduleSpec::Cron(_) => {
            let mut cursor = from - 1;
            while let Some(at) = job.spec.schedule.next_after(cursor, job.spec.time_zone) {
                if at >= to {
                    break;
                }
                push(at)?;
                cursor = at;
            }
        }
        ScheduleSpec::FixRate { seconds } => {
            let period = i64::from(*seconds) * 1000;
            let anchor = emitted
                .iter()
                .filter_map(|base| base.split_once('-')?.1.parse::<i64>().ok())
                .min()
                .unwrap_or(from);
            let mut at = from + (anchor - from).rem_euclid(period);
            while at < to {
                push(at)?;
                at += period;
            }
        }
        ScheduleSpec::FixDelay { .. } | ScheduleSpec::None => {
            return Err(ReplayError::Invalid(format!(
                "job {} has schedule type {}: only CRON and FIX_RATE schedules have fire times \
                 to backfill (a FIX_DELAY fire follows the end of the run before it)",
                job.id,
                job.spec.schedule.schedule_type()
            )));
        }
    }
    Ok(fires)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_ids_cover_shards_retries_and_replays_but_not_manual_runs() {
        assert_eq!(base_of("7-1000").as_deref(), Some("7-1000"));
        assert_eq!(base_of("7-1000-2").as_deref(), Some("7-1000"));
        assert_eq!(base_of("7-1000-r1").as_deref(), Some("7-1000"));
        assert_eq!(base_of("7-1000-p3").as_deref(), Some("7-1000"));
        assert_eq!(base_of("7-u0192abcd"), None);
        assert_eq!(base_of("7-p3-x1"), None);
    }
}
