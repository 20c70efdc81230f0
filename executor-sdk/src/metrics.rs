//! Every Prometheus metric an executor exports, in one place: names, help texts and label
//! sets, so that dashboards and alert rules (`dashboards/`) have one module to rely on.
//!
//! Each executor owns one [`ExecutorMetrics`] with a registry of its own; the parts that
//! count hold an `Arc` of it. With
//! [`ExecutorBuilder::metrics_address`](crate::ExecutorBuilder::metrics_address) the executor
//! serves it on `GET /metrics` at that address (`serve`); without, it counts into a registry
//! nobody reads.
//!
//! Naming follows Prometheus's conventions: `kadence_executor_` prefix, base units
//! (`_seconds`), counters end in `_total`.
//!
//! **Label cardinality is bounded:** `app` (one per executor: a constant label of its
//! registry, on every series), `shadow` (`"true"`, a constant label on every series of a
//! shadow executor only, so that queries can leave shadows out with `shadow!="true"`),
//! `handler` (the registered
//! names, and `script` for every GLUE_* job), `outcome` (a fixed set, [`outcome_of`]),
//! `reason` (a fixed set of dead-letter kinds), `change` (`assigned`, `revoked`), `topic`
//! (Kadence's topics), `partition` (the app's partitions). Job ids are never labels.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use kadence_schemas::{GlueType, TriggerRecord, result_code};
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};
use tokio_util::sync::CancellationToken;

/// Buckets for trigger-to-start waits, in seconds: from a millisecond to a minute.
const WAIT_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Buckets for run durations, in seconds: from 5 ms to an hour.
const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// The kinds of reason a trigger record is dead-lettered for, and a control record ignored.
pub(crate) const DEAD_LETTER_REASONS: [&str; 7] = [
    "unsigned",
    "unknown_key",
    "bad_signature",
    "bad_proof",
    "malformed_signature",
    "no_value",
    "undecodable",
];

/// An executor's metrics (see the module docs).
pub(crate) struct ExecutorMetrics {
    registry: Registry,
    /// From a trigger's scheduled time to its handler's start, by app and handler.
    pub(crate) trigger_to_start: HistogramVec,
    /// How long runs took, by app and handler.
    pub(crate) run_duration: HistogramVec,
    /// Triggers answered, by app, handler and [`outcome_of`] the answer.
    pub(crate) results: IntCounterVec,
    /// Redelivered triggers recognised by id and not run again.
    pub(crate) redeliveries: IntCounter,
    /// Triggers held until their scheduled time, now.
    pub(crate) held: IntGauge,
    /// Jobs with triggers queued behind a run (block strategies), now.
    pub(crate) queued_jobs: IntGauge,
    /// Runs in progress, now.
    pub(crate) running: IntGauge,
    /// Partitions assigned or revoked by the group.
    pub(crate) rebalances: IntCounterVec,
    /// Runs handed back unfinished to a partition's new owner.
    pub(crate) hand_backs: IntCounter,
    /// Publishes retried after a retriable broker error, by topic.
    pub(crate) publish_retries: IntCounterVec,
    /// Log records the broker did not take within the producer's retries: their lines are
    /// lost, so that the run's result is not held back.
    pub(crate) log_records_dropped: IntCounter,
    /// Trigger records sent to the dead-letter queue, by kind of reason.
    pub(crate) dead_letters: IntCounterVec,
    /// Trigger records a shadow executor could not take and skipped (production's group
    /// dead-letters them), by kind of reason.
    pub(crate) shadow_skipped: IntCounterVec,
    /// Control records ignored (unverified, empty or undecodable), by kind of reason.
    pub(crate) control_refused: IntCounterVec,
    /// Trigger records of each owned partition not yet done: the high watermark minus the
    /// committed offset, from the client's statistics every 5 s (held, queued and running
    /// triggers count: their offsets are not committed yet).
    pub(crate) consumer_lag: IntGaugeVec,
    /// How long the newest trigger of each owned partition can expect to wait before it
    /// starts (see [`expected_wait_seconds`]): the "will miss its window" signal.
    pub(crate) expected_wait: GaugeVec,
    /// What the expected wait is computed from, per partition.
    load: Mutex<PartitionLoad>,
}

/// Per partition: its lag (from the client's statistics) and the recent mean run duration.
#[derive(Default)]
struct PartitionLoad {
    lag: HashMap<i32, i64>,
    mean_run_ms: HashMap<i32, f64>,
}

/// Weight of the newest run in a partition's mean run duration (an exponential moving average
/// over roughly the last ten runs).
const RUN_WEIGHT: f64 = 0.2;

