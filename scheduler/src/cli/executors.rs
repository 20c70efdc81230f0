//! `kadence executor list`: the executors the registry knows from their beats, with the
//! partitions each owns; a RUNNING executor whose beats stopped shows as STALE.

use super::client::ApiClient;
use super::print::{format_ms, join_or_dash, outln};
use crate::domain::model::ExecutorStatus;
use crate::http::api::ExecutorView;

/// Prints the executors, of `app` or of every app.
pub(super) async fn list_executors(client: &ApiClient, app: Option<String>) -> anyhow::Result<()> {
    let executors: Vec<ExecutorView> = client.all("/api/executors", &[("app", app)]).await?;
    outln!(
        "{:<36} {:<16} {:<8} {:<12} {:<24} {:<16} HANDLERS",
        "EXECUTOR",
        "APP",
        "STATE",
        "PARTITIONS",
        "LAST BEAT",
        "RUNNING JOBS"
    )?;
    for view in executors {
        let executor = view.entry;
        let state = match (view.live, executor.state) {
            (false, ExecutorStatus::Running) => "STALE",
            (_, state) => state.as_str(),
        };
        outln!(
            "{:<36} {:<16} {:<8} {:<12} {:<24} {:<16} {}",
            executor.executor_id,
            executor.app,
            state,
            join_or_dash(&executor.owned_partitions),
            format_ms(Some(executor.last_beat_at_ms)),
            join_or_dash(&executor.running_jobs),
            join_or_dash(&executor.handlers),
        )?;
    }
    Ok(())
}
