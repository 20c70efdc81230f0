//! The routes the web console reads and the removal of a job, end to end: the job list's
//! handler, author and text filters; runs across jobs filtered by app, job, outcome and
//! time, never beyond a member's apps; one run with its retried attempts and the child run
//! its success fired; `DELETE /api/jobs/{id}` refusing a running job and a job that is
//! someone's child, then removing a stopped job and its runs; the dashboard's overview
//! counting what the test made.
//!
//! On both stores: every answer here comes from the database (filters, counts, deletion in
//! one transaction).

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use kadence_tests::fixtures::{Backend, wait_for};

/// `GET path` as the admin; panics unless it answers 200.
async fn get(app: &TestApp, path: &str) -> Value {
    let (status, body) = app.call(Method::GET, path, None).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// Every item of a listing, walked a page of `limit` at a time from `path` (which has a `?`).
async fn walk(app: &TestApp, token: Option<&str>, path: &str, limit: u32) -> Vec<Value> {
    let mut items = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut page_path = format!("{path}&limit={limit}");
        if let Some(after) = &after {
            page_path.push_str(&format!("&after={after}"));
        }
        let (status, body) = app
            .call_as(
                Some(token.unwrap_or(app.admin_token())),
                Method::GET,
                &page_path,
                None,
            )
            .await;
        assert_eq!(status, 200, "GET {page_path}: {body}");
        items.extend(body["items"].as_array().unwrap().iter().cloned());
        match body["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return items,
        }
    }
}

fn ids(items: &[Value], field: &str) -> Vec<i64> {
    items
        .iter()
        .map(|item| item[field].as_i64().unwrap())
        .collect()
}

/// A 400 whose message starts with `field`.
async fn refused(app: &TestApp, path: &str, field: &str) {
    let (status, body) = app.call(Method::GET, path, None).await;
    assert_eq!(status, 400, "GET {path}: {body}");
    let message = body["error"].as_str().unwrap();
    assert!(message.starts_with(field), "GET {path}: {message}");
}

/// `handler`, `author` and `q` each narrow the list to exactly the matching jobs, together
/// and with paging; `%` and `_` typed in `q` are plain characters.
async fn job_filters_return_exactly_the_matching_jobs(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app("alpha", 1).await;
    app.create_app("beta", 1).await;
    let mut made = Vec::new();
    for (app_name, name, handler, author) in [
        ("alpha", "Nightly REPORT", "sendReport", "ann"),
        ("alpha", "50% off_sale", "discount", "bob"),
        ("alpha", "500 offsale", "discount", "ann"),
        ("beta", "cleanup", "reportCleaner", "ann"),
    ] {
        let job = app
            .create_job(json!({"app": app_name, "name": name, "handler": handler,
                "author": author, "schedule_type": "NONE"}))
            .await;
        made.push(job.id);
    }
    let listed = |query: &'static str| {
        let app = &app;
        async move {
            ids(
                &walk(app, None, &format!("/api/jobs?{query}"), 1).await,
                "id",
            )
        }
    };
    assert_eq!(
        listed("handler=discount").await,
        [made[1], made[2]],
        "exact handler"
    );
    assert!(
        listed("handler=discoun").await.is_empty(),
        "not a substring"
    );
    assert_eq!(listed("author=ann").await, [made[0], made[2], made[3]]);
    assert_eq!(listed("author=ann&handler=discount").await, [made[2]]);
    assert_eq!(listed("author=ann&app=beta").await, [made[3]]);
    assert_eq!(listed("q=REPORT").await, [made[0], made[3]], "any case");
    assert_eq!(listed("q=report&status=STOPPED").await, [made[0], made[3]]);
    assert_eq!(listed("q=0%25%20off_").await, [made[1]], "typed % and _");
    assert!(listed("q=0_o").await.is_empty());
    let by_id = format!("/api/jobs?q={}", made[2]);
    assert_eq!(ids(&walk(&app, None, &by_id, 10).await, "id"), [made[2]]);
    assert_eq!(
        listed("q=&handler=").await.len(),
        4,
        "empty filters are left out"
    );
    // A member's filters stay within their apps.
    let viewer = app.add_member("viewer", &[("beta", "VIEW")]).await;
    let seen = walk(&app, Some(&viewer), "/api/jobs?author=ann", 10).await;
    assert_eq!(ids(&seen, "id"), [made[3]]);
    refused(&app, "/api/jobs?q=a%00b", "q contains a NUL").await;
    refused(&app, "/api/jobs?status=PAUSED", "unknown job status").await;
    app.shutdown().await;
}

