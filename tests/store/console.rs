//! The console's half of the store on both backends: job listings filtered by handler, author
//! and text (typed wildcards match only themselves); runs across jobs filtered by app, job,
//! outcome and time, newest first and paged, with their app, handler and job description; a
//! run's attempts and the runs found by trigger id; the removal of a job with everything kept
//! about it (refused while it runs or is someone's child); the dashboard's counts.

use kadence_scheduler::domain::model::{
    App, Glue, HistoryPolicy, Job, JobStatus, NewJob, RetryPolicy,
};
use kadence_scheduler::monitors::reports::{DAY_MS, day_of};
use kadence_scheduler::store::{
    JobCounts, JobFilter, JobRemoval, LogLines, PageRequest, RunCounts, RunFilter, RunOutcome,
    ShadowResult, Store, StoreError,
};
use kadence_schemas::{AppName, GlueType, JobId, TriggerId};

use super::T0;
use super::monitors::{complete, harness, manual_job, trigger};
use kadence_tests::fixtures::{Backend, TestDatabase};

fn app(name: &str) -> AppName {
    AppName::parse(name).unwrap()
}

async fn other_app(store: &dyn Store) {
    store
        .create_app(&App {
            name: app("other"),
            title: String::new(),
            partitions: 1,
            created_at_ms: T0,
        })
        .await
        .unwrap();
}

async fn job_ids(store: &dyn Store, filter: JobFilter, limit: u32) -> Vec<i64> {
    let mut ids = Vec::new();
    let mut page = PageRequest::first(limit);
    loop {
        let jobs = store.list_jobs(&filter, &page).await.unwrap();
        ids.extend(jobs.iter().map(|job| job.id.get()));
        if jobs.len() < limit as usize {
            return ids;
        }
        page.after = jobs.last().map(|job| job.id);
    }
}

async fn jobs_are_filtered_by_handler_author_and_text(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let h = harness(&db).await;
    let store = h.store.as_ref();
    let mut made = Vec::new();
    for (name, handler, author) in [
        ("Nightly REPORT", "sendReport", "ann"),
        ("50% off_sale", "discount", "bob"),
        ("500 offsale", "discount", "ann"),
        ("cleanup", "reportCleaner", "bob"),
    ] {
        let spec = NewJob {
            name: name.to_owned(),
            handler: handler.to_owned(),
            author: author.to_owned(),
            ..manual_job()
        };
        made.push(store.create_job(&spec, T0).await.unwrap().id.get());
    }
    let filter = |handler: Option<&str>, author: Option<&str>, text: Option<&str>| JobFilter {
        handler: handler.map(str::to_owned),
        author: author.map(str::to_owned),
        text: text.map(str::to_owned),
        ..JobFilter::default()
    };
    let found = |f: JobFilter| job_ids(store, f, 1);
    assert_eq!(
        found(filter(Some("discount"), None, None)).await,
        [made[1], made[2]]
    );
    assert_eq!(
        found(filter(None, Some("ann"), None)).await,
        [made[0], made[2]]
    );
    assert_eq!(
        found(filter(Some("discount"), Some("ann"), None)).await,
        [made[2]]
    );
    // Description or handler, any case; paged one at a time above, so paging keeps filters.
    assert_eq!(
        found(filter(None, None, Some("report"))).await,
        [made[0], made[3]]
    );
    // `%` and `_` are the characters themselves, not wildcards.
    assert_eq!(found(filter(None, None, Some("0% off_"))).await, [made[1]]);
    assert_eq!(
        found(filter(None, None, Some("0_o"))).await,
        Vec::<i64>::new()
    );
    // A number also matches the job with that id.
    let by_id = found(filter(None, None, Some(&made[3].to_string()))).await;
    assert_eq!(by_id, [made[3]]);
    let scoped = JobFilter {
        apps: Some(vec![app("other")]),
        ..filter(None, Some("ann"), None)
    };
    assert!(found(scoped).await.is_empty());
}