/// The expected wait, in seconds, of the newest trigger of a partition with `lag` records not
/// yet done, of which `held` wait for their own time (not a backlog) and `running` are going:
/// the others wait for the running ones, `running` at a time, each taking about
/// `mean_run_ms`. `None` while no run has been timed.
pub(crate) fn expected_wait_seconds(
    lag: i64,
    held: usize,
    running: usize,
    mean_run_ms: Option<f64>,
) -> Option<f64> {
    let waiting = (lag - held as i64 - running as i64).max(0) as f64;
    let mean_run_ms = mean_run_ms?;
    Some(waiting * mean_run_ms / running.max(1) as f64 / 1000.0)
}

impl ExecutorMetrics {
    /// Every metric, registered in a registry of its own whose every series carries the
    /// label `app`, and on a `shadow` executor `shadow="true"`.
    pub(crate) fn new(app: &str, shadow: bool) -> ExecutorMetrics {
        let metrics = ExecutorMetrics {
            registry: labelled_registry(app, shadow),
            trigger_to_start: histogram_vec(
                "kadence_executor_trigger_to_start_seconds",
                "Time from a trigger's scheduled time to its handler's start.",
                &["handler"],
                WAIT_BUCKETS,
            ),
            run_duration: histogram_vec(
                "kadence_executor_run_duration_seconds",
                "How long runs took, from the handler's start to its end.",
                &["handler"],
                DURATION_BUCKETS,
            ),
            results: counter_vec(
                "kadence_executor_results_total",
                "Triggers answered with a result, by outcome: success, failure, timeout, killed, \
                 covered (COVER_EARLY), discarded (DISCARD_LATER), unknown_handler, scripts_off.",
                &["handler", "outcome"],
            ),
            redeliveries: counter(
                "kadence_executor_redeliveries_total",
                "Redelivered triggers recognised by their id and not run again.",
            ),
            held: gauge(
                "kadence_executor_held_triggers",
                "Triggers that arrived early, held until their scheduled time.",
            ),
            queued_jobs: gauge(
                "kadence_executor_queued_jobs",
                "Jobs with triggers queued or held here.",
            ),
            running: gauge(
                "kadence_executor_running_jobs",
                "Jobs with a run in progress here.",
            ),
            rebalances: counter_vec(
                "kadence_executor_rebalances_total",
                "Partition assignments and revocations by the consumer group.",
                &["change"],
            ),
            hand_backs: counter(
                "kadence_executor_hand_backs_total",
                "Runs of revoked partitions handed back unfinished to the new owner.",
            ),
            publish_retries: counter_vec(
                "kadence_executor_publish_retries_total",
                "Publishes retried after a retriable broker error.",
                &["topic"],
            ),
            log_records_dropped: log_records_dropped_counter(),
            dead_letters: by_reason(
                "kadence_executor_dead_letters_total",
                "Trigger records sent to the dead-letter queue: unverified (signature), \
                 undecodable, or expired (received past their validity).",
            ),
            shadow_skipped: by_reason(
                "kadence_executor_shadow_skipped_total",
                "Trigger records a shadow executor could not take (unverified, undecodable or \
                 expired) and skipped without a dead letter: the production group dead-letters \
                 them.",
            ),
            control_refused: by_reason(
                "kadence_executor_control_refused_total",
                "Control records (KILL) read and ignored, never applied: failing signature \
                 verification (when scheduler keys are trusted), empty or undecodable.",
            ),
            expected_wait: expected_wait_gauge(),
            load: Mutex::default(),
            consumer_lag: consumer_lag_gauge(),
        };
        metrics.register_all();
        metrics.start_at_zero();
        metrics
    }

