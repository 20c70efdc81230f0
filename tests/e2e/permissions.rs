//! What a grant on one app must not open on another, beyond the route table of `access`:
//! script source reaches an app's executors only as a job's current script, at the request
//! of someone who may write scripts there (a replay into another app, a manual trigger, a
//! backfill); a run is judged by the app it ran in, not by its job's app now; what a member
//! may not view is answered as missing, not refused; a login name is the user's exactly, so
//! a database that compares names loosely (MariaDB ignores trailing spaces) lets no variant
//! past the failure count; and the current-password check of a password change counts as a
//! login does.

use std::time::Duration;

use kadence_schemas::TriggerRecord;
use kadence_tests::session::attempt_login;
use kadence_tests::triggers::read_records;
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TEST_ADMIN_PASSWORD, TestApp, spawn_app, spawn_app_with};
use kadence_tests::fixtures::{Backend, wait_for};

/// A GLUE_SHELL job of `app`, created by the admin, that runs `source`.
async fn script_job(app: &TestApp, app_name: &str, source: &str) -> i64 {
    app.create_job(
        json!({"app": app_name, "handler": "sh", "schedule_type": "NONE",
        "glue_type": "GLUE_SHELL", "glue_source": source}),
    )
    .await
    .id
}

/// The trigger records of `app_name`'s topic (one partition) once at least `count` are there.
async fn triggers_of(app: &TestApp, app_name: &str, count: usize) -> Vec<TriggerRecord> {
    let topic = format!("{}.triggers.{app_name}", app.prefix);
    wait_for(
        Duration::from_secs(30),
        "the trigger records on the topic",
        || async {
            let records: Vec<TriggerRecord> = read_records(&app.brokers, &topic, 1).await;
            (records.len() >= count).then_some(records)
        },
    )
    .await
}

/// A replay of `source`'s whole topic so far into `target`, as `token`.
async fn replay(app: &TestApp, token: &str, source: &str, target: &str) -> (u16, Value) {
    let body = json!({"app": source, "target_app": target, "from_ms": 1,
        "to_ms": kadence_tests::now_ms() + 1_000, "force": true});
    app.call_as(Some(token), Method::POST, "/api/replays", Some(body))
        .await
}

