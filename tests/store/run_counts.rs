//! Runs counted once each for the daily reports and the overview, on every backend: the
//! counts are the same before and after the runs are folded, a run that settles after its
//! fold is counted once, a history policy's drop never counts a folded run again, nothing is
//! folded past an id whose row a fire batch may still write, and a deleted job's counts go
//! with it.

use kadence_scheduler::config::RetentionConfig;
use kadence_scheduler::domain::model::{HistoryPolicy, Job, NewJob};
use kadence_scheduler::domain::schedule::MisfireStrategy;
use kadence_scheduler::monitors::reports::{DAY_MS, FOLD_IDS, day_of};
use kadence_scheduler::monitors::retention::drop_unkept_runs_once;
use kadence_scheduler::store::{BatchProgress, FOLD_GRACE_MS, PageRequest, RunCounts, Store};

use super::monitors::{complete, harness, manual_job, trigger};
use super::{T0, ack_of, lease_for, mark, running_job, scan_request, store_on};
use kadence_tests::fixtures::{Backend, TestDatabase};

/// When the tests fold and count: an hour into T0's day.
const NOW: i64 = T0 + 3_600_000;
const TEN_MINUTES: i64 = 600_000;

/// (running, succeeded, failed) of `job` in its report row for T0's day, after a refresh.
async fn reported(store: &dyn Store, job: &Job) -> (i64, i64, i64) {
    store
        .refresh_reports(day_of(T0), day_of(T0) + DAY_MS)
        .await
        .unwrap();
    let reports = store
        .list_reports(
            day_of(T0),
            day_of(T0) + DAY_MS,
            None,
            &PageRequest::first(100),
        )
        .await
        .unwrap();
    (reports.iter())
        .find(|report| report.job_id == job.id.get())
        .map_or((0, 0, 0), |report| {
            (report.running, report.succeeded, report.failed)
        })
}

/// The overview's counts of T0's day.
async fn overview(store: &dyn Store) -> RunCounts {
    store
        .count_runs(day_of(T0), day_of(T0) + DAY_MS, None)
        .await
        .unwrap()
}

/// Folds at `now_ms`, `limit` ids a transaction, until caught up; returns the transactions.
async fn fold_all(store: &dyn Store, now_ms: i64, limit: u32) -> usize {
    let mut transactions = 1;
    while store.fold_runs(now_ms, limit).await.unwrap() {
        transactions += 1;
    }
    transactions
}

