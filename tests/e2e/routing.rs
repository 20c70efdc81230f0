//! Routing on the real broker with three executors of one app: every strategy's partition
//! choice, the owning executor running each trigger, sharding broadcast, partition overrides
//! and FAILOVER after a kill -9.
//!
//! On both stores: the executor list (the `executors` table written from beats), and the
//! strategies that judge executors or keep per-job history — FAILOVER, BUSYOVER and the
//! every-strategy table, which has FAILOVER and the LEAST_* strategies — whose verdicts the
//! tests compare with the executor rows the store lists. Once, on SQLite: what needs only
//! the app's partition count — sharding broadcast (its one row per shard is the store
//! suite's `broadcast_fires_become_one_row_per_partition`, on both), named partitions, and
//! the partition-count check against the broker at start.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use kadence_scheduler::domain::model::{ExecutorStatus, Run, RunState};
use kadence_scheduler::http::api::{ExecutorView, JobView};
use kadence_schemas::JobId;
use serde_json::json;

use crate::helpers::{TestApp, executions, spawn_app, spawn_app_with};
use kadence_tests::fixtures::{Backend, TestDatabase, brokers, unique, wait_for};

/// Partition → id of the executor owning it.
fn owners(executors: &[ExecutorView]) -> HashMap<i32, String> {
    executors
        .iter()
        .flat_map(|view| {
            view.entry
                .owned_partitions
                .iter()
                .map(|&partition| (partition, view.entry.executor_id.clone()))
        })
        .collect()
}

/// Waits for the run of `trigger_id` to finish; returns it.
/// A fast handler's result can complete the run before the broker's acknowledgement, which
/// the ack writer records in batches, gives it its partition: on a busy machine a finished run
/// was read with no partition yet. These tests judge the partition, so they wait for both.
async fn finished_run(app: &TestApp, job: i64, trigger_id: &str) -> Run {
    wait_for(
        Duration::from_secs(30),
        &format!("run {trigger_id} finished, its partition recorded"),
        || async {
            app.runs(job).await.into_iter().find(|run| {
                run.trigger_id.as_str() == trigger_id
                    && run.state == RunState::Finished
                    && run.partition.is_some()
            })
        },
    )
    .await
}

/// Waits for the run of `trigger_id` to be acknowledged by the broker; returns its partition.
async fn dispatched_partition(app: &TestApp, job: i64, trigger_id: &str) -> i32 {
    wait_for(
        Duration::from_secs(30),
        &format!("run {trigger_id} dispatched"),
        || async {
            app.runs(job)
                .await
                .into_iter()
                .find(|run| run.trigger_id.as_str() == trigger_id)
                .and_then(|run| run.partition)
        },
    )
    .await
}

/// Each strategy picks its partitions as XXL-JOB picks addresses, and each trigger is run by
/// the executor that owns its partition (so CONSISTENT_HASH keeps a job on one executor).
async fn every_strategy_routes_among_three_executors(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("routes", 3).await;
    for _ in 0..3 {
        app.start_executor("routes");
    }
    let owner = owners(&app.wait_for_executors("routes", 3, 3).await);
    for strategy in [
        "FIRST",
        "LAST",
        "ROUND",
        "RANDOM",
        "CONSISTENT_HASH",
        "LEAST_FREQUENTLY_USED",
        "LEAST_RECENTLY_USED",
        "FAILOVER",
    ] {
        let job = app
            .create_job(
                json!({"app": "routes", "handler": "ok", "schedule_type": "NONE",
                "route_strategy": strategy}),
            )
            .await;
        let mut placed = Vec::new();
        let mut fired = Vec::new();
        // One at a time, so the order of acknowledgement is the order of choice. The choice
        // is made before the trigger is produced, so the next trigger need not wait for
        // the run to finish; the runs are checked once all seven are out.
        for _ in 0..7 {
            let trigger_id = app.trigger(job.id, None).await;
            placed.push(dispatched_partition(&app, job.id, &trigger_id).await);
            fired.push(trigger_id);
        }
        for (trigger_id, &partition) in fired.iter().zip(&placed) {
            let run = finished_run(&app, job.id, trigger_id).await;
            assert_eq!(run.handle_code, Some(200), "{strategy}: {run:?}");
            assert_eq!(run.partition, Some(partition), "{strategy}: {run:?}");
            assert_eq!(
                run.executor_id.as_deref(),
                Some(owner[&partition].as_str()),
                "{strategy}: the partition's owner runs the trigger"
            );
        }
        let distinct: HashSet<i32> = placed.iter().copied().collect();
        match strategy {
            "FIRST" => assert_eq!(placed, vec![0; 7], "{strategy}"),
            "LAST" => assert_eq!(placed, vec![2; 7], "{strategy}"),
            "ROUND" => {
                let expected: Vec<i32> = (0..7).map(|step| (placed[0] + step) % 3).collect();
                assert_eq!(placed, expected, "{strategy}");
            }
            // Seven uniform picks all on one partition: probability 3 × 3⁻⁷ ≈ 0.14 %.
            "RANDOM" => assert!(distinct.len() >= 2, "{strategy}: {placed:?}"),
            "CONSISTENT_HASH" => {
                let ring = kadence_scheduler::engine::routing::consistent_hash_partition(
                    JobId::new(job.id).unwrap(),
                    3,
                );
                assert_eq!(
                    placed,
                    vec![ring; 7],
                    "{strategy}: always the same executor"
                );
            }
            // Starting counts are below 3, so 7 uses must reach every partition.
            "LEAST_FREQUENTLY_USED" => assert_eq!(distinct.len(), 3, "{strategy}: {placed:?}"),
            "LEAST_RECENTLY_USED" => assert_eq!(placed, vec![0, 1, 2, 0, 1, 2, 0], "{strategy}"),
            // Every owner beats: the first partition.
            "FAILOVER" => assert_eq!(placed, vec![0; 7], "{strategy}"),
            _ => unreachable!("every strategy listed has a check"),
        }
    }
    app.shutdown().await;
}

