//! Daily reports (XXL-JOB's `xxl_job_log_report`): per UTC day, app and job, how many runs
//! are running, succeeded and failed, kept current by rewriting yesterday's and today's rows
//! every `monitors.report_interval` (default 1 min). Rewriting from the counts rather than
//! incrementing keeps the numbers right whatever the retries, duplicates or concurrent nodes;
//! yesterday is included because its last runs finish after midnight. A run still unfinished
//! two days after its scheduled day stays counted as running in its day's row.
//!
//! The rows are not recounted from the day's runs, which would read the whole day every
//! minute: each run is folded into the counts once, as it settles
//! ([`History::fold_runs`], up to [`FOLD_IDS`] ids a transaction until caught up), and a
//! report row is the counts plus the runs of the last minute or two (see the SQL store's
//! `run_counts` module).
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

use crate::clock::Clock;
use crate::config::RetentionConfig;
use crate::engine::pressure::{SchedulingPressure, run_every_yielding};
use crate::monitors::retention::drop_unkept_runs_once;
use crate::store::{History, StoreError};

/// Job-log ids folded into the counts in one transaction at most. A step's fold should be one
/// transaction (a fold writes a `run_counts` row for each job it meets, so at 10 000 jobs
/// firing every second, six transactions a minute wrote six times the rows: measured, 0.1
/// rows a run); a million is a step's runs at over 15 000 a second, while a database upgraded
/// with months of runs still folds them in many short transactions.
pub const FOLD_IDS: u32 = 1_000_000;

/// One step at `now_ms`: folds what settled and rewrites yesterday's and today's rows; returns
/// the rows written.
pub async fn refresh_reports_once(store: &dyn History, now_ms: i64) -> Result<u64, StoreError> {
    fold_and_refresh(store, now_ms, || async {}).await
}

/// [`refresh_reports_once`], awaiting `between` before each fold transaction after the first
/// (to yield to scheduling: a database upgraded with months of runs folds them in many).
async fn fold_and_refresh<F: Future<Output = ()>>(
    store: &dyn History,
    now_ms: i64,
    between: impl Fn() -> F,
) -> Result<u64, StoreError> {
    while store.fold_runs(now_ms, FOLD_IDS).await? {
        between().await;
    }
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
    run_every_yielding(
        ("report refresh", "reports"),
        interval,
        (Arc::clone(&clock), Arc::clone(&pressure)),
        shutdown,
        |now_ms| {
            let (store, retention) = (Arc::clone(&store), retention.clone());
            let (clock, pressure) = (Arc::clone(&clock), Arc::clone(&pressure));
            async move {
                let dropped =
                    drop_unkept_runs_once(store.as_ref(), &retention, now_ms, interval / 2).await?;
                if dropped > 0 {
                    tracing::debug!(dropped, "runs their history policy does not keep dropped");
                }
                let yield_between = || async {
                    pressure
                        .yield_to_scheduling(clock.as_ref(), "reports")
                        .await;
                };
                fold_and_refresh(store.as_ref(), now_ms, yield_between)
                    .await
                    .map(|_| ())
            }
        },
    )
    .await
}
