//! The executor sweeper: marks executors whose beats stopped DEAD in the `executors` table and
//! forgets them after `registry.forget_after`. Routing never reads the table (it reads the
//! in-memory [`Registry`](crate::engine::registry::Registry)); listings and the lost-run
//! monitor do.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, run_every};
use crate::config::RegistryConfig;
use crate::store::{ExecutorRegistry, StoreError};

/// What one sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepSummary {
    /// Executors newly marked DEAD.
    pub marked_dead: Vec<String>,
    /// Dead executors deleted from the table.
    pub forgotten: u64,
}

/// One sweep at `now_ms`: marks executors whose beats stopped DEAD and deletes those dead for
/// longer than `forget_after`. Safe on several nodes (each row is marked once).
pub async fn sweep_once(
    store: &dyn ExecutorRegistry,
    config: &RegistryConfig,
    now_ms: i64,
) -> Result<SweepSummary, StoreError> {
    let dead_timeout_ms = i64::try_from(config.dead_timeout.as_millis()).unwrap_or(i64::MAX);
    let forget_after_ms = i64::try_from(config.forget_after.as_millis()).unwrap_or(i64::MAX);
    let marked_dead = store
        .mark_dead_executors(now_ms.saturating_sub(dead_timeout_ms))
        .await?;
    for executor in &marked_dead {
        tracing::warn!(executor_id = %executor, "executor stopped beating; marked dead");
    }
    let forgotten = store
        .forget_executors(
            now_ms
                .saturating_sub(dead_timeout_ms)
                .saturating_sub(forget_after_ms),
        )
        .await?;
    Ok(SweepSummary {
        marked_dead,
        forgotten,
    })
}

/// Sweeps every `config.sweep_interval` until `shutdown`.
pub async fn run_sweeper(
    store: Arc<dyn ExecutorRegistry>,
    config: RegistryConfig,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
) {
    let interval = config.sweep_interval;
    run_every("registry sweep", interval, clock, shutdown, |now_ms| {
        let (store, config) = (Arc::clone(&store), config.clone());
        async move {
            sweep_once(store.as_ref(), &config, now_ms)
                .await
                .map(|_| ())
        }
    })
    .await
}
