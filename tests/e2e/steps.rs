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
    App, HistoryPolicy, JobStatus, NewJob, PendingFire, RouteStrategy, RunState,
};
use kadence_scheduler::domain::schedule::ScheduleSpec;
use kadence_scheduler::engine::acks::{AckLedger, AckWriter, SettledFire};
use kadence_scheduler::engine::cancellations::CancelledFires;
use kadence_scheduler::engine::claims::Claimer;
use kadence_scheduler::engine::dispatch::{
    DispatchOutcomes, DispatchSettings, DispatchSummary, Dispatcher,
};
use kadence_scheduler::engine::held_runs::HeldRuns;
use kadence_scheduler::engine::intake::FireIntake;
use kadence_scheduler::engine::kafka::TopicAdmin;
use kadence_scheduler::engine::open_batches::OpenBatches;
use kadence_scheduler::engine::partitions::PartitionDirectory;
use kadence_scheduler::engine::preread::{PreReadSettings, PreReader};
use kadence_scheduler::engine::registry::Registry;
use kadence_scheduler::engine::shards::{ShardLeaser, ShardOwnership};
use kadence_scheduler::engine::signer::{SignedProducer, Signer};
use kadence_scheduler::readers::executor_auth::ExecutorKeyring;
use kadence_scheduler::readers::results::{ResultsConsumer, ResultsSummary};
use kadence_scheduler::store::{PageRequest, Store};
use kadence_schemas::{AppName, JobId, ResultRecord, Topics, codec};
use kadence_tests::triggers::read_triggers;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use tokio::sync::mpsc;

use kadence_tests::fixtures::{Backend, TestDatabase, brokers, fetch_rows, unique};

/// The manual clock's start: 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
/// How long a written fire stays its writer's after its time.
const LEASE: Duration = Duration::from_secs(2);

/// What each test here starts from: a store with an app of two partitions and a running
/// every-second job, the shared topics, and node a's pre-read at T0 with a 5 s window: the
/// fires of T0+1 s … T0+5 s, written as batches and admitted.
struct Scanned {
    db: TestDatabase,
    store: Arc<dyn Store>,
    topics: Topics,
    app: AppName,
    kafka: KafkaSettings,
    job: JobId,
    clock: Arc<ManualClock>,
    /// Node a's batches, as its ack writer settles them.
    open_batches: Arc<OpenBatches>,
    fires: Vec<PendingFire>,
}

impl Scanned {
    async fn at_t0(backend: Backend, prefix: &str) -> Scanned {
        let db = TestDatabase::create(backend).await;
        let store = open_store(&db.url, 4).await.expect("open the store");
        let topics = Topics::new(&unique(prefix)).unwrap();
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
        Scanned {
            db,
            store,
            topics,
            app,
            kafka,
            job,
            clock,
            open_batches,
            fires,
        }
    }

    /// Node a's dispatcher on the manual clock, settling into `ledger` and the returned
    /// channel.
    fn dispatcher(&self, ledger: &Arc<AckLedger>) -> (Dispatcher, mpsc::Receiver<SettledFire>) {
        let (acks, ack_rx) = mpsc::channel(100);
        let signer = Signer::new(RecordSigner::generate().unwrap());
        let dispatcher = Dispatcher::new(
            SignedProducer::new(self.kafka.idempotent_producer().unwrap(), Arc::new(signer)),
            self.topics.clone(),
            Arc::new(PartitionDirectory::new(self.store.clone())),
            Arc::new(Registry::new(Duration::from_secs(10))),
            DispatchOutcomes {
                acks,
                ledger: Arc::clone(ledger),
                cancelled: Arc::new(CancelledFires::new()),
            },
            Arc::clone(&self.clock) as Arc<dyn Clock>,
            DispatchSettings {
                max_in_flight: 10,
                drain_timeout: Duration::from_secs(5),
                trigger_validity: Some(Duration::from_secs(3600)),
                trigger_signatures: kadence_scheduler::config::TriggerSignatures::Auto,
            },
        );
        (dispatcher, ack_rx)
    }

    /// Node a's ack writer of what dispatch settles into `ledger` and `ack_rx`, settling its
    /// batches.
    fn ack_writer(
        &self,
        ledger: &Arc<AckLedger>,
        ack_rx: mpsc::Receiver<SettledFire>,
    ) -> AckWriter {
        AckWriter::new(
            self.store.clone(),
            Arc::clone(ledger),
            Arc::clone(&self.open_batches),
            ack_rx,
            100,
        )
    }

