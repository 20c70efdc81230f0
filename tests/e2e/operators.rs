//! What operators do, end to end: bad input is a 4xx everywhere (a schedule that never fires
//! included), a busy API answers 503 with `Retry-After` (never 500), and stopping or
//! rescheduling a job stops the fires planned under its old state on every scheduler node.
//!
//! On both stores: each test is about what the database holds or how it behaves (NUL in text,
//! a locked table, cancelled fires, paging).

use std::collections::HashMap;
use std::time::Duration;

use kadence_scheduler::domain::model::Run;
use kadence_tests::now_ms;
use kadence_tests::triggers::read_triggers;
use serde_json::json;

use crate::helpers::{spawn_app, spawn_app_with};
use kadence_tests::fixtures::{Backend, wait_for};

/// A NUL character in any text is 400 naming the field (PostgreSQL cannot store it, and
/// answered 500 before); a body over the limit is 413 on every route that takes one.
async fn bad_input_is_a_4xx_everywhere(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app("strict", 1).await;
    let job = app
        .create_job(json!({"app": "strict", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let post = reqwest::Method::POST;
    let patch = reqwest::Method::PATCH;
    let job_path = format!("/api/jobs/{}", job.id);
    let trigger_path = format!("/api/jobs/{}/trigger", job.id);
    let kill_path = format!("/api/jobs/{}/kill", job.id);

    let nul_cases = [
        (
            post.clone(),
            "/api/jobs",
            json!({"app": "strict", "handler": "ok", "schedule_type": "NONE", "params": "a\u{0}b"}),
            "params",
        ),
        (
            post.clone(),
            "/api/jobs",
            json!({"app": "strict", "handler": "o\u{0}k", "schedule_type": "NONE"}),
            "handler",
        ),
        (
            post.clone(),
            "/api/jobs",
            json!({"app": "strict", "handler": "ok", "schedule_type": "NONE", "author": "\u{0}"}),
            "author",
        ),
        (
            patch.clone(),
            job_path.as_str(),
            json!({"name": "x\u{0}"}),
            "name",
        ),
        (
            post.clone(),
            trigger_path.as_str(),
            json!({"params": "\u{0}"}),
            "params",
        ),
        (
            post.clone(),
            kill_path.as_str(),
            json!({"reason": "\u{0}"}),
            "reason",
        ),
        (
            post.clone(),
            "/api/apps",
            json!({"name": "other", "partitions": 1, "title": "t\u{0}"}),
            "title",
        ),
    ];
    for (method, path, body, field) in nul_cases {
        let (status, answer) = app.call(method.clone(), path, Some(body)).await;
        assert_eq!(status, 400, "{method} {path}: {answer}");
        let message = answer["error"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{field} contains a NUL character")),
            "{method} {path}: {message}"
        );
    }

    let huge = "x".repeat(600 * 1024);
    let too_large = [
        (
            post.clone(),
            "/api/jobs",
            json!({"app": "strict", "handler": "ok", "params": huge}),
        ),
        (patch.clone(), job_path.as_str(), json!({"params": huge})),
        (
            post.clone(),
            "/api/apps",
            json!({"name": "big", "partitions": 1, "title": huge}),
        ),
        (post.clone(), trigger_path.as_str(), json!({"params": huge})),
        (post.clone(), kill_path.as_str(), json!({"reason": huge})),
    ];
    for (method, path, body) in too_large {
        let (status, answer) = app.call(method.clone(), path, Some(body)).await;
        assert_eq!(status, 413, "{method} {path}: {answer}");
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .starts_with("request body too large"),
            "{answer}"
        );
    }
    // A cron expression that never fires is refused when saved (created or edited), and
    // its preview says why instead of listing nothing.
    let never = "0 0 0 30 2 ?";
    for (method, path, body) in [
        (
            post.clone(),
            "/api/jobs",
            json!({"app": "strict", "handler": "ok", "schedule_conf": never}),
        ),
        (
            patch.clone(),
            job_path.as_str(),
            json!({"schedule_type": "CRON", "schedule_conf": never}),
        ),
    ] {
        let (status, answer) = app.call(method.clone(), path, Some(body)).await;
        assert_eq!(status, 400, "{method} {path}: {answer}");
        let message = answer["error"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{never:?} never fires after ")),
            "{method} {path}: {message}"
        );
    }
    let (status, preview) = app
        .call(
            reqwest::Method::GET,
            "/api/schedules/preview?schedule_conf=0%200%200%2030%202%20%3F&after_ms=0",
            None,
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["fires"], json!([]));
    assert_eq!(preview["never_fires"], json!(true));
    assert_eq!(
        preview["message"].as_str().unwrap_or_default(),
        format!(
            "{never:?} never fires after 1970-01-01T00:00:00+00:00: a day no month has \
             (such as 30 in February) or only past years"
        )
    );
    let (_, preview) = app
        .call(
            reqwest::Method::GET,
            "/api/schedules/preview?schedule_conf=0%200%2012%20%3F%20*%20L&after_ms=0&count=1",
            None,
        )
        .await;
    assert_eq!(preview["fires"], json!(["1970-01-03T12:00:00+00:00"]));
    assert_eq!(preview["never_fires"], json!(false));
    assert_eq!(preview["message"], json!(null));
    // Nothing of the refused requests was written.
    let (status, jobs) = app.call(reqwest::Method::GET, "/api/jobs", None).await;
    assert_eq!(status, 200);
    assert_eq!(jobs["items"].as_array().unwrap().len(), 1);
    assert_eq!(jobs["items"][0]["name"], "ok");
    app.shutdown().await;
}

/// A database connection held by someone else makes a request slow: it is answered 503
/// with `Retry-After` at the request timeout, a request beyond the concurrency limit is shed
/// at once with 503, `/health` still answers, and nothing half-done remains.
async fn a_busy_api_answers_503_with_retry_after(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.api.max_concurrent_requests = 1;
        config.api.request_timeout = Duration::from_secs(1);
    })
    .await;
    app.create_app("busy", 1).await;
    let lock = hold_jobs_table(backend, &app.database().url).await;

    let blocked = {
        let http = reqwest::Client::new();
        let url = format!("{}/api/jobs", app.api_url());
        let token = app.admin_token().to_owned();
        tokio::spawn(async move {
            http.post(url)
                .bearer_auth(token)
                .json(&json!({"app": "busy", "handler": "ok", "schedule_type": "NONE"}))
                .send()
                .await
                .expect("API answers")
        })
    };
    // Time for the blocked request to take the only slot. A fixed wait, because the only
    // sign of it is the API's answer, and a request sent to look would take the slot itself
    // and get the blocked one shed instead.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let shed = reqwest::Client::new()
        .get(format!("{}/api/apps", app.api_url()))
        .bearer_auth(app.admin_token())
        .send()
        .await
        .unwrap();
    assert_eq!(shed.status().as_u16(), 503);
    assert_eq!(shed.headers()["retry-after"], "1");
    let body: serde_json::Value = shed.json().await.unwrap();
    assert_eq!(
        body["error"],
        "service busy: too many requests at once; retry in a moment"
    );
    let health = reqwest::get(format!("{}/health", app.api_url()))
        .await
        .unwrap();
    assert_eq!(
        health.status().as_u16(),
        200,
        "health is outside the limits"
    );
    let ready = reqwest::get(format!("{}/health/ready", app.api_url()))
        .await
        .unwrap();
    assert_eq!(
        ready.status().as_u16(),
        200,
        "readiness is outside the limits"
    );
    let ready: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(ready["database"]["reachable"], true, "{ready}");
    assert!(ready["database"]["error"].is_null(), "{ready}");

    let timed_out = blocked.await.unwrap();
    assert_eq!(timed_out.status().as_u16(), 503);
    assert_eq!(timed_out.headers()["retry-after"], "1");
    let body: serde_json::Value = timed_out.json().await.unwrap();
    assert_eq!(
        body["error"],
        "service busy: the request took too long; retry in a moment"
    );

    drop(lock);
    let created = app
        .create_job(json!({"app": "busy", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let (status, jobs) = app.call(reqwest::Method::GET, "/api/jobs", None).await;
    assert_eq!(status, 200);
    let ids: Vec<i64> = jobs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![created.id],
        "the timed-out create left nothing behind"
    );
    app.shutdown().await;
}

/// A transaction that keeps writers off the `jobs` table until dropped (SQLite: the write
/// lock; PostgreSQL: an exclusive table lock; MySQL: a table write lock).
async fn hold_jobs_table(backend: Backend, url: &str) -> Box<dyn std::any::Any + Send> {
    use sqlx::{Connection, Executor};
    match backend {
        Backend::Sqlite => {
            let mut connection = sqlx::SqliteConnection::connect(url).await.unwrap();
            connection.execute("BEGIN IMMEDIATE").await.unwrap();
            Box::new(connection)
        }
        Backend::Postgres => {
            let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
            connection
                .execute("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
                .await
                .unwrap();
            Box::new(connection)
        }
        Backend::MySql => {
            let mut connection = sqlx::MySqlConnection::connect(url).await.unwrap();
            connection.execute("LOCK TABLES jobs WRITE").await.unwrap();
            Box::new(connection)
        }
    }
}

/// Two scheduler nodes share the schedule. Jobs stopped through one node, while fires are
/// planned seconds ahead and held in either node's wheel, emit nothing due more than the
/// emit lead plus the cancellation poll after the stop (nothing at all once the leases
/// ended: no claim takes a cancelled fire), and no run exists for them. A job whose schedule
/// is edited fires on the new schedule only, each instant once.
async fn stops_and_edits_cancel_planned_fires_on_every_node(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.schedule.lease = Duration::from_secs(2);
        config.schedule.claim_interval = Duration::from_millis(500);
    })
    .await;
    let (other_node, other_url) = app.start_node().await;
    app.create_app("ops", 1).await;
    let mut stopped = Vec::new();
    for _ in 0..5 {
        let job = app
            .create_job(json!({"app": "ops", "handler": "ok", "schedule_conf": "* * * * * ?", "start": true}))
            .await;
        stopped.push(job.id);
    }
    let edited = app
        .create_job(
            json!({"app": "ops", "handler": "ok", "schedule_conf": "* * * * * ?", "start": true}),
        )
        .await;
    // Started jobs fire from now + the 5 s window on, and the pre-read loop plans them at
    // once: wait until every job has a fire planned beyond where a stop can still let it out
    // (the horizon below, 2 s), so that there is something in a wheel to cancel. A job's
    // fires are planned up to its next fire time, exclusive, and a job is planned again
    // when that is within the read-ahead (3 s): asking for more than 2.5 s ahead holds for
    // most of each cycle, for all six jobs at once even on a loaded machine (4 s held for
    // under a second of each cycle and timed out under the full suite).
    wait_for(
        Duration::from_secs(30),
        "every job with a fire planned more than 2.5 s ahead",
        || async {
            let ahead = now_ms() + 2_500;
            for job in stopped.iter().chain([&edited.id]) {
                let (_, view) = app
                    .call(reqwest::Method::GET, &format!("/api/jobs/{job}"), None)
                    .await;
                let planned_ahead = view["next_fire_ms"]
                    .as_i64()
                    .is_some_and(|next_fire_ms| next_fire_ms - 1_000 > ahead);
                if !planned_ahead {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;

    for job in &stopped {
        let (status, body) = app
            .call_node(
                &other_url,
                reqwest::Method::POST,
                &format!("/api/jobs/{job}/stop"),
                None,
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let stop_ms = now_ms();
    let (status, body) = app
        .call_node(
            &other_url,
            reqwest::Method::PATCH,
            &format!("/api/jobs/{}", edited.id),
            Some(json!({"schedule_conf": "*/2 * * * * ?"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let edit_ms = now_ms();
    // Past the window, every lease and a few claim passes. A fixed wait: what it waits for
    // is the absence of emissions (nothing of the stopped jobs past the horizon, nothing on
    // the old schedule), which no condition can report; the new schedule's fires come in
    // the same time.
    tokio::time::sleep(Duration::from_secs(10)).await;

    let topic = format!("{}.triggers.ops", app.prefix);
    let records = read_triggers(&app.brokers, &topic, 1).await;
    // Emit lead 1 s + cancellation poll 250 ms, and 750 ms for a slow machine.
    let horizon = |at: i64| at + 2_000;
    let mut per_trigger: HashMap<String, usize> = HashMap::new();
    for record in &records {
        *per_trigger
            .entry(record.trigger_id.as_str().to_owned())
            .or_default() += 1;
        if stopped.contains(&record.job_id.get()) {
            assert!(
                record.scheduled_at_ms <= horizon(stop_ms),
                "{} due {} ms after the stop was emitted",
                record.trigger_id,
                record.scheduled_at_ms - stop_ms
            );
        }
        if record.job_id.get() == edited.id && record.scheduled_at_ms > horizon(edit_ms) {
            assert_eq!(
                record.scheduled_at_ms % 2_000,
                0,
                "{} fired on the old schedule after the edit",
                record.trigger_id
            );
        }
    }
    let doubled: Vec<_> = per_trigger.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "emitted twice: {doubled:?}");
    let new_schedule: Vec<i64> = records
        .iter()
        .filter(|record| {
            record.job_id.get() == edited.id && record.scheduled_at_ms > horizon(edit_ms)
        })
        .map(|record| record.scheduled_at_ms)
        .collect();
    assert!(
        new_schedule.len() >= 3,
        "the new schedule fires: {new_schedule:?}"
    );
    for pair in new_schedule.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            2_000,
            "every new fire once: {new_schedule:?}"
        );
    }

    // A cancelled fire never becomes a run.
    for job in &stopped {
        let runs: Vec<Run> = app.runs(*job).await;
        let late: Vec<&Run> = runs
            .iter()
            .filter(|run| run.scheduled_at_ms > horizon(stop_ms))
            .collect();
        assert!(late.is_empty(), "{late:?}");
    }
    other_node.stop(Duration::from_secs(10)).await;
    app.shutdown().await;
}

/// Every list is a page: `limit` bounds it, `next` passed back as `after` continues it to the
/// end without repeating an item, filters apply to every page, and bad paging is 400.
async fn lists_come_in_pages(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app("paged", 1).await;
    app.create_app("other", 1).await;
    let mut running = Vec::new();
    for n in 0..5 {
        let job = app
            .create_job(
                json!({"app": "paged", "handler": "ok", "schedule_conf": "0 0 3 * * ?",
                "start": n % 2 == 0}),
            )
            .await;
        if n % 2 == 0 {
            running.push(job.id);
        }
    }
    app.create_job(json!({"app": "other", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let pages = |query: &'static str| {
        let app = &app;
        async move {
            let mut ids = Vec::new();
            let mut pages = 0;
            let mut after: Option<String> = None;
            loop {
                let path = match &after {
                    Some(after) => format!("/api/jobs?{query}&limit=2&after={after}"),
                    None => format!("/api/jobs?{query}&limit=2"),
                };
                let (status, page) = app.call(reqwest::Method::GET, &path, None).await;
                assert_eq!(status, 200, "{page}");
                let items = page["items"].as_array().unwrap();
                assert!(items.len() <= 2);
                ids.extend(items.iter().map(|job| job["id"].as_i64().unwrap()));
                pages += 1;
                match page["next"].as_str() {
                    Some(next) => after = Some(next.to_owned()),
                    None => return (ids, pages),
                }
            }
        }
    };
    let (all, page_count) = pages("app=paged").await;
    assert_eq!(all.len(), 5);
    assert!(
        all.windows(2).all(|pair| pair[0] < pair[1]),
        "by id, none twice: {all:?}"
    );
    assert_eq!(page_count, 3);
    let (running_ids, _) = pages("app=paged&status=RUNNING").await;
    assert_eq!(running_ids, running);

    let (status, runs) = app
        .call(
            reqwest::Method::GET,
            &format!("/api/jobs/{}/runs?limit=5", all[0]),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(runs["items"], json!([]));
    assert_eq!(runs["next"], json!(null));
    for bad in [
        "/api/jobs?limit=0",
        "/api/jobs?limit=1001",
        "/api/jobs?after=x",
        "/api/jobs?status=PAUSED",
        "/api/executors?after=no-slash",
        "/api/reports?after=1/2",
    ] {
        let (status, body) = app.call(reqwest::Method::GET, bad, None).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    app.shutdown().await;
}

on_every_backend!(
    bad_input_is_a_4xx_everywhere,
    lists_come_in_pages,
    a_busy_api_answers_503_with_retry_after,
    stops_and_edits_cancel_planned_fires_on_every_node,
);
