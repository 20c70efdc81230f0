//! Executor keys on the real broker: what executors write must be signed by a key of the app
//! it is about. Results, log records and beats the test produces straight to the topics
//! (unsigned, signed by another app's key, or speaking for another app's run, or signed with
//! a key revoked since) go to the dead-letter queue with their reasons and change nothing; the
//! app's own executor, signing with the app's key, completes the run. Making, listing and
//! revoking keys is an admin's, and no answer but the first shows a key's secret.
//!
//! Runs once, on SQLite: its subject is the readers' checks, not the store.

use std::time::Duration;

use kadence_scheduler::domain::model::RunState;
use kadence_schemas::{
    AppName, ExecutorBeat, ExecutorState, JobId, LogRecord, ResultRecord, TriggerId, codec,
};
use reqwest::Method;
use serde_json::json;

use crate::helpers::spawn_app_with;
use kadence_tests::fixtures::{Backend, wait_for};

async fn what_executors_write_needs_a_key_of_their_app(backend: Backend) {
    let mut app = spawn_app_with(backend, |config| {
        config.executor_auth.key_refresh_interval = Duration::from_secs(1);
    })
    .await;
    app.create_app("alpha", 1).await;
    app.create_app("beta", 1).await;
    let job = app
        .create_job(json!({"app": "beta", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    // No executor of beta runs yet: the run waits, DISPATCHED.
    let fired = app.trigger(job.id, None).await;
    let run = wait_for(Duration::from_secs(30), "the run's row", || async {
        app.runs(job.id).await.into_iter().next()
    })
    .await;
    let result = |app_name: &str| ResultRecord {
        trigger_id: TriggerId::parse(&fired).unwrap(),
        log_id: run.log_id,
        job_id: JobId::new(job.id).unwrap(),
        app: AppName::parse(app_name).unwrap(),
        executor_id: "forger".into(),
        code: 200,
        message: None,
        started_at_ms: 1,
        finished_at_ms: 2,
        attempt: 0,
        retry_after_ms: None,
    };
    let results = format!("{}.results", app.prefix);
    let beta_result = codec::encode(&result("beta")).unwrap();
    app.produce_raw(&results, 0, &fired, &beta_result).await;
    app.produce_signed("alpha", (&results, 0), &fired, &beta_result)
        .await;
    let alpha_result = codec::encode(&result("alpha")).unwrap();
    app.produce_signed("alpha", (&results, 0), &fired, &alpha_result)
        .await;
    let forged_lines = LogRecord {
        trigger_id: TriggerId::parse(&fired).unwrap(),
        log_id: run.log_id,
        job_id: JobId::new(job.id).unwrap(),
        executor_id: "forger".into(),
        first_line: 1,
        lines: vec!["forged".into()],
        emitted_at_ms: kadence_schemas::now_ms(),
        run_started_at_ms: Some(kadence_schemas::now_ms()),
    };
    let logs = format!("{}.logs", app.prefix);
    let forged_lines = codec::encode(&forged_lines).unwrap();
    app.produce_signed("alpha", (&logs, 0), &fired, &forged_lines)
        .await;

    let letters = app.dead_letters(4).await;
    let reasons: Vec<&str> = letters.iter().map(|(reason, _)| reason.as_str()).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("unsigned result record: ")),
        "{reasons:?}"
    );
    for expected in [
        "result record of app beta signed by a key of app alpha".to_owned(),
        format!("result of app alpha for trigger {fired}, a run of app beta"),
        "log record of app beta signed by a key of app alpha".to_owned(),
    ] {
        assert!(
            reasons.contains(&expected.as_str()),
            "{expected}: {reasons:?}"
        );
    }
    let waiting = app.runs(job.id).await;
    assert_eq!(waiting[0].state, RunState::Dispatched, "{waiting:?}");
    let (status, lines) = app
        .call(Method::GET, &format!("/api/runs/{}/log", run.log_id), None)
        .await;
    assert_eq!(status, 200, "{lines}");
    assert!(!lines.to_string().contains("forged"), "{lines}");

    // The app's own executor, signing with beta's key, completes the run.
    app.start_executor("beta");
    let done = app.wait_for_run(job.id, 200, Duration::from_secs(60)).await;
    assert_ne!(done.executor_id.as_deref(), Some("forger"));

    // Revoked, beta's key signs nothing the scheduler takes.
    let key = app.executor_key("beta").unwrap();
    let key_id = key.split('.').next().unwrap();
    let (status, revoked) = app
        .call(
            Method::DELETE,
            &format!("/api/apps/beta/executor-keys/{key_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{revoked}");
    assert!(revoked["revoked_at_ms"].is_i64(), "{revoked}");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let beat = ExecutorBeat {
        executor_id: "revoked".into(),
        app: AppName::parse("beta").unwrap(),
        host: "elsewhere".into(),
        version: "test".into(),
        handlers: vec!["ok".into()],
        owned_partitions: vec![0],
        running_jobs: Vec::new(),
        queued_jobs: Vec::new(),
        state: ExecutorState::Running,
        sent_at_ms: kadence_schemas::now_ms(),
        features: Vec::new(),
    };
    let beats = format!("{}.beats", app.prefix);
    let beat = codec::encode(&beat).unwrap();
    app.produce_signed("beta", (&beats, 0), "revoked", &beat)
        .await;
    let letters = app.dead_letters(5).await;
    let unknown = format!("beat signed by unknown executor key {key_id}");
    assert!(
        letters
            .iter()
            .any(|(reason, _)| reason.starts_with(&unknown)),
        "{letters:?}"
    );
    app.shutdown().await;
}

/// Making and revoking keys is an admin's; listing shows no secret, and a member who may view
/// the app sees its keys.
async fn executor_keys_are_an_admins_and_their_secrets_are_shown_once(backend: Backend) {
    let app = spawn_app_with(backend, |_| {}).await;
    app.create_app("keys", 1).await;
    let secret = app.executor_key("keys").unwrap();
    let secret = secret.split('.').nth(1).unwrap();
    let viewer = app.add_member("viewer", &[("keys", "VIEW")]).await;
    let (status, listed) = app
        .call_as(
            Some(&viewer),
            Method::GET,
            "/api/apps/keys/executor-keys",
            None,
        )
        .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert!(!listed.to_string().contains(secret), "{listed}");
    let (status, refused) = app
        .call_as(
            Some(&viewer),
            Method::POST,
            "/api/apps/keys/executor-keys",
            None,
        )
        .await;
    assert_eq!(status, 403, "{refused}");
    let (status, missing) = app
        .call(Method::POST, "/api/apps/nowhere/executor-keys", None)
        .await;
    assert_eq!(status, 404, "{missing}");
    // A member asking after an app they have no grant on learns nothing of whether it exists.
    let (status, unseen) = app
        .call_as(
            Some(&viewer),
            Method::GET,
            "/api/apps/nowhere/executor-keys",
            None,
        )
        .await;
    assert_eq!(status, 403, "{unseen}");
    let (status, other) = app
        .call(
            Method::DELETE,
            "/api/apps/keys/executor-keys/0123456789abcdef",
            None,
        )
        .await;
    assert_eq!(status, 404, "{other}");
    app.shutdown().await;
}

on_sqlite_only!(
    what_executors_write_needs_a_key_of_their_app,
    executor_keys_are_an_admins_and_their_secrets_are_shown_once,
);