    /// Creates the series of every fixed label value at zero, so that dashboards and rate
    /// queries see them from the first scrape, not only after the first event.
    fn start_at_zero(&self) {
        for topic in ["results", "dlq"] {
            self.publish_retries.with_label_values(&[topic]);
        }
        for reason in DEAD_LETTER_REASONS {
            self.dead_letters.with_label_values(&[reason]);
            self.shadow_skipped.with_label_values(&[reason]);
            self.control_refused.with_label_values(&[reason]);
        }
        for change in ["assigned", "revoked"] {
            self.rebalances.with_label_values(&[change]);
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
    fn collectors(&self) -> [Box<dyn prometheus::core::Collector>; 16] {
        [
            Box::new(self.trigger_to_start.clone()),
            Box::new(self.run_duration.clone()),
            Box::new(self.results.clone()),
            Box::new(self.redeliveries.clone()),
            Box::new(self.held.clone()),
            Box::new(self.queued_jobs.clone()),
            Box::new(self.running.clone()),
            Box::new(self.rebalances.clone()),
            Box::new(self.hand_backs.clone()),
            Box::new(self.publish_retries.clone()),
            Box::new(self.log_records_dropped.clone()),
            Box::new(self.dead_letters.clone()),
            Box::new(self.shadow_skipped.clone()),
            Box::new(self.control_refused.clone()),
            Box::new(self.consumer_lag.clone()),
            Box::new(self.expected_wait.clone()),
        ]
    }

    /// Notes the lag of `partition`, or that it has none to report (`None`: not consumed).
    pub(crate) fn record_lag(&self, partition: i32, lag: Option<i64>) {
        let label = partition.to_string();
        let mut load = self.load.lock().expect("partition load lock");
        match lag {
            Some(lag) => {
                self.consumer_lag.with_label_values(&[&label]).set(lag);
                load.lag.insert(partition, lag);
            }
            None => {
                let _ = self.consumer_lag.remove_label_values(&[&label]);
                let _ = self.expected_wait.remove_label_values(&[&label]);
                load.lag.remove(&partition);
            }
        }
    }

    /// Notes a run of `partition` that took `millis`.
    pub(crate) fn record_run(&self, partition: i32, millis: i64) {
        let mut load = self.load.lock().expect("partition load lock");
        let mean = load.mean_run_ms.entry(partition).or_insert(millis as f64);
        *mean += RUN_WEIGHT * (millis as f64 - *mean);
    }

    /// Sets each consumed partition's expected wait from its lag and mean run duration, with
    /// the counts of its `held` and `running` triggers now.
    pub(crate) fn update_expected_waits(
        &self,
        held: impl Fn(i32) -> usize,
        running: impl Fn(i32) -> usize,
    ) {
        let load = self.load.lock().expect("partition load lock");
        for (&partition, &lag) in &load.lag {
            let mean = load.mean_run_ms.get(&partition).copied();
            let label = partition.to_string();
            match expected_wait_seconds(lag, held(partition), running(partition), mean) {
                Some(wait) => self.expected_wait.with_label_values(&[&label]).set(wait),
                None => {
                    let _ = self.expected_wait.remove_label_values(&[&label]);
                }
            }
        }
    }

    /// Every metric in Prometheus's text exposition format.
    pub(crate) fn render(&self) -> String {
        let mut text = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut text)
            .expect("encoding metrics into memory cannot fail");
        String::from_utf8(text).expect("the text format is UTF-8")
    }
}

/// The handler label of `trigger`: its handler name, or `script` for every script job (their
/// names are free text).
pub(crate) fn handler_label(trigger: &TriggerRecord) -> &str {
    match trigger.glue_type {
        GlueType::Bean => &trigger.handler,
        _ => "script",
    }
}

/// The outcome label of a result with `code` and `message`. The messages of refusals, kills
/// and covers are the protocol's fixed texts (`schemas/PROTOCOL.md`), so their start tells
/// them apart.
pub(crate) fn outcome_of(code: i32, message: Option<&str>) -> &'static str {
    let message = message.unwrap_or_default();
    match code {
        result_code::SUCCESS => "success",
        result_code::TIMEOUT => "timeout",
        _ if message.starts_with("killed: ") => "killed",
        _ if message.starts_with("covered by trigger ") => "covered",
        _ if message.starts_with("discarded: ") => "discarded",
        _ if message.contains(" has no handler named ") => "unknown_handler",
        _ if message.contains(" does not run scripts ") => "scripts_off",
        _ => "failure",
    }
}

/// Seconds from milliseconds, for histograms; negative spans count as zero.
pub(crate) fn seconds(millis: i64) -> f64 {
    millis.max(0) as f64 / 1000.0
}

/// Serves `metrics` on `GET /metrics` at `address` until `stop` fires. Binding happens
/// before this returns, so a taken address fails the executor's start.
pub(crate) async fn serve(
    metrics: Arc<ExecutorMetrics>,
    address: SocketAddr,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let metrics = Arc::clone(&metrics);
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    metrics.render(),
                )
            }
        }),
    );
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "the metrics endpoint stopped");
        }
    });
    tracing::info!(address = %bound, "serving metrics on /metrics");
    Ok(bound)
}

/// Every metric an executor exports, unregistered, without the registry's constant labels
/// (`app` on every series, `shadow` on a shadow executor's). The book's metrics reference is
/// generated from it; a registry cannot serve, since it gathers only the families that have
/// series already.
pub fn catalogue() -> Vec<Box<dyn prometheus::core::Collector>> {
    ExecutorMetrics::new("catalogue", false)
        .collectors()
        .into_iter()
        .collect()
}

/// A registry whose every series carries `app`, and on a `shadow` executor `shadow="true"`.
fn labelled_registry(app: &str, shadow: bool) -> Registry {
    let mut constant_labels = HashMap::from([("app".to_owned(), app.to_owned())]);
    if shadow {
        constant_labels.insert("shadow".to_owned(), "true".to_owned());
    }
    Registry::new_custom(None, Some(constant_labels))
        .expect("app and shadow are valid constant labels")
}

