//! The store suite: every test runs on SQLite and on PostgreSQL, each on its own fresh
//! database. It checks the durable half of scheduling: pre-read writes each fire once and
//! advances next-fire times, leases are claimed only when expired, results complete a run
//! once (first result wins), and concurrent schedulers never write a fire twice.

#[macro_use]
extern crate kadence_tests;
mod accounts;
mod audit;
mod batches;
mod console;
mod held_runs;
mod history;
mod imports;
mod monitors;
mod operators;
mod registry;
mod run_counts;
mod shards;
mod signing;
mod user_changes;

use std::collections::HashSet;
use std::sync::Arc;

use kadence_scheduler::app::pools::open_store;
use kadence_scheduler::domain::model::{
    App, ChildTriggerMode, Completion, CompletionOutcome, Glue, JobStatus, NewJob, PendingFire,
    RetryBackoff, RetryPolicy, RunState,
};
use kadence_scheduler::domain::schedule::{MisfireStrategy, ScheduleSpec};
use kadence_scheduler::store::{
    BatchProgress, DispatchAck, DispatchMarks, JobFilter, OwnedShard, PageRequest, PreReadOutcome,
    PreReadRequest, ShardLeaseRequest, Store, StoreError,
};
use kadence_schemas::{AppName, GlueType, JobId, TriggerId, TriggerType};
use kadence_tests::fixtures::{Backend, TestDatabase};

/// 2026-01-01T00:00:00Z
const T0: i64 = 1_767_225_600_000;

async fn store_on(db: &TestDatabase) -> Arc<dyn Store> {
    open_store(&db.url, 4)
        .await
        .expect("open and migrate the store")
}

fn demo_app() -> App {
    App {
        name: AppName::parse("demo").unwrap(),
        title: "Demo".into(),
        partitions: 3,
        created_at_ms: T0,
    }
}

fn every_second_job(misfire: MisfireStrategy) -> NewJob {
    NewJob {
        misfire_strategy: misfire,
        params: "p".into(),
        ..NewJob::new(
            AppName::parse("demo").unwrap(),
            "tick",
            ScheduleSpec::parse("CRON", "* * * * * ?").unwrap(),
            "ok",
        )
    }
}

/// Shards every test database is split into.
const SHARDS: u32 = 4;

/// A shard lease long enough to outlast any test's manual clock.
const SHARD_LEASE_MS: i64 = 600_000;

/// Leases `node` its share of the shards at `now_ms` (creating them on a fresh database).
async fn lease_for(store: &dyn Store, now_ms: i64, node: &str) -> Vec<OwnedShard> {
    store
        .ensure_shards(SHARDS)
        .await
        .expect("create the shards");
    store
        .lease_shards(&ShardLeaseRequest {
            node_id: node.into(),
            now_ms,
            lease_ms: SHARD_LEASE_MS,
        })
        .await
        .expect("lease shards")
        .owned
}

/// A pre-read scan by `node` at `now_ms` of `shards`.
fn scan_request(now_ms: i64, node: &str, shards: Vec<OwnedShard>) -> PreReadRequest {
    PreReadRequest {
        now_ms,
        window_ms: 5_000,
        read_ahead_ms: 5_000,
        batch_size: 100,
        node_id: node.into(),
        lease_ms: 1_000,
        shards,
    }
}

/// One pre-read scan by `node` at `now_ms` of the shards it leases first.
async fn pre_read_at(store: &dyn Store, now_ms: i64, node: &str) -> PreReadOutcome {
    let shards = lease_for(store, now_ms, node).await;
    store
        .pre_read(&scan_request(now_ms, node, shards))
        .await
        .expect("pre-read")
}

async fn running_job(store: &dyn Store, misfire: MisfireStrategy, next_fire_ms: i64) -> JobId {
    store.create_app(&demo_app()).await.unwrap();
    let job = store
        .create_job(&every_second_job(misfire), T0)
        .await
        .unwrap();
    store
        .set_job_status(job.id, JobStatus::Running, Some(next_fire_ms), T0, T0)
        .await
        .unwrap();
    job.id
}

