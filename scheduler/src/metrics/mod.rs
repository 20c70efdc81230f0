//! Every Prometheus metric the scheduler exports, in one place: names, help texts and label
//! sets, so that dashboards and alert rules (`dashboards/`) have one module to rely on.
//!
//! A node owns one [`SchedulerMetrics`] (its own registry, not a process-global one, so that
//! several schedulers in one test process count apart); the parts that count hold an `Arc` of
//! it, and `GET /metrics` renders it in Prometheus's text format ([`SchedulerMetrics::render`]).
//! A part built without one (a test driving a single step) counts into a private instance that
//! nobody reads.
//!
//! Naming follows Prometheus's conventions: `kadence_scheduler_` prefix, base units
//! (`_seconds`), counters end in `_total`.
//!
//! **Label cardinality is bounded:** `app` (executor apps, created by operators),
//! `trigger_type` (9 values), `code` (result codes as executors send them: 200, 500, 502, and
//! whatever else a foreign executor writes, which operators control), `source` (the topics a
//! scheduler reads), `reason` (a fixed set of kinds, never the free text of a dead-letter
//! reason), `operation` (store operations: the fixed texts the store names them by),
//! `consumer` (the scheduler's own consumers), `channel` (alarm channels), `stage` (where a
//! pending fire is), `how` (how a schedule shard was taken: free or taken over). Job ids are labels only of the `kadence_scheduler_job_…` metrics, and only
//! for the jobs `[telemetry] job_metrics` lists (none by default): a label per job would grow
//! without bound, and a job's full history is its run list in the API.
//!
//! Store errors are counted per process ([`STORE_ERRORS`], registered in every node's
//! registry): the store reports them where it builds the error, below any one node.

mod database;
mod held_runs;
mod jobs;
mod pressure;
mod shards;

use std::collections::HashSet;
use std::sync::LazyLock;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

pub use database::DatabaseMetrics;
pub use held_runs::HeldRunsMetrics;
pub use jobs::JobMetrics;
pub use pressure::PressureMetrics;
pub use shards::ShardMetrics;

/// Failed store operations by operation, in this process (see the module docs).
pub static STORE_ERRORS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "kadence_scheduler_store_errors_total",
        "Store operations that failed (the database refused or could not be reached), by \
         operation.",
        &["operation"],
    )
});

/// Buckets for lateness and waits, in seconds: from a millisecond to a minute.
pub(crate) const LATENESS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Buckets for a pre-read scan's duration, in seconds.
const SCAN_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// The scheduler's metrics (see the module docs).
pub struct SchedulerMetrics {
    registry: Registry,
    /// Fires written durably and handed to the wheel, by app, trigger type and source
    /// (`schedule`, `claim`, `manual`, `follow_up`).
    pub fires_planned: IntCounterVec,
    /// Trigger records the broker acknowledged, by app and trigger type.
    pub triggers_emitted: IntCounterVec,
    /// From a fire's scheduled time to the broker's acknowledgement of its trigger, by app.
    pub fire_lateness: HistogramVec,
    /// Duration of one pre-read scan (the transaction over this node's shards and the writes).
    pub pre_read_scan_duration: Histogram,
    /// Due jobs read by pre-read scans.
    pub pre_read_jobs_read: IntCounter,
    /// Fires written by pre-read scans.
    pub pre_read_fires_written: IntCounter,
    /// Pre-read scans that failed (the database said no; retried on the next tick).
    pub pre_read_failures: IntCounter,
    /// Pending fires of other nodes (or of this one, restarted) taken over after their lease
    /// expired.
    pub lease_claims: IntCounter,
    /// Fires missed by more than the pre-read window, by app and the misfire strategy applied
    /// (DO_NOTHING skipped them, FIRE_ONCE_NOW fired once now).
    pub misfires: IntCounterVec,
    /// Failed runs' alarms by app and outcome: SENT (delivered on every channel), FAILED
    /// (a channel failed), NOT_NEEDED (the job has no channel). Retries are the
    /// `source="retry"` fires of `fires_planned`.
    pub alarms: IntCounterVec,
    /// Runs failed as lost: their executor died and no result can arrive.
    pub lost_runs: IntCounter,
    /// Results completing a run, by app and result code.
    pub results: IntCounterVec,
    /// Results ignored because their run already had one (redeliveries, a second executor).
    pub duplicate_results: IntCounter,
    /// Records sent to the dead-letter queue, by the topic they came from and the kind of
    /// reason.
    pub dead_letters: IntCounterVec,
    /// Live executors per app, from their beats.
    pub live_executors: IntGaugeVec,
    /// Partitions of each app's trigger topic owned by a live executor.
    pub owned_partitions: IntGaugeVec,
    /// Time a pre-read scan waited for its shards' rows (the name predates the shards: it was
    /// the wait for the one schedule lock).
    pub schedule_lock_wait: Histogram,
    /// Fires of this node written durably and not yet acknowledged by the broker, by stage:
    /// `wheel` (waiting for their time) and `dispatching` (sent, awaiting acknowledgement).
    pub pending_fires: IntGaugeVec,
    /// Alarm deliveries by app, channel (`email`, `webhook`) and outcome (`sent`, `failed`).
    pub alarm_deliveries: IntCounterVec,
    /// Records of the scheduler's own consumer groups not yet read, by consumer (`results`,
    /// `logs`) and partition, from the client's statistics every 5 s.
    pub consumer_lag: IntGaugeVec,
    /// Per-job metrics, for the jobs `[telemetry] job_metrics` lists.
    pub jobs: JobMetrics,
    /// Schedule shards: owned, taken, lost.
    pub shards: ShardMetrics,
}