    /// Dispatch emits `fires` (every one acknowledged).
    async fn emit(&self, dispatcher: &Dispatcher, fires: &[PendingFire]) {
        let emitted = dispatcher.dispatch_once(fires.to_vec()).await;
        assert_eq!(
            emitted,
            DispatchSummary {
                acknowledged: fires.len(),
                ..DispatchSummary::default()
            }
        );
    }

    /// The results consumer of the shared topics, taking hand-made results unsigned
    /// (executor signatures are other tests' subject).
    async fn results_consumer(&self) -> ResultsConsumer {
        let keyring = ExecutorKeyring::load(Arc::clone(&self.store) as _, false)
            .await
            .unwrap();
        ResultsConsumer::new(
            &self.kafka,
            &self.topics,
            Duration::from_secs(6),
            self.store.clone(),
            DeadLetters::new(self.kafka.idempotent_producer().unwrap(), self.topics.dlq()),
            keyring,
            100,
        )
        .unwrap()
    }

    /// Sends a success of each of `fires`, finished at `finished_at_ms`, to the results topic.
    async fn send_successes(&self, fires: &[PendingFire], finished_at_ms: i64) {
        for fire in fires {
            let result = success(fire, finished_at_ms);
            send(&self.topics.results(), &codec::encode(&result).unwrap()).await;
        }
    }
}

/// Pre-read writes the window's fires, dispatch emits some of them stamped with the manual
/// clock, the ack writer marks those, another node claims the rest once their lease ended
/// (same trigger ids), and the results consumer completes the emitted ones and dead-letters
/// a record it cannot read.
async fn the_fire_path_runs_step_by_step_on_a_manual_clock(backend: Backend) {
    let scanned = Scanned::at_t0(backend, "steps").await;
    let Scanned {
        store,
        topics,
        app,
        job,
        clock,
        fires,
        ..
    } = &scanned;
    let job = *job;

    // At T0+3 s dispatch emits the first three; the records carry the manual clock's time.
    clock.set(T0 + 3_000);
    let ledger = Arc::new(AckLedger::new());
    let (dispatcher, ack_rx) = scanned.dispatcher(&ledger);
    scanned.emit(&dispatcher, &fires[..3]).await;
    let mut ack_writer = scanned.ack_writer(&ledger, ack_rx);
    assert_eq!(ack_writer.write_once().await.unwrap(), Some(3));
    assert!(ledger.is_empty(), "every acknowledgement is written");
    let records = read_triggers(&brokers(), &topics.triggers(app), 2).await;
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
        FireIntake::new(Arc::clone(store), wheel_b, "node-b".into(), LEASE),
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
    scanned.send_successes(&fires[..3], T0 + 3_500).await;
    send(&topics.results(), b"not a result").await;
    let mut results = scanned.results_consumer().await;
    let total = step_results_until(&mut results, |total| {
        (total.applied, total.dead_lettered) == (3, 1)
    })
    .await;
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

/// A run whose result comes while its row is held has its row written once, already
/// finished; a held run without its result is written DISPATCHED when dispatch stops; the
/// batch settles past both. Holding starts only once the results consumer's client
/// statistics show that it reads every partition of the results topic.
async fn a_quick_result_has_its_run_row_written_once(backend: Backend) {
    quick_results_while_held(backend, HistoryPolicy::All).await;
}

/// The same with a job that keeps failures only: its quick successes are never written at
/// all (a set of unkept runs stands in for them), and a success delivered again is still
/// recognised as a repeat.
async fn a_quick_success_of_a_job_keeping_failures_only_is_never_written(backend: Backend) {
    quick_results_while_held(backend, HistoryPolicy::Failures).await;
}

/// Three fires emitted and held, two of them succeeding quickly, under `history`.
async fn quick_results_while_held(backend: Backend, history: HistoryPolicy) {
    let scanned = Scanned::at_t0(backend, "held").await;
    let Scanned {
        db,
        store,
        clock,
        fires,
        ..
    } = &scanned;
    // Read when results are recorded, not when fires are planned.
    db.execute(&format!("UPDATE jobs SET history = '{}'", history.as_str()))
        .await;
    count_run_row_updates(db).await;
    // Far longer than the test: every row written here is written by a result or at the
    // stop, never because a hold ended.
    let held = Arc::new(HeldRuns::new(
        Duration::from_secs(600),
        Duration::from_secs(600),
    ));
    let mut results = (scanned.results_consumer().await).taking_held_runs_from(Arc::clone(&held));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    // The client reports its statistics every 5 s; the group assigns during polls.
    while !held.holds() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the results consumer's statistics never showed it reading the results partition"
        );
        results
            .complete_results_once(Duration::from_millis(200))
            .await
            .unwrap();
    }

    clock.set(T0 + 3_000);
    let ledger = Arc::new(AckLedger::new());
    let (dispatcher, ack_rx) = scanned.dispatcher(&ledger);
    scanned.emit(&dispatcher, &fires[..3]).await;
    let writer = scanned
        .ack_writer(&ledger, ack_rx)
        .holding_runs_in(Arc::clone(&held));
    let writer = tokio::spawn(writer.run());
    while held.len() < 3 {
        assert!(tokio::time::Instant::now() < deadline, "runs never held");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for fire in &fires[..3] {
        assert!(
            store.get_run(fire.log_id).await.unwrap().is_none(),
            "held, not written"
        );
    }

    scanned.send_successes(&fires[..2], T0 + 3_500).await;
    let total = step_results_until(&mut results, |total| total.applied >= 2).await;
    assert_eq!(
        (total.applied, total.duplicates, total.dead_lettered),
        (2, 0, 0)
    );
    assert_eq!(held.len(), 1, "the run without a result is still held");
    scanned.send_successes(&fires[..1], T0 + 3_500).await;
    let again = step_results_until(&mut results, |total| total.duplicates >= 1).await;
    assert_eq!(
        (again.applied, again.duplicates, again.dead_lettered),
        (0, 1, 0),
        "a result delivered again"
    );

    // Dispatch stops: the writer writes the run still held and settles the batch.
    drop(dispatcher);
    tokio::time::timeout(Duration::from_secs(30), writer)
        .await
        .expect("the ack writer stops once everything is written")
        .unwrap();
    assert!(ledger.is_empty(), "every acknowledgement is written");
    let mut states = Vec::new();
    for fire in &fires[..3] {
        states.push(
            store
                .get_run(fire.log_id)
                .await
                .unwrap()
                .map(|run| run.state),
        );
    }
    let quick = match history {
        HistoryPolicy::All => Some(RunState::Finished),
        _ => None,
    };
    assert_eq!(states, [quick, quick, Some(RunState::Dispatched)]);
    let updates: Vec<(i64,)> = fetch_rows(db, "SELECT log_id FROM run_row_updates", None).await;
    assert_eq!(updates, [], "every row was written once, by an insert");
    // The batch's lease follows its first fire still open: another node takes over the
    // last two fires only, once T0+4 s + the lease passed.
    let claimed = store
        .claim_expired_batches("node-b", T0 + 7_001, 2_000, 10)
        .await
        .unwrap();
    let open: Vec<&PendingFire> = claimed
        .iter()
        .flat_map(|batch| batch.pending_fires())
        .collect();
    assert_eq!(open, fires[3..].iter().collect::<Vec<_>>());
}

