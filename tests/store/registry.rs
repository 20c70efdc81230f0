//! The executor registry table and the fires routing needs: broadcast shards and partition
//! overrides, on both backends.

use std::time::Duration;

use kadence_scheduler::config::RegistryConfig;
use kadence_scheduler::domain::model::{
    ExecutorEntry, ExecutorStatus, JobStatus, PendingFire, RouteStrategy, RunState,
};
use kadence_scheduler::domain::schedule::MisfireStrategy;
use kadence_scheduler::monitors::executor_sweep::sweep_once;
use kadence_scheduler::monitors::lost_runs::{LostRunsSummary, fail_lost_runs_once};
use kadence_scheduler::store::{
    DispatchAck, DispatchMarks, LogLines, NewFire, PageRequest, RunLogLines,
};
use kadence_schemas::{AppName, TriggerId, TriggerType};

use super::{T0, demo_app, every_second_job, pre_read_at, store_on};
use kadence_tests::fixtures::{Backend, TestDatabase};

fn executor(id: &str, partitions: &[i32], beat_ms: i64) -> ExecutorEntry {
    ExecutorEntry {
        executor_id: id.to_owned(),
        app: AppName::parse("demo").unwrap(),
        host: "host-1".to_owned(),
        version: "0.1.0".to_owned(),
        handlers: vec!["ok".to_owned(), "fail".to_owned()],
        owned_partitions: partitions.to_vec(),
        running_jobs: vec![7],
        queued_jobs: vec![8, 9],
        state: ExecutorStatus::Running,
        first_seen_at_ms: beat_ms,
        last_beat_at_ms: beat_ms,
        features: vec![
            "round-signatures".to_owned(),
            "some-future-feature".to_owned(),
        ],
    }
}

/// The table keeps each executor's newest beat; the sweep marks silent executors dead once
/// and forgets them later.
async fn registry_keeps_the_newest_beat_and_sweeps_dead_executors(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    store
        .upsert_executors(&[executor("a", &[0, 1], T0), executor("b", &[2], T0)])
        .await
        .unwrap();
    // A newer beat replaces the row (first seen stays); an older one read late does not.
    store
        .upsert_executors(&[executor("a", &[0], T0 + 3_000)])
        .await
        .unwrap();
    store
        .upsert_executors(&[executor("a", &[0, 1, 2], T0 + 1_000)])
        .await
        .unwrap();
    let listed = store.list_executors(None).await.unwrap();
    assert_eq!(listed.len(), 2);
    let a = &listed[0];
    assert_eq!(
        (
            a.executor_id.as_str(),
            a.owned_partitions.clone(),
            a.first_seen_at_ms,
            a.last_beat_at_ms
        ),
        ("a", vec![0], T0, T0 + 3_000)
    );
    assert_eq!(a.handlers, vec!["ok", "fail"]);
    assert_eq!(a.features, vec!["round-signatures", "some-future-feature"]);
    assert_eq!(
        (a.running_jobs.clone(), a.queued_jobs.clone()),
        (vec![7], vec![8, 9])
    );
    let other_app = AppName::parse("other").unwrap();
    assert!(
        store
            .list_executors(Some(&other_app))
            .await
            .unwrap()
            .is_empty()
    );

    let config = RegistryConfig {
        dead_timeout: Duration::from_secs(10),
        forget_after: Duration::from_secs(60),
        ..RegistryConfig::default()
    };
    // b's beat is exactly 10 s old: still alive; a millisecond later it is dead, once.
    let sweep = sweep_once(store.as_ref(), &config, T0 + 10_000)
        .await
        .unwrap();
    assert!(sweep.marked_dead.is_empty());
    let sweep = sweep_once(store.as_ref(), &config, T0 + 10_001)
        .await
        .unwrap();
    assert_eq!(sweep.marked_dead, vec!["b".to_owned()]);
    let sweep = sweep_once(store.as_ref(), &config, T0 + 10_002)
        .await
        .unwrap();
    assert!(
        sweep.marked_dead.is_empty(),
        "each executor is marked dead once"
    );
    let states: Vec<ExecutorStatus> = store
        .list_executors(None)
        .await
        .unwrap()
        .iter()
        .map(|entry| entry.state)
        .collect();
    assert_eq!(states, vec![ExecutorStatus::Running, ExecutorStatus::Dead]);
    // A beat brings a dead executor back.
    store
        .upsert_executors(&[executor("b", &[2], T0 + 11_000)])
        .await
        .unwrap();
    assert_eq!(
        store.list_executors(None).await.unwrap()[1].state,
        ExecutorStatus::Running
    );
    // Silent for the dead timeout: both dead, still listed.
    let sweep = sweep_once(store.as_ref(), &config, T0 + 11_000 + 10_001)
        .await
        .unwrap();
    assert_eq!((sweep.marked_dead.len(), sweep.forgotten), (2, 0));
    // Silent for dead timeout + forget_after: deleted.
    let sweep = sweep_once(store.as_ref(), &config, T0 + 11_000 + 70_001)
        .await
        .unwrap();
    assert_eq!((sweep.marked_dead.len(), sweep.forgotten), (0, 2));
    assert!(store.list_executors(None).await.unwrap().is_empty());
}

