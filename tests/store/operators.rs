//! What operators do must never lose or double a fire: a stop or a schedule edit cancels the
//! fires planned under the old state, whichever node holds them (in its wheel, or in a batch
//! a claim takes over); an acknowledgement the database refused is written later and its
//! trigger is never emitted again meanwhile.

use std::sync::Arc;
use std::time::Duration;

use kadence_scheduler::domain::model::{JobStatus, PendingFire, RunState};
use kadence_scheduler::domain::schedule::{MisfireStrategy, ScheduleSpec};
use kadence_scheduler::engine::acks::{AckLedger, AckWriter, SettledFire};
use kadence_scheduler::engine::cancellations::{CancellationPoller, CancelledFires};
use kadence_scheduler::engine::claims::Claimer;
use kadence_scheduler::engine::intake::FireIntake;
use kadence_scheduler::store::{CANCELLATION_MEMORY_MS, DispatchAck, PageRequest, Store};
use kadence_schemas::JobId;
use tokio::sync::mpsc;

use super::{T0, every_second_job, pre_read_at, running_job, store_on};
use kadence_tests::fixtures::{Backend, TestDatabase};

/// The runs of `job` (a run exists once its trigger was acknowledged).
async fn run_count(store: &dyn Store, job: JobId) -> usize {
    store
        .list_runs(job, &PageRequest::first(1000))
        .await
        .unwrap()
        .len()
}

/// What a claim by a node started later, long after every lease ended, emits.
async fn claimed_later(store: &Arc<dyn Store>, now_ms: i64) -> Vec<i64> {
    let (wheel, mut claimed) = mpsc::channel(100);
    let claimer = Claimer::new(
        FireIntake::new(
            Arc::clone(store),
            wheel,
            "node-b".into(),
            Duration::from_secs(10),
        ),
        100,
        Arc::new(AckLedger::new()),
    );
    claimer.claim_once(now_ms).await.unwrap();
    let mut emitted = Vec::new();
    while let Ok(fire) = claimed.try_recv() {
        emitted.push(fire.scheduled_at_ms);
    }
    emitted.sort_unstable();
    emitted
}

/// A job firing every second whose fires T0+1 s … T0+5 s a scan at T0 planned.
async fn job_with_planned_fires(
    backend: Backend,
) -> (TestDatabase, Arc<dyn Store>, JobId, Vec<PendingFire>, i64) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let job = running_job(&*store, MisfireStrategy::DoNothing, T0 + 1_000).await;
    let outcome = pre_read_at(store.as_ref(), T0, "node-a").await;
    assert_eq!(outcome.fires.len(), 5, "T0+1 s … T0+5 s");
    assert_eq!(outcome.batches.len(), 1);
    (db, store, job, outcome.fires, outcome.batches[0].id)
}

/// A stop cancels the job's planned fires in its own transaction: no later claim (another
/// node, or a node started after the stop) emits them, every node learns of it for the copies
/// in its wheel, and a restart plans new fires that pass.
async fn stopping_a_job_cancels_its_planned_fires(backend: Backend) {
    let (_db, store, job, planned, _) = job_with_planned_fires(backend).await;

    // Stopped at T0 + 0.5 s, taking effect 1 s later: the fire due at T0 + 1 s may be on its
    // way already and is left alone; the later ones are cancelled.
    let change = store
        .set_job_status(job, JobStatus::Stopped, None, T0 + 1_500, T0 + 500)
        .await
        .unwrap();
    let cancellation = change
        .cancelled
        .expect("the stop cancels the planned fires");
    assert_eq!(cancellation.job_id, job);
    assert_eq!(cancellation.from_ms, T0 + 1_500);
    assert_eq!(
        cancellation.up_to_log_id,
        planned.iter().map(|fire| fire.log_id).max().unwrap()
    );
    assert_eq!(run_count(&*store, job).await, 0, "none was emitted");

    // Long after every lease ended, a claim (say, by a node started later) takes the batch
    // and emits only the fire that was left alone.
    assert_eq!(claimed_later(&store, T0 + 60_000).await, [T0 + 1_000]);

    // Another node, which holds copies in its wheel, learns of the stop from the store.
    let elsewhere = Arc::new(CancelledFires::new());
    let poller = CancellationPoller::new(
        store.clone(),
        Arc::clone(&elsewhere),
        Duration::from_secs(10),
    );
    assert_eq!(poller.poll_once(T0 + 600).await.unwrap(), 1);
    let dropped: Vec<i64> = planned
        .iter()
        .filter(|fire| elsewhere.is_cancelled(fire))
        .map(|fire| fire.scheduled_at_ms)
        .collect();
    assert_eq!(dropped, (2..=5).map(|s| T0 + s * 1_000).collect::<Vec<_>>());

    // Started again: new fires, planned after the stop, are not taken for cancelled ones.
    store
        .set_job_status(
            job,
            JobStatus::Running,
            Some(T0 + 7_000),
            T0 + 2_000,
            T0 + 2_000,
        )
        .await
        .unwrap();
    let replanned = pre_read_at(store.as_ref(), T0 + 2_000, "node-a")
        .await
        .fires;
    assert_eq!(replanned.len(), 1, "T0+7 s");
    assert!(!elsewhere.is_cancelled(&replanned[0]));
    // The cancellation is forgotten once no node can hold its fires any more.
    poller.poll_once(T0 + 60_000).await.unwrap();
    assert!(!elsewhere.is_empty());
    poller
        .poll_once(T0 + 500 + CANCELLATION_MEMORY_MS + 10_001)
        .await
        .unwrap();
    assert!(elsewhere.is_empty());
}