/// Steps `results` until the summed summaries satisfy `enough`, for a minute at most;
/// returns the sum.
async fn step_results_until(
    results: &mut ResultsConsumer,
    enough: impl Fn(&ResultsSummary) -> bool,
) -> ResultsSummary {
    let mut total = ResultsSummary::default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !enough(&total) {
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
    total
}

/// Makes `db` note the log id of every update of a `job_logs` row in `run_row_updates`.
async fn count_run_row_updates(db: &TestDatabase) {
    db.execute("CREATE TABLE run_row_updates (log_id BIGINT NOT NULL)")
        .await;
    match db.backend() {
        Backend::Sqlite => {
            db.execute(
                "CREATE TRIGGER count_run_row_updates AFTER UPDATE ON job_logs \
                 BEGIN INSERT INTO run_row_updates VALUES (NEW.id); END",
            )
            .await
        }
        Backend::Postgres => {
            db.execute(
                "CREATE FUNCTION count_run_row_update() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN INSERT INTO run_row_updates VALUES (NEW.id); RETURN NEW; END $$",
            )
            .await;
            db.execute(
                "CREATE TRIGGER count_run_row_updates AFTER UPDATE ON job_logs \
                 FOR EACH ROW EXECUTE FUNCTION count_run_row_update()",
            )
            .await
        }
        Backend::MySql => {
            db.execute(
                "CREATE TRIGGER count_run_row_updates AFTER UPDATE ON job_logs \
                 FOR EACH ROW INSERT INTO run_row_updates VALUES (NEW.id)",
            )
            .await
        }
    }
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

/// Produces `payload` to `topic`.
async fn send(topic: &str, payload: &[u8]) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .create()
        .unwrap();
    producer
        .send(
            FutureRecord::<str, [u8]>::to(topic).payload(payload),
            Timeout::After(Duration::from_secs(10)),
        )
        .await
        .map_err(|(error, _)| error)
        .expect("produce to the results topic");
}

on_every_backend!(
    the_fire_path_runs_step_by_step_on_a_manual_clock,
    a_quick_result_has_its_run_row_written_once,
    a_quick_success_of_a_job_keeping_failures_only_is_never_written,
);