/// A SHARDING_BROADCAST job's fire is written as one row per partition, and a manual trigger
/// with named partitions as one row per named partition; the route partitions survive a claim.
async fn broadcast_fires_become_one_row_per_partition(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    store.create_app(&demo_app()).await.unwrap();
    let mut spec = every_second_job(MisfireStrategy::DoNothing);
    spec.route_strategy = RouteStrategy::ShardingBroadcast;
    let job = store.create_job(&spec, T0).await.unwrap();
    let job = store
        .set_job_status(job.id, JobStatus::Running, Some(T0 + 1_000), T0, T0)
        .await
        .unwrap()
        .job;

    let fires = pre_read_at(store.as_ref(), T0 + 500 - 4_000, "node-a")
        .await
        .fires;
    let shards: Vec<_> = fires
        .iter()
        .map(|fire| {
            (
                fire.trigger_id.clone(),
                fire.shard_index,
                fire.shard_total,
                fire.route_partitions.clone(),
            )
        })
        .collect();
    assert_eq!(
        shards,
        (0..3)
            .map(|shard| (
                TriggerId::shard(job.id, T0 + 1_000, shard as u32),
                shard,
                3,
                Some(vec![shard])
            ))
            .collect::<Vec<_>>()
    );

    let manual = store
        .insert_fire(
            &job,
            &NewFire {
                trigger_id: TriggerId::fresh(job.id),
                trigger_type: TriggerType::Manual,
                params: "x".to_owned(),
                scheduled_at_ms: T0,
                node_id: "node-a".to_owned(),
                lease_until_ms: T0 + 1_000,
                partitions: Some(vec![2, 0]),
            },
        )
        .await
        .unwrap();
    let summary: Vec<_> = manual
        .iter()
        .map(|fire| {
            (
                fire.shard_index,
                fire.shard_total,
                fire.route_partitions.clone(),
            )
        })
        .collect();
    assert_eq!(summary, vec![(0, 2, Some(vec![2])), (1, 2, Some(vec![0]))]);

    // Another node claims the manual shards after their lease: same rows, same partitions.
    let mut claimed = store
        .claim_expired_fires("node-b", T0 + 1_500, T0 + 60_000, 100)
        .await
        .unwrap();
    claimed.sort_by_key(|fire| fire.shard_index);
    assert_eq!(claimed, manual);
    // The manual shards are pending rows; the scheduled ones wait in their batch.
    let runs = store
        .list_runs(job.id, &PageRequest::first(100))
        .await
        .unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|run| run.state == RunState::Scheduled));
}