/// An edit that changes a running job's schedule cancels the fires planned under the old
/// schedule; the new schedule's fires replace them, including at instants both schedules
/// share (same trigger id, a log id above the cancellation's).
async fn a_schedule_edit_replaces_the_planned_fires(backend: Backend) {
    let (_db, store, job, _, _) = job_with_planned_fires(backend).await;

    let mut every_two_seconds = every_second_job(MisfireStrategy::DoNothing);
    every_two_seconds.schedule = ScheduleSpec::parse("CRON", "*/2 * * * * ?").unwrap();
    let change = store
        .update_job(
            job,
            &every_two_seconds,
            JobStatus::Running,
            Some(T0 + 2_000),
            Some(T0 + 500),
            T0 + 500,
        )
        .await
        .unwrap();
    let cancellation = change
        .cancelled
        .expect("the old schedule's fires are cancelled");
    let replanned = pre_read_at(store.as_ref(), T0 + 600, "node-a").await.fires;
    let times: Vec<i64> = replanned.iter().map(|fire| fire.scheduled_at_ms).collect();
    assert_eq!(times, vec![T0 + 2_000, T0 + 4_000]);
    for fire in &replanned {
        assert!(
            fire.log_id > cancellation.up_to_log_id,
            "a replacement has a log id of its own, above the cancellation"
        );
    }
    // Both nodes died: a claim emits the new schedule's fires only, once each.
    assert_eq!(
        claimed_later(&store, T0 + 60_000).await,
        [T0 + 2_000, T0 + 4_000]
    );

    // An edit that keeps the schedule (params only) cancels nothing.
    let mut params_only = every_two_seconds.clone();
    params_only.params = "other".into();
    let change = store
        .update_job(
            job,
            &params_only,
            JobStatus::Running,
            Some(T0 + 6_000),
            None,
            T0 + 700,
        )
        .await
        .unwrap();
    assert_eq!(change.cancelled, None);
}

/// Installs (or removes) database triggers that refuse every DISPATCHED run, written or
/// marked: a real database error on the acknowledgement path, on either backend.
async fn refuse_dispatched_marks(db: &TestDatabase, backend: Backend, refuse: bool) {
    let statements: &[&str] = match (backend, refuse) {
        (Backend::Sqlite, true) => &[
            "CREATE TRIGGER refuse_marks BEFORE UPDATE OF state ON job_logs \
             WHEN NEW.state = 'DISPATCHED' BEGIN SELECT RAISE(ABORT, 'marks refused'); END",
            "CREATE TRIGGER refuse_runs BEFORE INSERT ON job_logs \
             WHEN NEW.state = 'DISPATCHED' BEGIN SELECT RAISE(ABORT, 'marks refused'); END",
        ],
        (Backend::Sqlite, false) => &["DROP TRIGGER refuse_marks", "DROP TRIGGER refuse_runs"],
        (Backend::Postgres, true) => &[
            "CREATE FUNCTION refuse_marks() RETURNS trigger AS $$ BEGIN \
             RAISE EXCEPTION 'marks refused'; END $$ LANGUAGE plpgsql",
            "CREATE TRIGGER refuse_marks BEFORE INSERT OR UPDATE ON job_logs FOR EACH ROW \
             WHEN (NEW.state = 'DISPATCHED') EXECUTE FUNCTION refuse_marks()",
        ],
        (Backend::Postgres, false) => &["DROP TRIGGER refuse_marks ON job_logs"],
        (Backend::MySql, true) => &[
            "CREATE TRIGGER refuse_marks BEFORE UPDATE ON job_logs FOR EACH ROW \
             BEGIN IF NEW.state = 'DISPATCHED' THEN \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'marks refused'; END IF; END",
            "CREATE TRIGGER refuse_runs BEFORE INSERT ON job_logs FOR EACH ROW \
             BEGIN IF NEW.state = 'DISPATCHED' THEN \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'marks refused'; END IF; END",
        ],
        (Backend::MySql, false) => &["DROP TRIGGER refuse_marks", "DROP TRIGGER refuse_runs"],
    };
    for statement in statements {
        db.execute(statement).await;
    }
}