async fn runs_are_searched_across_jobs_newest_first(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let h = harness(&db).await;
    let store = h.store.as_ref();
    other_app(store).await;
    let demo = store.create_job(&manual_job(), T0).await.unwrap();
    let elsewhere = NewJob {
        app: app("other"),
        name: "Elsewhere".to_owned(),
        handler: "fail".to_owned(),
        ..manual_job()
    };
    let elsewhere = store.create_job(&elsewhere, T0).await.unwrap();
    // demo: ok at T0, failed at T0+1000, unfinished at T0+2000; other: failed at T0+1500.
    let ok = trigger(store, &demo, T0).await.remove(0);
    let failed = trigger(store, &demo, T0 + 1_000).await.remove(0);
    let unfinished = trigger(store, &demo, T0 + 2_000).await.remove(0);
    let other_failed = trigger(store, &elsewhere, T0 + 1_500).await.remove(0);
    complete(store, &ok.trigger_id, 200, T0 + 10, None).await;
    complete(store, &failed.trigger_id, 500, T0 + 1_010, None).await;
    complete(store, &other_failed.trigger_id, 502, T0 + 1_510, None).await;

    let search = |filter: RunFilter, limit: u32| async move {
        let mut ids = Vec::new();
        let mut page = PageRequest::first(limit);
        loop {
            let runs = store.search_runs(&filter, &page).await.unwrap();
            ids.extend(runs.iter().map(|summary| summary.run.log_id));
            if runs.len() < limit as usize {
                return ids;
            }
            page.after = runs.last().map(|summary| summary.run.log_id);
        }
    };
    let everything = search(RunFilter::default(), 2).await;
    assert_eq!(
        everything,
        [
            other_failed.log_id,
            unfinished.log_id,
            failed.log_id,
            ok.log_id
        ],
        "newest first, paged"
    );
    let demo_only = RunFilter {
        apps: Some(vec![app("demo")]),
        ..RunFilter::default()
    };
    assert_eq!(
        search(demo_only.clone(), 1).await,
        [unfinished.log_id, failed.log_id, ok.log_id]
    );
    let outcome = |outcome| RunFilter {
        outcome: Some(outcome),
        ..RunFilter::default()
    };
    assert_eq!(
        search(outcome(RunOutcome::Failed), 10).await,
        [other_failed.log_id, failed.log_id]
    );
    assert_eq!(
        search(outcome(RunOutcome::Succeeded), 10).await,
        [ok.log_id]
    );
    assert_eq!(
        search(outcome(RunOutcome::Unfinished), 10).await,
        [unfinished.log_id]
    );
    assert!(search(outcome(RunOutcome::Unknown), 10).await.is_empty());
    let window = RunFilter {
        job: Some(demo.id),
        from_ms: Some(T0 + 1_000),
        to_ms: Some(T0 + 2_000),
        ..RunFilter::default()
    };
    assert_eq!(search(window, 10).await, [failed.log_id], "[from, to)");
    let nothing = RunFilter {
        apps: Some(Vec::new()),
        ..RunFilter::default()
    };
    assert!(search(nothing, 10).await.is_empty(), "no apps: no runs");

    let summary = store
        .run_summary(other_failed.log_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            summary.app.as_str(),
            summary.handler.as_str(),
            summary.job_description.as_deref()
        ),
        ("other", "fail", Some("Elsewhere"))
    );
    assert_eq!(summary.run.handle_code, Some(502));
    assert!(store.run_summary(987_654).await.unwrap().is_none());
    let by_id = store
        .runs_by_trigger_ids(&[
            failed.trigger_id.clone(),
            TriggerId::parse("1-p999").unwrap(),
            ok.trigger_id.clone(),
        ])
        .await
        .unwrap();
    let found: Vec<i64> = by_id.iter().map(|summary| summary.run.log_id).collect();
    assert_eq!(found, [ok.log_id, failed.log_id]);
}

async fn a_run_s_attempts_are_its_first_attempt_and_retries(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let mut h = harness(&db).await;
    let spec = NewJob {
        retry: RetryPolicy {
            count: 2,
            ..RetryPolicy::default()
        },
        ..manual_job()
    };
    let job = h.store.create_job(&spec, T0).await.unwrap();
    let first = trigger(h.store.as_ref(), &job, T0).await.remove(0);
    complete(h.store.as_ref(), &first.trigger_id, 500, T0 + 1, None).await;
    h.monitor.follow_up_once(T0 + 2).await.unwrap();
    let retry = h.fires.try_recv().expect("a retry");
    complete(h.store.as_ref(), &retry.trigger_id, 200, T0 + 3, None).await;
    let other = trigger(h.store.as_ref(), &job, T0 + 4).await.remove(0);

    for asked in [first.log_id, retry.log_id] {
        let summary = h.store.run_summary(asked).await.unwrap().unwrap();
        let first_log_id = summary.run.first_log_id.unwrap_or(summary.run.log_id);
        let attempts = h.store.run_attempts(first_log_id).await.unwrap();
        let seen: Vec<(i32, i64, Option<i32>)> = attempts
            .iter()
            .map(|run| (run.attempt, run.log_id, run.handle_code))
            .collect();
        assert_eq!(
            seen,
            [(0, first.log_id, Some(500)), (1, retry.log_id, Some(200))]
        );
    }
    let alone = h.store.run_attempts(other.log_id).await.unwrap();
    assert_eq!(alone.len(), 1);
}