impl Default for SchedulerMetrics {
    fn default() -> Self {
        SchedulerMetrics::new()
    }
}

impl SchedulerMetrics {
    /// Every metric, registered in a registry of its own; no job has metrics of its own.
    pub fn new() -> SchedulerMetrics {
        SchedulerMetrics::with_jobs(HashSet::new())
    }

    /// Every metric, with per-job metrics for the `listed` jobs.
    pub fn with_jobs(listed: HashSet<i64>) -> SchedulerMetrics {
        let registry = Registry::new();
        let (
            pre_read_scan_duration,
            pre_read_jobs_read,
            pre_read_fires_written,
            pre_read_failures,
            misfires,
        ) = pre_read_metrics();
        let (schedule_lock_wait, pending_fires, alarm_deliveries, consumer_lag) = health_metrics();
        let (results, duplicate_results) = result_metrics();
        let metrics = SchedulerMetrics {
            fires_planned: counter_vec(
                "kadence_scheduler_fires_planned_total",
                "Fires written durably and handed to the time wheel.",
                &["app", "trigger_type", "source"],
            ),
            triggers_emitted: counter_vec(
                "kadence_scheduler_triggers_emitted_total",
                "Trigger records acknowledged by the broker.",
                &["app", "trigger_type"],
            ),
            fire_lateness: histogram_vec(
                "kadence_scheduler_fire_lateness_seconds",
                "Time from a fire's scheduled time to the broker's acknowledgement of its \
                 trigger (negative lateness, an early emission, counts as zero).",
                &["app"],
                LATENESS_BUCKETS,
            ),
            pre_read_scan_duration,
            pre_read_jobs_read,
            pre_read_fires_written,
            pre_read_failures,
            lease_claims: counter(
                "kadence_scheduler_lease_claims_total",
                "Pending fires taken over after their owner's lease expired.",
            ),
            misfires,
            alarms: counter_vec(
                "kadence_scheduler_alarms_total",
                "Alarms for failed runs, by outcome (SENT, FAILED, NOT_NEEDED).",
                &["app", "outcome"],
            ),
            lost_runs: counter(
                "kadence_scheduler_lost_runs_total",
                "Runs failed as lost: their executor died and no result can arrive.",
            ),
            results,
            duplicate_results,
            dead_letters: counter_vec(
                "kadence_scheduler_dead_letters_total",
                "Records the scheduler sent to the dead-letter queue.",
                &["source", "reason"],
            ),
            live_executors: gauge_vec(
                "kadence_scheduler_live_executors",
                "Executors whose beats are fresh.",
                &["app"],
            ),
            owned_partitions: gauge_vec(
                "kadence_scheduler_owned_partitions",
                "Partitions of the app's trigger topic owned by a live executor.",
                &["app"],
            ),
            schedule_lock_wait,
            pending_fires,
            alarm_deliveries,
            consumer_lag,
            jobs: JobMetrics::new(listed),
            shards: ShardMetrics::new(),
            registry,
        };
        metrics.register_all();
        metrics.start_fixed_labels_at_zero();
        metrics
    }

    /// The fixed label values start at zero, so rate queries see them from the first scrape.
    /// (Labels with an app appear with the app's first event.)
    fn start_fixed_labels_at_zero(&self) {
        for reason in ["no_value", "undecodable", "wrong_job", "unknown_trigger"] {
            self.dead_letters.with_label_values(&["results", reason]);
        }
        for stage in ["wheel", "dispatching"] {
            self.pending_fires.with_label_values(&[stage]);
        }
    }

