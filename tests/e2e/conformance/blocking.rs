//! Block strategies and KILL as the protocol defines them: what happens to a trigger while its
//! job runs on the executor, and what a KILL stops — running, queued, and triggers that reach
//! an executor only after the KILL was sent.

use std::time::Duration;

use kadence_scheduler::domain::model::{Run, RunState};
use serde_json::{Value, json};

use super::{Implementation, results, run_of, stage};
use crate::helpers::{TestApp, spawn_app};
use kadence_tests::fixtures::{Backend, wait_for};

/// A `sleep` job of `app_name` under `strategy`, sleeping `millis` unless a trigger says
/// otherwise.
async fn sleeper(app: &TestApp, app_name: &str, strategy: &str, millis: u32) -> i64 {
    app.create_job(
        json!({"app": app_name, "handler": "sleep", "schedule_type": "NONE",
        "params": millis.to_string(), "block_strategy": strategy}),
    )
    .await
    .id
}

/// Asks the executors to kill `job`'s runs, with `reason` when given.
async fn kill(app: &TestApp, job: i64, reason: Option<&str>) {
    let body = reason.map_or(json!({}), |reason| json!({ "reason": reason }));
    let (status, answer): (u16, Value) = app
        .call(
            reqwest::Method::POST,
            &format!("/api/jobs/{job}/kill"),
            Some(body),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
}

/// Asserts that no two of `runs` overlapped in time.
fn one_after_another(runs: &[Run]) {
    let mut spans: Vec<(i64, i64)> = runs
        .iter()
        .map(|run| (run.started_at_ms.unwrap(), run.handle_at_ms.unwrap()))
        .collect();
    spans.sort_unstable();
    for pair in spans.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "overlapping runs: {runs:?}");
    }
}

/// SERIAL_EXECUTION: triggers of a busy job queue and run one after another, all of them.
async fn serial_execution_runs_one_after_another(executor: Implementation) {
    let (app, _process) = stage(executor, "serial", 1).await;
    let job = sleeper(&app, "serial", "SERIAL_EXECUTION", 700).await;
    for _ in 0..3 {
        app.trigger(job, None).await;
    }
    let runs = results(&app, job, 3).await;
    assert!(
        runs.iter().all(|run| run.handle_code == Some(200)),
        "{runs:?}"
    );
    one_after_another(&runs);
    app.shutdown().await;
}

/// DISCARD_LATER: a trigger of a busy job is refused with the exact message; the running run
/// goes on.
async fn discard_later_refuses_while_the_job_runs(executor: Implementation) {
    let (app, mut process) = stage(executor, "discard", 1).await;
    let job = sleeper(&app, "discard", "DISCARD_LATER", 3_000).await;
    let running = app.trigger(job, None).await;
    process
        .wait_for_line(&format!("started {running}"), Duration::from_secs(30))
        .await;
    let refused = app.trigger(job, None).await;
    let runs = results(&app, job, 2).await;
    assert_eq!(run_of(&runs, &running).handle_code, Some(200));
    let refusal = run_of(&runs, &refused);
    assert_eq!(refusal.handle_code, Some(500));
    let expected = format!(
        "discarded: job {job} is already running or queued on executor discard-1 \
         (block strategy DISCARD_LATER)"
    );
    assert_eq!(refusal.handle_msg.as_deref(), Some(expected.as_str()));
    assert_eq!(
        process.runs_of(&refused),
        0,
        "the refused trigger never ran"
    );
    app.shutdown().await;
}

/// COVER_EARLY: a new trigger cancels the running run, which says who covered it, and runs.
async fn cover_early_cancels_the_running_run(executor: Implementation) {
    let (app, mut process) = stage(executor, "cover", 1).await;
    let job = sleeper(&app, "cover", "COVER_EARLY", 30_000).await;
    let covered = app.trigger(job, None).await;
    process
        .wait_for_line(&format!("started {covered}"), Duration::from_secs(30))
        .await;
    let covering = app.trigger(job, Some("200")).await;
    let runs = results(&app, job, 2).await;
    assert_eq!(run_of(&runs, &covering).handle_code, Some(200));
    let first = run_of(&runs, &covered);
    assert_eq!(first.handle_code, Some(500));
    let expected = format!("covered by trigger {covering} (block strategy COVER_EARLY)");
    assert_eq!(first.handle_msg.as_deref(), Some(expected.as_str()));
    app.shutdown().await;
}

/// CONCURRENT: runs of one job overlap.
async fn concurrent_runs_overlap(executor: Implementation) {
    let (app, _process) = stage(executor, "parallel", 1).await;
    let job = sleeper(&app, "parallel", "CONCURRENT", 3_000).await;
    for _ in 0..3 {
        app.trigger(job, None).await;
    }
    let runs = results(&app, job, 3).await;
    assert!(
        runs.iter().all(|run| run.handle_code == Some(200)),
        "{runs:?}"
    );
    let last_start = runs.iter().map(|run| run.started_at_ms.unwrap()).max();
    let first_end = runs.iter().map(|run| run.handle_at_ms.unwrap()).min();
    assert!(last_start < first_end, "all three ran at once: {runs:?}");
    app.shutdown().await;
}