/// BUSYOVER skips partitions whose owner reports the job running, and falls back to
/// FAILOVER's choice when the job is busy everywhere.
async fn busyover_avoids_executors_running_the_job(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("busy", 3).await;
    for _ in 0..3 {
        app.start_executor("busy");
    }
    let owner = owners(&app.wait_for_executors("busy", 3, 3).await);
    let job = app
        .create_job(
            json!({"app": "busy", "handler": "sleep", "schedule_type": "NONE",
            "params": "60000", "route_strategy": "BUSYOVER", "block_strategy": "CONCURRENT"}),
        )
        .await;
    for expected in [0, 1, 2, 0] {
        let trigger_id = app.trigger(job.id, None).await;
        let partition = dispatched_partition(&app, job.id, &trigger_id).await;
        assert_eq!(partition, expected, "BUSYOVER placed trigger {trigger_id}");
        // Wait until the owner's beat says the job runs there before the next trigger.
        app.wait_for_beat("busy", "the owner reports the job running", |view| {
            view.entry.executor_id == owner[&partition] && view.entry.running_jobs.contains(&job.id)
        })
        .await;
    }
    app.call(
        reqwest::Method::POST,
        &format!("/api/jobs/{}/kill", job.id),
        None,
    )
    .await;
    app.shutdown().await;
}

/// SHARDING_BROADCAST with 3 executors and 6 partitions runs 6 shards per fire, each exactly
/// once, each on its partition's owner; a manual trigger may name partitions.
async fn sharding_broadcast_runs_every_shard_exactly_once(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("bcast", 6).await;
    for _ in 0..3 {
        app.start_executor("bcast");
    }
    let executors = app.wait_for_executors("bcast", 3, 6).await;
    let owner = owners(&executors);
    let job: JobView = app
        .create_job(
            json!({"app": "bcast", "handler": "count", "schedule_type": "FIX_RATE",
            "schedule_conf": "1", "route_strategy": "SHARDING_BROADCAST", "start": true}),
        )
        .await;
    let runs = wait_for(
        Duration::from_secs(60),
        "two fires of six shards",
        || async {
            let runs = app.runs(job.id).await;
            (runs
                .iter()
                .filter(|run| run.state == RunState::Finished)
                .count()
                >= 12)
                .then_some(runs)
        },
    )
    .await;
    app.stop_job(job.id).await;
    let mut fires: HashMap<i64, Vec<&Run>> = HashMap::new();
    for run in runs.iter().filter(|run| run.state == RunState::Finished) {
        fires.entry(run.scheduled_at_ms).or_default().push(run);
    }
    let complete: Vec<_> = fires.values().filter(|shards| shards.len() == 6).collect();
    assert!(complete.len() >= 2, "whole fires: {fires:?}");
    for shards in complete {
        let mut by_executor: HashMap<&str, usize> = HashMap::new();
        let mut indexes: Vec<i32> = shards.iter().map(|run| run.shard_index).collect();
        indexes.sort_unstable();
        assert_eq!(indexes, vec![0, 1, 2, 3, 4, 5]);
        for run in shards {
            assert_eq!(
                (run.shard_total, run.partition, run.handle_code),
                (6, Some(run.shard_index), Some(200)),
                "{run:?}"
            );
            assert_eq!(
                run.trigger_id.as_str(),
                format!("{}-{}-{}", job.id, run.scheduled_at_ms, run.shard_index)
            );
            assert_eq!(executions(run.trigger_id.as_str()), 1, "{run:?} ran once");
            let executor = run.executor_id.as_deref().unwrap();
            assert_eq!(executor, owner[&run.shard_index]);
            *by_executor.entry(executor).or_default() += 1;
        }
        assert_eq!(
            by_executor.len(),
            3,
            "every executor ran shards: {by_executor:?}"
        );
    }

    // A manual broadcast over named partitions: one shard each, indexed by position.
    let (status, body) = app
        .trigger_with(job.id, json!({"partitions": [4, 1]}))
        .await;
    assert_eq!(status, 202, "{body}");
    let shards = body["runs"].as_array().unwrap();
    assert_eq!(shards.len(), 2, "{body}");
    for (position, (shard, partition)) in shards.iter().zip([4, 1]).enumerate() {
        assert_eq!(shard["shard_index"], position);
        assert_eq!(shard["shard_total"], 2);
        let trigger_id = shard["trigger_id"].as_str().unwrap();
        let run = finished_run(&app, job.id, trigger_id).await;
        assert_eq!(
            (run.partition, run.handle_code),
            (Some(partition), Some(200))
        );
    }
    app.shutdown().await;
}

