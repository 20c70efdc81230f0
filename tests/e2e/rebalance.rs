//! Rebalances on the real broker: the runs of partitions the group moves to a new executor
//! either finish first (and run once) or are handed back (and run by the new owner), and each
//! trigger ends with one result.
//!
//! Run once, on SQLite: the subject is the executor's revocation handling and the consumer
//! group; the store only records the results.

use std::collections::HashMap;
use std::time::Duration;

use kadence_scheduler::domain::model::Run;
use serde_json::json;

use crate::helpers::{TestApp, executions, spawn_app};
use kadence_tests::fixtures::{Backend, wait_for};

/// Starts one executor alone on a 6-partition app, broadcasts a job whose 6 shards each run
/// `run_ms` (all at once), and once they all started, starts a second executor; returns the
/// job's 6 finished runs.
async fn broadcast_then_rebalance(
    app: &mut TestApp,
    rebalance_timeout: Duration,
    run_ms: u64,
) -> Vec<Run> {
    app.create_app("moving", 6).await;
    app.start_executor_with("moving", |builder| {
        builder
            .executor_id("moving-first")
            .max_concurrent_per_job(10)
            .rebalance_timeout(rebalance_timeout)
    });
    app.wait_for_executors("moving", 1, 6).await;
    let job = app
        .create_job(
            json!({"app": "moving", "handler": "slow_count", "schedule_type": "NONE",
            "params": run_ms.to_string(), "route_strategy": "SHARDING_BROADCAST",
            "block_strategy": "CONCURRENT"}),
        )
        .await;
    let (status, body) = app.trigger_with(job.id, json!({})).await;
    assert_eq!(status, 202, "{body}");
    let shards: Vec<String> = body["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["trigger_id"].as_str().unwrap().to_owned())
        .collect();
    wait_for(
        Duration::from_secs(30),
        "all six shards running",
        || async { shards.iter().all(|id| executions(id) >= 1).then_some(()) },
    )
    .await;
    app.start_executor_with("moving", |builder| builder.executor_id("moving-second"));
    wait_for(Duration::from_secs(120), "six shards finished", || async {
        let runs = app.runs(job.id).await;
        (runs.iter().filter(|run| run.handle_code.is_some()).count() == 6).then_some(runs)
    })
    .await
}

/// Runs that finish within the rebalance timeout are committed before their partition moves:
/// the new owner does not run them again.
async fn revoked_runs_finish_before_their_partitions_move(backend: Backend) {
    let mut app = spawn_app(backend).await;
    let runs = broadcast_then_rebalance(&mut app, Duration::from_secs(3), 1_500).await;
    // The second executor has joined: let any redelivery happen before counting.
    app.wait_for_executors("moving", 2, 6).await;
    for run in &runs {
        assert_eq!(run.handle_code, Some(200), "{run:?}");
        assert_eq!(run.executor_id.as_deref(), Some("moving-first"), "{run:?}");
        assert_eq!(executions(run.trigger_id.as_str()), 1, "ran once: {run:?}");
    }
    app.shutdown().await;
}

/// Runs still going at the rebalance timeout are handed back: no result from the old owner,
/// the new owner runs them, and each ends with one result.
async fn revoked_runs_past_the_timeout_are_handed_back(backend: Backend) {
    let mut app = spawn_app(backend).await;
    let runs = broadcast_then_rebalance(&mut app, Duration::from_millis(500), 6_000).await;
    let owners = app.wait_for_executors("moving", 2, 6).await;
    let second: Vec<i32> = owners
        .iter()
        .find(|view| view.entry.executor_id == "moving-second")
        .unwrap()
        .entry
        .owned_partitions
        .clone();
    assert!(!second.is_empty());
    let mut by_executor: HashMap<&str, usize> = HashMap::new();
    for run in &runs {
        assert_eq!(run.handle_code, Some(200), "{run:?}");
        let executor = run.executor_id.as_deref().unwrap();
        *by_executor.entry(executor).or_default() += 1;
        if second.contains(&run.shard_index) {
            assert_eq!(
                executor, "moving-second",
                "moved shard run by its new owner: {run:?}"
            );
            // At least twice: the group may rebalance more than once while members join, and
            // each time the old owner hands back what it restarted.
            assert!(
                executions(run.trigger_id.as_str()) >= 2,
                "handed back, run again: {run:?}"
            );
        }
    }
    assert_eq!(
        by_executor.get("moving-second"),
        Some(&second.len()),
        "{by_executor:?}"
    );
    app.shutdown().await;
}

on_sqlite_only!(
    revoked_runs_finish_before_their_partitions_move,
    revoked_runs_past_the_timeout_are_handed_back,
);
