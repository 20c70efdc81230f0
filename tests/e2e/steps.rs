//! The scheduler's loops driven one step at a time on a [`ManualClock`], against the real broker
//! and both stores: the pre-read scan, dispatch, the acknowledgement writer, claims and the
//! results consumer, each through its step function (`pre_read_once`, `dispatch_once`,
//! `write_once`, `claim_once`, `complete_results_once`) rather than its timed loop. The clock
//! decides every instant, so the test states exactly which fires exist when, and proves the
//! loops take their time from the clock they are given (the trigger records carry it).
//! Runs on both stores: what it checks is what the store wrote at each step.

use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::{DeadLetters, KafkaSettings, RecordSigner};
use kadence_scheduler::app::pools::open_store;
use kadence_scheduler::clock::{Clock, ManualClock};
use kadence_scheduler::domain::model::{
    App, JobStatus, NewJob, PendingFire, RouteStrategy, RunState,
};
use kadence_scheduler::domain::schedule::ScheduleSpec;
use kadence_scheduler::engine::acks::{AckLedger, AckWriter};
use kadence_scheduler::engine::cancellations::CancelledFires;
use kadence_scheduler::engine::claims::Claimer;
use kadence_scheduler::engine::dispatch::{
    DispatchOutcomes, DispatchSettings, DispatchSummary, Dispatcher,
};
use kadence_scheduler::engine::intake::FireIntake;
use kadence_scheduler::engine::kafka::TopicAdmin;
use kadence_scheduler::engine::partitions::PartitionDirectory;
use kadence_scheduler::engine::preread::{PreReadSettings, PreReader};
use kadence_scheduler::engine::registry::Registry;
use kadence_scheduler::engine::shards::{ShardLeaser, ShardOwnership};
use kadence_scheduler::engine::signer::{SignedProducer, Signer};
use kadence_scheduler::readers::results::{ResultsConsumer, ResultsSummary};
use kadence_scheduler::store::{PageRequest, Store};
use kadence_schemas::{AppName, ResultRecord, Topics, codec};
use kadence_tests::triggers::read_triggers;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use tokio::sync::mpsc;

use kadence_tests::fixtures::{Backend, TestDatabase, brokers, unique};

/// The manual clock's start: 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
/// How long a written fire stays its writer's after its time.
const LEASE: Duration = Duration::from_secs(2);