    fn register_all(&self) {
        for collector in self.collectors() {
            // Names are unique constants of this module: a clash is a bug here.
            self.registry
                .register(collector)
                .expect("metric names are unique");
        }
    }

    /// Every metric of this instance, unregistered.
    pub(crate) fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        let fixed: [Box<dyn prometheus::core::Collector>; 21] = [
            Box::new(STORE_ERRORS.clone()),
            Box::new(self.schedule_lock_wait.clone()),
            Box::new(self.pending_fires.clone()),
            Box::new(self.alarm_deliveries.clone()),
            Box::new(self.consumer_lag.clone()),
            Box::new(self.lost_runs.clone()),
            Box::new(self.alarms.clone()),
            Box::new(self.misfires.clone()),
            Box::new(self.fires_planned.clone()),
            Box::new(self.triggers_emitted.clone()),
            Box::new(self.fire_lateness.clone()),
            Box::new(self.pre_read_scan_duration.clone()),
            Box::new(self.pre_read_jobs_read.clone()),
            Box::new(self.pre_read_fires_written.clone()),
            Box::new(self.pre_read_failures.clone()),
            Box::new(self.lease_claims.clone()),
            Box::new(self.results.clone()),
            Box::new(self.duplicate_results.clone()),
            Box::new(self.dead_letters.clone()),
            Box::new(self.live_executors.clone()),
            Box::new(self.owned_partitions.clone()),
        ];
        let parts = [self.jobs.collectors(), self.shards.collectors()];
        fixed
            .into_iter()
            .chain(parts.into_iter().flatten())
            .collect()
    }

    pub fn register(&self, collectors: Vec<Box<dyn prometheus::core::Collector>>) {
        for collector in collectors {
            self.registry
                .register(collector)
                .expect("metric names are unique");
        }
    }

    /// Counts an acknowledged trigger and its lateness: from the time it was scheduled for
    /// (a misfire's original time, so that late fires show as late) to `now_ms`.
    pub fn count_acknowledged(&self, fire: &crate::domain::model::PendingFire, now_ms: i64) {
        let app = fire.app.as_str();
        self.triggers_emitted
            .with_label_values(&[app, fire.trigger_type.as_str()])
            .inc();
        let late_ms = now_ms - fire.scheduled_at_ms;
        self.fire_lateness
            .with_label_values(&[app])
            .observe(seconds(late_ms));
        self.jobs.emitted(app, fire.job_id.get(), late_ms);
    }

    /// Sets the lag of the scheduler's consumer `consumer` on each partition the client's
    /// `statistics` report for `topic`; a partition the client no longer reads (lag `-1`)
    /// loses its series.
    pub fn record_consumer_lag(
        &self,
        consumer: &str,
        topic: &str,
        statistics: &rdkafka::statistics::Statistics,
    ) {
        for (partition, lag) in kadence_kafka::partition_lags(statistics, topic) {
            let labels = [consumer, &partition.to_string()];
            match lag {
                Some(lag) => self.consumer_lag.with_label_values(&labels).set(lag),
                None => {
                    let _ = self.consumer_lag.remove_label_values(&labels);
                }
            }
        }
    }

    /// Every metric in Prometheus's text exposition format.
    pub fn render(&self) -> String {
        let mut text = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut text)
            .expect("encoding metrics into memory cannot fail");
        String::from_utf8(text).expect("the text format is UTF-8")
    }
}

/// The pre-read scan's metrics: duration, jobs read, fires written, failures, misfires.
fn pre_read_metrics() -> (Histogram, IntCounter, IntCounter, IntCounter, IntCounterVec) {
    (
        histogram(
            "kadence_scheduler_pre_read_scan_duration_seconds",
            "Duration of one pre-read scan: the transaction over this node's schedule shards.",
            SCAN_BUCKETS,
        ),
        counter(
            "kadence_scheduler_pre_read_jobs_read_total",
            "Due jobs read by pre-read scans.",
        ),
        counter(
            "kadence_scheduler_pre_read_fires_written_total",
            "Fires written by pre-read scans.",
        ),
        counter(
            "kadence_scheduler_pre_read_failures_total",
            "Pre-read scans that failed; retried on the next tick.",
        ),
        counter_vec(
            "kadence_scheduler_misfires_total",
            "Fires missed by more than the pre-read window, by the misfire strategy applied.",
            &["app", "strategy"],
        ),
    )
}

