//! The metrics labelled with a job id (see the parent module on label cardinality).

use std::collections::HashSet;

use prometheus::core::Collector;
use prometheus::{HistogramVec, IntCounterVec};

use super::{LATENESS_BUCKETS, counter_vec, histogram_vec, seconds};

/// The metrics labelled with a job id, kept only for the jobs an operator listed.
pub struct JobMetrics {
    listed: HashSet<i64>,
    /// Trigger records acknowledged, by app and job.
    triggers_emitted: IntCounterVec,
    /// Scheduled time to acknowledgement, by app and job.
    fire_lateness: HistogramVec,
    /// Results that completed a run, by app, job and code.
    results: IntCounterVec,
}

impl JobMetrics {
    pub(super) fn new(listed: HashSet<i64>) -> JobMetrics {
        JobMetrics {
            listed,
            triggers_emitted: counter_vec(
                "kadence_scheduler_job_triggers_emitted_total",
                "Trigger records acknowledged by the broker, for the jobs listed in \
                 [telemetry] job_metrics.",
                &["app", "job"],
            ),
            fire_lateness: histogram_vec(
                "kadence_scheduler_job_fire_lateness_seconds",
                "Scheduled time to the broker's acknowledgement, for the jobs listed in \
                 [telemetry] job_metrics.",
                &["app", "job"],
                LATENESS_BUCKETS,
            ),
            results: counter_vec(
                "kadence_scheduler_job_results_total",
                "Results that completed a run, for the jobs listed in [telemetry] job_metrics.",
                &["app", "job", "code"],
            ),
        }
    }

    /// Counts an acknowledged trigger of `job`, `late_ms` after its scheduled time, if listed.
    pub fn emitted(&self, app: &str, job: i64, late_ms: i64) {
        if self.listed.contains(&job) {
            let job = job.to_string();
            self.triggers_emitted.with_label_values(&[app, &job]).inc();
            self.fire_lateness
                .with_label_values(&[app, &job])
                .observe(seconds(late_ms));
        }
    }

    /// Counts a result of `job` with `code`, if listed.
    pub fn completed(&self, app: &str, job: i64, code: &str) {
        if self.listed.contains(&job) {
            let job = job.to_string();
            self.results.with_label_values(&[app, &job, code]).inc();
        }
    }

    pub(super) fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![
            Box::new(self.triggers_emitted.clone()),
            Box::new(self.fire_lateness.clone()),
            Box::new(self.results.clone()),
        ]
    }
}
