//! Daily reports (XXL-JOB's `xxl_job_log_report`): per UTC day, app and job, how many runs
//! are running, succeeded and failed, kept current by recounting yesterday and today every
//! `monitors.report_interval` (default 1 min). Recounting rather than incrementing keeps the
//! numbers right whatever the retries, duplicates or concurrent nodes; yesterday is included
//! because its last runs finish after midnight. A run still unfinished two days after its
//! scheduled day stays counted as running in its day's row.
//!
//! Each step first drops the finished runs their jobs' history policies do not keep
//! ([`crate::monitors::retention::drop_unkept_runs_once`]): they are counted in `run_counts`
//! as they go, and the recount adds those counts, so the reports count every run whatever
//! the policy. The drop may take up to half the interval when it is behind (see
//! [`crate::monitors::retention`]); the recount then follows it, and the next step comes an
//! interval after that.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use crate::clock::{DAY_MS, day_of};

use crate::clock::{Clock, millis, run_every};
use crate::config::RetentionConfig;
use crate::engine::pressure::SchedulingPressure;
use crate::monitors::retention::drop_unkept_runs_once;
use crate::store::{History, StoreError};

/// One step at `now_ms`: recounts yesterday's and today's rows; returns the rows written.
pub async fn refresh_reports_once(store: &dyn History, now_ms: i64) -> Result<u64, StoreError> {
    let today = day_of(now_ms);
    store.refresh_reports(today - DAY_MS, today + DAY_MS).await
}

/// Drops unkept runs and refreshes every `interval` until `shutdown`; each step first
/// yields to scheduling while it falls behind (see [`crate::engine::pressure`]).
pub async fn run_reports(
    store: Arc<dyn History>,
    interval: std::time::Duration,
    retention: RetentionConfig,
    (clock, pressure): (Arc<dyn Clock>, Arc<SchedulingPressure>),
    shutdown: CancellationToken,
) {
    run_every(
        "report refresh",
        interval,
        Arc::clone(&clock),
        shutdown,
        |now_ms| {
            let (store, retention) = (Arc::clone(&store), retention.clone());
            let (clock, pressure) = (Arc::clone(&clock), Arc::clone(&pressure));
            async move {
                let waited = pressure
                    .yield_to_scheduling(clock.as_ref(), "reports")
                    .await;
                let now_ms = now_ms + millis(waited);
                let dropped =
                    drop_unkept_runs_once(store.as_ref(), &retention, now_ms, interval / 2).await?;
                if dropped > 0 {
                    tracing::debug!(dropped, "runs their history policy does not keep dropped");
                }
                refresh_reports_once(store.as_ref(), now_ms)
                    .await
                    .map(|_| ())
            }
        },
    )
    .await
}