/// The broker acknowledged a trigger but the database refuses its mark for longer than the
/// lease: the mark is retried until it lands, and the claim loop never emits the trigger a
/// second time meanwhile (it would have, before the ledger).
async fn an_unwritten_acknowledgement_is_retried_and_never_re_emitted(backend: Backend) {
    let (db, store, job, fires, batch) = job_with_planned_fires(backend).await;
    let acknowledged: &PendingFire = &fires[0];
    let (wheel, mut claimed) = mpsc::channel(100);
    let intake = FireIntake::new(
        Arc::clone(&store),
        wheel,
        "node-a".into(),
        Duration::from_secs(10),
    );
    intake.open_batches().open(batch, &fires);

    let ledger = Arc::new(AckLedger::new());
    let (acks, acks_rx) = mpsc::channel(10);
    let mut writer = AckWriter::new(
        store.clone(),
        Arc::clone(&ledger),
        Arc::clone(intake.open_batches()),
        acks_rx,
        100,
    );
    refuse_dispatched_marks(&db, backend, true).await;
    ledger.acknowledged(acknowledged.log_id);
    acks.send(SettledFire::Acknowledged(DispatchAck {
        log_id: acknowledged.log_id,
        partition: 0,
        dispatched_at_ms: T0 + 1_001,
        executor_id: None,
        fire: Some(Box::new(acknowledged.clone())),
    }))
    .await
    .unwrap();
    assert!(
        writer.write_once().await.is_err(),
        "the database refuses the mark"
    );
    assert_eq!(ledger.len(), 1);

    // The batch's lease has ended (1 s after its first fire): the claim takes it back but
    // emits only the four fires that were never acknowledged.
    let claimer = Claimer::new(intake.clone(), 100, Arc::clone(&ledger));
    // On PostgreSQL the refused transaction may hold its row lock a moment longer (its
    // rollback runs when the connection goes back to the pool), and claims skip locked rows:
    // claim until the batch is taken.
    let mut taken = 0;
    for _ in 0..100 {
        taken += claimer.claim_once(T0 + 30_000).await.unwrap();
        if taken >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(taken, 1);
    let mut emitted = Vec::new();
    while let Ok(fire) = claimed.try_recv() {
        emitted.push(fire.trigger_id);
    }
    assert_eq!(emitted.len(), 4);
    assert!(!emitted.contains(&acknowledged.trigger_id));

    // The database takes marks again: the same batch is written, nothing is lost.
    refuse_dispatched_marks(&db, backend, false).await;
    assert_eq!(writer.write_once().await.unwrap(), Some(1));
    assert!(ledger.is_empty());
    let run = store
        .list_runs(job, &PageRequest::first(10))
        .await
        .unwrap()
        .into_iter()
        .find(|run| run.trigger_id == acknowledged.trigger_id)
        .unwrap();
    assert_eq!(run.state, RunState::Dispatched);
    assert_eq!(run.dispatched_at_ms, Some(T0 + 1_001));
    drop(acks);
    assert_eq!(
        writer.write_once().await.unwrap(),
        None,
        "closed and drained"
    );
}

on_every_backend!(
    stopping_a_job_cancels_its_planned_fires,
    a_schedule_edit_replaces_the_planned_fires,
    an_unwritten_acknowledgement_is_retried_and_never_re_emitted,
);