/// A manual trigger may name the partitions to route among (XXL-JOB's address list); one
/// that does not exist is refused with a message saying which exist.
async fn manual_triggers_route_among_named_partitions(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("named", 6).await;
    app.start_executor("named");
    let job = app
        .create_job(
            json!({"app": "named", "handler": "ok", "schedule_type": "NONE",
            "route_strategy": "ROUND"}),
        )
        .await;
    let mut placed = Vec::new();
    for _ in 0..4 {
        let (status, body) = app
            .trigger_with(job.id, json!({"partitions": [3, 5]}))
            .await;
        assert_eq!(status, 202, "{body}");
        let trigger_id = body["trigger_id"].as_str().unwrap();
        placed.push(dispatched_partition(&app, job.id, trigger_id).await);
    }
    assert!(
        placed == vec![3, 5, 3, 5] || placed == vec![5, 3, 5, 3],
        "ROUND among the named partitions: {placed:?}"
    );
    for (partitions, message) in [
        (
            json!([6]),
            "partition 6 does not exist: app named has 6 partitions (0 to 5)",
        ),
        (json!([-1]), "partition -1 does not exist"),
        (json!([]), "partitions is empty"),
        (json!([2, 2]), "partition 2 is named twice"),
    ] {
        let (status, body) = app
            .trigger_with(job.id, json!({"partitions": partitions}))
            .await;
        assert_eq!(status, 400, "{partitions}: {body}");
        assert!(body.to_string().contains(message), "{partitions}: {body}");
    }
    app.shutdown().await;
}

/// kill -9 of the executor owning partition 0 under FAILOVER: as soon as its beats are
/// stale, new triggers go to the next partition with a live owner — before the group
/// rebalances the dead executor's partitions away.
async fn failover_moves_off_a_killed_executor_before_the_rebalance(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.registry.dead_timeout = Duration::from_secs(2);
    })
    .await;
    app.create_app("fo", 3).await;
    let executor_key = app.executor_key("fo").expect("create_app made one");
    let mut processes = Vec::new();
    for index in 0..3 {
        processes.push(
            tokio::process::Command::new(env!("CARGO_BIN_EXE_test-executor"))
                .env("KADENCE_BROKERS", &app.brokers)
                .env(
                    "KADENCE_BROKER_KIND",
                    kadence_tests::fixtures::broker_kind().name(),
                )
                .env("KADENCE_ALLOW_UNVERIFIED", "1")
                .env("KADENCE_EXECUTOR_KEY", &executor_key)
                .env("KADENCE_APP", "fo")
                .env("KADENCE_TOPIC_PREFIX", &app.prefix)
                .env("KADENCE_EXECUTOR_ID", format!("fo-executor-{index}"))
                // Beats every 500 ms; the group notices a dead member only after 45 s.
                .env("KADENCE_BEAT_INTERVAL_MS", "500")
                .env("KADENCE_SESSION_TIMEOUT_MS", "45000")
                .env("RUST_LOG", "warn")
                .stdout(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("start an executor process"),
        );
    }
    let owner = owners(&app.wait_for_executors("fo", 3, 3).await);
    let job = app
        .create_job(
            json!({"app": "fo", "handler": "ok", "schedule_type": "NONE",
            "route_strategy": "FAILOVER"}),
        )
        .await;
    let before = app.trigger(job.id, None).await;
    let run = finished_run(&app, job.id, &before).await;
    assert_eq!(
        (run.partition, run.executor_id.as_deref()),
        (Some(0), Some(owner[&0].as_str()))
    );

    let doomed: usize = owner[&0]
        .trim_start_matches("fo-executor-")
        .parse()
        .unwrap();
    processes[doomed].start_kill().unwrap();
    processes[doomed].wait().await.unwrap();
    app.wait_for_beat("fo", "the killed executor's beats go stale", |view| {
        view.entry.executor_id == owner[&0] && !view.live
    })
    .await;
    let after = app.trigger(job.id, None).await;
    let run = finished_run(&app, job.id, &after).await;
    assert_eq!(run.handle_code, Some(200));
    assert_eq!(
        (run.partition, run.executor_id.as_deref()),
        (Some(1), Some(owner[&1].as_str())),
        "the next partition with a live owner"
    );
    // The group has not rebalanced yet: no live executor has taken partition 0 over.
    let live = app.executors("fo").await;
    assert!(
        live.iter()
            .filter(|view| view.live)
            .all(|view| !view.entry.owned_partitions.contains(&0)),
        "routing moved before the rebalance: {live:?}"
    );
    app.shutdown().await;
}

