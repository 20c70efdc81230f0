//! The lost-run monitor: fails runs whose result can no longer arrive.
//!
//! XXL-JOB fails every run still "running" ten minutes after dispatch whose executor's
//! registration lapsed — and, because it cannot tell, also long runs on healthy executors.
//! Kadence knows more. Kafka redelivers a trigger whose executor died before publishing its
//! result, so most runs of a dead executor are simply run again by the executor that takes
//! over the partition. A run is **lost** only when all of these hold:
//! - it has been unfinished for longer than `registry.lost_run_after` (default 10 min) since
//!   the broker acknowledged its trigger;
//! - the executor that owned its partition at dispatch (recorded on the run) is dead in the
//!   registry: beats stopped for longer than the dead timeout, or forgotten (a STOPPING
//!   executor that still beats is draining its runs);
//! - the app has at least one live executor (with none, the trigger waits in its partition and
//!   runs when one joins — that is not a loss);
//! - no live executor of the app reports the job running or queued (so a redelivered run in
//!   progress elsewhere, or a long run, is never failed).
//!
//! A lost run is completed with code 500 and a message that says which executor died and when,
//! through the same first-result-wins compare-and-set as real results: several scheduler nodes
//! may run the monitor, and a real result that arrives first always wins.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat};
use tokio_util::sync::CancellationToken;

use crate::clock::millis;
use crate::clock::{Clock, run_every};
use crate::config::RegistryConfig;
use crate::domain::model::{Completion, CompletionOutcome, ExecutorEntry};
use crate::engine::registry::is_live;
use crate::metrics::SchedulerMetrics;
use crate::store::{Store, StoreError, UnfinishedRun};

/// Unfinished runs examined per step at most.
const BATCH: u32 = 500;

/// What one step did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LostRunsSummary {
    /// Old unfinished runs examined.
    pub examined: usize,
    /// Runs failed as lost.
    pub failed: usize,
}

/// One step at `now_ms` (see the module docs).
pub async fn fail_lost_runs_once(
    store: &dyn Store,
    config: &RegistryConfig,
    now_ms: i64,
) -> Result<LostRunsSummary, StoreError> {
    let lost_after_ms = millis(config.lost_run_after);
    let dead_timeout_ms = millis(config.dead_timeout);
    let runs = store
        .unfinished_runs(now_ms.saturating_sub(lost_after_ms), BATCH)
        .await?;
    if runs.is_empty() {
        return Ok(LostRunsSummary::default());
    }
    let executors: HashMap<String, ExecutorEntry> = store
        .list_executors(None)
        .await?
        .into_iter()
        .map(|entry| (entry.executor_id.clone(), entry))
        .collect();
    let lost: Vec<Completion> = runs
        .iter()
        .filter_map(|run| {
            lost_reason(run, &executors, now_ms, dead_timeout_ms).map(|reason| Completion {
                app: None,
                trigger_id: run.trigger_id.clone(),
                executor_id: run.executor_id.clone(),
                code: kadence_schemas::result_code::FAILURE,
                message: Some(reason),
                started_at_ms: run.dispatched_at_ms,
                finished_at_ms: now_ms,
                retry_after_ms: None,
            })
        })
        .collect();
    let outcomes = store.complete_runs(&lost).await?;
    let failed = outcomes
        .iter()
        .filter(|outcome| **outcome == CompletionOutcome::Applied)
        .count();
    for completion in lost
        .iter()
        .zip(&outcomes)
        .filter_map(|(completion, outcome)| {
            (*outcome == CompletionOutcome::Applied).then_some(completion)
        })
    {
        tracing::warn!(trigger_id = %completion.trigger_id, executor_id = %completion.executor_id,
            "run failed as lost: its executor is dead and no live executor runs the job");
    }
    Ok(LostRunsSummary {
        examined: runs.len(),
        failed,
    })
}

/// Why `run` is lost, or `None` while its result may still come.
fn lost_reason(
    run: &UnfinishedRun,
    executors: &HashMap<String, ExecutorEntry>,
    now_ms: i64,
    dead_timeout_ms: i64,
) -> Option<String> {
    // Still beating, even while STOPPING (draining its runs): its result may come.
    let beating =
        |entry: &ExecutorEntry| now_ms.saturating_sub(entry.last_beat_at_ms) <= dead_timeout_ms;
    let death = match executors.get(&run.executor_id) {
        Some(entry) if beating(entry) => return None,
        Some(entry) => format!("is dead (last beat {})", format_ms(entry.last_beat_at_ms)),
        None => "is gone from the registry".to_owned(),
    };
    let app_executors = || executors.values().filter(|entry| entry.app == run.app);
    if !app_executors().any(|entry| is_live(entry, now_ms, dead_timeout_ms)) {
        // The trigger waits in its partition for an executor to join.
        return None;
    }
    let job = run.job_id.get();
    if app_executors()
        .filter(|entry| beating(entry))
        .any(|entry| entry.running_jobs.contains(&job) || entry.queued_jobs.contains(&job))
    {
        return None;
    }
    Some(format!(
        "result lost: executor {} {death}, and no live executor of app {} runs or queues job {} \
         ({} min after dispatch)",
        run.executor_id,
        run.app,
        run.job_id,
        now_ms.saturating_sub(run.dispatched_at_ms) / 60_000
    ))
}

fn format_ms(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

/// Runs a step every `config.sweep_interval` until `shutdown`, counting the runs it fails
/// into `metrics`.
pub async fn run_lost_run_monitor(
    store: Arc<dyn Store>,
    config: RegistryConfig,
    clock: Arc<dyn Clock>,
    metrics: Arc<SchedulerMetrics>,
    shutdown: CancellationToken,
) {
    let interval = config.sweep_interval;
    run_every("lost-run step", interval, clock, shutdown, |now_ms| {
        let (store, config, metrics) = (Arc::clone(&store), config.clone(), Arc::clone(&metrics));
        async move {
            let summary = fail_lost_runs_once(store.as_ref(), &config, now_ms).await?;
            metrics.lost_runs.inc_by(summary.failed as u64);
            if summary.failed > 0 {
                tracing::info!(?summary, "lost runs failed");
            }
            Ok::<(), StoreError>(())
        }
    })
    .await
}