/// Pre-read writes the window's fires, dispatch emits some of them stamped with the manual
/// clock, the ack writer marks those, another node claims the rest once their lease ended
/// (same trigger ids), and the results consumer completes the emitted ones and dead-letters
/// a record it cannot read.
async fn the_fire_path_runs_step_by_step_on_a_manual_clock(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = open_store(&db.url, 4).await.expect("open the store");
    let topics = Topics::new(&unique("steps")).unwrap();
    let app = AppName::parse("steps").unwrap();
    let kafka = KafkaSettings {
        brokers: brokers(),
        broker_kind: kadence_tests::fixtures::broker_kind(),
        options: Default::default(),
    };
    let admin = TopicAdmin::new(&kafka).unwrap();
    admin.ensure_shared_topics(&topics, 1).await.unwrap();
    admin
        .ensure_topic(&topics.triggers(&app), 2, &[])
        .await
        .unwrap();
    let job = every_second_job(store.as_ref(), &app, T0 + 1_000).await;
    let clock = Arc::new(ManualClock::new(T0));

    // Pre-read at T0 with a 5 s window: the fires of T0+1 s … T0+5 s, written and admitted.
    let (wheel, mut admitted) = mpsc::channel(100);
    let intake = FireIntake::new(Arc::clone(&store), wheel, "node-a".into(), LEASE);
    let open_batches = Arc::clone(intake.open_batches());
    // Node a takes every schedule shard (it is the only node), then scans them.
    store.ensure_shards(4).await.unwrap();
    let ownership = Arc::new(ShardOwnership::new("node-a"));
    let leaser = ShardLeaser::new(store.clone(), Arc::clone(&ownership), LEASE, Arc::default());
    assert_eq!(
        leaser.lease_once(clock.now_ms()).await.unwrap().owned.len(),
        4
    );
    let pre_reader = PreReader::new(
        intake,
        ownership,
        PreReadSettings {
            window: Duration::from_secs(5),
            read_ahead: Duration::from_secs(5),
            batch_size: 100,
        },
    );
    let planned = pre_reader.pre_read_once(clock.now_ms()).await.unwrap();
    assert_eq!((planned.jobs_read, planned.fires_written), (1, 5));
    let fires = drain(&mut admitted);
    let seconds: Vec<i64> = fires
        .iter()
        .map(|f| (f.scheduled_at_ms - T0) / 1_000)
        .collect();
    assert_eq!(seconds, [1, 2, 3, 4, 5]);

    // At T0+3 s dispatch emits the first three; the records carry the manual clock's time.
    clock.set(T0 + 3_000);
    let (acks, ack_rx) = mpsc::channel(100);
    let ledger = Arc::new(AckLedger::new());
    let signer = Signer::new(RecordSigner::generate().unwrap());
    let dispatcher = Dispatcher::new(
        SignedProducer::new(kafka.idempotent_producer().unwrap(), Arc::new(signer)),
        topics.clone(),
        Arc::new(PartitionDirectory::new(store.clone())),
        Arc::new(Registry::new(Duration::from_secs(10))),
        DispatchOutcomes {
            acks,
            ledger: Arc::clone(&ledger),
            cancelled: Arc::new(CancelledFires::new()),
        },
        Arc::clone(&clock) as Arc<dyn Clock>,
        DispatchSettings {
            max_in_flight: 10,
            drain_timeout: Duration::from_secs(5),
            trigger_validity: Some(Duration::from_secs(3600)),
            trigger_signatures: kadence_scheduler::config::TriggerSignatures::Auto,
        },
    );
    let emitted = dispatcher.dispatch_once(fires[..3].to_vec()).await;
    assert_eq!(
        emitted,
        DispatchSummary {
            acknowledged: 3,
            ..DispatchSummary::default()
        }
    );
    let mut ack_writer = AckWriter::new(
        store.clone(),
        Arc::clone(&ledger),
        open_batches,
        ack_rx,
        100,
    );
    assert_eq!(ack_writer.write_once().await.unwrap(), Some(3));
    assert!(ledger.is_empty(), "every acknowledgement is written");
    let records = read_triggers(&brokers(), &topics.triggers(&app), 2).await;
    let mut on_topic: Vec<(String, i64)> = records
        .iter()
        .map(|r| (r.trigger_id.to_string(), r.emitted_at_ms))
        .collect();
    on_topic.sort();
    let mut expected: Vec<(String, i64)> = fires[..3]
        .iter()
        .map(|f| (f.trigger_id.to_string(), T0 + 3_000))
        .collect();
    expected.sort();
    assert_eq!(on_topic, expected);

    // Node a "dies" with two fires in its wheel. Once the lease of their batch ended (its
    // earliest open fire, T0+4 s, + 2 s), node b claims it and emits exactly those two, with
    // their trigger ids; the dispatched ones stay.
    let (wheel_b, mut claimed) = mpsc::channel(100);
    let claimer = Claimer::new(
        FireIntake::new(Arc::clone(&store), wheel_b, "node-b".into(), LEASE),
        100,
        Arc::new(AckLedger::new()),
    );
    clock.set(T0 + 4_000 + 2_000);
    assert_eq!(
        claimer.claim_once(clock.now_ms()).await.unwrap(),
        0,
        "T0+4 s is leased until T0+6 s"
    );
    clock.set(T0 + 7_001);
    assert_eq!(
        claimer.claim_once(clock.now_ms()).await.unwrap(),
        1,
        "one batch"
    );
    let taken_over: Vec<String> = drain(&mut claimed)
        .iter()
        .map(|f| f.trigger_id.to_string())
        .collect();
    let left: Vec<String> = fires[3..]
        .iter()
        .map(|f| f.trigger_id.to_string())
        .collect();
    assert_eq!(taken_over, left);

    // Results for the three emitted runs, and one unreadable record, reach the results topic.
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .create()
        .unwrap();
    for fire in &fires[..3] {
        let result = success(fire, T0 + 3_500);
        send(
            &producer,
            &topics.results(),
            &codec::encode(&result).unwrap(),
        )
        .await;
    }
    send(&producer, &topics.results(), b"not a result").await;
    let mut results = ResultsConsumer::new(
        &kafka,
        &topics,
        Duration::from_secs(6),
        store.clone(),
        DeadLetters::new(kafka.idempotent_producer().unwrap(), topics.dlq()),
        // Hand-made results, unsigned: executor signatures are other tests' subject.
        kadence_scheduler::readers::executor_auth::ExecutorKeyring::load(
            Arc::clone(&store) as _,
            false,
        )
        .await
        .unwrap(),
        100,
    )
    .unwrap();
    let mut total = ResultsSummary::default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while (total.applied, total.dead_lettered) != (3, 1) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "results so far: {total:?}"
        );
        let step = results
            .complete_results_once(Duration::from_secs(1))
            .await
            .unwrap();
        total.applied += step.applied;
        total.duplicates += step.duplicates;
        total.dead_lettered += step.dead_lettered;
    }
    assert_eq!(total.duplicates, 0);
    let runs = store.list_runs(job, &PageRequest::first(10)).await.unwrap();
    let mut states: Vec<(i64, RunState)> = runs
        .iter()
        .map(|run| ((run.scheduled_at_ms - T0) / 1_000, run.state))
        .collect();
    states.sort_by_key(|(second, _)| *second);
    assert_eq!(
        states,
        [
            (1, RunState::Finished),
            (2, RunState::Finished),
            (3, RunState::Finished),
        ],
        "the claimed fires have no run until their triggers are acknowledged"
    );
}

