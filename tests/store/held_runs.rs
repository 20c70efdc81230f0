//! Rows held back for their results: a batch fire's row written once with its result, already
//! finished (followed up when it failed, FIX_DELAY advanced), a held row without its result
//! written DISPATCHED in the same transaction, a held run whose row exists already (its fire
//! emitted again) completed by the update, and a held success that its job's history policy
//! does not keep never written at all (nor left unfinished when its row exists).

use kadence_scheduler::clock::millis;
use kadence_scheduler::config::RetentionConfig;
use kadence_scheduler::domain::model::{
    Completion, CompletionOutcome, HistoryPolicy, JobStatus, NewJob, PendingFire, RetryPolicy,
    RunState,
};
use kadence_scheduler::domain::schedule::MisfireStrategy;
use kadence_scheduler::monitors::reports::{DAY_MS, day_of, refresh_reports_once};
use kadence_scheduler::monitors::retention::drop_unkept_runs_once;
use kadence_scheduler::store::{DispatchAck, LogLines, PageRequest, Store};
use kadence_schemas::TriggerId;
use kadence_tests::fixtures::{Backend, TestDatabase};

use super::{
    T0, ack_of, demo_app, every_second_job, fix_delay_job_planned, mark, pre_read_at, running_job,
    store_on,
};

/// Time enough for every drop below to catch up.
const BUDGET: std::time::Duration = std::time::Duration::from_secs(60);

/// The result of `fire` from `app`'s executor `exec-1`, with `code`, finished at 50 ms past
/// its time.
fn result_of(fire: &PendingFire, app: &str, code: i32) -> Completion {
    Completion {
        app: Some(app.to_owned()),
        trigger_id: fire.trigger_id.clone(),
        executor_id: "exec-1".into(),
        code,
        message: Some(format!("code {code}")),
        started_at_ms: fire.fire_at_ms + 1,
        finished_at_ms: fire.fire_at_ms + 50,
        retry_after_ms: None,
    }
}

async fn run_state(store: &dyn Store, fire: &PendingFire) -> Option<(RunState, Option<i32>)> {
    let run = store.get_run(fire.log_id).await.unwrap()?;
    Some((run.state, run.handle_code))
}

async fn a_held_row_is_written_once_with_its_result(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    running_job(store.as_ref(), MisfireStrategy::DoNothing, T0 + 1_000).await;
    let fires = pre_read_at(store.as_ref(), T0, "node-a").await.fires;
    let acks: Vec<DispatchAck> = (fires.iter().take(4))
        .map(|fire| ack_of(fire, 2, fire.fire_at_ms - 1_000, Some("expected-owner")))
        .collect();
    let held: Vec<&DispatchAck> = acks.iter().take(3).collect();
    let outcomes = store
        .complete_runs_writing_rows(
            &[
                result_of(&fires[0], "demo", 200),
                result_of(&fires[1], "demo", 500),
                // Another app's executor cannot finish run 2: its row is written DISPATCHED.
                result_of(&fires[2], "other", 200),
                // A repeat in the same batch.
                result_of(&fires[0], "demo", 500),
            ],
            &held,
        )
        .await
        .unwrap();
    assert_eq!(
        outcomes,
        [
            CompletionOutcome::Applied,
            CompletionOutcome::Applied,
            CompletionOutcome::OtherApp {
                run_app: "demo".into()
            },
            CompletionOutcome::Duplicate,
        ]
    );
    let run = store.get_run(fires[0].log_id).await.unwrap().unwrap();
    assert_eq!(
        (run.state, run.handle_code, run.partition),
        (RunState::Finished, Some(200), Some(2))
    );
    assert_eq!(run.executor_id.as_deref(), Some("exec-1"), "who ran it");
    assert_eq!(run.handle_msg.as_deref(), Some("code 200"));
    assert_eq!(
        run_state(store.as_ref(), &fires[1]).await,
        Some((RunState::Finished, Some(500)))
    );
    assert_eq!(
        run_state(store.as_ref(), &fires[2]).await,
        Some((RunState::Dispatched, None))
    );
    // The failure waits for its follow-up (retry, alarm); the success needs none.
    let followed: Vec<i64> = store
        .claim_finished_runs(T0 + 10_000, T0 + 20_000, 10)
        .await
        .unwrap()
        .iter()
        .map(|run| run.fire.log_id)
        .collect();
    assert_eq!(followed, [fires[1].log_id]);
    // A later result of a run written this way is a repeat.
    let again = (store
        .complete_runs(&[result_of(&fires[0], "demo", 500)])
        .await)
        .unwrap();
    assert_eq!(again, [CompletionOutcome::Duplicate]);

    // Fire 3 was emitted again and that copy's row exists: its result completes the row by
    // the update, and the rest of the batch is written as ever.
    mark(store.as_ref(), &acks[3..], &[]).await;
    let fifth = ack_of(&fires[4], 2, fires[4].fire_at_ms - 1_000, None);
    let outcomes = store
        .complete_runs_writing_rows(
            &[
                result_of(&fires[3], "demo", 200),
                result_of(&fires[4], "demo", 200),
            ],
            &[&acks[3], &fifth],
        )
        .await
        .unwrap();
    assert_eq!(outcomes, [const { CompletionOutcome::Applied }; 2]);
    for fire in &fires[3..5] {
        assert_eq!(
            run_state(store.as_ref(), fire).await,
            Some((RunState::Finished, Some(200)))
        );
    }
}

