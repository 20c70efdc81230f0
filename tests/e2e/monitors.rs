//! After runs finish, on the real broker: retries linked to the first attempt, one alarm per
//! failure delivered to a local SMTP server and a local webhook, child jobs after success only.
//!
//! On both stores: retries, alarm states and child fires are the scheduler's writes.

use std::time::Duration;

use kadence_scheduler::config::SmtpTls;
use kadence_scheduler::model::{AlarmStatus, RunState};
use kadence_schemas::TriggerType;
use serde_json::json;

use crate::common::{Backend, wait_for};
use crate::helpers::spawn_app_with;
use crate::sinks::{SmtpSink, WebhookSink};

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