async fn apps_and_jobs_round_trip(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    store.create_app(&demo_app()).await.unwrap();
    assert!(matches!(
        store.create_app(&demo_app()).await,
        Err(StoreError::AppExists(_))
    ));
    assert_eq!(store.list_apps().await.unwrap(), vec![demo_app()]);

    let mut orphan = every_second_job(MisfireStrategy::DoNothing);
    orphan.app = AppName::parse("nowhere").unwrap();
    assert!(matches!(
        store.create_job(&orphan, T0).await,
        Err(StoreError::UnknownApp(_))
    ));

    let spec = every_second_job(MisfireStrategy::FireOnceNow);
    let job = store.create_job(&spec, T0).await.unwrap();
    assert_eq!(job.spec, spec);
    assert_eq!(job.status, JobStatus::Stopped);
    assert_eq!(store.get_job(job.id).await.unwrap(), Some(job.clone()));
    let started = store
        .set_job_status(job.id, JobStatus::Running, Some(T0 + 1_000), T0 + 5, T0 + 5)
        .await
        .unwrap()
        .job;
    assert_eq!(
        (started.status, started.next_fire_ms),
        (JobStatus::Running, Some(T0 + 1_000))
    );
    let missing = JobId::new(999_999).unwrap();
    assert!(matches!(
        store
            .set_job_status(missing, JobStatus::Stopped, None, T0, T0)
            .await,
        Err(StoreError::JobNotFound(_))
    ));
    assert_eq!(
        store
            .list_jobs(
                &JobFilter {
                    apps: Some(vec![AppName::parse("demo").unwrap()]),
                    ..JobFilter::default()
                },
                &PageRequest::first(10),
            )
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn pre_read_writes_each_fire_once_and_advances(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let job = running_job(store.as_ref(), MisfireStrategy::DoNothing, T0 + 1_000).await;

    let outcome = pre_read_at(store.as_ref(), T0 + 500, "node-a").await;
    assert_eq!(outcome.jobs_read, 1);
    let scheduled: Vec<i64> = outcome.fires.iter().map(|f| f.scheduled_at_ms).collect();
    assert_eq!(
        scheduled,
        vec![T0 + 1_000, T0 + 2_000, T0 + 3_000, T0 + 4_000, T0 + 5_000]
    );
    for fire in &outcome.fires {
        assert_eq!(
            fire.trigger_id,
            TriggerId::scheduled(job, fire.scheduled_at_ms)
        );
        assert_eq!(fire.trigger_type, TriggerType::Cron);
        assert!(fire.log_id > 0);
        assert_eq!(fire.params, "p");
    }
    let after = store.get_job(job).await.unwrap().unwrap();
    assert_eq!(after.next_fire_ms, Some(T0 + 6_000));
    assert_eq!(after.last_fire_ms, Some(T0 + 5_000));

    // Same instant again: nothing new is due, nothing is written twice.
    let again = pre_read_at(store.as_ref(), T0 + 500, "node-a").await;
    assert!(again.fires.is_empty());
    // A second later exactly one more fire enters the window.
    let next = pre_read_at(store.as_ref(), T0 + 1_500, "node-a").await;
    assert_eq!(
        next.fires
            .iter()
            .map(|f| f.scheduled_at_ms)
            .collect::<Vec<_>>(),
        vec![T0 + 6_000]
    );
    // Planned fires are batches, one per scan and shard: a run exists once its trigger is
    // on the broker.
    assert_eq!(outcome.batches.len(), 1);
    assert_eq!(outcome.batches[0].fires, 0..5);
    assert_eq!(next.batches.len(), 1);
    let runs = store
        .list_runs(job, &PageRequest::first(100))
        .await
        .unwrap();
    assert!(runs.is_empty(), "{runs:?}");
}

/// The acknowledgement of `fire` of a batch (its run row is written with the mark).
fn ack_of(fire: &PendingFire, partition: i32, at_ms: i64, executor: Option<&str>) -> DispatchAck {
    DispatchAck {
        log_id: fire.log_id,
        partition,
        dispatched_at_ms: at_ms,
        executor_id: executor.map(str::to_owned),
        fire: Some(Box::new(fire.clone())),
    }
}

/// Records `acks` as node-a's, settling `batches`.
async fn mark(store: &dyn Store, acks: &[DispatchAck], batches: &[BatchProgress]) {
    store
        .mark_dispatched(&DispatchMarks {
            node_id: "node-a",
            acks,
            batches,
            lease_ms: 1_000,
        })
        .await
        .unwrap();
}

/// A job is read only once its next fire is within the read-ahead, then planned through the
/// whole window: one next-fire update for several fires.
async fn a_job_is_read_within_the_read_ahead_and_planned_through_the_window(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let job = running_job(store.as_ref(), MisfireStrategy::DoNothing, T0 + 4_000).await;
    let shards = lease_for(store.as_ref(), T0, "node-a").await;
    let scan = |now_ms: i64| {
        let request = PreReadRequest {
            read_ahead_ms: 3_000,
            ..scan_request(now_ms, "node-a", shards.clone())
        };
        let store = std::sync::Arc::clone(&store);
        async move { store.pre_read(&request).await.unwrap() }
    };
    assert_eq!(
        scan(T0).await.jobs_read,
        0,
        "4 s away, beyond the read-ahead"
    );
    let outcome = scan(T0 + 1_500).await;
    let planned: Vec<i64> = outcome
        .fires
        .iter()
        .map(|f| f.scheduled_at_ms - T0)
        .collect();
    assert_eq!(planned, [4_000, 5_000, 6_000]);
    assert_eq!(
        store.get_job(job).await.unwrap().unwrap().next_fire_ms,
        Some(T0 + 7_000)
    );
    assert_eq!(
        scan(T0 + 2_500).await.jobs_read,
        0,
        "the next fire is 4.5 s away"
    );
    assert_eq!(scan(T0 + 4_000).await.fires.len(), 3, "7 s, 8 s and 9 s");
}

async fn misfire_strategies_apply_after_a_long_outage(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let job = running_job(store.as_ref(), MisfireStrategy::FireOnceNow, T0).await;
    let now = T0 + 60_000; // a minute of downtime
    let outcome = pre_read_at(store.as_ref(), now, "node-a").await;
    let first = &outcome.fires[0];
    assert_eq!(first.trigger_type, TriggerType::Misfire);
    assert_eq!(first.scheduled_at_ms, T0);
    assert_eq!(first.fire_at_ms, now);
    assert!(
        outcome.fires[1..]
            .iter()
            .all(|f| f.scheduled_at_ms > now && f.trigger_type == TriggerType::Cron)
    );
    assert_eq!(
        store.get_job(job).await.unwrap().unwrap().status,
        JobStatus::Running
    );
}

/// A node's batch is claimed only after its lease, by one node, with the fires its node had
/// not yet recorded; a fire whose run row exists is not emitted again.
async fn expired_batches_are_claimed_once_without_what_was_dispatched(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    running_job(store.as_ref(), MisfireStrategy::DoNothing, T0 + 1_000).await;
    let outcome = pre_read_at(store.as_ref(), T0, "node-a").await;
    let (written, batch) = (outcome.fires, outcome.batches[0].id);
    assert_eq!(written.len(), 5);
    let claim = |node: &'static str, now_ms: i64| {
        let store = Arc::clone(&store);
        async move {
            store
                .claim_expired_batches(node, now_ms, 1_000, 100)
                .await
                .unwrap()
        }
    };
    // Leased until its earliest open fire + 1 s.
    assert!(claim("node-b", T0 + 1_500).await.is_empty());
    // Node a records the first two and moves the lease to the third; it also got the
    // fourth acknowledged but had not settled its batch past the third when it died.
    let progress = BatchProgress {
        id: batch,
        pending_from_ms: Some(T0 + 3_000),
    };
    let first_two = [
        ack_of(&written[0], 0, T0 + 1_000, None),
        ack_of(&written[1], 0, T0 + 2_000, None),
    ];
    mark(store.as_ref(), &first_two, &[progress]).await;
    mark(
        store.as_ref(),
        &[ack_of(&written[3], 0, T0 + 4_000, None)],
        &[],
    )
    .await;
    assert!(claim("node-b", T0 + 3_500).await.is_empty());

    let (b, c) = tokio::join!(claim("node-b", T0 + 4_001), claim("node-c", T0 + 4_001));
    let claimed: Vec<_> = b.into_iter().chain(c).collect();
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    let pending: Vec<&PendingFire> = claimed[0].pending_fires().collect();
    assert_eq!(
        pending,
        [&written[2], &written[4]],
        "the same fires, same trigger ids, without the recorded one"
    );
    assert!(claim("node-d", T0 + 4_001).await.is_empty());
    let runs = store
        .list_runs(written[0].job_id, &PageRequest::first(100))
        .await
        .unwrap();
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|run| run.state == RunState::Dispatched));
}

