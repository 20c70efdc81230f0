//! The metrics of the database watch (see [`crate::monitors::database_watch`]): whether this node's
//! database answers, and how often it went out of reach.

use prometheus::core::Collector;
use prometheus::{IntCounter, IntGauge};

use super::counter;

/// Database-watch metrics of one node. They are made with the watch, which a node starts
/// before its [`SchedulerMetrics`](super::SchedulerMetrics), and registered in it with
/// [`collectors`](Self::collectors).
pub struct DatabaseMetrics {
    /// 1 while the database answers the watch's checks, 0 during an outage.
    pub reachable: IntGauge,
    /// Times the database went out of reach.
    pub outages: IntCounter,
}

impl DatabaseMetrics {
    /// The gauge at 1 (reachable) and the counter at 0.
    pub fn new() -> DatabaseMetrics {
        let reachable = IntGauge::new(
            "kadence_scheduler_database_reachable",
            "1 while this node's database answers its checks, 0 during an outage.",
        )
        .expect("valid metric definition");
        reachable.set(1);
        DatabaseMetrics {
            reachable,
            outages: counter(
                "kadence_scheduler_database_outages_total",
                "Times this node's database went out of reach (failed checks in a row).",
            ),
        }
    }

    /// The gauge and the counter, for the node's registry.
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![
            Box::new(self.reachable.clone()),
            Box::new(self.outages.clone()),
        ]
    }
}

impl Default for DatabaseMetrics {
    fn default() -> Self {
        DatabaseMetrics::new()
    }
}
