//! Run history policies on both backends: ALL keeps every finished run, FAILURES drops the
//! successes, NONE drops every run once it is followed up (a failed attempt stays while its
//! retry is under way); dropped runs go with their log lines, only after
//! `retention.unkept_runs_for`, are counted exactly once even with two nodes dropping at
//! once, and the daily reports still count every run. A success of a job without children
//! is done at completion: the follow-up monitor never claims it.

use kadence_scheduler::config::RetentionConfig;
use kadence_scheduler::domain::model::{
    Completion, CompletionOutcome, HistoryPolicy, Job, NewJob, RetryPolicy, Run,
};
use kadence_scheduler::monitors::reports::{DAY_MS, day_of, refresh_reports_once};
use kadence_scheduler::monitors::retention::drop_unkept_runs_once;
use kadence_scheduler::store::{LogLines, PageRequest, Store};
use kadence_schemas::TriggerId;

use super::T0;
use super::monitors::{complete, harness, manual_job, trigger};
use kadence_tests::fixtures::{Backend, TestDatabase};

const TEN_MINUTES: i64 = 600_000;
/// Time enough for every drop below to catch up.
const BUDGET: std::time::Duration = std::time::Duration::from_secs(60);

async fn runs_of(store: &dyn Store, job: &Job) -> Vec<Run> {
    store
        .list_runs(job.id, &PageRequest::first(100))
        .await
        .unwrap()
}