async fn first_result_wins(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let job = running_job(store.as_ref(), MisfireStrategy::DoNothing, T0 + 1_000).await;
    let fire = pre_read_at(store.as_ref(), T0, "node-a")
        .await
        .fires
        .remove(0);
    // Its run is written once the broker acknowledged it: before, a result is unknown.
    let early = store
        .complete_runs(&[Completion {
            app: None,
            trigger_id: fire.trigger_id.clone(),
            executor_id: "exec-1".into(),
            code: 200,
            message: None,
            started_at_ms: T0 + 1_001,
            finished_at_ms: T0 + 1_002,
            retry_after_ms: None,
        }])
        .await
        .unwrap();
    assert_eq!(early, [CompletionOutcome::UnknownTrigger]);
    let dispatched = ack_of(&fire, 2, T0 + 1_000, Some("expected-owner"));
    mark(store.as_ref(), std::slice::from_ref(&dispatched), &[]).await;
    let completion = |code: i32, message: &str| Completion {
        app: None,
        trigger_id: fire.trigger_id.clone(),
        executor_id: "exec-1".into(),
        code,
        message: Some(message.into()),
        started_at_ms: T0 + 1_001,
        finished_at_ms: T0 + 1_050,
        retry_after_ms: None,
    };
    let unknown = Completion {
        app: None,
        trigger_id: TriggerId::scheduled(job, T0 + 999_000),
        ..completion(200, "x")
    };
    let outcomes = store
        .complete_runs(&[
            completion(500, "boom"),
            completion(200, "late duplicate"),
            unknown,
        ])
        .await
        .unwrap();
    assert_eq!(
        outcomes,
        vec![
            CompletionOutcome::Applied,
            CompletionOutcome::Duplicate,
            CompletionOutcome::UnknownTrigger
        ]
    );
    // An acknowledgement recorded again after the result (a claimer emitted the fire again;
    // or, for a run written before its trigger, the broker's ack arriving late) does not
    // move the run back.
    mark(store.as_ref(), std::slice::from_ref(&dispatched), &[]).await;
    let existing_row = DispatchAck {
        fire: None,
        partition: 3,
        ..dispatched
    };
    mark(store.as_ref(), &[existing_row], &[]).await;
    let run = store
        .list_runs(job, &PageRequest::first(100))
        .await
        .unwrap()
        .into_iter()
        .find(|run| run.trigger_id == fire.trigger_id)
        .unwrap();
    assert_eq!(run.state, RunState::Finished);
    assert_eq!(run.handle_code, Some(500));
    assert_eq!(run.handle_msg.as_deref(), Some("boom"));
    assert_eq!(run.partition, Some(3));
    assert_eq!(
        run.executor_id.as_deref(),
        Some("exec-1"),
        "the executor that ran it, not the one expected at dispatch"
    );
}