/// A job with a run (its log lines, a report row), a dropped run (its count), script
/// versions and a shadow result; returns it.
async fn job_with_history(store: &dyn Store, name: &str) -> Job {
    let spec = NewJob {
        name: name.to_owned(),
        glue: Glue {
            glue_type: GlueType::GlueShell,
            source: Some(format!("echo {name}")),
            remark: "first".to_owned(),
        },
        history: HistoryPolicy::CountsOnly,
        ..manual_job()
    };
    let job = store.create_job(&spec, T0).await.unwrap();
    let kept = trigger(store, &job, T0).await.remove(0);
    let dropped = trigger(store, &job, T0 + 1).await.remove(0);
    complete(store, &kept.trigger_id, 500, T0 + 5, None).await;
    complete(store, &dropped.trigger_id, 200, T0 + 5, None).await;
    // A success without children needs no follow-up: its policy drops it, counted.
    assert_eq!(store.drop_unkept_runs(T0 + 10, 100).await.unwrap(), 1);
    store
        .append_log_lines(
            &[LogLines {
                log_id: kept.log_id,
                run_started_at_ms: T0,
                first_line: 1,
                lines: vec!["hello".to_owned()],
            }],
            100,
        )
        .await
        .unwrap();
    store
        .record_shadow_results(&[ShadowResult {
            trigger_id: kept.trigger_id.clone(),
            app: job.spec.app.clone(),
            job_id: job.id,
            executor_id: "shadow-1".to_owned(),
            code: 200,
            message: None,
            started_at_ms: T0 + 2,
            finished_at_ms: T0 + 3,
        }])
        .await
        .unwrap();
    job
}

/// Every run of T0's day, by outcome.
async fn day_counts(store: &dyn Store) -> RunCounts {
    store
        .count_runs(day_of(T0), day_of(T0) + DAY_MS, None)
        .await
        .unwrap()
}