/// A running every-second job of `app` (2 partitions) whose next fire is `next_fire_ms`.
async fn every_second_job(
    store: &dyn Store,
    app: &AppName,
    next_fire_ms: i64,
) -> kadence_schemas::JobId {
    let every_second = ScheduleSpec::parse("CRON", "* * * * * ?").unwrap();
    store
        .create_app(&App {
            name: app.clone(),
            title: "Steps".into(),
            partitions: 2,
            created_at_ms: T0,
        })
        .await
        .unwrap();
    let spec = NewJob {
        route_strategy: RouteStrategy::Round,
        ..NewJob::new(app.clone(), "tick", every_second, "ok")
    };
    let job = store.create_job(&spec, T0).await.unwrap();
    store
        .set_job_status(job.id, JobStatus::Running, Some(next_fire_ms), T0, T0)
        .await
        .unwrap();
    job.id
}

/// What is waiting on `channel` now.
fn drain(channel: &mut mpsc::Receiver<PendingFire>) -> Vec<PendingFire> {
    std::iter::from_fn(|| channel.try_recv().ok()).collect()
}

/// A successful result of `fire`, finished at `finished_at_ms`.
fn success(fire: &PendingFire, finished_at_ms: i64) -> ResultRecord {
    ResultRecord {
        trigger_id: fire.trigger_id.clone(),
        log_id: fire.log_id,
        job_id: fire.job_id,
        app: fire.app.clone(),
        executor_id: "executor-steps".into(),
        code: 200,
        message: None,
        started_at_ms: finished_at_ms - 100,
        finished_at_ms,
        attempt: fire.attempt,
        retry_after_ms: None,
    }
}

async fn send(producer: &FutureProducer, topic: &str, payload: &[u8]) {
    producer
        .send(
            FutureRecord::<str, [u8]>::to(topic).payload(payload),
            Timeout::After(Duration::from_secs(10)),
        )
        .await
        .map_err(|(error, _)| error)
        .expect("produce to the results topic");
}

on_every_backend!(the_fire_path_runs_step_by_step_on_a_manual_clock);