async fn concurrent_schedulers_write_each_fire_once(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let setup = store_on(&db).await;
    setup.create_app(&demo_app()).await.unwrap();
    let mut jobs = Vec::new();
    for _ in 0..20 {
        let job = setup
            .create_job(&every_second_job(MisfireStrategy::DoNothing), T0)
            .await
            .unwrap();
        setup
            .set_job_status(job.id, JobStatus::Running, Some(T0 + 1_000), T0, T0)
            .await
            .unwrap();
        jobs.push(job.id);
    }
    // Three "nodes" share the shards (two rounds: the first node takes all, then gives the
    // later ones their share); then each, with its own pool, scans the same instants
    // concurrently, and one of them also with a stale claim on every shard.
    let mut owned = Vec::new();
    for round in 0..2 {
        owned.clear();
        for node in 0..3 {
            owned.push(lease_for(setup.as_ref(), T0 + round, &format!("node-{node}")).await);
        }
    }
    let mut covered: Vec<u32> = owned.iter().flatten().map(|owned| owned.shard).collect();
    covered.sort_unstable();
    assert_eq!(covered, (0..SHARDS).collect::<Vec<_>>(), "{owned:?}");
    let stale: Vec<OwnedShard> = (0..SHARDS)
        .map(|shard| OwnedShard { shard, fence: 1 })
        .collect();
    let mut nodes = Vec::new();
    for (node, shards) in owned.into_iter().enumerate() {
        let store = store_on(&db).await;
        let stale = stale.clone();
        nodes.push(tokio::spawn(async move {
            let mut fires = Vec::new();
            for step in 0..10 {
                let now = T0 + step * 1_000;
                let name = format!("node-{node}");
                let request = scan_request(now, &name, shards.clone());
                fires.extend(store.pre_read(&request).await.expect("pre-read").fires);
                if node == 0 {
                    let stale = scan_request(now, &name, stale.clone());
                    fires.extend(store.pre_read(&stale).await.expect("pre-read").fires);
                }
            }
            fires
        }));
    }
    let mut seen = HashSet::new();
    for node in nodes {
        for fire in node.await.unwrap() {
            assert!(
                seen.insert(fire.trigger_id.clone()),
                "{} written twice",
                fire.trigger_id
            );
        }
    }
    // Every job has every second from T0+1 s to T0+14 s (last scan at T0+9 s, window 5 s).
    for job in jobs {
        for second in 1..=14 {
            let expected = TriggerId::scheduled(job, T0 + second * 1_000);
            assert!(seen.contains(&expected), "missing {expected}");
        }
    }
    assert_eq!(seen.len(), 20 * 14);
}