/// Waits until `job` has `count` runs with a result; returns them.
async fn finished_runs(app: &TestApp, job: i64, count: usize) -> Vec<Value> {
    wait_for(
        Duration::from_secs(60),
        &format!("{count} finished runs of job {job}"),
        || async {
            let runs = walk(app, None, &format!("/api/runs?job={job}"), 100).await;
            (runs
                .iter()
                .filter(|run| run["handle_code"].is_i64())
                .count()
                >= count)
                .then_some(runs)
        },
    )
    .await
}

/// `GET /api/runs` filters by app, job, outcome and time, newest first and paged, each run
/// with its app, handler and job description; a member sees only their apps' runs, and is
/// refused another app or a job of another app, by name.
async fn runs_search_filters_and_never_shows_a_member_another_app(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("alpha", 1).await;
    app.create_app("beta", 1).await;
    app.start_executor("alpha");
    app.start_executor("beta");
    let job = |app_name: &str, handler: &str, name: &str| json!({"app": app_name, "handler": handler, "name": name, "schedule_type": "NONE"});
    let ok = app.create_job(job("alpha", "ok", "Alpha ok")).await;
    let fail = app.create_job(job("alpha", "fail", "Alpha fail")).await;
    let beta = app.create_job(job("beta", "fail", "Beta fail")).await;
    for id in [ok.id, ok.id, fail.id, beta.id] {
        app.trigger(id, None).await;
    }
    finished_runs(&app, ok.id, 2).await;
    finished_runs(&app, fail.id, 1).await;
    let beta_runs = finished_runs(&app, beta.id, 1).await;

    let all = walk(&app, None, "/api/runs?", 1).await;
    assert_eq!(all.len(), 4, "{all:?}");
    let log_ids = ids(&all, "log_id");
    assert!(
        log_ids.windows(2).all(|pair| pair[0] > pair[1]),
        "newest first: {log_ids:?}"
    );
    let beta_run = &beta_runs[0];
    assert_eq!(
        (
            &beta_run["app"],
            &beta_run["handler"],
            &beta_run["job_description"]
        ),
        (&json!("beta"), &json!("fail"), &json!("Beta fail"))
    );
    let runs_of = |query: &str| {
        let (app, query) = (&app, query.to_owned());
        async move {
            let runs = walk(app, None, &format!("/api/runs?{query}"), 100).await;
            let mut jobs = ids(&runs, "job_id");
            jobs.sort_unstable();
            jobs
        }
    };
    assert_eq!(runs_of("app=alpha").await, [ok.id, ok.id, fail.id]);
    assert_eq!(runs_of(&format!("job={}", ok.id)).await, [ok.id, ok.id]);
    assert_eq!(runs_of("outcome=FAILED").await, [fail.id, beta.id]);
    assert_eq!(runs_of("outcome=failed&app=beta").await, [beta.id]);
    assert_eq!(runs_of("outcome=SUCCEEDED").await, [ok.id, ok.id]);
    assert!(runs_of("outcome=RUNNING").await.is_empty());
    let at = beta_run["scheduled_at_ms"].as_i64().unwrap();
    let window = format!("from_ms={at}&to_ms={}", at + 1);
    assert_eq!(runs_of(&window).await, [beta.id], "[from_ms, to_ms)");

    // A trigger no executor takes stays RUNNING (not finished yet).
    app.create_app("gamma", 1).await;
    let waiting = app.create_job(job("gamma", "ok", "Waiting")).await;
    app.trigger(waiting.id, None).await;
    assert_eq!(runs_of("outcome=RUNNING").await, [waiting.id]);

    let viewer = app.add_member("viewer", &[("alpha", "VIEW")]).await;
    let seen = walk(&app, Some(&viewer), "/api/runs?", 2).await;
    assert!(
        seen.len() == 3 && seen.iter().all(|run| run["app"] == "alpha"),
        "{seen:?}"
    );
    let failures = walk(&app, Some(&viewer), "/api/runs?outcome=FAILED", 10).await;
    assert_eq!(ids(&failures, "job_id"), [fail.id]);
    // Naming an app is refused; a job or run of an app the member may not view does not
    // exist for them, as one that does not exist at all.
    let (status, body) = app
        .call_as(Some(&viewer), Method::GET, "/api/runs?app=beta", None)
        .await;
    assert_eq!(status, 403, "{body}");
    for path in [
        format!("/api/runs?job={}", beta.id),
        format!("/api/runs/{}", beta_run["log_id"]),
    ] {
        let (status, body) = app.call_as(Some(&viewer), Method::GET, &path, None).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    let (status, _) = app.call(Method::GET, "/api/runs?job=999999", None).await;
    assert_eq!(status, 404);
    refused(&app, "/api/runs?outcome=LOST", "outcome").await;
    refused(&app, "/api/runs?outcome=UNKNOWN", "outcome").await;
    refused(&app, "/api/runs?from_ms=10&to_ms=5", "from_ms").await;
    refused(&app, "/api/runs?to_ms=soon", "to_ms").await;
    refused(&app, "/api/runs?job=abc", "job").await;
    refused(&app, "/api/runs/abc", "log id").await;
    app.shutdown().await;
}

/// One run in detail: every attempt of a retried run, in order, whichever attempt is asked
/// for, and the child run its success fired.
async fn run_detail_shows_attempts_and_the_child_run(backend: Backend) {
    let mut app = spawn_app_with(backend, |config| {
        config.monitors.interval = Duration::from_millis(200);
    })
    .await;
    app.create_app("detail", 1).await;
    app.start_executor("detail");
    let child = app
        .create_job(
            json!({"app": "detail", "handler": "ok", "schedule_type": "NONE",
            "name": "The child"}),
        )
        .await;
    let parent = app
        .create_job(
            json!({"app": "detail", "handler": "flaky", "schedule_type": "NONE",
            "retry_count": 2, "child_job_ids": [child.id]}),
        )
        .await;
    let first = app.trigger(parent.id, None).await;
    let runs = finished_runs(&app, parent.id, 3).await;
    app.wait_for_run(child.id, 200, Duration::from_secs(30))
        .await;
    let log_of = |attempt: i64| {
        runs.iter()
            .find(|run| run["attempt"] == attempt)
            .map(|run| run["log_id"].as_i64().unwrap())
            .unwrap()
    };
    for asked in [log_of(0), log_of(2)] {
        let detail = get(&app, &format!("/api/runs/{asked}")).await;
        assert_eq!(detail["log_id"], asked);
        assert_eq!(
            (&detail["app"], &detail["handler"]),
            (&json!("detail"), &json!("flaky"))
        );
        let attempts: Vec<(i64, String, i64)> = detail["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|run| {
                (
                    run["attempt"].as_i64().unwrap(),
                    run["trigger_id"].as_str().unwrap().to_owned(),
                    run["handle_code"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            attempts,
            [
                (0, first.clone(), 500),
                (1, format!("{first}-r1"), 500),
                (2, format!("{first}-r2"), 200),
            ]
        );
        assert!(detail["attempts"][2]["partition"].is_i64(), "{detail}");
        assert!(detail["attempts"][2]["executor_id"].is_string(), "{detail}");
        assert_eq!(detail["child_job_ids"], json!([child.id]));
        let children = detail["children"].as_array().unwrap();
        assert_eq!(children.len(), 1, "{detail}");
        assert_eq!(children[0]["job_id"], child.id);
        assert_eq!(children[0]["trigger_type"], "PARENT");
        assert_eq!(children[0]["job_description"], "The child");
        assert_eq!(
            children[0]["trigger_id"],
            format!("{}-p{}", child.id, log_of(2))
        );
    }
    let (status, _) = app.call(Method::GET, "/api/runs/987654", None).await;
    assert_eq!(status, 404);
    app.shutdown().await;
}

/// `DELETE /api/jobs/{id}`: 409 while the job is RUNNING and while another job names it as a
/// child (naming that job); otherwise 204, and the job, its runs and their logs are gone,
/// its id is not given out again, and the removal is in the audit trail.
async fn delete_refuses_a_running_job_and_a_child_then_removes_everything(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("doomed", 1).await;
    app.start_executor("doomed");
    let job = app
        .create_job(
            json!({"app": "doomed", "handler": "ok", "schedule_conf": "* * * * * ?",
            "start": true}),
        )
        .await;
    let keeper = app
        .create_job(json!({"app": "doomed", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    app.trigger(keeper.id, None).await;
    let runs = finished_runs(&app, job.id, 2).await;
    let path = format!("/api/jobs/{}", job.id);
    let (status, body) = app.call(Method::DELETE, &path, None).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("stop it first"),
        "{body}"
    );
    app.stop_job(job.id).await;
    let parent = app
        .create_job(
            json!({"app": "doomed", "handler": "ok", "schedule_type": "NONE",
            "child_job_ids": [job.id]}),
        )
        .await;
    let (status, body) = app.call(Method::DELETE, &path, None).await;
    assert_eq!(status, 409, "{body}");
    let expected = format!("job {} is a child of job {}", job.id, parent.id);
    assert!(
        body["error"].as_str().unwrap().starts_with(&expected),
        "{body}"
    );
    let (status, body) = app
        .call(
            Method::PATCH,
            &format!("/api/jobs/{}", parent.id),
            Some(json!({"child_job_ids": []})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // Fires on their way when it stopped land first: the runs are all there to delete.
    wait_for(Duration::from_secs(30), "every run finished", || async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let running = format!("/api/runs?job={}&outcome=RUNNING", job.id);
        get(&app, &running).await["items"]
            .as_array()
            .unwrap()
            .is_empty()
            .then_some(())
    })
    .await;

    let (status, body) = app.call(Method::DELETE, &path, None).await;
    assert_eq!(status, 204, "{body}");
    let log_id = runs[0]["log_id"].as_i64().unwrap();
    for gone in [
        path.clone(),
        format!("{path}/runs"),
        format!("/api/runs?job={}", job.id),
        format!("/api/runs/{log_id}"),
        format!("/api/runs/{log_id}/log"),
    ] {
        let (status, body) = app.call(Method::GET, &gone, None).await;
        assert_eq!(status, 404, "GET {gone}: {body}");
    }
    let left = walk(&app, None, "/api/runs?app=doomed", 100).await;
    assert!(
        !left.is_empty() && left.iter().all(|run| run["job_id"] == keeper.id),
        "{left:?}"
    );
    let (status, _) = app.call(Method::DELETE, &path, None).await;
    assert_eq!(status, 404, "deleted already");
    let newer = app
        .create_job(json!({"app": "doomed", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    assert!(newer.id > parent.id, "ids are never given out again");
    let trail = get(&app, &format!("/api/audit?target={path}")).await;
    let deleted = trail["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["action"] == "DELETE /api/jobs/{id}" && entry["status"] == 204)
        .cloned()
        .unwrap_or_else(|| panic!("no audited delete: {trail}"));
    assert_eq!(deleted["app"], "doomed");
    assert_eq!(deleted["details"]["before"]["id"], job.id);
    assert!(deleted["details"]["runs_deleted"].as_i64().unwrap() >= 2);
    app.shutdown().await;
}

/// The overview counts exactly the jobs, live executors and runs the test made, for an admin
/// (every app) and for a member (their app only); `days` is checked.
async fn overview_counts_what_the_test_created(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("alpha", 1).await;
    app.create_app("beta", 1).await;
    app.start_executor("alpha");
    let ok = app
        .create_job(json!({"app": "alpha", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let fail = app
        .create_job(json!({"app": "alpha", "handler": "fail", "schedule_type": "NONE"}))
        .await;
    // Started, but its first fire is in 2099: RUNNING without a run.
    app.create_job(
        json!({"app": "alpha", "handler": "ok", "schedule_conf": "0 0 3 1 1 ? 2099",
        "start": true}),
    )
    .await;
    let waiting = app
        .create_job(json!({"app": "beta", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    for id in [ok.id, ok.id, fail.id, waiting.id] {
        app.trigger(id, None).await;
    }
    finished_runs(&app, ok.id, 2).await;
    finished_runs(&app, fail.id, 1).await;
    let overview = wait_for(Duration::from_secs(30), "an executor live", || async {
        let overview = get(&app, "/api/overview").await;
        (overview["executors"]["live"] == 1).then_some(overview)
    })
    .await;
    assert_eq!(
        overview["jobs"],
        json!({"total": 4, "running": 1, "stopped": 3})
    );
    assert_eq!(
        overview["executors"]["apps"],
        json!([{"app": "alpha", "live": 1}])
    );
    let today = &overview["today"];
    let counts = |day: &Value| {
        (
            day["succeeded"].as_i64().unwrap(),
            day["failed"].as_i64().unwrap(),
            day["running"].as_i64().unwrap(),
        )
    };
    assert_eq!(counts(today), (2, 1, 1), "{overview}");
    let days = overview["days"].as_array().unwrap();
    assert_eq!(days.len(), 7);
    assert_eq!(&days[6], today);
    assert!(
        days[..6].iter().all(|day| counts(day) == (0, 0, 0)),
        "{days:?}"
    );
    let failures = overview["recent_failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(
        (
            &failures[0]["job_id"],
            &failures[0]["handler"],
            &failures[0]["app"]
        ),
        (&json!(fail.id), &json!("fail"), &json!("alpha"))
    );

    let member = app.add_member("beta-viewer", &[("beta", "VIEW")]).await;
    let (status, mine) = app
        .call_as(Some(&member), Method::GET, "/api/overview?days=1", None)
        .await;
    assert_eq!(status, 200, "{mine}");
    assert_eq!(
        mine["jobs"],
        json!({"total": 1, "running": 0, "stopped": 1})
    );
    assert_eq!(mine["executors"], json!({"live": 0, "apps": []}));
    assert_eq!(counts(&mine["today"]), (0, 0, 1));
    assert_eq!(mine["days"].as_array().unwrap().len(), 1);
    assert_eq!(mine["recent_failures"], json!([]));
    for bad in ["0", "91", "week"] {
        refused(&app, &format!("/api/overview?days={bad}"), "days").await;
    }
    app.shutdown().await;
}

on_every_backend!(
    job_filters_return_exactly_the_matching_jobs,
    runs_search_filters_and_never_shows_a_member_another_app,
    run_detail_shows_attempts_and_the_child_run,
    delete_refuses_a_running_job_and_a_child_then_removes_everything,
    overview_counts_what_the_test_created,
);