fn log_records_dropped_counter() -> IntCounter {
    counter(
        "kadence_executor_log_records_dropped_total",
        "Log records (up to 500 lines of a run) the broker did not acknowledge within the \
         producer's delivery timeout: dropped, so that the run's result is not held back.",
    )
}

fn consumer_lag_gauge() -> IntGaugeVec {
    gauge_vec(
        "kadence_executor_consumer_lag",
        "Trigger records of an owned partition not yet done: high watermark minus the \
         committed offset.",
        &["partition"],
    )
}

fn expected_wait_gauge() -> GaugeVec {
    GaugeVec::new(
        Opts::new(
            "kadence_executor_expected_wait_seconds",
            "How long the newest trigger of a partition can expect to wait before it starts: \
             triggers not started ahead of it times the recent mean run duration, over the runs \
             going at once.",
        ),
        &["partition"],
    )
    .expect("valid metric definition")
}

fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("valid metric definition")
}

/// A counter of refused records by kind of reason (see [`DEAD_LETTER_REASONS`]).
fn by_reason(name: &str, help: &str) -> IntCounterVec {
    counter_vec(name, help, &["reason"])
}

fn gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::new(name, help).expect("valid metric definition")
}

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric definition")
}

fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric definition")
}

fn histogram_vec(name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> HistogramVec {
    HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        labels,
    )
    .expect("valid metric definition")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_follow_the_protocols_messages() {
        let cases = [
            (200, None, "success"),
            (
                502,
                Some("run timed out after 1 s and was cancelled"),
                "timeout",
            ),
            (500, Some("killed: stuck"), "killed"),
            (
                500,
                Some("covered by trigger 5-2 (block strategy COVER_EARLY)"),
                "covered",
            ),
            (
                500,
                Some("discarded: job 5 is already running"),
                "discarded",
            ),
            (
                500,
                Some("executor e has no handler named \"x\" (it has: a)"),
                "unknown_handler",
            ),
            (
                500,
                Some("executor e does not run scripts (GLUE_SHELL): …"),
                "scripts_off",
            ),
            (500, Some("bad input"), "failure"),
            (500, None, "failure"),
        ];
        for (code, message, outcome) in cases {
            assert_eq!(outcome_of(code, message), outcome, "{code} {message:?}");
        }
    }

    #[test]
    fn the_expected_wait_counts_what_waits_for_the_runs_going() {
        // Nothing timed yet: unknown.
        assert_eq!(expected_wait_seconds(5, 0, 1, None), None);
        // A serial job: one run of 3 s going, four triggers behind it.
        assert_eq!(expected_wait_seconds(5, 0, 1, Some(3_000.0)), Some(12.0));
        // Held triggers wait for their own time, not for a backlog.
        assert_eq!(expected_wait_seconds(2, 1, 1, Some(3_000.0)), Some(0.0));
        // Four runs at once drain four times as fast.
        assert_eq!(expected_wait_seconds(12, 0, 4, Some(1_000.0)), Some(2.0));
        assert_eq!(expected_wait_seconds(0, 0, 0, Some(1_000.0)), Some(0.0));
    }

    #[test]
    fn the_exposition_names_every_metric() {
        let metrics = ExecutorMetrics::new("billing", false);
        metrics
            .results
            .with_label_values(&["report", "success"])
            .inc();
        metrics
            .trigger_to_start
            .with_label_values(&["report"])
            .observe(seconds(3));
        metrics.held.set(2);
        let text = metrics.render();
        assert!(text.contains(
            // The registry's constant label comes last.
            "kadence_executor_results_total{handler=\"report\",outcome=\"success\",app=\"billing\"} 1"
        ));
        assert!(text.contains("# TYPE kadence_executor_trigger_to_start_seconds histogram"));
        assert!(text.contains("kadence_executor_held_triggers{app=\"billing\"} 2"));
        assert!(
            !text.contains("shadow=\""),
            "production series carry no shadow label"
        );
        let shadow = ExecutorMetrics::new("billing", true);
        shadow
            .shadow_skipped
            .with_label_values(&["undecodable"])
            .inc();
        let text = shadow.render();
        // The registry orders its constant labels as it likes: look for each.
        let series = |name: &str| -> Vec<&str> {
            text.lines()
                .filter(|line| line.starts_with(name))
                .filter(|line| line.contains("app=\"billing\"") && line.contains("shadow=\"true\""))
                .collect()
        };
        let skipped = series("kadence_executor_shadow_skipped_total{reason=\"undecodable\"");
        assert!(skipped.len() == 1 && skipped[0].ends_with(" 1"), "{text}");
        assert_eq!(series("kadence_executor_held_triggers{").len(), 1, "{text}");
    }
}
