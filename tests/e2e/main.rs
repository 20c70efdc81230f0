//! End-to-end: a scheduler and executors in this process, the real broker, SQLite and
//! PostgreSQL. Each test has its own topic prefix (so its own topics and group ids) and its own
//! database.
//!
//! The tests in this file that schedule, record results and logs, or answer from the
//! database (cron and FIX_DELAY fires, early emission, manual triggers, editing, bad input,
//! the rolling log) run on both stores. Those whose subject is the executor run once, on
//! SQLite: block strategies and the dead-letter queue (the store's part there, "unknown
//! trigger id", is the store suite's `first_result_wins`, on both). The rule is in
//! `tests/src/fixtures.rs`. What every executor implementation must do — kills, graceful stops,
//! redelivery after a kill -9, each block strategy — is the `conformance` suite's, run
//! against the Rust and the Python executor as processes.

#[macro_use]
extern crate kadence_tests;
mod access;
mod api_guards;
mod api_load;
mod book;
#[cfg(unix)]
mod bridge;
mod browser;
mod closing;
#[cfg(unix)]
mod conformance;
mod console;
mod console_api;
mod console_session;
mod executor_keys;
mod field_limits;
mod helpers;
#[cfg(unix)]
mod java_sample;
mod login_guard;
mod metrics;
mod monitors;
mod operators;
mod otlp;
mod permissions;
mod prometheus;
mod rebalance;
mod registry;
mod replays;
mod routing;
mod scripts;
mod shadow;
mod signing;
mod sinks;
mod steps;
mod user_lifecycle;
mod xxl_import;

use std::collections::HashSet;
use std::time::Duration;

use helpers::spawn_app;
use kadence_scheduler::domain::model::{Run, RunState};
use kadence_schemas::{
    AppName, ExecutorBeat, ExecutorState, JobId, ResultRecord, TriggerId, TriggerType, codec,
};
use kadence_tests::fixtures::{Backend, wait_for};
use serde_json::json;

fn finished(runs: &[Run], code: i32) -> Vec<&Run> {
    runs.iter()
        .filter(|run| run.state == RunState::Finished && run.handle_code == Some(code))
        .collect()
}

