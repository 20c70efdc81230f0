//! The pre-read loop: XXL-JOB's `JobScheduleHelper` scan, made durable.
//!
//! Every `pre_read_interval` the loop calls [`PreReader::pre_read_once`], which asks the store to
//! run one short transaction over the schedule shards this node owns (see [`crate::engine::shards`]:
//! the transaction first checks their fences and locks them, so a node that lost a shard
//! writes nothing for it): read the running jobs of those shards whose next fire is
//! within the read-ahead (3 s by default), plan each through `now + pre_read_window` with [`plan_job`](crate::domain::planning::plan_job)
//! (pure: see [`crate::domain::planning`] for the rules), advance the jobs' next-fire times, write the
//! planned fires as one compact batch per shard, with job-log ids reserved for them, owned by
//! this node under a lease (the durable half of the time wheel; see
//! [`crate::store::fire_batch`]), commit. A run's row is written only once the broker
//! acknowledged its trigger ([`crate::engine::acks`]): one write per scan and shard, not per fire. The returned
//! fires go into the in-memory [`TimeWheel`](crate::engine::wheel) through the
//! [`FireIntake`](crate::engine::intake), which emits each at its time.
//!
//! A scan plans many fires at once (every fire of a job inside the window, where XXL-JOB
//! wheels one per scan) and advances each job's next fire once, all jobs in one batched
//! statement per chunk, so fast schedules lose nothing to the scan interval. Because a job is
//! read only once its next fire is within the read-ahead but planned through the whole
//! window, a job due every second is read (and its row updated) once per about three fires
//! rather than once per fire ([`PreReadSettings::read_ahead_for`]).

use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::{FailureLog, RunTracer, Severity};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, millis};
use crate::engine::intake::{FireIntake, PlannedBatch};
use crate::engine::pressure::SchedulingPressure;
use crate::engine::shards::ShardOwnership;
use crate::store::StoreError;
use crate::traces::record_pre_read;

/// Parameters of one pre-read scan.
#[derive(Debug, Clone)]
pub struct PreReadSettings {
    /// How far ahead fires are planned (XXL-JOB: 5 s).
    pub window: Duration,
    /// A job is read once its next fire is this close (at most `window`), and then planned
    /// through the window: a job due every second is read once per several fires, not once
    /// per fire as in XXL-JOB. See [`PreReadSettings::read_ahead_for`].
    pub read_ahead: Duration,
    /// Maximum jobs read per scan.
    pub batch_size: u32,
}

impl PreReadSettings {
    /// The read-ahead a node scanning every `interval` and emitting `emit_lead` early needs:
    /// a fire must be planned before the wheel emits it, with one more scan of margin for a
    /// scan that runs late. With the defaults (1 s, 1 s, 5 s window) 3 s: an every-second job
    /// is read every third second, its next-fire time updated once for three fires.
    pub fn read_ahead_for(interval: Duration, emit_lead: Duration, window: Duration) -> Duration {
        (interval * 2 + emit_lead).min(window)
    }
}

/// Runs pre-read scans of the shards this node owns; the fires go into the wheel through the
/// [`FireIntake`].
pub struct PreReader {
    intake: FireIntake,
    ownership: Arc<ShardOwnership>,
    settings: PreReadSettings,
    wake: Arc<Notify>,
    tracer: RunTracer,
    pressure: Option<Arc<SchedulingPressure>>,
}

impl PreReader {
    /// A pre-reader scanning the shards `ownership` holds, writing and admitting its fires
    /// through `intake`.
    pub fn new(
        intake: FireIntake,
        ownership: Arc<ShardOwnership>,
        settings: PreReadSettings,
    ) -> Self {
        PreReader {
            intake,
            ownership,
            settings,
            wake: Arc::new(Notify::new()),
            tracer: RunTracer::local("kadence-scheduler"),
            pressure: None,
        }
    }

    /// The same pre-reader telling `pressure` how far ahead each scan planned.
    pub fn pressing(self, pressure: Arc<SchedulingPressure>) -> Self {
        PreReader {
            pressure: Some(pressure),
            ..self
        }
    }

    /// The same pre-reader tracing each scan with `tracer`.
    pub fn with_tracer(self, tracer: RunTracer) -> Self {
        PreReader { tracer, ..self }
    }

    /// Wakes the loop for a scan now rather than at its next tick: after an edit gave a job
    /// a new schedule whose first fire may be due within the interval.
    pub fn waker(&self) -> Arc<Notify> {
        Arc::clone(&self.wake)
    }

    /// One scan at `now_ms`: returns how many jobs were read and how many fires written. A
    /// node holding no usable shard does not scan.
    pub async fn pre_read_once(&self, now_ms: i64) -> Result<PlannedBatch, StoreError> {
        let shards = self.ownership.usable(now_ms);
        if shards.is_empty() {
            return Ok(PlannedBatch::default());
        }
        let started = std::time::Instant::now();
        let metrics = self.intake.metrics();
        let span_start = std::time::SystemTime::now();
        let planned = self
            .intake
            .plan_due(
                now_ms,
                (
                    millis(self.settings.window),
                    millis(self.settings.read_ahead),
                ),
                self.settings.batch_size,
                shards,
            )
            .await;
        let outcome = planned.as_ref().map_err(ToString::to_string);
        let counts = outcome.map(|planned| (planned.jobs_read, planned.fires_written));
        record_pre_read(&self.tracer, span_start, now_ms, counts);
        let planned = planned.inspect_err(|_| metrics.pre_read_failures.inc())?;
        if let Some(pressure) = &self.pressure {
            pressure.scan_planned(now_ms, planned.earliest_fire_at_ms);
        }
        if !planned.fenced_out.is_empty() {
            self.ownership
                .drop_fenced(&planned.fenced_out, now_ms)
                .report(&metrics.shards, self.ownership.node_id());
            metrics.shards.owned.set(self.ownership.count() as i64);
        }
        metrics
            .pre_read_scan_duration
            .observe(started.elapsed().as_secs_f64());
        metrics.pre_read_jobs_read.inc_by(planned.jobs_read as u64);
        metrics
            .pre_read_fires_written
            .inc_by(planned.fires_written as u64);
        tracing::debug!(
            ?planned,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "pre-read scan"
        );
        Ok(planned)
    }

    /// Scans every `interval` until `shutdown`; database errors are logged and retried on the
    /// next tick (fires stay safe in the table meanwhile).
    pub async fn run(self, clock: Arc<dyn Clock>, interval: Duration, shutdown: CancellationToken) {
        let mut failures = FailureLog::new("pre-read scan", Severity::Error);
        loop {
            let scan = self.pre_read_once(clock.now_ms()).await;
            failures.record(&scan);
            // A full batch means more jobs are due: scan again at once.
            let full_batch =
                scan.is_ok_and(|summary| summary.jobs_read >= self.settings.batch_size as usize);
            if full_batch {
                continue;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
                _ = self.wake.notified() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_ahead_covers_the_emit_lead_and_a_late_scan_within_the_window() {
        let second = Duration::from_secs(1);
        let window = Duration::from_secs(5);
        let read_ahead = |interval, lead| PreReadSettings::read_ahead_for(interval, lead, window);
        assert_eq!(read_ahead(second, second), Duration::from_secs(3));
        assert_eq!(read_ahead(second, Duration::ZERO), Duration::from_secs(2));
        assert_eq!(
            read_ahead(second, second * 3),
            window,
            "never beyond the window"
        );
    }
}
