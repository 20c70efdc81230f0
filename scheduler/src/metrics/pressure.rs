//! The metrics of scheduling pressure (see [`crate::engine::pressure`]): the pre-read's slack,
//! and how long history waited for scheduling.

use prometheus::core::Collector;
use prometheus::{CounterVec, Gauge, Opts};

/// Scheduling-pressure metrics of one node, made with its
/// [`SchedulingPressure`](crate::engine::pressure::SchedulingPressure) and registered in its
/// [`SchedulerMetrics`](super::SchedulerMetrics) with [`collectors`](Self::collectors).
pub struct PressureMetrics {
    /// How long before its time the earliest fire of the latest scan that planned one is due.
    pub pre_read_slack: Gauge,
    /// Time history writers waited for scheduling, by writer (`logs`, `retention`,
    /// `reports`).
    pub history_yield: CounterVec,
}

/// The history writers that yield, each a `writer` label of
/// [`PressureMetrics::history_yield`].
pub const HISTORY_WRITERS: [&str; 3] = ["logs", "retention", "reports"];

impl PressureMetrics {
    /// The gauge at 0 and the counter at 0 for each of [`HISTORY_WRITERS`], so that rate
    /// queries see them from the first scrape.
    pub fn new() -> PressureMetrics {
        let metrics = PressureMetrics {
            pre_read_slack: Gauge::new(
                "kadence_scheduler_pre_read_slack_seconds",
                "How long before it is due the earliest fire of the latest pre-read scan \
                 was planned (by default, below 1.5 s the pre-read runs behind and history \
                 yields).",
            )
            .expect("valid metric definition"),
            history_yield: CounterVec::new(
                Opts::new(
                    "kadence_scheduler_history_yield_seconds_total",
                    "Time history writers waited for scheduling that fell behind, by writer.",
                ),
                &["writer"],
            )
            .expect("valid metric definition"),
        };
        for writer in HISTORY_WRITERS {
            metrics.history_yield.with_label_values(&[writer]);
        }
        metrics
    }

    /// The gauge and the counter, for the node's registry.
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![
            Box::new(self.pre_read_slack.clone()),
            Box::new(self.history_yield.clone()),
        ]
    }
}

impl Default for PressureMetrics {
    fn default() -> Self {
        PressureMetrics::new()
    }
}
