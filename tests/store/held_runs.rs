//! Rows held back for their results: a batch fire's row written once with its result, already
//! finished (followed up when it failed, FIX_DELAY advanced), a held row without its result
//! written DISPATCHED in the same transaction, and a held row that exists already failing the
//! write as a whole, so that its result is recorded by the update instead.

use kadence_scheduler::domain::model::{
    Completion, CompletionOutcome, PendingFire, RetryPolicy, RunState,
};
use kadence_scheduler::domain::schedule::MisfireStrategy;
use kadence_scheduler::store::{DispatchAck, Store};
use kadence_tests::fixtures::{Backend, TestDatabase};

use super::{T0, ack_of, fix_delay_job_planned, mark, pre_read_at, running_job, store_on};

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

    // Another node emitted fire 3 again and its row exists: the write fails as a whole and
    // changes nothing; the result is then recorded by the update.
    mark(store.as_ref(), &acks[3..], &[]).await;
    let result = result_of(&fires[3], "demo", 200);
    let refused = store
        .complete_runs_writing_rows(std::slice::from_ref(&result), &[&acks[3]])
        .await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(
        run_state(store.as_ref(), &fires[3]).await,
        Some((RunState::Dispatched, None))
    );
    let recorded = store.complete_runs(&[result]).await.unwrap();
    assert_eq!(recorded, [CompletionOutcome::Applied]);
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

on_every_backend!(
    a_held_row_is_written_once_with_its_result,
    a_held_fix_delay_run_schedules_the_next_fire,
);