/// A running FIX_DELAY job (30 s) with `retry`, due at T0 + 1 s, and the fires of a scan at
/// T0, acknowledged (their runs written).
async fn fix_delay_job_fired(store: &dyn Store, retry: RetryPolicy) -> (JobId, Vec<PendingFire>) {
    let (job, fires) = fix_delay_job_planned(store, retry).await;
    let acks: Vec<DispatchAck> = fires
        .iter()
        .map(|fire| ack_of(fire, 0, T0 + 1_000, None))
        .collect();
    mark(store, &acks, &[]).await;
    (job, fires)
}

/// A running FIX_DELAY job (30 s) with `retry`, due at T0 + 1 s, and the fires of a scan at
/// T0 (no run written yet).
async fn fix_delay_job_planned(store: &dyn Store, retry: RetryPolicy) -> (JobId, Vec<PendingFire>) {
    store.create_app(&demo_app()).await.unwrap();
    let spec = NewJob {
        schedule: ScheduleSpec::parse("FIX_DELAY", "30").unwrap(),
        retry,
        ..every_second_job(MisfireStrategy::DoNothing)
    };
    let job = store.create_job(&spec, T0).await.unwrap();
    store
        .set_job_status(job.id, JobStatus::Running, Some(T0 + 1_000), T0, T0)
        .await
        .unwrap();
    let fires = pre_read_at(store, T0, "node-a").await.fires;
    (job.id, fires)
}

async fn fix_delay_waits_for_the_run_to_finish(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let (job_id, fires) = fix_delay_job_fired(store.as_ref(), RetryPolicy::default()).await;
    assert_eq!(fires.len(), 1);
    assert_eq!(fires[0].trigger_type, TriggerType::FixDelay);
    let waiting = store.get_job(job_id).await.unwrap().unwrap();
    assert_eq!(
        (waiting.status, waiting.next_fire_ms),
        (JobStatus::Running, None)
    );
    // Nothing more fires while the run is going.
    assert!(
        pre_read_at(store.as_ref(), T0 + 60_000, "node-a")
            .await
            .fires
            .is_empty()
    );
    let finished_at = T0 + 4_321;
    let outcome = store
        .complete_runs(&[Completion {
            app: None,
            trigger_id: fires[0].trigger_id.clone(),
            executor_id: "e".into(),
            code: 200,
            message: None,
            started_at_ms: T0 + 1_001,
            finished_at_ms: finished_at,
            retry_after_ms: None,
        }])
        .await
        .unwrap();
    assert_eq!(outcome, vec![CompletionOutcome::Applied]);
    let rescheduled = store.get_job(job_id).await.unwrap().unwrap();
    assert_eq!(rescheduled.next_fire_ms, Some(finished_at + 30_000));
}

/// A FIX_DELAY run that fails with retries left has not ended: the next fire waits for its
/// last attempt (here the retry), and counts from that attempt's end.
async fn fix_delay_waits_for_the_last_attempt(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let retry = RetryPolicy {
        count: 1,
        backoff: RetryBackoff::None,
    };
    let (job_id, mut fires) = fix_delay_job_fired(store.as_ref(), retry).await;
    let first = fires.remove(0);
    let failure = |trigger_id: &TriggerId, finished_at_ms: i64| Completion {
        app: None,
        trigger_id: trigger_id.clone(),
        executor_id: "e".into(),
        code: 500,
        message: Some("boom".into()),
        started_at_ms: finished_at_ms - 100,
        finished_at_ms,
        retry_after_ms: None,
    };
    store
        .complete_runs(&[failure(&first.trigger_id, T0 + 2_000)])
        .await
        .unwrap();
    let waiting = store.get_job(job_id).await.unwrap().unwrap();
    assert_eq!(
        waiting.next_fire_ms, None,
        "the failed first attempt will be retried"
    );

    // The follow-up monitor's retry of it, as it writes one.
    let retry = PendingFire {
        log_id: 0,
        trigger_id: first.trigger_id.retry(1),
        trigger_type: TriggerType::Retry,
        attempt: 1,
        scheduled_at_ms: T0 + 2_500,
        fire_at_ms: T0 + 2_500,
        ..first.clone()
    };
    let retry = store
        .insert_retry(&retry, first.log_id, "node-a", 10_000, T0 + 2_100)
        .await
        .unwrap()
        .expect("retry written");
    store
        .complete_runs(&[failure(&retry.trigger_id, T0 + 3_000)])
        .await
        .unwrap();
    let rescheduled = store.get_job(job_id).await.unwrap().unwrap();
    assert_eq!(
        rescheduled.next_fire_ms,
        Some(T0 + 3_000 + 30_000),
        "retries exhausted: the delay counts from the last attempt's end"
    );
}