async fn each_run_is_counted_once_as_it_settles(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let h = harness(&db).await;
    let store = h.store.as_ref();
    let kept = store.create_job(&manual_job(), T0).await.unwrap();
    let failures = NewJob {
        history: HistoryPolicy::Failures,
        ..manual_job()
    };
    let unkept = store.create_job(&failures, T0).await.unwrap();
    // `kept`: a success, a failure and a run without its result yet; `unkept` (FAILURES): a
    // success before the fold and a run that succeeds after it.
    let success = trigger(store, &kept, T0).await.remove(0);
    let failure = trigger(store, &kept, T0 + 1).await.remove(0);
    let unfinished = trigger(store, &kept, T0 + 2).await.remove(0);
    let early_success = trigger(store, &unkept, T0 + 3).await.remove(0);
    let late_success = trigger(store, &unkept, T0 + 4).await.remove(0);
    complete(store, &success.trigger_id, 200, T0 + 10, None).await;
    complete(store, &failure.trigger_id, 500, T0 + 10, None).await;
    complete(store, &early_success.trigger_id, 200, T0 + 10, None).await;
    assert_eq!(reported(store, &kept).await, (1, 1, 1));
    assert_eq!(reported(store, &unkept).await, (1, 1, 0));

    // The first fold only records the ids given out; they are folded once that is
    // FOLD_GRACE_MS old, here two ids a transaction.
    assert_eq!(fold_all(store, NOW, FOLD_IDS).await, 1);
    let later = NOW + FOLD_GRACE_MS;
    assert!(
        fold_all(store, later, 2).await >= 3,
        "five runs, two a transaction"
    );
    assert_eq!(reported(store, &kept).await, (1, 1, 1), "the same, folded");
    assert_eq!(reported(store, &unkept).await, (1, 1, 0));
    let counts = overview(store).await;
    assert_eq!((counts.running, counts.succeeded, counts.failed), (2, 2, 1));

    // Runs open when they were folded settle: counted as they are now.
    complete(store, &unfinished.trigger_id, 500, T0 + 20, None).await;
    complete(store, &late_success.trigger_id, 200, T0 + 20, None).await;
    assert_eq!(reported(store, &kept).await, (0, 1, 2));
    assert_eq!(reported(store, &unkept).await, (0, 2, 0));

    // FAILURES drops both successes, the one folded settled and the one still listed open:
    // each counted once.
    let config = RetentionConfig::default();
    let budget = std::time::Duration::from_secs(60);
    let dropped = drop_unkept_runs_once(store, &config, later + TEN_MINUTES, budget)
        .await
        .unwrap();
    assert_eq!(dropped, 2);
    assert_eq!(
        reported(store, &unkept).await,
        (0, 2, 0),
        "dropped, not twice"
    );
    // The next fold counts the open run that settled, once.
    fold_all(store, later + FOLD_GRACE_MS, FOLD_IDS).await;
    assert_eq!(
        reported(store, &kept).await,
        (0, 1, 2),
        "settled open runs once"
    );
    assert_eq!(reported(store, &unkept).await, (0, 2, 0));

    // A run after the last fold counts at once; one of a FAILURES job dropped before its fold
    // is counted by the drop.
    let newest = trigger(store, &kept, T0 + 30).await.remove(0);
    complete(store, &newest.trigger_id, 200, T0 + 40, None).await;
    let unfolded = trigger(store, &unkept, T0 + 30).await.remove(0);
    complete(store, &unfolded.trigger_id, 200, T0 + 40, None).await;
    let much_later = later + 2 * TEN_MINUTES;
    assert_eq!(
        drop_unkept_runs_once(store, &config, much_later, budget)
            .await
            .unwrap(),
        1
    );
    assert_eq!(reported(store, &kept).await, (0, 2, 2));
    assert_eq!(reported(store, &unkept).await, (0, 3, 0));
    fold_all(store, much_later, FOLD_IDS).await;
    fold_all(store, much_later + FOLD_GRACE_MS, FOLD_IDS).await;
    assert_eq!(reported(store, &kept).await, (0, 2, 2), "folded, the same");
    assert_eq!(reported(store, &unkept).await, (0, 3, 0));
    let counts = overview(store).await;
    assert_eq!((counts.running, counts.succeeded, counts.failed), (0, 5, 2));

    // A deleted job's counts go with it, folded and open alike.
    trigger(store, &kept, T0 + 50).await;
    fold_all(store, much_later + 2 * FOLD_GRACE_MS, FOLD_IDS).await;
    fold_all(store, much_later + 3 * FOLD_GRACE_MS, FOLD_IDS).await;
    assert_eq!(reported(store, &kept).await, (1, 2, 2));
    store.remove_job(kept.id).await.unwrap();
    fold_all(store, much_later + 4 * FOLD_GRACE_MS, FOLD_IDS).await;
    let counts = overview(store).await;
    assert_eq!(
        (counts.running, counts.succeeded, counts.failed),
        (0, 3, 0),
        "only the FAILURES job's runs"
    );
}

async fn nothing_is_folded_past_a_row_a_fire_batch_may_still_write(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let store = store.as_ref();
    let job = running_job(store, MisfireStrategy::DoNothing, T0 + 1_000).await;
    let shards = lease_for(store, T0, "node-a").await;
    let scan = store
        .pre_read(&scan_request(T0, "node-a", shards))
        .await
        .unwrap();
    assert!(!scan.fires.is_empty());
    // A manual run written after the scan reserved the batch's ids.
    let job = store.get_job(job).await.unwrap().unwrap();
    let manual = trigger(store, &job, T0).await.remove(0);
    complete(store, &manual.trigger_id, 200, T0 + 10, None).await;
    fold_all(store, NOW, FOLD_IDS).await;
    fold_all(store, NOW + FOLD_GRACE_MS, FOLD_IDS).await;

    // The broker acknowledges the batch's first fire only now: its row is written, and its
    // result comes; the batch settles.
    let fire = &scan.fires[0];
    let progress: Vec<BatchProgress> = (scan.batches.iter())
        .map(|batch| BatchProgress {
            id: batch.id,
            pending_from_ms: None,
        })
        .collect();
    mark(store, &[ack_of(fire, 0, T0 + 500, None)], &progress).await;
    complete(store, &fire.trigger_id, 200, T0 + 1_100, None).await;
    fold_all(store, NOW + 2 * FOLD_GRACE_MS, FOLD_IDS).await;
    fold_all(store, NOW + 3 * FOLD_GRACE_MS, FOLD_IDS).await;
    let counts = overview(store).await;
    assert_eq!(
        (counts.running, counts.succeeded, counts.failed),
        (0, 2, 0),
        "the batch fire's run and the manual one, each once"
    );
    assert_eq!(reported(store, &job).await, (0, 2, 0));
}

on_every_backend!(
    each_run_is_counted_once_as_it_settles,
    nothing_is_folded_past_a_row_a_fire_batch_may_still_write
);