async fn history_policies_keep_what_they_say_and_count_every_run(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let mut h = harness(&db).await;
    let store = h.store.as_ref();
    let mut jobs = Vec::new();
    for history in [
        HistoryPolicy::All,
        HistoryPolicy::Failures,
        HistoryPolicy::CountsOnly,
    ] {
        let spec = NewJob {
            history,
            retry: RetryPolicy {
                count: u32::from(history == HistoryPolicy::CountsOnly),
                ..RetryPolicy::default()
            },
            ..manual_job()
        };
        jobs.push(store.create_job(&spec, T0).await.unwrap());
    }
    let (all, failures, none) = (&jobs[0], &jobs[1], &jobs[2]);
    // Per job: one success, one failure, finished at T0 + 10.
    let mut succeeded: Vec<TriggerId> = Vec::new();
    let mut failed: Vec<TriggerId> = Vec::new();
    let mut success_log_ids = Vec::new();
    for job in &jobs {
        let success = trigger(store, job, T0).await.remove(0);
        let failure = trigger(store, job, T0 + 1).await.remove(0);
        complete(store, &success.trigger_id, 200, T0 + 10, None).await;
        complete(store, &failure.trigger_id, 500, T0 + 10, None).await;
        succeeded.push(success.trigger_id.clone());
        success_log_ids.push(success.log_id);
        failed.push(failure.trigger_id.clone());
        store
            .append_log_lines(
                &[LogLines {
                    log_id: success.log_id,
                    run_started_at_ms: T0,
                    first_line: 1,
                    lines: vec![format!("job {}", job.id)],
                }],
                100,
            )
            .await
            .unwrap();
    }

    // Only the failures need a follow-up; the NONE job's failure is retried.
    let summary = h.monitor.follow_up_once(T0 + 20).await.unwrap();
    assert_eq!((summary.runs, summary.retries), (3, 1));
    let retry = h
        .fires
        .try_recv()
        .expect("the NONE job's failure is retried");
    assert_eq!(retry.trigger_id, failed[2].retry(1));

    // One run a batch and one batch a pass: the drop of unkept runs is not capped by the
    // pass's batches (it goes on until caught up), so every count below is whole.
    let config = RetentionConfig {
        batch_size: 1,
        max_batches: 1,
        ..RetentionConfig::default()
    };
    assert_eq!(
        drop_unkept_runs_once(store, &config, T0 + 10 + TEN_MINUTES, BUDGET)
            .await
            .unwrap(),
        0,
        "nothing goes before retention.unkept_runs_for"
    );
    // A result delivered again is still recognised as a repeat meanwhile.
    let repeat = Completion {
        app: None,
        trigger_id: succeeded[1].clone(),
        executor_id: "exec-1".to_owned(),
        code: 200,
        message: None,
        started_at_ms: T0 + 9,
        finished_at_ms: T0 + 10,
        retry_after_ms: None,
    };
    assert_eq!(
        store.complete_runs(&[repeat]).await.unwrap(),
        vec![CompletionOutcome::Duplicate]
    );

    // Two nodes dropping at once: each run is dropped, and counted, by one of them.
    let at = T0 + 11 + TEN_MINUTES;
    let (a, b) = tokio::join!(
        drop_unkept_runs_once(store, &config, at, BUDGET),
        drop_unkept_runs_once(store, &config, at, BUDGET)
    );
    assert_eq!(
        a.unwrap() + b.unwrap(),
        2,
        "FAILURES' and NONE's successes; NONE's retried failure stays while its retry runs"
    );
    let mut kept = Vec::new();
    for job in &jobs {
        kept.push(runs_of(store, job).await.len());
    }
    assert_eq!(kept, vec![2, 1, 2]);
    for (log_id, lines_left) in success_log_ids.iter().zip([1, 0, 0]) {
        let lines = store.read_log_lines(*log_id, 1, 10).await.unwrap().lines;
        assert_eq!(
            lines.len(),
            lines_left,
            "a dropped run's log lines go with it"
        );
    }

    // The retry fails too (no retries left): then the NONE job keeps nothing.
    complete(store, &retry.trigger_id, 500, at + 5, None).await;
    let summary = h.monitor.follow_up_once(at + 10).await.unwrap();
    assert_eq!((summary.runs, summary.retries), (1, 0));
    let later = at + 20 + TEN_MINUTES;
    assert_eq!(
        drop_unkept_runs_once(store, &config, later, BUDGET)
            .await
            .unwrap(),
        2
    );
    assert!(runs_of(store, none).await.is_empty());
    assert_eq!(runs_of(store, failures).await[0].trigger_id, failed[1]);

    // The reports count every run, kept or dropped.
    refresh_reports_once(store, T0 + 3_600_000).await.unwrap();
    let reports = store
        .list_reports(
            day_of(T0),
            day_of(T0) + DAY_MS,
            None,
            &PageRequest::first(10),
        )
        .await
        .unwrap();
    let counts: Vec<(i64, i64, i64, i64)> = reports
        .iter()
        .map(|r| (r.job_id, r.running, r.succeeded, r.failed))
        .collect();
    assert_eq!(
        counts,
        vec![
            (all.id.get(), 0, 1, 1),
            (failures.id.get(), 0, 1, 1),
            (none.id.get(), 0, 1, 2),
        ]
    );

    // One batch holding a run's result twice: the first is applied, the second a repeat.
    let fire = trigger(store, all, T0 + 5).await.remove(0);
    let result = Completion {
        app: None,
        trigger_id: fire.trigger_id.clone(),
        executor_id: "exec-2".to_owned(),
        code: 500,
        message: Some("first".to_owned()),
        started_at_ms: T0 + 6,
        finished_at_ms: T0 + 7,
        retry_after_ms: None,
    };
    let again = Completion {
        app: None,
        message: Some("second".to_owned()),
        ..result.clone()
    };
    assert_eq!(
        store.complete_runs(&[result, again]).await.unwrap(),
        vec![CompletionOutcome::Applied, CompletionOutcome::Duplicate]
    );
    let run = runs_of(store, all)
        .await
        .into_iter()
        .find(|run| run.trigger_id == fire.trigger_id)
        .unwrap();
    assert_eq!(run.handle_msg.as_deref(), Some("first"));
}

on_every_backend!(history_policies_keep_what_they_say_and_count_every_run);
