//! The metrics of run rows held for their results (see [`crate::engine::held_runs`]): how
//! long a row is held now, and how many are.

use prometheus::core::Collector;
use prometheus::{Gauge, IntGauge};

/// Held-run metrics of one node, made with its
/// [`HeldRuns`](crate::engine::held_runs::HeldRuns) and registered in its
/// [`SchedulerMetrics`](super::SchedulerMetrics) with [`collectors`](Self::collectors).
pub struct HeldRunsMetrics {
    /// How long a run acknowledged now would be held: `schedule.run_row_hold`, longer while
    /// the results consumer lags; 0 where rows are not held.
    pub hold: Gauge,
    /// Runs whose rows are held now.
    pub held: IntGauge,
}

impl HeldRunsMetrics {
    /// Both gauges at 0.
    pub fn new() -> HeldRunsMetrics {
        HeldRunsMetrics {
            hold: Gauge::new(
                "kadence_scheduler_run_row_hold_seconds",
                "How long the row of a run acknowledged now waits for its result before it is \
                 written (schedule.run_row_hold, plus the results consumer's lag, at most half \
                 the lease; 0 where rows are not held).",
            )
            .expect("valid metric definition"),
            held: IntGauge::new(
                "kadence_scheduler_held_runs",
                "Runs whose rows are held for their results now.",
            )
            .expect("valid metric definition"),
        }
    }

    /// The gauges, for the node's registry.
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![Box::new(self.hold.clone()), Box::new(self.held.clone())]
    }
}

impl Default for HeldRunsMetrics {
    fn default() -> Self {
        HeldRunsMetrics::new()
    }
}
