//! Retention (XXL-JOB's `logretentiondays`): finished runs, their log lines, report rows,
//! audit entries and shadow results older than `retention.days` (default 30) are deleted in bounded batches
//! (`retention.batch_size` rows per transaction, default 1 000), so the job-log tables never
//! grow without end and no delete holds a long lock. It never takes the schedule lock, and it
//! never deletes an unfinished run (a pending fire is never lost to retention).
//!
//! The runs a job's history policy does not keep go much sooner, counted, with every report
//! refresh ([`drop_unkept_runs_once`]). Those are most runs under a steady load (a job that
//! keeps failures only keeps almost nothing), so that drop is not capped by `max_batches`: it
//! goes on until it has caught up, or until its time budget is spent, because a capped drop
//! falls behind for good as soon as the load finishes more runs a minute than the cap (the
//! soak found it: 100 000 a minute against 120 000 finished at 2 000 fires a second, and the
//! database grew without end).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, DAY_MS, day_of, millis};
use crate::config::RetentionConfig;
use crate::engine::pressure::{SchedulingPressure, run_every_yielding};
use crate::store::{History, Store, StoreError};

/// What one step deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RetentionSummary {
    /// Runs (with their log lines).
    pub runs: u64,
    /// Report rows.
    pub reports: u64,
    /// Audit entries.
    pub audit_entries: u64,
    /// Shadow runs' results (see [`crate::operations::replay::shadow`]).
    pub shadow_results: u64,
}

/// One step at `now_ms`: deletes batches until nothing older than the retention is left, or
/// `max_batches` batches of each kind were deleted (the next step goes on).
pub async fn apply_retention_once(
    store: &dyn Store,
    config: &RetentionConfig,
    now_ms: i64,
) -> Result<RetentionSummary, StoreError> {
    let cutoff = now_ms - i64::from(config.days) * DAY_MS;
    Ok(RetentionSummary {
        runs: in_batches(config, |limit| store.delete_old_runs(cutoff, limit)).await?,
        reports: in_batches(config, |limit| {
            store.delete_old_reports(day_of(cutoff), limit)
        })
        .await?,
        audit_entries: in_batches(config, |limit| store.delete_old_audit(cutoff, limit)).await?,
        shadow_results: in_batches(config, |limit| {
            store.delete_old_shadow_results(cutoff, limit)
        })
        .await?,
    })
}

/// Runs `delete` (given the batch size, answering how many it deleted) until a batch is not
/// full or `config.max_batches` ran; returns the total.
async fn in_batches<F, Fut>(config: &RetentionConfig, mut delete: F) -> Result<u64, StoreError>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = Result<u64, StoreError>>,
{
    let mut total = 0;
    for _ in 0..config.max_batches {
        let deleted = delete(config.batch_size).await?;
        total += deleted;
        if deleted < u64::from(config.batch_size) {
            break;
        }
    }
    Ok(total)
}

/// Drops, in batches, the finished runs their jobs' history policies do not keep
/// (see [`crate::domain::model::HistoryPolicy`]), `config.unkept_runs_for` after they ended: until
/// fewer than a batch is left (caught up) or `budget` has passed since it began (the next
/// step goes on; a batch once begun is finished). Before that it counts the sets of runs
/// that never had a row and forgets those whose runs ended as long ago. Returns the runs
/// dropped or counted from a set, each counted in `run_counts`.
pub async fn drop_unkept_runs_once(
    store: &dyn History,
    config: &RetentionConfig,
    now_ms: i64,
    budget: Duration,
) -> Result<u64, StoreError> {
    let finished_before = now_ms - millis(config.unkept_runs_for);
    let began = Instant::now();
    let caught_up = |taken: u64| taken < u64::from(config.batch_size) || began.elapsed() >= budget;
    let mut total = 0;
    // The runs that never had a row (see `crate::store::unkept_run_set`) are counted at once,
    // so that the recount that follows has them, and their sets are forgotten when their rows
    // would have been dropped.
    loop {
        let counted = store.count_unkept_run_sets(config.batch_size).await?;
        total += counted.runs;
        if caught_up(counted.sets) {
            break;
        }
    }
    loop {
        let forgotten = (store.forget_unkept_run_sets(finished_before, config.batch_size)).await?;
        if caught_up(forgotten) {
            break;
        }
    }
    loop {
        let dropped = store
            .drop_unkept_runs(finished_before, config.batch_size)
            .await?;
        total += dropped;
        if caught_up(dropped) {
            return Ok(total);
        }
    }
}

/// Applies the retention every `config.interval` until `shutdown`; each step first yields to
/// scheduling while it falls behind (see [`crate::engine::pressure`]).
pub async fn run_retention(
    store: Arc<dyn Store>,
    config: RetentionConfig,
    (clock, pressure): (Arc<dyn Clock>, Arc<SchedulingPressure>),
    shutdown: CancellationToken,
) {
    let interval = config.interval;
    run_every_yielding(
        ("retention step", "retention"),
        interval,
        (clock, pressure),
        shutdown,
        |now_ms| {
            let (store, config) = (Arc::clone(&store), config.clone());
            async move {
                let summary = apply_retention_once(store.as_ref(), &config, now_ms).await?;
                if summary != RetentionSummary::default() {
                    tracing::info!(?summary, "old runs and reports deleted");
                }
                Ok::<(), StoreError>(())
            }
        },
    )
    .await
}