/// A FIX_DELAY job's next fire counts from the end of a run whose row was written with its
/// result, as from one completed by the update.
async fn a_held_fix_delay_run_schedules_the_next_fire(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let (job, fires) = fix_delay_job_planned(store.as_ref(), RetryPolicy::default()).await;
    assert_eq!(fires.len(), 1);
    let ack = ack_of(&fires[0], 0, T0, None);
    let result = result_of(&fires[0], "demo", 200);
    let outcomes = store
        .complete_runs_writing_rows(std::slice::from_ref(&result), &[&ack])
        .await
        .unwrap();
    assert_eq!(outcomes, [CompletionOutcome::Applied]);
    let next = store.get_job(job).await.unwrap().unwrap();
    assert_eq!(next.next_fire_ms, Some(result.finished_at_ms + 30_000));
}

/// A held success of a job that keeps failures only never gets a row: it is recorded in a
/// set of unkept runs, which recognises its result delivered again, keeps a node that claims
/// the batch from emitting it again, is counted once in the reports and is forgotten, with
/// the run's log lines, when its row would have been dropped.
async fn a_held_success_of_a_job_keeping_failures_only_gets_no_row(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    store.create_app(&demo_app()).await.unwrap();
    let spec = NewJob {
        history: HistoryPolicy::Failures,
        ..every_second_job(MisfireStrategy::DoNothing)
    };
    let job = store.create_job(&spec, T0).await.unwrap().id;
    (store.set_job_status(job, JobStatus::Running, Some(T0 + 1_000), T0, T0))
        .await
        .unwrap();
    let fires = pre_read_at(store.as_ref(), T0, "node-a").await.fires;
    assert_eq!(fires.len(), 5);
    let acks: Vec<DispatchAck> = (fires.iter().take(3))
        .map(|fire| ack_of(fire, 0, fire.fire_at_ms, None))
        .collect();
    let held: Vec<&DispatchAck> = acks.iter().collect();
    let lines = LogLines {
        log_id: fires[0].log_id,
        run_started_at_ms: fires[0].fire_at_ms + 1,
        first_line: 1,
        lines: vec!["hello".to_owned()],
    };
    store.append_log_lines(&[lines], 100).await.unwrap();
    let results = [
        result_of(&fires[0], "demo", 200),
        result_of(&fires[1], "demo", 500),
        result_of(&fires[2], "demo", 200),
    ];
    let outcomes = (store.complete_runs_writing_rows(&results, &held))
        .await
        .unwrap();
    assert_eq!(outcomes, [const { CompletionOutcome::Applied }; 3]);
    assert_eq!(run_state(store.as_ref(), &fires[0]).await, None);
    assert_eq!(run_state(store.as_ref(), &fires[2]).await, None);
    assert_eq!(
        run_state(store.as_ref(), &fires[1]).await,
        Some((RunState::Finished, Some(500))),
        "a failure keeps its row"
    );

    // Results delivered again, from the right app and from another one, and a result for a
    // trigger never fired.
    let never_fired = Completion {
        trigger_id: TriggerId::scheduled(job, T0 + 1_500),
        ..result_of(&fires[0], "demo", 200)
    };
    let again = store
        .complete_runs(&[
            result_of(&fires[0], "demo", 500),
            result_of(&fires[2], "other", 200),
            never_fired.clone(),
        ])
        .await
        .unwrap();
    assert_eq!(
        again,
        [
            CompletionOutcome::Duplicate,
            CompletionOutcome::OtherApp {
                run_app: "demo".into()
            },
            CompletionOutcome::UnknownTrigger,
        ]
    );

    // node-a dies before it settles its batch: node-b emits only the fires never run.
    let claimed = store
        .claim_expired_batches("node-b", T0 + 60_000, 1_000, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let mut settled: Vec<i64> = claimed[0].settled.iter().copied().collect();
    settled.sort_unstable();
    assert_eq!(
        settled,
        fires[..3]
            .iter()
            .map(|fire| fire.log_id)
            .collect::<Vec<_>>()
    );

    // Counted at the next recount, once, even by two nodes at once.
    let config = RetentionConfig::default();
    let now = T0 + 60_000;
    let (a, b) = tokio::join!(
        drop_unkept_runs_once(store.as_ref(), &config, now, BUDGET),
        drop_unkept_runs_once(store.as_ref(), &config, now, BUDGET)
    );
    assert_eq!(a.unwrap() + b.unwrap(), 2);
    assert_eq!(reported_at(store.as_ref(), now).await, [(2, 1)]);

    // Forgotten with the run's lines once a row would have been dropped; a result delivered
    // after that is unknown, as it would be after the row's drop.
    let ended = results[0].finished_at_ms;
    let later = ended + millis(config.unkept_runs_for);
    drop_unkept_runs_once(store.as_ref(), &config, later, BUDGET)
        .await
        .unwrap();
    let kept_lines = store.read_log_lines(fires[0].log_id, 1, 10).await.unwrap();
    assert_eq!(kept_lines.lines.len(), 1, "kept while the set is");
    drop_unkept_runs_once(store.as_ref(), &config, later + 1, BUDGET)
        .await
        .unwrap();
    let kept_lines = store.read_log_lines(fires[0].log_id, 1, 10).await.unwrap();
    assert!(kept_lines.lines.is_empty(), "{kept_lines:?}");
    let late = store
        .complete_runs(&[result_of(&fires[0], "demo", 200)])
        .await
        .unwrap();
    assert_eq!(late, [CompletionOutcome::UnknownTrigger]);
    assert_eq!(
        reported_at(store.as_ref(), later + 1).await,
        [(2, 1)],
        "still counted"
    );

    // node-b's copy of fire 3 has its row; node-a, which held the run, takes its result: the
    // row is finished, not left open by a run set aside as unkept.
    mark(store.as_ref(), &[ack_of(&fires[3], 0, T0, None)], &[]).await;
    let held = ack_of(&fires[3], 0, fires[3].fire_at_ms, None);
    let outcomes = store
        .complete_runs_writing_rows(&[result_of(&fires[3], "demo", 200)], &[&held])
        .await
        .unwrap();
    assert_eq!(outcomes, [CompletionOutcome::Applied]);
    assert_eq!(
        run_state(store.as_ref(), &fires[3]).await,
        Some((RunState::Finished, Some(200)))
    );
}

/// The daily reports of T0's day as a recount at `now_ms` leaves them: (succeeded, failed)
/// of each row.
async fn reported_at(store: &dyn Store, now_ms: i64) -> Vec<(i64, i64)> {
    refresh_reports_once(store, now_ms).await.unwrap();
    let page = PageRequest::first(10);
    let reports = (store.list_reports(day_of(T0), day_of(T0) + DAY_MS, None, &page))
        .await
        .unwrap();
    reports.iter().map(|r| (r.succeeded, r.failed)).collect()
}

on_every_backend!(
    a_held_row_is_written_once_with_its_result,
    a_held_fix_delay_run_schedules_the_next_fire,
    a_held_success_of_a_job_keeping_failures_only_gets_no_row,
);