/// The lost-run monitor fails a run only when its executor is dead, the app has a live
/// executor, and none of them runs or queues the job.
async fn lost_runs_are_failed_only_when_their_result_cannot_come(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let job = super::running_job(store.as_ref(), MisfireStrategy::DoNothing, T0 + 1_000).await;
    let fires = pre_read_at(store.as_ref(), T0, "node-a").await.fires;
    let (on_a, on_b, unowned) = (&fires[0], &fires[1], &fires[2]);
    let ack = |fire: &PendingFire, executor: Option<&str>| DispatchAck {
        log_id: fire.log_id,
        partition: 0,
        dispatched_at_ms: T0 + 1_000,
        executor_id: executor.map(str::to_owned),
        fire: Some(Box::new(fire.clone())),
    };
    store
        .mark_dispatched(&DispatchMarks {
            node_id: "node-a",
            acks: &[
                ack(on_a, Some("a")),
                ack(on_b, Some("b")),
                ack(unowned, None),
            ],
            batches: &[],
            lease_ms: 1_000,
        })
        .await
        .unwrap();
    let config = RegistryConfig {
        dead_timeout: Duration::from_secs(10),
        lost_run_after: Duration::from_secs(600),
        ..RegistryConfig::default()
    };
    let mut beat = executor("a", &[0], T0);
    beat.running_jobs = vec![];
    beat.queued_jobs = vec![];
    store.upsert_executors(&[beat]).await.unwrap();
    let step = |now: i64| {
        let store = store.clone();
        let config = config.clone();
        async move {
            fail_lost_runs_once(store.as_ref(), &config, now)
                .await
                .unwrap()
        }
    };

    // Not old enough yet: nothing examined.
    assert_eq!(step(T0 + 1_000 + 600_000).await.examined, 0);
    let now = T0 + 1_000 + 600_001;
    // a is dead, b unknown, but the app has no live executor: the triggers wait.
    assert_eq!(
        step(now).await,
        LostRunsSummary {
            examined: 2,
            failed: 0
        }
    );
    // b is alive and runs the job (a redelivered run, or a long one): nothing is lost.
    let busy_b = ExecutorEntry {
        running_jobs: vec![job.get()],
        ..executor("b", &[0], now)
    };
    store.upsert_executors(&[busy_b]).await.unwrap();
    assert_eq!(step(now).await.failed, 0);
    // b goes idle: a's run is lost; b's own run is a long run on a live executor.
    let idle_b = ExecutorEntry {
        running_jobs: vec![],
        queued_jobs: vec![],
        ..executor("b", &[0], now + 1)
    };
    store.upsert_executors(&[idle_b]).await.unwrap();
    assert_eq!(
        step(now + 1).await,
        LostRunsSummary {
            examined: 2,
            failed: 1
        }
    );
    let runs = store
        .list_runs(job, &PageRequest::first(100))
        .await
        .unwrap();
    let lost = runs
        .iter()
        .find(|run| run.trigger_id == on_a.trigger_id)
        .unwrap();
    assert_eq!(
        (lost.state, lost.handle_code),
        (RunState::Finished, Some(500))
    );
    let message = lost.handle_msg.as_deref().unwrap();
    assert!(
        message.contains("result lost: executor a is dead (last beat 2026-01-01T00:00:00.000Z)"),
        "{message}"
    );
    let long = runs
        .iter()
        .find(|run| run.trigger_id == on_b.trigger_id)
        .unwrap();
    assert_eq!(long.state, RunState::Dispatched);
    // Failed once: the next step only sees b's run.
    assert_eq!(
        step(now + 2).await,
        LostRunsSummary {
            examined: 1,
            failed: 0
        }
    );
}

/// Log lines are stored once per (run, line) whatever the redeliveries, bounded per run, and
/// read from a given line on; lines of unknown runs are dropped.
async fn log_lines_are_stored_once_bounded_and_read_from_a_line(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    super::running_job(store.as_ref(), MisfireStrategy::DoNothing, T0 + 1_000).await;
    let fires = pre_read_at(store.as_ref(), T0, "node-a").await.fires;
    let log_id = fires[0].log_id;
    let batch = |first_line: i64, lines: &[&str]| LogLines {
        log_id,
        run_started_at_ms: T0 + 5,
        first_line,
        lines: lines.iter().map(|line| line.to_string()).collect(),
    };
    let stored = store
        .append_log_lines(&[batch(1, &["a", "b", "c"]), batch(4, &["d"])], 5)
        .await
        .unwrap();
    assert_eq!(stored, 2, "a chunk per record");
    // A redelivered record, one past the limit, and a log id never given out.
    let ghost = LogLines {
        log_id: 987_654,
        run_started_at_ms: T0 + 5,
        first_line: 1,
        lines: vec!["lost".to_owned()],
    };
    let stored = store
        .append_log_lines(&[batch(3, &["c", "d", "e", "f"]), ghost], 5)
        .await
        .unwrap();
    assert_eq!(
        stored, 1,
        "a record shipped again from line 3 is a chunk of its own, cut at the limit (5); the \
         ghost's lines are dropped"
    );
    let read = store.read_log_lines(log_id, 2, 10).await.unwrap();
    assert_eq!(
        (read.run_started_at_ms, read.earlier_runs),
        (Some(T0 + 5), 0)
    );
    assert_eq!(
        read.lines,
        vec![
            (2, "b".to_owned()),
            (3, "c".to_owned()),
            (4, "d".to_owned()),
            (5, "e".to_owned())
        ]
    );
    assert_eq!(
        store
            .read_log_lines(log_id, 1, 2)
            .await
            .unwrap()
            .lines
            .len(),
        2
    );
    assert_eq!(
        store.read_log_lines(987_654, 1, 10).await.unwrap(),
        RunLogLines::default(),
        "no line: no run named"
    );
    assert!(
        store.get_run(log_id).await.unwrap().is_none(),
        "lines are kept for a planned fire whose run is written once its trigger is acknowledged"
    );
}