/// A job firing every second runs through Kafka and its results land in the database; a
/// failing handler's rows carry its message.
async fn cron_jobs_fire_through_kafka_and_results_land(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("demo", 2).await;
    app.start_executor("demo");
    let succeeding = app
        .create_job(
            json!({"app": "demo", "handler": "ok", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?", "start": true}),
        )
        .await;
    let failing = app
        .create_job(
            json!({"app": "demo", "handler": "fail", "schedule_conf": "* * * * * ?",
            "params": "p-42", "route_strategy": "LAST", "start": true}),
        )
        .await;
    assert_eq!(succeeding.status, "RUNNING");

    let ok_runs = wait_for(Duration::from_secs(60), "three successful runs", || async {
        let runs = app.runs(succeeding.id).await;
        (finished(&runs, 200).len() >= 3).then_some(runs)
    })
    .await;
    let fail_runs = wait_for(Duration::from_secs(30), "three failed runs", || async {
        let runs = app.runs(failing.id).await;
        (finished(&runs, 500).len() >= 3).then_some(runs)
    })
    .await;
    app.stop_job(succeeding.id).await;
    app.stop_job(failing.id).await;

    for (job, runs) in [(succeeding.id, &ok_runs), (failing.id, &fail_runs)] {
        let ids: HashSet<&str> = runs.iter().map(|run| run.trigger_id.as_str()).collect();
        assert_eq!(ids.len(), runs.len(), "trigger ids are distinct");
        for run in runs {
            assert_eq!(run.trigger_type, TriggerType::Cron);
            assert_eq!(run.scheduled_at_ms % 1_000, 0, "fires on second boundaries");
            assert_eq!(
                run.trigger_id.as_str(),
                format!("{job}-{}", run.scheduled_at_ms),
                "deterministic trigger id"
            );
        }
    }
    for run in finished(&fail_runs, 500) {
        assert_eq!(
            run.handle_msg.as_deref(),
            Some("failing on purpose with params \"p-42\"")
        );
        assert_eq!(run.partition, Some(1), "LAST routes to the last partition");
        assert!(run.executor_id.is_some());
    }
    for run in finished(&ok_runs, 200) {
        assert_eq!(run.partition, Some(0), "FIRST routes to partition 0");
        assert!(run.dispatched_at_ms.is_some());
    }
    app.shutdown().await;
}

/// Manual triggers carry their own params; a handler the executor lacks gets a failure result
/// saying so; triggers emitted before any executor joined wait and then run.
async fn manual_triggers_and_missing_handlers(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("manual", 1).await;
    let job = app
        .create_job(
            json!({"app": "manual", "handler": "fail", "schedule_type": "NONE", "params": "own"}),
        )
        .await;
    let unknown = app
        .create_job(json!({"app": "manual", "handler": "nope", "schedule_type": "NONE"}))
        .await;
    // No executor yet: the triggers wait in their partition.
    let first = app.trigger(job.id, Some("override")).await;
    let second = app.trigger(job.id, None).await;
    let missing = app.trigger(unknown.id, None).await;
    wait_for(Duration::from_secs(10), "triggers dispatched", || async {
        let runs = app.runs(job.id).await;
        runs.iter()
            .all(|run| run.state == RunState::Dispatched)
            .then_some(())
    })
    .await;
    app.start_executor("manual");
    let runs = wait_for(Duration::from_secs(60), "manual runs finished", || async {
        let runs = app.runs(job.id).await;
        (finished(&runs, 500).len() == 2).then_some(runs)
    })
    .await;
    let message = |id: &str| {
        runs.iter()
            .find(|run| run.trigger_id.as_str() == id)
            .and_then(|run| run.handle_msg.clone())
            .unwrap()
    };
    assert_eq!(
        message(&first),
        "failing on purpose with params \"override\""
    );
    assert_eq!(message(&second), "failing on purpose with params \"own\"");
    assert!(
        runs.iter()
            .all(|run| run.trigger_type == TriggerType::Manual)
    );
    let missing_run = app
        .wait_for_run(unknown.id, 500, Duration::from_secs(30))
        .await;
    assert_eq!(missing_run.trigger_id.as_str(), missing);
    let text = missing_run.handle_msg.unwrap();
    assert!(
        text.contains(
            "has no handler named \"nope\" (it has: chatty, count, fail, flaky, ok, sleep, slow_count)"
        ),
        "{text}"
    );
    app.shutdown().await;
}

/// Bad input gets a 4xx with a message that says what to fix.
async fn bad_input_is_refused_clearly(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app("strict", 1).await;
    let post = |path: &'static str, body: serde_json::Value| {
        let app = &app;
        async move { app.call(reqwest::Method::POST, path, Some(body)).await }
    };
    let (status, body) = post(
        "/api/jobs",
        json!({"app": "strict", "handler": "ok", "schedule_conf": "0 61 * * * ?"}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("invalid cron expression \"0 61 * * * ?\""),
        "{body}"
    );
    let (status, body) = post(
        "/api/jobs",
        json!({"app": "ghost", "handler": "ok", "schedule_conf": "* * * * * ?"}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("unknown app ghost"),
        "{body}"
    );
    let (status, body) = post("/api/jobs", json!({"app": "strict", "handler": "ok", "schedule_conf": "* * * * * ?", "route_strategy": "NEAREST"})).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("unknown route strategy \"NEAREST\""),
        "{body}"
    );
    let huge = "x".repeat(64 * 1024 + 1);
    let (status, body) = post(
        "/api/jobs",
        json!({"app": "strict", "handler": "ok", "schedule_type": "NONE", "params": huge}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("the limit is 65536 bytes"),
        "{body}"
    );
    let (status, body) = post("/api/jobs", json!({"app": "strict", "handler": "ok", "schedule_conf": "* * * * * ?", "time_zone": "Mars/Base"})).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("unknown time zone"),
        "{body}"
    );
    let (status, body) = post("/api/jobs", json!({"app": "strict", "handlr": "ok"})).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("unknown field `handlr`"),
        "{body}"
    );
    let (status, _) = post("/api/apps", json!({"name": "strict", "partitions": 1})).await;
    assert_eq!(status, 409);
    // A trigger topic that exists with another partition count is reported, never guessed around.
    let topic = format!("{}.triggers.mismatch", app.prefix);
    helpers::create_topic(&topic, 3).await;
    let (status, body) = post("/api/apps", json!({"name": "mismatch", "partitions": 2})).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("exists with 3 partitions but Kadence expects 2"),
        "{body}"
    );
    let (status, body) = post("/api/apps", json!({"name": "bad.name", "partitions": 1})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = post("/api/apps", json!({"name": "zero", "partitions": 0})).await;
    assert_eq!(status, 400, "{body}");
    let manual = app
        .create_job(json!({"app": "strict", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let (status, body) = app
        .call(
            reqwest::Method::POST,
            &format!("/api/jobs/{}/start", manual.id),
            None,
        )
        .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("cannot be started"),
        "{body}"
    );
    let (status, _) = app
        .call(reqwest::Method::GET, "/api/jobs/424242", None)
        .await;
    assert_eq!(status, 404);
    let (status, _) = app.call(reqwest::Method::GET, "/api/jobs/abc", None).await;
    assert_eq!(status, 400);
    app.shutdown().await;
}

/// Editing follows XXL-JOB: a running job's next fire is recomputed only when its schedule
/// changes; child links are checked; scripts are versioned.
async fn editing_jobs_follows_xxl_job_rules(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app("edit", 1).await;
    let patch = |id: i64, body: serde_json::Value| {
        let app = &app;
        async move {
            app.call(
                reqwest::Method::PATCH,
                &format!("/api/jobs/{id}"),
                Some(body),
            )
            .await
        }
    };
    let job = app
        .create_job(
            json!({"app": "edit", "handler": "ok", "schedule_conf": "0 0 3 * * ?", "start": true}),
        )
        .await;
    let (status, params_only) = patch(job.id, json!({"params": "x"})).await;
    assert_eq!(status, 200, "{params_only}");
    assert_eq!(params_only["params"], "x");
    assert_eq!(
        params_only["next_fire_ms"],
        json!(job.next_fire_ms),
        "unchanged schedule keeps its next fire"
    );
    let (status, rescheduled) = patch(job.id, json!({"schedule_conf": "0 0 4 * * ?"})).await;
    assert_eq!(status, 200, "{rescheduled}");
    let next = rescheduled["next_fire_ms"].as_i64().unwrap();
    // Between 03:00 and 04:00 the next 04:00 comes before the next 03:00, so the two are
    // compared on the clock face, not as instants.
    assert_eq!(
        (next - job.next_fire_ms.unwrap()).rem_euclid(86_400_000),
        3_600_000,
        "03:00 became 04:00"
    );
    let (status, body) = patch(job.id, json!({"schedule_conf": "0 61 * * * ?"})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = patch(job.id, json!({"status": "STOPPED"})).await;
    assert_eq!(status, 400, "{body}");

    let child = app
        .create_job(json!({"app": "edit", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let (status, body) = patch(child.id, json!({"child_job_ids": [job.id]})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = patch(job.id, json!({"child_job_ids": [child.id]})).await;
    assert_eq!(status, 400);
    let expected = format!(
        "child jobs would form a cycle: {} → {} → {}",
        job.id, child.id, job.id
    );
    assert!(
        body["error"].as_str().unwrap().contains(&expected),
        "{body}"
    );
    let (status, body) = patch(job.id, json!({"child_job_ids": [999_999]})).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("child job 999999 does not exist"),
        "{body}"
    );
    let (status, body) = patch(job.id, json!({"alarm_emails": ["not-an-address"]})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = patch(job.id, json!({"alarm_webhook": "ftp://x"})).await;
    assert_eq!(status, 400, "{body}");

    let (status, body) = app
        .call(reqwest::Method::POST, "/api/jobs", Some(json!({"app": "edit", "handler": "sh", "schedule_type": "NONE", "glue_type": "GLUE_SHELL"})))
        .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("needs a glue_source"),
        "{body}"
    );
    let script = app
        .create_job(json!({"app": "edit", "handler": "sh", "schedule_type": "NONE", "glue_type": "GLUE_SHELL",
            "glue_source": "echo one", "glue_remark": "first"}))
        .await;
    let (status, _) = patch(
        script.id,
        json!({"glue_source": "echo two", "glue_remark": "second"}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, versions) = app
        .call(
            reqwest::Method::GET,
            &format!("/api/jobs/{}/glue", script.id),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(versions[0]["source"], "echo two");
    assert_eq!(versions[1]["remark"], "first");
    app.shutdown().await;
}

/// Triggers `count` runs of a new `sleep` job with `strategy` while the executor is busy with
/// nothing else, and waits until each has a result.
async fn burst(app: &helpers::TestApp, strategy: &str, count: usize, sleep_ms: u64) -> Vec<Run> {
    let job = app
        .create_job(
            json!({"app": "blocks", "handler": "sleep", "schedule_type": "NONE",
            "params": sleep_ms.to_string(), "block_strategy": strategy}),
        )
        .await;
    let mut fired = Vec::new();
    for _ in 0..count {
        fired.push(app.trigger(job.id, None).await);
    }
    wait_for(
        Duration::from_secs(60),
        "a result for every run",
        || async {
            let runs = app.runs(job.id).await;
            (runs.iter().filter(|run| run.handle_code.is_some()).count() == count).then_some(())
        },
    )
    .await;
    let mut runs = app.runs(job.id).await;
    // In trigger order.
    runs.sort_by_key(|run| fired.iter().position(|id| id == run.trigger_id.as_str()));
    runs
}

fn overlaps(a: &Run, b: &Run) -> bool {
    a.started_at_ms.unwrap() < b.handle_at_ms.unwrap()
        && b.started_at_ms.unwrap() < a.handle_at_ms.unwrap()
}

/// Every block strategy's observable behaviour, on one executor.
async fn block_strategies_behave_as_in_xxl_job(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("blocks", 1).await;
    app.start_executor("blocks");
    // Warm up: the executor has joined its group once a first run finishes.
    burst(&app, "SERIAL_EXECUTION", 1, 1).await;

    let serial = burst(&app, "SERIAL_EXECUTION", 3, 400).await;
    assert!(
        serial.iter().all(|run| run.handle_code == Some(200)),
        "{serial:?}"
    );
    for pair in serial.windows(2) {
        assert!(
            pair[1].started_at_ms.unwrap() >= pair[0].handle_at_ms.unwrap(),
            "FIFO, one at a time: {serial:?}"
        );
    }

    let discard = burst(&app, "DISCARD_LATER", 3, 1_500).await;
    assert_eq!(discard[0].handle_code, Some(200));
    for refused in &discard[1..] {
        assert_eq!(refused.handle_code, Some(500));
        assert!(
            refused
                .handle_msg
                .as_deref()
                .unwrap()
                .contains("(block strategy DISCARD_LATER)"),
            "{refused:?}"
        );
    }

    let cover = burst(&app, "COVER_EARLY", 3, 1_500).await;
    for covered in &cover[..2] {
        assert_eq!(covered.handle_code, Some(500), "{cover:?}");
        let message = covered.handle_msg.as_deref().unwrap();
        assert!(
            message.starts_with("covered by trigger ")
                && message.ends_with("(block strategy COVER_EARLY)"),
            "{message}"
        );
    }
    assert_eq!(cover[2].handle_code, Some(200), "the newest run wins");

    let concurrent = burst(&app, "CONCURRENT", 3, 1_000).await;
    assert!(concurrent.iter().all(|run| run.handle_code == Some(200)));
    assert!(
        overlaps(&concurrent[0], &concurrent[1]),
        "runs in parallel: {concurrent:?}"
    );
    assert!(
        !overlaps(&concurrent[0], &concurrent[2]) || !overlaps(&concurrent[1], &concurrent[2]),
        "at most two at once"
    );
    app.shutdown().await;
}

/// A run's log can be read from a given line while it runs (XXL-JOB's rolling log), and the
/// rest once it finished.
async fn a_run_log_is_read_from_line_n_while_it_runs(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("logs", 1).await;
    app.start_executor("logs");
    let job = app
        .create_job(json!({"app": "logs", "handler": "chatty", "schedule_type": "NONE"}))
        .await;
    app.trigger(job.id, None).await;
    let run = wait_for(Duration::from_secs(30), "the run dispatched", || async {
        app.runs(job.id).await.into_iter().next()
    })
    .await;
    let read = |from: i64| {
        let app = &app;
        async move {
            let (status, body) = app
                .call(
                    reqwest::Method::GET,
                    &format!("/api/runs/{}/log?from_line={from}", run.log_id),
                    None,
                )
                .await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    let running = wait_for(
        Duration::from_secs(30),
        "five lines while it runs",
        || async {
            let body = read(3).await;
            (body["lines"].as_array().unwrap().len() == 3).then_some(body)
        },
    )
    .await;
    assert_eq!(running["lines"], json!(["line 3", "line 4", "line 5"]));
    assert_eq!(running["next_line"], 6);
    assert_eq!(running["finished"], false);

    helpers::release_chatty();
    app.wait_for_run(job.id, 200, Duration::from_secs(30)).await;
    let rest = wait_for(Duration::from_secs(30), "the last lines", || async {
        let body = read(6).await;
        (body["lines"].as_array().unwrap().len() == 2).then_some(body)
    })
    .await;
    assert_eq!(rest["lines"], json!(["line 6", "line 7"]));
    assert_eq!(
        (rest["next_line"].clone(), rest["finished"].clone()),
        (json!(8), json!(true))
    );
    let (status, body) = app
        .call(
            reqwest::Method::GET,
            &format!("/api/runs/{}/log?from_line=1&limit=2", run.log_id),
            None,
        )
        .await;
    assert_eq!(
        (status, body["lines"].clone()),
        (200, json!(["line 1", "line 2"]))
    );
    let (status, body) = app
        .call(
            reqwest::Method::GET,
            &format!("/api/runs/{}/log?from_line=0", run.log_id),
            None,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = app
        .call(reqwest::Method::GET, "/api/runs/987654/log", None)
        .await;
    assert_eq!(status, 404, "{body}");
    app.shutdown().await;
}

/// Triggers produced ahead of their time (`schedule.emit_lead`) reach the broker early and are
/// held by the executor until their scheduled millisecond; a held trigger can be killed.
async fn triggers_emitted_early_run_at_their_scheduled_millisecond(backend: Backend) {
    let mut app = helpers::spawn_app_with(backend, |config| {
        config.schedule.emit_lead = Duration::from_secs(3);
        // Rows written on acknowledgement, not held for their results: the test looks for
        // the run of a trigger that waits at the executor 2 s or more before its time.
        config.schedule.run_row_hold = Some(Duration::ZERO);
    })
    .await;
    app.create_app("early", 1).await;
    app.start_executor("early");
    let job = app
        .create_job(
            json!({"app": "early", "handler": "ok", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?", "start": true}),
        )
        .await;
    let runs = wait_for(Duration::from_secs(60), "three runs", || async {
        let runs = app.runs(job.id).await;
        (finished(&runs, 200).len() >= 3).then_some(runs)
    })
    .await;
    app.stop_job(job.id).await;
    for run in finished(&runs, 200) {
        let dispatched = run.dispatched_at_ms.unwrap();
        let started = run.started_at_ms.unwrap();
        assert!(
            dispatched < run.scheduled_at_ms,
            "acknowledged before its time: {run:?}"
        );
        assert!(
            started >= run.scheduled_at_ms,
            "never started early: {run:?}"
        );
    }

    // A held trigger is killed like a queued one.
    let held = app
        .create_job(
            json!({"app": "early", "handler": "ok", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?", "start": true}),
        )
        .await;
    let first = wait_for(
        Duration::from_secs(30),
        "a trigger acknowledged early",
        || async {
            let now = kadence_tests::now_ms();
            app.runs(held.id)
                .await
                .into_iter()
                .find(|run| run.state == RunState::Dispatched && run.scheduled_at_ms > now + 2_000)
        },
    )
    .await;
    app.stop_job(held.id).await;
    // The executor holds it (its beats count it as queued) long before its time.
    app.wait_for_beat("early", "the trigger held", |view| {
        view.entry.queued_jobs.contains(&held.id)
    })
    .await;
    let (status, body) = app
        .call(
            reqwest::Method::POST,
            &format!("/api/jobs/{}/kill", held.id),
            Some(json!({"reason": "not today"})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let killed = wait_for(
        Duration::from_secs(30),
        "the held trigger killed",
        || async {
            app.runs(held.id)
                .await
                .into_iter()
                .find(|run| run.trigger_id == first.trigger_id && run.state == RunState::Finished)
        },
    )
    .await;
    assert_eq!(killed.handle_code, Some(500), "{killed:?}");
    assert_eq!(killed.handle_msg.as_deref(), Some("killed: not today"));
    assert!(
        killed.handle_at_ms.unwrap() < killed.scheduled_at_ms,
        "{killed:?}"
    );
    app.shutdown().await;
}

/// FIX_DELAY: each run starts a fixed delay after the previous one finished.
async fn fix_delay_counts_from_the_end_of_the_previous_run(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("delay", 1).await;
    app.start_executor("delay");
    let job = app
        .create_job(
            json!({"app": "delay", "handler": "ok", "schedule_type": "FIX_DELAY",
            "schedule_conf": "1", "start": true}),
        )
        .await;
    let runs = wait_for(Duration::from_secs(60), "three FIX_DELAY runs", || async {
        let runs = app.runs(job.id).await;
        (finished(&runs, 200).len() >= 3).then_some(runs)
    })
    .await;
    app.stop_job(job.id).await;
    let mut done: Vec<&Run> = finished(&runs, 200);
    done.sort_by_key(|run| run.scheduled_at_ms);
    for pair in done.windows(2) {
        assert_eq!(pair[1].trigger_type, TriggerType::FixDelay);
        let previous_end = pair[0].handle_at_ms.expect("finished");
        assert!(
            pair[1].scheduled_at_ms >= previous_end + 1_000,
            "run at {} began less than 1 s after the previous ended at {previous_end}",
            pair[1].scheduled_at_ms
        );
    }
    app.shutdown().await;
}

/// A record nobody can decode goes to the dead-letter queue with the reason, and the
/// partition keeps flowing; so does a result for a trigger the scheduler never emitted.
async fn poison_records_go_to_the_dlq_and_the_partition_keeps_flowing(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("poison", 1).await;
    app.start_executor("poison");
    let triggers = format!("{}.triggers.poison", app.prefix);
    app.produce_raw(&triggers, 0, "1", b"{\"not\": \"avro\"}")
        .await;
    let job = app
        .create_job(json!({"app": "poison", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let fired = app.trigger(job.id, None).await;
    let run = app.wait_for_run(job.id, 200, Duration::from_secs(60)).await;
    assert_eq!(run.trigger_id.as_str(), fired);

    let stray = ResultRecord {
        trigger_id: TriggerId::scheduled(JobId::new(987_654).unwrap(), 1_000),
        log_id: 1,
        job_id: JobId::new(987_654).unwrap(),
        app: AppName::parse("poison").unwrap(),
        executor_id: "elsewhere".into(),
        code: 200,
        message: None,
        started_at_ms: 1,
        finished_at_ms: 2,
        attempt: 0,
        retry_after_ms: None,
    };
    let results = format!("{}.results", app.prefix);
    let signed_stray = codec::encode(&stray).unwrap();
    app.produce_signed("poison", (&results, 0), "987654-1000", &signed_stray)
        .await;
    // A result that names another job than its trigger id's cannot complete that run.
    let misattributed = ResultRecord {
        trigger_id: TriggerId::parse(&fired).unwrap(),
        job_id: JobId::new(job.id + 1).unwrap(),
        code: 500,
        ..stray.clone()
    };
    let misattributed = codec::encode(&misattributed).unwrap();
    app.produce_signed("poison", (&results, 0), &fired, &misattributed)
        .await;

    let letters = app.dead_letters(3).await;
    let reasons: Vec<&str> = letters.iter().map(|(reason, _)| reason.as_str()).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("undecodable trigger record") && r.contains("first byte is 0x7b")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("unknown trigger id 987654-1000")),
        "{reasons:?}"
    );
    let wrong_job = format!(
        "result for trigger {fired} names job {}, but the trigger belongs to job {}",
        job.id + 1,
        job.id
    );
    assert!(reasons.contains(&wrong_job.as_str()), "{reasons:?}");
    assert!(
        letters
            .iter()
            .any(|(_, payload)| payload.as_slice() == b"{\"not\": \"avro\"}"),
        "original bytes kept"
    );
    app.shutdown().await;
}

/// A beat of an app that does not exist, or claiming partitions its app's topic does not
/// have, goes to the dead-letter queue with the reason and never into the registry.
async fn beats_claiming_what_no_app_has_go_to_the_dlq(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app("claims", 3).await;
    let beat = |executor: &str, app_name: &str, partitions: Vec<i32>| ExecutorBeat {
        executor_id: executor.to_owned(),
        app: AppName::parse(app_name).unwrap(),
        host: "elsewhere".to_owned(),
        version: "hostile".to_owned(),
        handlers: vec!["ok".to_owned()],
        owned_partitions: partitions,
        running_jobs: Vec::new(),
        queued_jobs: Vec::new(),
        state: ExecutorState::Running,
        sent_at_ms: kadence_schemas::now_ms(),
        features: Vec::new(),
    };
    let beats = format!("{}.beats", app.prefix);
    for (executor, app_name, partitions) in [
        ("intruder", "claims", vec![0, 7]),
        ("ghost", "nowhere", vec![0]),
    ] {
        let payload = codec::encode(&beat(executor, app_name, partitions)).unwrap();
        app.produce_signed("claims", (&beats, 0), executor, &payload)
            .await;
    }
    let letters = app.dead_letters(2).await;
    let reasons: Vec<&str> = letters.iter().map(|(reason, _)| reason.as_str()).collect();
    assert!(
        reasons.contains(
            &"beat of executor intruder claims partitions [7] of app claims, whose trigger \
              topic has 3"
        ),
        "{reasons:?}"
    );
    // No key belongs to an app that does not exist: a key of another app signed it.
    assert!(
        reasons.contains(&"beat of app nowhere signed by a key of app claims"),
        "{reasons:?}"
    );
    let (status, listed) = app.call(reqwest::Method::GET, "/api/executors", None).await;
    assert_eq!(status, 200, "{listed}");
    assert!(
        !listed.to_string().contains("intruder") && !listed.to_string().contains("ghost"),
        "{listed}"
    );
    app.shutdown().await;
}

on_every_backend!(
    a_run_log_is_read_from_line_n_while_it_runs,
    triggers_emitted_early_run_at_their_scheduled_millisecond,
    editing_jobs_follows_xxl_job_rules,
    fix_delay_counts_from_the_end_of_the_previous_run,
    cron_jobs_fire_through_kafka_and_results_land,
    manual_triggers_and_missing_handlers,
    bad_input_is_refused_clearly,
);

on_sqlite_only!(
    block_strategies_behave_as_in_xxl_job,
    poison_records_go_to_the_dlq_and_the_partition_keeps_flowing,
    beats_claiming_what_no_app_has_go_to_the_dlq,
);
