//! What a node exports, listed without running one: the book's metrics reference is generated
//! from [`metric_catalogue`] (a registry cannot serve, since it gathers only the families that
//! have series already).

use crate::metrics::{HeldRunsMetrics, PressureMetrics, SchedulerMetrics};
use crate::monitors::database_watch::DatabaseHealth;

/// Every metric a node registers, unregistered: its [`SchedulerMetrics`], its database
/// watch's, its scheduling pressure's and its held runs', as [`super::Scheduler`] wires them.
pub fn metric_catalogue() -> Vec<Box<dyn prometheus::core::Collector>> {
    let mut all = SchedulerMetrics::new().collectors();
    all.extend(DatabaseHealth::new(0).collectors());
    all.extend(PressureMetrics::new().collectors());
    all.extend(HeldRunsMetrics::new().collectors());
    all
}