async fn removing_a_job_deletes_everything_kept_about_it(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let h = harness(&db).await;
    let store = h.store.as_ref();
    let doomed = job_with_history(store, "doomed").await;
    let kept = job_with_history(store, "kept").await;
    store
        .refresh_reports(day_of(T0), day_of(T0) + DAY_MS)
        .await
        .unwrap();
    let both = RunCounts {
        succeeded: 2,
        failed: 2,
        running: 0,
    };
    assert_eq!(day_counts(store).await, both);

    store
        .set_job_status(doomed.id, JobStatus::Running, Some(T0 + 60_000), T0, T0)
        .await
        .unwrap();
    assert_eq!(
        store.remove_job(doomed.id).await.unwrap(),
        JobRemoval::Running
    );
    store
        .set_job_status(doomed.id, JobStatus::Stopped, None, T0, T0)
        .await
        .unwrap();
    let parent = NewJob {
        child_job_ids: vec![kept.id, doomed.id],
        ..manual_job()
    };
    let parent = store.create_job(&parent, T0).await.unwrap();
    assert_eq!(
        store.remove_job(doomed.id).await.unwrap(),
        JobRemoval::ChildOf(vec![parent.id])
    );
    let orphaned = NewJob {
        child_job_ids: vec![kept.id],
        ..manual_job()
    };
    store
        .update_job(parent.id, &orphaned, JobStatus::Stopped, None, None, T0)
        .await
        .unwrap();
    let doomed_runs = store
        .list_runs(doomed.id, &PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(doomed_runs.len(), 1);
    assert_eq!(
        store.remove_job(doomed.id).await.unwrap(),
        JobRemoval::Removed { runs: 1 }
    );

    assert!(store.get_job(doomed.id).await.unwrap().is_none());
    assert!(
        store
            .list_runs(doomed.id, &PageRequest::first(10))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .get_run(doomed_runs[0].log_id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .read_log_lines(doomed_runs[0].log_id, 1, 10)
            .await
            .unwrap()
            .lines
            .is_empty()
    );
    assert!(store.glue_versions(doomed.id).await.unwrap().is_empty());
    let reports = store
        .list_reports(0, i64::MAX, None, &PageRequest::first(100))
        .await
        .unwrap();
    let report_jobs: Vec<i64> = reports.iter().map(|report| report.job_id).collect();
    assert_eq!(report_jobs, [kept.id.get()]);
    let half = RunCounts {
        succeeded: 1,
        failed: 1,
        running: 0,
    };
    assert_eq!(
        day_counts(store).await,
        half,
        "its dropped runs' counts went too"
    );
    let shadows = store
        .shadow_pairs(&doomed.spec.app, 0, i64::MAX, 100)
        .await
        .unwrap();
    let shadow_jobs: Vec<JobId> = shadows.iter().map(|pair| pair.shadow.job_id).collect();
    assert_eq!(shadow_jobs, [kept.id]);
    // The other job keeps everything.
    assert_eq!(store.glue_versions(kept.id).await.unwrap().len(), 1);
    assert!(matches!(
        store.remove_job(doomed.id).await,
        Err(StoreError::JobNotFound(_))
    ));
    // Ids are never given out again.
    let next = store.create_job(&manual_job(), T0).await.unwrap();
    assert!(next.id.get() > parent.id.get(), "{next:?}");
}

async fn dashboard_counts_cover_the_apps_asked_for(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let h = harness(&db).await;
    let store = h.store.as_ref();
    other_app(store).await;
    let demo = store.create_job(&manual_job(), T0).await.unwrap();
    store.create_job(&manual_job(), T0).await.unwrap();
    let elsewhere = NewJob {
        app: app("other"),
        ..manual_job()
    };
    let elsewhere = store.create_job(&elsewhere, T0).await.unwrap();
    store
        .set_job_status(demo.id, JobStatus::Running, Some(T0 + DAY_MS), T0, T0)
        .await
        .unwrap();
    let demo_scope = [app("demo")];
    assert_eq!(
        store.count_jobs(None).await.unwrap(),
        JobCounts {
            total: 3,
            running: 1,
            stopped: 2
        }
    );
    assert_eq!(
        store.count_jobs(Some(&demo_scope)).await.unwrap(),
        JobCounts {
            total: 2,
            running: 1,
            stopped: 1
        }
    );
    assert_eq!(
        store.count_jobs(Some(&[])).await.unwrap(),
        JobCounts::default()
    );

    // Yesterday: one success of demo; today: a failure of demo, one of other, one unfinished.
    let today = day_of(T0) + DAY_MS;
    let yesterday_ok = trigger(store, &demo, today - 1_000).await.remove(0);
    complete(store, &yesterday_ok.trigger_id, 200, today - 900, None).await;
    let failed = trigger(store, &demo, today + 1_000).await.remove(0);
    complete(store, &failed.trigger_id, 500, today + 1_100, None).await;
    let other_failed = trigger(store, &elsewhere, today + 2_000).await.remove(0);
    complete(store, &other_failed.trigger_id, 500, today + 2_100, None).await;
    trigger(store, &demo, today + 3_000).await;
    assert_eq!(
        store
            .count_runs(today, today + DAY_MS, Some(&demo_scope))
            .await
            .unwrap(),
        RunCounts {
            succeeded: 0,
            failed: 1,
            running: 1
        }
    );
    store
        .refresh_reports(today - DAY_MS, today + DAY_MS)
        .await
        .unwrap();
    let totals = store
        .daily_totals(today - DAY_MS, today + DAY_MS, Some(&demo_scope))
        .await
        .unwrap();
    assert_eq!(
        totals,
        [
            (
                today - DAY_MS,
                RunCounts {
                    succeeded: 1,
                    failed: 0,
                    running: 0
                }
            ),
            (
                today,
                RunCounts {
                    succeeded: 0,
                    failed: 1,
                    running: 1
                }
            ),
        ]
    );
    let all = store
        .daily_totals(today, today + DAY_MS, None)
        .await
        .unwrap();
    assert_eq!(all[0].1.failed, 2);
}

on_every_backend!(
    jobs_are_filtered_by_handler_author_and_text,
    runs_are_searched_across_jobs_newest_first,
    a_run_s_attempts_are_its_first_attempt_and_retries,
    removing_a_job_deletes_everything_kept_about_it,
    dashboard_counts_cover_the_apps_asked_for,
);