/// A KILL stops the job's running run and drops its queued one; both say they were killed,
/// and the queued one never started.
async fn a_kill_stops_running_and_queued_runs(executor: Implementation) {
    let (app, mut process) = stage(executor, "kill", 1).await;
    let job = sleeper(&app, "kill", "SERIAL_EXECUTION", 30_000).await;
    let running = app.trigger(job, None).await;
    let queued = app.trigger(job, None).await;
    process
        .wait_for_line(&format!("started {running}"), Duration::from_secs(30))
        .await;
    app.wait_for_beat("kill", "the job running and queued", |view| {
        view.entry.running_jobs.contains(&job) && view.entry.queued_jobs.contains(&job)
    })
    .await;
    kill(&app, job, Some("stuck on a lock")).await;
    let runs = results(&app, job, 2).await;
    for id in [&running, &queued] {
        let run = run_of(&runs, id);
        assert_eq!(run.handle_code, Some(500), "{run:?}");
        assert_eq!(run.handle_msg.as_deref(), Some("killed: stuck on a lock"));
    }
    let stopped = run_of(&runs, &running);
    assert!(
        stopped.handle_at_ms.unwrap() - stopped.started_at_ms.unwrap() < 20_000,
        "stopped long before its 30 s: {stopped:?}"
    );
    assert_eq!(process.runs_of(&queued), 0, "the queued run never started");
    app.shutdown().await;
}

/// A KILL naming one run stops that run only; the job's other run goes on to its result.
async fn a_kill_of_one_run_leaves_the_others(executor: Implementation) {
    let (app, mut process) = stage(executor, "one", 1).await;
    let job = sleeper(&app, "one", "CONCURRENT", 30_000).await;
    let doomed = app.trigger(job, None).await;
    let spared = app.trigger(job, Some("3000")).await;
    for id in [&doomed, &spared] {
        process
            .wait_for_line(&format!("started {id}"), Duration::from_secs(30))
            .await;
    }
    let log_id = run_of(&app.runs(job).await, &doomed).log_id;
    let (status, answer) = app
        .call(
            reqwest::Method::POST,
            &format!("/api/runs/{log_id}/kill"),
            Some(json!({"reason": "just this one"})),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["trigger_id"], json!(doomed));
    let runs = results(&app, job, 2).await;
    let killed = run_of(&runs, &doomed);
    assert_eq!(killed.handle_code, Some(500), "{killed:?}");
    assert_eq!(killed.handle_msg.as_deref(), Some("killed: just this one"));
    assert_eq!(run_of(&runs, &spared).handle_code, Some(200), "{runs:?}");
    // A finished run has nothing left to kill.
    let (status, answer) = app
        .call(
            reqwest::Method::POST,
            &format!("/api/runs/{log_id}/kill"),
            None,
        )
        .await;
    assert_eq!(status, 409, "{answer}");
    app.shutdown().await;
}

/// A KILL sent while no executor is up covers the triggers emitted before it: the executor
/// that comes refuses them as killed without running them, and runs the trigger emitted after.
async fn a_kill_sent_while_no_executor_is_up_covers_its_triggers(executor: Implementation) {
    let app = spawn_app(Backend::Sqlite).await;
    app.create_app("down", 1).await;
    let job = app
        .create_job(json!({"app": "down", "handler": "ok", "schedule_type": "NONE"}))
        .await
        .id;
    let before = [app.trigger(job, None).await, app.trigger(job, None).await];
    wait_for(
        Duration::from_secs(10),
        "both triggers dispatched",
        || async {
            let runs = app.runs(job).await;
            (runs.len() == 2 && runs.iter().all(|run| run.state == RunState::Dispatched))
                .then_some(())
        },
    )
    .await;
    kill(&app, job, None).await;
    // Emitted after the KILL: not covered.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let after = app.trigger(job, None).await;

    let mut process = start_owner_of_existing(executor, &app, "down").await;
    let runs = results(&app, job, 3).await;
    for id in &before {
        let run = run_of(&runs, id);
        assert_eq!(run.handle_code, Some(500), "{run:?}");
        assert_eq!(
            run.handle_msg.as_deref(),
            Some("killed: requested by an operator")
        );
        assert_eq!(process.runs_of(id), 0, "{id} never ran");
    }
    assert_eq!(run_of(&runs, &after).handle_code, Some(200));
    assert_eq!(process.runs_of(&after), 1);
    app.shutdown().await;
}

/// Starts the one executor of the existing one-partition app `app_name`.
async fn start_owner_of_existing(
    executor: Implementation,
    app: &TestApp,
    app_name: &str,
) -> super::ExecutorProcess {
    let id = format!("{app_name}-1");
    super::ExecutorProcess::start(executor, app, app_name, &id).await
}

on_every_executor!(
    serial_execution_runs_one_after_another,
    discard_later_refuses_while_the_job_runs,
    cover_early_cancels_the_running_run,
    concurrent_runs_overlap,
    a_kill_stops_running_and_queued_runs,
    a_kill_of_one_run_leaves_the_others,
    a_kill_sent_while_no_executor_is_up_covers_its_triggers,
);