/// Results completing runs, and duplicates ignored.
fn result_metrics() -> (IntCounterVec, IntCounter) {
    (
        counter_vec(
            "kadence_scheduler_results_total",
            "Results that completed a run.",
            &["app", "code"],
        ),
        counter(
            "kadence_scheduler_duplicate_results_total",
            "Results ignored because their run already had one.",
        ),
    )
}

/// Schedule-lock wait, pending fires, alarm deliveries, consumer lag.
fn health_metrics() -> (Histogram, IntGaugeVec, IntCounterVec, IntGaugeVec) {
    (
        histogram(
            "kadence_scheduler_schedule_lock_wait_seconds",
            "Time a pre-read scan waited for its schedule shards' rows (and a connection).",
            SCAN_BUCKETS,
        ),
        gauge_vec(
            "kadence_scheduler_pending_fires",
            "Fires of this node written durably and not yet acknowledged by the broker, by \
             stage (wheel: waiting for their time; dispatching: awaiting acknowledgement).",
            &["stage"],
        ),
        counter_vec(
            "kadence_scheduler_alarm_deliveries_total",
            "Alarm deliveries by channel and outcome (sent, failed).",
            &["app", "channel", "outcome"],
        ),
        gauge_vec(
            "kadence_scheduler_consumer_lag",
            "Records of the scheduler's own consumer groups not yet read, by consumer and \
             partition.",
            &["consumer", "partition"],
        ),
    )
}

/// The content type of [`SchedulerMetrics::render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(crate) fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("valid metric definition")
}

pub(crate) fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric definition")
}

pub(crate) fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric definition")
}

pub(crate) fn histogram(name: &str, help: &str, buckets: &[f64]) -> Histogram {
    Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec()))
        .expect("valid metric definition")
}

pub(crate) fn histogram_vec(
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: &[f64],
) -> HistogramVec {
    HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        labels,
    )
    .expect("valid metric definition")
}

/// Seconds from milliseconds, for histograms; negative spans count as zero.
pub fn seconds(millis: i64) -> f64 {
    millis.max(0) as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_renders_with_its_help_and_type() {
        let metrics = SchedulerMetrics::new();
        metrics
            .triggers_emitted
            .with_label_values(&["billing", "CRON"])
            .inc();
        metrics
            .fire_lateness
            .with_label_values(&["billing"])
            .observe(seconds(12));
        metrics
            .live_executors
            .with_label_values(&["billing"])
            .set(2);
        let text = metrics.render();
        assert!(text.contains(
            "kadence_scheduler_triggers_emitted_total{app=\"billing\",trigger_type=\"CRON\"} 1"
        ));
        assert!(text.contains("# TYPE kadence_scheduler_fire_lateness_seconds histogram"));
        assert!(text.contains(
            "kadence_scheduler_fire_lateness_seconds_bucket{app=\"billing\",le=\"0.025\"} 1"
        ));
        assert!(text.contains("kadence_scheduler_live_executors{app=\"billing\"} 2"));
        assert!(text.contains("kadence_scheduler_pending_fires{stage=\"wheel\"} 0"));
        // Store errors appear with the first one (the operations are the store's own texts).
        STORE_ERRORS.with_label_values(&["read a test row"]).inc();
        assert!(
            metrics
                .render()
                .contains("kadence_scheduler_store_errors_total{operation=\"read a test row\"} 1")
        );
        // Unlabelled metrics show from the start, at zero.
        assert!(text.contains("kadence_scheduler_duplicate_results_total 0"));
        assert_eq!(seconds(-5), 0.0);
    }

    #[test]
    fn only_listed_jobs_get_metrics_of_their_own() {
        let metrics = SchedulerMetrics::with_jobs(HashSet::from([7]));
        metrics.jobs.emitted("billing", 7, 30);
        metrics.jobs.emitted("billing", 8, 30);
        metrics.jobs.completed("billing", 7, "500");
        metrics.jobs.completed("billing", 8, "500");
        let text = metrics.render();
        assert!(
            text.contains(
                "kadence_scheduler_job_triggers_emitted_total{app=\"billing\",job=\"7\"} 1"
            )
        );
        assert!(text.contains(
            "kadence_scheduler_job_results_total{app=\"billing\",code=\"500\",job=\"7\"} 1"
        ));
        assert!(!text.contains("job=\"8\""), "{text}");
    }
}