/// SCRIPTS on one app and OPERATE on another must not add up to running a script on the
/// other's executors; OPERATE alone runs no script at a request; a replay runs the job's
/// current script, never the version its original carried; a replay into another app is on
/// that app's audit trail too.
async fn scripts_cross_no_app_and_no_version_without_the_grant(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app("alpha", 1).await;
    app.create_app("beta", 1).await;
    let job = script_job(&app, "alpha", "echo first version").await;
    app.trigger(job, None).await;
    triggers_of(&app, "alpha", 1).await;
    let mallory = app
        .add_member("mallory", &[("alpha", "SCRIPTS"), ("beta", "OPERATE")])
        .await;
    let operator = app.add_member("op-alpha", &[("alpha", "OPERATE")]).await;

    let (status, body) = replay(&app, &mallory, "alpha", "beta").await;
    assert_eq!(
        status, 403,
        "a script carried into beta without SCRIPTS there: {body}"
    );
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("SCRIPTS grant on beta"),
        "{body}"
    );
    let trigger = format!("/api/jobs/{job}/trigger");
    let (status, body) = app
        .call_as(Some(&operator), Method::POST, &trigger, Some(json!({})))
        .await;
    assert_eq!(
        status, 403,
        "a manual run of a script needs SCRIPTS: {body}"
    );
    assert!(
        body["error"].as_str().unwrap().contains("SCRIPTS"),
        "{body}"
    );
    let backfill = json!({"job_id": job, "from_ms": 1, "to_ms": 2});
    let (status, body) = app
        .call_as(
            Some(&operator),
            Method::POST,
            "/api/backfills",
            Some(backfill),
        )
        .await;
    assert_eq!(
        status, 403,
        "a backfill of a script job needs SCRIPTS: {body}"
    );
    let (status, body) = replay(&app, &operator, "alpha", "alpha").await;
    assert_eq!(status, 403, "so does a replay of its triggers: {body}");

    // The script changes; a replay by the admin runs the version the job has now.
    let (status, body) = app
        .call(
            Method::PATCH,
            &format!("/api/jobs/{job}"),
            Some(json!({"glue_source": "echo second version"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = replay(&app, app.admin_token(), "alpha", "beta").await;
    assert_eq!(status, 201, "{body}");
    let replayed = triggers_of(&app, "beta", 1).await;
    assert_eq!(
        replayed[0].glue_source.as_deref(),
        Some("echo second version"),
        "the job's current script, not the one the original carried"
    );
    let (status, audit) = app.call(Method::GET, "/api/audit?app=beta", None).await;
    assert_eq!(status, 200, "{audit}");
    assert!(
        audit["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|entry| entry["action"] == "POST /api/replays" && entry["status"] == 201),
        "the replay is on the target app's trail: {audit}"
    );

    // A job that is gone has no script to replay.
    let (status, body) = app
        .call(Method::DELETE, &format!("/api/jobs/{job}"), None)
        .await;
    assert!(status < 300, "{status} {body}");
    let (status, body) = replay(&app, app.admin_token(), "alpha", "alpha").await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains(&format!("jobs {job}")),
        "{body}"
    );
    app.shutdown().await;
}

/// A run stays its app's when its job moves: the old app's members keep reading it and may
/// kill it, the new app's members do not see it, and a member who may view neither is told
/// it does not exist, as for a run that never was.
async fn runs_are_judged_by_the_app_they_ran_in(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app("alpha", 1).await;
    app.create_app("beta", 1).await;
    let job = app
        .create_job(json!({"app": "alpha", "handler": "ok", "schedule_type": "NONE"}))
        .await
        .id;
    let (status, triggered) = app.trigger_with(job, json!({})).await;
    assert_eq!(status, 202, "{triggered}");
    let run = triggered["log_id"].as_i64().unwrap();
    let (status, body) = app
        .call(
            Method::PATCH,
            &format!("/api/jobs/{job}"),
            Some(json!({"app": "beta"})),
        )
        .await;
    assert_eq!(status, 200, "the job moves to beta: {body}");
    let alpha_operator = app.add_member("op-alpha", &[("alpha", "OPERATE")]).await;
    let beta_viewer = app.add_member("view-beta", &[("beta", "VIEW")]).await;
    let stranger = app.add_member("stranger", &[]).await;

    let log = format!("/api/runs/{run}/log");
    let (status, body) = app
        .call_as(Some(&alpha_operator), Method::GET, &log, None)
        .await;
    assert_eq!(status, 200, "the app it ran in keeps its run's log: {body}");
    let (status, body) = app
        .call_as(Some(&beta_viewer), Method::GET, &log, None)
        .await;
    assert_eq!(status, 404, "the job's new app does not get it: {body}");
    let (status, body) = app
        .call_as(
            Some(&beta_viewer),
            Method::GET,
            &format!("/api/jobs/{job}/runs"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["items"],
        json!([]),
        "runs of alpha are not beta's: {body}"
    );
    let kill = format!("/api/runs/{run}/kill");
    let (status, body) = app
        .call_as(Some(&alpha_operator), Method::POST, &kill, Some(json!({})))
        .await;
    assert_eq!(status, 202, "its app's operator may kill it: {body}");

    // What a member may not view does not exist for them.
    for (path, missing) in [
        (format!("/api/runs/{run}"), "/api/runs/987654321".to_owned()),
        (format!("/api/jobs/{job}"), "/api/jobs/987654321".to_owned()),
    ] {
        let (status, hidden) = app.call_as(Some(&stranger), Method::GET, &path, None).await;
        let (missing_status, absent) = app
            .call_as(Some(&stranger), Method::GET, &missing, None)
            .await;
        assert_eq!((status, missing_status), (404, 404), "{hidden} / {absent}");
        let shape = |body: &Value| {
            body["error"]
                .as_str()
                .unwrap()
                .replace(|c: char| c.is_ascii_digit(), "")
        };
        assert_eq!(shape(&hidden), shape(&absent), "answered alike");
    }
    app.shutdown().await;
}

/// `admin` throttled after failed logins stays throttled under `admin ` (MariaDB compares
/// the two equal), and a wrong current password of a password change counts as a failed
/// login.
async fn login_names_are_exact_and_password_checks_are_throttled(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        // The third failure of a user from the address makes it wait a minute.
        config.auth.login_free_failures = 2;
        config.auth.login_delay_first = Duration::from_secs(60);
        config.auth.login_free_failures_per_address = 100;
    })
    .await;
    let api = app.api_url();
    let attempt = |name: &'static str, password: &'static str| async move {
        attempt_login(api, name, password).await.0
    };
    for _ in 0..3 {
        assert_eq!(attempt("admin", "wrong").await, 401);
    }
    assert_eq!(attempt("admin", TEST_ADMIN_PASSWORD).await, 429, "waiting");
    assert_eq!(
        attempt("admin   ", TEST_ADMIN_PASSWORD).await,
        401,
        "a name with trailing spaces is not admin's"
    );

    let ann = app.add_member("ann", &[]).await;
    let change = |current: &str| json!({"password": "ann-password-2", "current_password": current});
    for _ in 0..3 {
        let (status, body) = app
            .call_as(
                Some(&ann),
                Method::PUT,
                "/api/users/ann/password",
                Some(change("wrong")),
            )
            .await;
        assert_eq!(status, 403, "{body}");
    }
    let (status, body) = app
        .call_as(
            Some(&ann),
            Method::PUT,
            "/api/users/ann/password",
            Some(change("ann-password-1")),
        )
        .await;
    assert_eq!(
        status, 429,
        "guessing through the password change is throttled: {body}"
    );
    app.shutdown().await;
}

on_sqlite_only!(
    scripts_cross_no_app_and_no_version_without_the_grant,
    runs_are_judged_by_the_app_they_ran_in,
);
on_every_backend!(login_names_are_exact_and_password_checks_are_throttled);