/// A trigger run twice (its first run handed back in a rebalance, or its executor dead) numbers
/// both runs' lines from 1 under one log id: each run keeps its own lines, bounded per run,
/// and the log shows the run that started last. Lines of `LogRecord` v1, which names no run
/// (stored as started at 0), show until a run that names itself replaces them.
async fn two_runs_of_one_trigger_keep_their_lines_apart_and_the_later_is_shown(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    super::running_job(store.as_ref(), MisfireStrategy::DoNothing, T0 + 1_000).await;
    let fires = pre_read_at(store.as_ref(), T0, "node-a").await.fires;
    let log_id = fires[0].log_id;
    let run = |run_started_at_ms: i64, first_line: i64, lines: &[&str]| LogLines {
        log_id,
        run_started_at_ms,
        first_line,
        lines: lines.iter().map(|line| line.to_string()).collect(),
    };
    let (first, second) = (T0 + 10, T0 + 40_000);
    let shown = |from_line: i64| {
        let store = store.clone();
        async move { store.read_log_lines(log_id, from_line, 10).await.unwrap() }
    };

    // Lines of an executor that predates LogRecord v2.
    store
        .append_log_lines(&[run(0, 1, &["old 1", "old 2"])], 3)
        .await
        .unwrap();
    let read = shown(1).await;
    assert_eq!((read.run_started_at_ms, read.earlier_runs), (Some(0), 0));
    assert_eq!(read.lines, vec![(1, "old 1".into()), (2, "old 2".into())]);

    // The first run, then the second in the same batch and after; the limit (3) holds per run.
    let stored = store
        .append_log_lines(
            &[
                run(first, 1, &["first 1", "first 2", "first 3", "first 4"]),
                run(second, 1, &["second 1"]),
            ],
            3,
        )
        .await
        .unwrap();
    assert_eq!(
        stored, 2,
        "a chunk of each run, the first run's cut at 3 lines"
    );
    let stored = store
        .append_log_lines(
            &[run(second, 2, &["second 2"]), run(first, 1, &["first 1"])],
            3,
        )
        .await
        .unwrap();
    assert_eq!(
        stored, 1,
        "a redelivered record of the first run is a repeat"
    );
    let read = shown(1).await;
    assert_eq!(
        (read.run_started_at_ms, read.earlier_runs),
        (Some(second), 2),
        "the later run replaces the first and the version-1 lines"
    );
    assert_eq!(
        read.lines,
        vec![(1, "second 1".into()), (2, "second 2".into())]
    );
    assert_eq!(shown(2).await.lines, vec![(2, "second 2".into())]);
    assert!(
        shown(3).await.lines.is_empty(),
        "the first run's line 3 is not shown"
    );
}

on_every_backend!(
    two_runs_of_one_trigger_keep_their_lines_apart_and_the_later_is_shown,
    log_lines_are_stored_once_bounded_and_read_from_a_line,
    registry_keeps_the_newest_beat_and_sweeps_dead_executors,
    broadcast_fires_become_one_row_per_partition,
    lost_runs_are_failed_only_when_their_result_cannot_come,
);
