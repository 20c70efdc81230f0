//! Daily reports (XXL-JOB's `xxl_job_log_report`): per UTC day, app and job, how many runs
//! are running, succeeded and failed, kept current by recounting yesterday and today every
//! `monitors.report_interval` (default 1 min). Recounting rather than incrementing keeps the
//! numbers right whatever the retries, duplicates or concurrent nodes; yesterday is included
//! because its last runs finish after midnight. A run still unfinished two days after its
//! scheduled day stays counted as running in its day's row.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, run_every};
use crate::store::{Store, StoreError};

/// One day in ms.
pub const DAY_MS: i64 = 86_400_000;

/// The UTC midnight of `ms`'s day.
pub fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS) * DAY_MS
}

/// One step at `now_ms`: recounts yesterday's and today's rows; returns the rows written.
pub async fn refresh_reports_once(store: &dyn Store, now_ms: i64) -> Result<u64, StoreError> {
    let today = day_of(now_ms);
    store.refresh_reports(today - DAY_MS, today + DAY_MS).await
}

/// Refreshes every `interval` until `shutdown`.
pub async fn run_reports(
    store: Arc<dyn Store>,
    interval: std::time::Duration,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
) {
    run_every("report refresh", interval, clock, shutdown, |now_ms| {
        let store = Arc::clone(&store);
        async move {
            refresh_reports_once(store.as_ref(), now_ms)
                .await
                .map(|_| ())
        }
    })
    .await
}