async fn the_whole_job_model_round_trips_and_keeps_30_script_versions(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    store.create_app(&demo_app()).await.unwrap();
    let parent = store
        .create_job(&every_second_job(MisfireStrategy::DoNothing), T0)
        .await
        .unwrap();
    let script = |n: usize| Glue {
        glue_type: GlueType::GlueShell,
        source: Some(format!("echo version {n}")),
        remark: format!("v{n}"),
    };
    let spec = NewJob {
        author: "ops@example.com".into(),
        alarm_emails: vec!["a@example.com".into(), "b@example.com".into()],
        alarm_webhook: Some("https://hooks.example.com/kadence".into()),
        retry: RetryPolicy {
            count: 3,
            backoff: RetryBackoff::Exponential {
                base_ms: 2_000,
                cap_ms: 60_000,
            },
        },
        glue: script(0),
        child_job_ids: vec![parent.id],
        child_trigger_mode: ChildTriggerMode::AllShards,
        time_zone: "Asia/Tokyo".parse().unwrap(),
        ..every_second_job(MisfireStrategy::FireOnceNow)
    };
    let job = store.create_job(&spec, T0).await.unwrap();
    assert_eq!(job.spec, spec);
    assert_eq!(job.glue_updated_at_ms, Some(T0));
    assert_eq!(store.get_job(job.id).await.unwrap().unwrap(), job);

    for n in 1..=35 {
        let changed = NewJob {
            glue: script(n),
            ..spec.clone()
        };
        store
            .update_job(
                job.id,
                &changed,
                JobStatus::Stopped,
                None,
                None,
                T0 + n as i64,
            )
            .await
            .unwrap();
    }
    // An edit that leaves the script alone saves no version and keeps its timestamp.
    let params_only = NewJob {
        params: "new".into(),
        glue: script(35),
        ..spec.clone()
    };
    let edited = store
        .update_job(
            job.id,
            &params_only,
            JobStatus::Stopped,
            None,
            None,
            T0 + 99,
        )
        .await
        .unwrap()
        .job;
    assert_eq!(edited.glue_updated_at_ms, Some(T0 + 35));
    assert_eq!(edited.spec.params, "new");
    let versions = store.glue_versions(job.id).await.unwrap();
    assert_eq!(versions.len(), 30);
    assert_eq!(versions[0].source, "echo version 35");
    assert_eq!(versions[29].source, "echo version 6");

    // A fire carries the script it was planned with.
    store
        .update_job(
            job.id,
            &params_only,
            JobStatus::Running,
            Some(T0 + 1_000),
            None,
            T0,
        )
        .await
        .unwrap();
    let fires = pre_read_at(store.as_ref(), T0, "node-a").await.fires;
    assert!(!fires.is_empty());
    assert_eq!(fires[0].glue_type, GlueType::GlueShell);
    assert_eq!(fires[0].glue_source.as_deref(), Some("echo version 35"));
    assert_eq!(fires[0].glue_updated_at_ms, Some(T0 + 35));
}

on_every_backend!(
    the_whole_job_model_round_trips_and_keeps_30_script_versions,
    fix_delay_waits_for_the_run_to_finish,
    fix_delay_waits_for_the_last_attempt,
    apps_and_jobs_round_trip,
    pre_read_writes_each_fire_once_and_advances,
    a_job_is_read_within_the_read_ahead_and_planned_through_the_window,
    misfire_strategies_apply_after_a_long_outage,
    expired_batches_are_claimed_once_without_what_was_dispatched,
    first_result_wins,
    concurrent_schedulers_write_each_fire_once,
);