/// At start, every app's trigger topic is checked against the broker: a topic with another
/// partition count stops the scheduler with a message naming both counts.
async fn a_partition_count_mismatch_is_reported_at_start(backend: Backend) {
    let database = TestDatabase::create(backend).await;
    let prefix = unique("kt");
    let store = kadence_scheduler::app::pools::open_store(&database.url, 2)
        .await
        .unwrap();
    store
        .create_app(&kadence_scheduler::domain::model::App {
            name: kadence_schemas::AppName::parse("drifted").unwrap(),
            title: String::new(),
            partitions: 2,
            created_at_ms: 0,
        })
        .await
        .unwrap();
    crate::helpers::create_topic(&format!("{prefix}.triggers.drifted"), 3).await;
    let mut config = kadence_scheduler::config::Config::default();
    config.database.url = secrecy::SecretString::from(database.url.clone());
    config.kafka.brokers = brokers();
    config.kafka.topic_prefix = prefix;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let error = match kadence_scheduler::app::Scheduler::start(
        config,
        listener,
        std::sync::Arc::new(kadence_scheduler::clock::SystemClock),
    )
    .await
    {
        Ok(_) => panic!("a scheduler must not start over a mismatched trigger topic"),
        Err(error) => format!("{error:#}"),
    };
    assert!(
        error.contains("verifying the trigger topic of app drifted")
            && error.contains("exists with 3 partitions but Kadence expects 2"),
        "{error}"
    );
}

/// The registry lists each executor from its beats: handlers, partitions, running jobs; a
/// graceful stop shows at once as STOPPING, owning nothing.
async fn executors_are_listed_from_their_beats(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("listed", 2).await;
    app.start_executor("listed");
    let executors = app.wait_for_executors("listed", 1, 2).await;
    let entry = &executors[0].entry;
    assert_eq!(
        entry.handlers,
        vec![
            "chatty",
            "count",
            "fail",
            "flaky",
            "ok",
            "sleep",
            "slow_count"
        ]
    );
    assert_eq!(entry.owned_partitions, vec![0, 1]);
    assert!(
        !entry.host.is_empty() && !entry.version.is_empty(),
        "{entry:?}"
    );
    let job = app
        .create_job(
            json!({"app": "listed", "handler": "sleep", "schedule_type": "NONE",
            "params": "60000"}),
        )
        .await;
    app.trigger(job.id, None).await;
    app.wait_for_beat("listed", "the job listed as running", |view| {
        view.entry.running_jobs == vec![job.id]
    })
    .await;
    app.call(
        reqwest::Method::POST,
        &format!("/api/jobs/{}/kill", job.id),
        None,
    )
    .await;
    app.stop_executors().await;
    // The final beat: stopping, owning nothing (read by the scheduler within moments).
    let stopped = wait_for(Duration::from_secs(10), "the final beat", || async {
        let listed = app.executors("listed").await;
        (listed.len() == 1
            && listed[0].entry.state == ExecutorStatus::Stopping
            && listed[0].entry.owned_partitions.is_empty())
        .then_some(listed)
    })
    .await;
    assert!(!stopped[0].live, "{stopped:?}");
    app.shutdown().await;
}

on_every_backend!(
    executors_are_listed_from_their_beats,
    every_strategy_routes_among_three_executors,
    busyover_avoids_executors_running_the_job,
    failover_moves_off_a_killed_executor_before_the_rebalance,
);

on_sqlite_only!(
    a_partition_count_mismatch_is_reported_at_start,
    sharding_broadcast_runs_every_shard_exactly_once,
    manual_triggers_route_among_named_partitions,
);
