//! After runs finish, on the real broker: retries linked to the first attempt, one alarm per
//! failure delivered to a local SMTP server and a local webhook, child jobs after success only.
//! Webhooks reach internal addresses only when `alarm.webhook_allowed_networks` names them
//! (the local receivers are on 127.0.0.1, so these tests name it), follow no redirect, and
//! tell members only SENT or FAILED, and FAILED no sooner than `alarm.timeout` after the
//! delivery began, however it failed; VIEW members see their URLs' scheme, host and port
//! only.
//!
//! On both stores: retries, alarm states and child fires are the scheduler's writes. The
//! webhook's limits are the API's and the alarm channel's, so they run on SQLite only.

use std::time::Duration;

use kadence_scheduler::config::{SmtpTls, WebhookNetworks};
use kadence_scheduler::domain::model::{AlarmStatus, Run, RunState};
use kadence_schemas::TriggerType;
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_with};
use crate::sinks::{SmtpSink, WebhookSink};
use kadence_tests::fixtures::{Backend, wait_for};

/// The allow-list that lets webhooks reach the local receivers.
fn loopback_receivers() -> WebhookNetworks {
    WebhookNetworks::parse(&["127.0.0.1"]).expect("an address")
}

/// A handler failing twice then succeeding, with retry count 2: three linked rows, one alarm
/// per failure by e-mail and by webhook, and then its child job runs; a parent that fails
/// fires no child.
async fn a_failing_run_is_retried_alarmed_and_its_child_fires_only_on_success(backend: Backend) {
    let smtp = SmtpSink::start().await;
    let webhook = WebhookSink::start().await;
    let smtp_port = smtp.port;
    let mut app = spawn_app_with(backend, |config| {
        config.alarm.smtp_host = Some("127.0.0.1".to_owned());
        config.alarm.smtp_port = smtp_port;
        config.alarm.smtp_tls = SmtpTls::None;
        config.alarm.webhook_allowed_networks = loopback_receivers();
        config.monitors.interval = Duration::from_millis(200);
    })
    .await;
    app.create_app("mon", 1).await;
    app.start_executor("mon");
    let child = app
        .create_job(json!({"app": "mon", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let parent = app
        .create_job(
            json!({"app": "mon", "handler": "flaky", "schedule_type": "NONE",
            "retry_count": 2, "alarm_emails": ["ops@example.com"],
            "alarm_webhook": webhook.url(), "child_job_ids": [child.id]}),
        )
        .await;
    let first = app.trigger(parent.id, None).await;
    let runs = wait_for(
        Duration::from_secs(60),
        "three attempts, the last one good",
        || async {
            let runs = app.runs(parent.id).await;
            (runs.len() == 3 && runs.iter().any(|run| run.handle_code == Some(200))).then_some(runs)
        },
    )
    .await;
    let mut attempts: Vec<_> = runs
        .iter()
        .map(|run| {
            (
                run.attempt,
                run.trigger_type,
                run.handle_code,
                run.trigger_id.to_string(),
            )
        })
        .collect();
    attempts.sort_by_key(|(attempt, ..)| *attempt);
    assert_eq!(
        attempts,
        vec![
            (0, TriggerType::Manual, Some(500), first.clone()),
            (1, TriggerType::Retry, Some(500), format!("{first}-r1")),
            (2, TriggerType::Retry, Some(200), format!("{first}-r2")),
        ]
    );
    let first_log_id = runs.iter().find(|run| run.attempt == 0).unwrap().log_id;
    assert!(
        runs.iter()
            .filter(|run| run.attempt > 0)
            .all(|run| run.first_log_id == Some(first_log_id)),
        "retries link to the first attempt: {runs:?}"
    );

    let hooks = wait_for(Duration::from_secs(30), "two webhook alarms", || async {
        let bodies = webhook.bodies();
        (bodies.len() >= 2).then_some(bodies)
    })
    .await;
    let mut told: Vec<(i64, i64)> = hooks
        .iter()
        .map(|body| {
            (
                body["attempt"].as_i64().unwrap(),
                body["retries_left"].as_i64().unwrap(),
            )
        })
        .collect();
    told.sort();
    assert_eq!(told, vec![(0, 2), (1, 1)]);
    assert!(hooks.iter().all(|body| {
        body["kind"] == "run_failed"
            && body["job_id"] == parent.id
            && body["first_log_id"] == first_log_id
            && body["message"]
                .as_str()
                .unwrap()
                .starts_with("flaky: attempt")
    }));
    let mails = wait_for(Duration::from_secs(30), "two alarm e-mails", || async {
        let mails = smtp.messages();
        (mails.len() >= 2).then_some(mails)
    })
    .await;
    assert!(
        mails.iter().all(|mail| mail.contains("To: ops@example.com")
            && mail.contains(&format!("Subject: [Kadence] job {} ", parent.id))),
        "{mails:?}"
    );
    let statuses = wait_for(
        Duration::from_secs(30),
        "alarm statuses recorded",
        || async {
            let runs = app.runs(parent.id).await;
            let mut statuses: Vec<(i32, AlarmStatus)> = runs
                .iter()
                .map(|run| (run.attempt, run.alarm_status))
                .collect();
            statuses.sort_by_key(|(attempt, _)| *attempt);
            (statuses.iter().all(|(_, status)| {
                *status != AlarmStatus::Unprocessed && *status != AlarmStatus::Locked
            }))
            .then_some(statuses)
        },
    )
    .await;
    assert_eq!(
        statuses,
        vec![
            (0, AlarmStatus::Sent),
            (1, AlarmStatus::Sent),
            (2, AlarmStatus::NotNeeded)
        ]
    );
    let child_run = app
        .wait_for_run(child.id, 200, Duration::from_secs(30))
        .await;
    assert_eq!(child_run.trigger_type, TriggerType::Parent);
    assert_eq!(
        app.runs(child.id).await.len(),
        1,
        "one success, one child run"
    );

    // A parent that fails (no retries) fires no child.
    let lonely = app
        .create_job(json!({"app": "mon", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let failing = app
        .create_job(
            json!({"app": "mon", "handler": "fail", "schedule_type": "NONE",
            "child_job_ids": [lonely.id]}),
        )
        .await;
    app.trigger(failing.id, None).await;
    wait_for(
        Duration::from_secs(30),
        "the failure followed up",
        || async {
            app.runs(failing.id).await.into_iter().find(|run| {
                run.state == RunState::Finished && run.alarm_status == AlarmStatus::NotNeeded
            })
        },
    )
    .await;
    assert!(
        app.runs(lonely.id).await.is_empty(),
        "no child after a failure"
    );
    app.shutdown().await;
}

on_every_backend!(a_failing_run_is_retried_alarmed_and_its_child_fires_only_on_success);

/// A local port nothing listens on (it was free a moment ago).
fn closed_port() -> u16 {
    kadence_tests::free_port()
}

/// A job of app `hooks` whose handler fails, alarming `webhook`.
fn failing_job(webhook: &str) -> Value {
    json!({"app": "hooks", "handler": "fail", "schedule_type": "NONE", "alarm_webhook": webhook})
}

/// The alarm status of `job`'s first run once it is followed up.
async fn followed_up(app: &TestApp, job: i64) -> AlarmStatus {
    wait_for(Duration::from_secs(60), "the alarm status", || async {
        let runs = app.runs(job).await;
        runs.first()
            .map(|run| run.alarm_status)
            .filter(|status| ![AlarmStatus::Unprocessed, AlarmStatus::Locked].contains(status))
    })
    .await
}

/// `job`'s first run as the member with `token` sees it (JSON).
async fn first_run_as(app: &TestApp, token: &str, job: i64) -> Value {
    let path = format!("/api/jobs/{job}/runs");
    let (status, body) = app.call_as(Some(token), Method::GET, &path, None).await;
    assert_eq!(status, 200, "{body}");
    body["items"][0].clone()
}

/// Admins' audit entries of `job`'s failed alarm deliveries.
async fn alarm_failures(app: &TestApp, job: i64) -> Vec<Value> {
    let (status, trail) = app
        .call(
            Method::GET,
            &format!("/api/audit?target=/api/jobs/{job}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{trail}");
    let entries = trail["items"].as_array().unwrap().iter();
    entries
        .filter(|entry| entry["action"] == "ALARM webhook")
        .cloned()
        .collect()
}

/// With 127.0.0.1 allowed: other loopback and internal addresses are refused when the job is
/// saved; a webhook on 127.0.0.1 is delivered, a redirect is not followed, and a closed port
/// and an HTTP 500 both read FAILED to a member while admins see why; a VIEW member sees the
/// URL's scheme, host and port only, an operator sees it whole.
async fn webhooks_reach_allowed_networks_only_and_members_learn_only_failed(backend: Backend) {
    let webhook = WebhookSink::start().await;
    let closed_port = closed_port();
    let mut app = spawn_app_with(backend, |config| {
        config.alarm.webhook_allowed_networks = loopback_receivers();
        config.monitors.interval = Duration::from_millis(200);
    })
    .await;
    app.create_app("hooks", 1).await;
    app.start_executor("hooks");
    let viewer = app.add_member("hook-viewer", &[("hooks", "VIEW")]).await;
    let operator = app
        .add_member("hook-operator", &[("hooks", "OPERATE")])
        .await;
    let port = webhook.addr.port();
    for refused in [
        format!("http://127.0.0.2:{port}/hook"),
        format!("http://[::1]:{port}/hook"),
        format!("http://[::ffff:127.0.0.2]:{port}/hook"),
        "http://169.254.169.254/latest/meta-data".to_owned(),
        "http://10.0.0.1/hook".to_owned(),
    ] {
        let (status, body) = app
            .call_as(
                Some(&operator),
                Method::POST,
                "/api/jobs",
                Some(failing_job(&refused)),
            )
            .await;
        assert_eq!(status, 400, "{refused}: {body}");
        assert_eq!(body["field"], "alarm_webhook", "{body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains("alarm.webhook_allowed_networks"), "{error}");
    }

    let secret = format!("http://ops:s3cret@127.0.0.1:{port}/hook?token=abc");
    let delivered = app.create_job(failing_job(&secret)).await;
    let redirected = app.create_job(failing_job(&webhook.url_of("/moved"))).await;
    let nobody = format!("http://127.0.0.1:{closed_port}/hook");
    let closed = app.create_job(failing_job(&nobody)).await;
    let broken = app
        .create_job(failing_job(&webhook.url_of("/broken")))
        .await;
    for job in [&delivered, &redirected, &closed, &broken] {
        app.trigger(job.id, None).await;
    }
    let mut statuses = Vec::new();
    for job in [&delivered, &redirected, &closed, &broken] {
        statuses.push(followed_up(&app, job.id).await);
    }
    let failed = AlarmStatus::Failed;
    assert_eq!(statuses, vec![AlarmStatus::Sent, failed, failed, failed]);
    let bodies = webhook.bodies();
    assert_eq!(bodies.len(), 1, "the redirect is not followed: {bodies:?}");
    assert_eq!(bodies[0]["job_id"], delivered.id);

    // A member sees the same FAILED for a closed port as for an HTTP 500.
    let closed_run = first_run_as(&app, &viewer, closed.id).await;
    let broken_run = first_run_as(&app, &viewer, broken.id).await;
    assert_eq!(closed_run["alarm_status"], "FAILED");
    assert_eq!(broken_run["alarm_status"], "FAILED");
    let keys = |run: &Value| run.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&closed_run), keys(&broken_run));
    // Admins see why; members see no such entry.
    for (job, reason) in [
        (closed.id, "onnect"),
        (broken.id, "500"),
        (redirected.id, "307"),
    ] {
        let failures = alarm_failures(&app, job).await;
        assert_eq!(failures.len(), 1, "{failures:?}");
        let told = failures[0]["details"]["reason"].as_str().unwrap();
        assert!(told.contains(reason), "{told}");
        assert!(failures[0]["app"].is_null(), "only admins list it");
    }
    let (_, seen) = app
        .call_as(Some(&viewer), Method::GET, "/api/audit?limit=1000", None)
        .await;
    let seen = seen["items"].as_array().unwrap();
    assert!(
        !seen.is_empty() && seen.iter().all(|entry| entry["action"] != "ALARM webhook"),
        "{seen:?}"
    );
    assert!(
        !serde_json::to_string(seen).unwrap().contains("s3cret"),
        "job edits in the trail hide credentials: {seen:?}"
    );

    // VIEW sees where alarms go and nothing after, in the job and in the list; OPERATE sees
    // the URL whole.
    let hidden = format!("http://127.0.0.1:{port}/REDACTED");
    let path = format!("/api/jobs/{}", delivered.id);
    let (_, shown) = app.call_as(Some(&viewer), Method::GET, &path, None).await;
    assert_eq!(shown["alarm_webhook"], hidden.as_str());
    let (_, listed) = app
        .call_as(Some(&viewer), Method::GET, "/api/jobs?app=hooks", None)
        .await;
    let listed = listed["items"].as_array().unwrap().iter();
    let listed = listed
        .filter(|job| job["id"] == delivered.id)
        .collect::<Vec<_>>();
    assert_eq!(listed[0]["alarm_webhook"], hidden.as_str());
    let (_, whole) = app.call_as(Some(&operator), Method::GET, &path, None).await;
    assert_eq!(whole["alarm_webhook"], secret.as_str());
    app.shutdown().await;
}

/// How long the timing test gives an alarm's delivery.
const SHORT_ALARM_TIMEOUT: Duration = Duration::from_secs(3);

/// When each of `jobs`' first run was first seen FAILED, ms, polling every 50 ms: each
/// sighting is no sooner than the status was written.
async fn first_seen_failed(app: &TestApp, jobs: &[i64]) -> Vec<(i64, Run)> {
    let mut seen: Vec<Option<(i64, Run)>> = vec![None; jobs.len()];
    let deadline = kadence_tests::now_ms() + 60_000;
    while seen.iter().any(Option::is_none) {
        assert!(
            kadence_tests::now_ms() < deadline,
            "not FAILED in time: {seen:?}"
        );
        for (job, sighting) in jobs.iter().zip(seen.iter_mut()) {
            if sighting.is_some() {
                continue;
            }
            let at_ms = kadence_tests::now_ms();
            let runs = app.runs(*job).await;
            if let Some(run) = runs.first().filter(|run| {
                run.alarm_status != AlarmStatus::Unprocessed
                    && run.alarm_status != AlarmStatus::Locked
            }) {
                *sighting = Some((at_ms, run.clone()));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    seen.into_iter().flatten().collect()
}

/// A refused connection fails at once and an HTTP 500 after a round trip, yet a member sees
/// either turn FAILED no sooner than `alarm.timeout` after the run's result came (the
/// delivery begins after it), so the moment tells nothing about the target; a delivered
/// alarm is not held back.
async fn failed_alarms_turn_failed_no_sooner_than_the_timeout_however_they_failed(
    backend: Backend,
) {
    let webhook = WebhookSink::start().await;
    let closed_port = closed_port();
    let mut app = spawn_app_with(backend, |config| {
        config.alarm.webhook_allowed_networks = loopback_receivers();
        config.alarm.timeout = SHORT_ALARM_TIMEOUT;
        config.monitors.interval = Duration::from_millis(100);
    })
    .await;
    app.create_app("hooks", 1).await;
    app.start_executor("hooks");
    let refused = app
        .create_job(failing_job(&format!("http://127.0.0.1:{closed_port}/hook")))
        .await;
    let broken = app
        .create_job(failing_job(&webhook.url_of("/broken")))
        .await;
    let delivered = app.create_job(failing_job(&webhook.url())).await;
    for job in [&refused, &broken, &delivered] {
        app.trigger(job.id, None).await;
    }
    let seen = first_seen_failed(&app, &[refused.id, broken.id, delivered.id]).await;
    let timeout_ms = i64::try_from(SHORT_ALARM_TIMEOUT.as_millis()).unwrap();
    for (what, (seen_ms, run)) in ["refused at once", "an HTTP 500"].iter().zip(&seen) {
        assert_eq!(run.alarm_status, AlarmStatus::Failed, "{what}: {run:?}");
        let result_ms = run.handle_at_ms.expect("the run has its result");
        assert!(
            *seen_ms >= result_ms + timeout_ms,
            "{what}: FAILED seen {} ms after the result, sooner than alarm.timeout ({timeout_ms} ms)",
            seen_ms - result_ms
        );
    }
    assert_eq!(seen[2].1.alarm_status, AlarmStatus::Sent, "{:?}", seen[2]);
    let bodies = webhook.bodies();
    assert!(
        bodies.iter().any(|body| body["job_id"] == delivered.id),
        "{bodies:?}"
    );
    app.shutdown().await;
}

/// Without an allow-list: a literal loopback webhook is refused when saved (created or
/// edited); a name that resolves to loopback is saved, and refused as it is resolved at
/// delivery, without a request reaching the receiver.
async fn without_an_allow_list_loopback_is_refused_when_saved_and_when_resolved(backend: Backend) {
    let webhook = WebhookSink::start().await;
    let mut app = spawn_app_with(backend, |config| {
        config.monitors.interval = Duration::from_millis(200);
    })
    .await;
    app.create_app("hooks", 1).await;
    app.start_executor("hooks");
    let (status, body) = app
        .call(Method::POST, "/api/jobs", Some(failing_job(&webhook.url())))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["field"], "alarm_webhook");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("127.0.0.1 is a loopback address")
            && error.contains("KADENCE_ALARM__WEBHOOK_ALLOWED_NETWORKS"),
        "{error}"
    );
    let by_name = webhook.url().replace("127.0.0.1", "localhost");
    let job = app.create_job(failing_job(&by_name)).await;
    let (status, body) = app
        .call(
            Method::PATCH,
            &format!("/api/jobs/{}", job.id),
            Some(json!({"alarm_webhook": webhook.url()})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    app.trigger(job.id, None).await;
    assert_eq!(followed_up(&app, job.id).await, AlarmStatus::Failed);
    assert!(webhook.bodies().is_empty(), "nothing reached the receiver");
    let failures = alarm_failures(&app, job.id).await;
    let told = failures[0]["details"]["reason"].as_str().unwrap();
    assert!(
        told.contains("host localhost resolves to no address"),
        "{told}"
    );
    app.shutdown().await;
}

/// An `https://` webhook is called over TLS: the receiver's first bytes are a TLS handshake
/// record (a ClientHello), not a refusal before connecting. Most receivers (chat bots,
/// incident tools) take https only. The receiver here answers no handshake, so the delivery
/// reads FAILED.
async fn https_webhooks_are_called_over_tls(backend: Backend) {
    let receiver = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = receiver.local_addr().unwrap().port();
    let first_bytes = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let (mut connection, _) = receiver.accept().await.expect("the webhook connects");
        let mut head = [0u8; 3];
        connection.read_exact(&mut head).await.expect("it sends");
        head
    });
    let mut app = spawn_app_with(backend, |config| {
        config.alarm.webhook_allowed_networks = loopback_receivers();
        config.monitors.interval = Duration::from_millis(200);
    })
    .await;
    app.create_app("hooks", 1).await;
    app.start_executor("hooks");
    let job = app
        .create_job(failing_job(&format!("https://127.0.0.1:{port}/hook")))
        .await;
    app.trigger(job.id, None).await;
    let head = tokio::time::timeout(Duration::from_secs(60), first_bytes)
        .await
        .expect("the alarm is sent in time")
        .unwrap();
    assert_eq!(
        head[..2],
        [0x16, 0x03],
        "a TLS handshake record: {head:02x?}"
    );
    assert_eq!(followed_up(&app, job.id).await, AlarmStatus::Failed);
    app.shutdown().await;
}

on_sqlite_only!(
    failed_alarms_turn_failed_no_sooner_than_the_timeout_however_they_failed,
    https_webhooks_are_called_over_tls,
    webhooks_reach_allowed_networks_only_and_members_learn_only_failed,
    without_an_allow_list_loopback_is_refused_when_saved_and_when_resolved,
);
