//! Signed triggers on the real broker: the scheduler signs every trigger and control record,
//! an executor that trusts its key runs them, and records the test produces straight to the
//! topics — unsigned, signed by a foreign key, changed after signing, signed for another
//! topic, with a malformed signature — never run: triggers land in the dead-letter queue with
//! their reasons, control records are ignored. A key rotation reaches every scheduler node,
//! and an executor trusting both keys runs what the new one signs.
//!
//! The rotation runs on both stores (the key every node signs with comes from the database);
//! the rest runs once, on SQLite: its subject is the executor's verification.

use std::time::Duration;

use kadence_kafka::RecordSigner;
use kadence_scheduler::domain::model::Run;
use kadence_schemas::{
    AppName, BlockStrategy, ControlCommand, ControlRecord, GlueType, JobId, TriggerId,
    TriggerRecord, TriggerType, codec, headers,
};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use reqwest::Method;
use secrecy::ExposeSecret;
use serde_json::json;

use crate::helpers::{TestApp, executions, spawn_app, spawn_app_with};
use crate::metrics::{free_address, scrape};
use kadence_tests::fixtures::{Backend, unique, wait_for};

/// The scheduler's own signing key, read from its database (as only a test may).
pub(crate) async fn scheduler_key(app: &TestApp) -> RecordSigner {
    let stored = app
        .store()
        .newest_signing_key()
        .await
        .unwrap()
        .expect("the scheduler made a key");
    RecordSigner::from_base64(stored.private_key.expose_secret()).unwrap()
}

/// A trigger of the `count` handler for `job` of `app`, with its own trigger id.
pub(crate) fn count_trigger(app: &str, job: i64, n: i64) -> TriggerRecord {
    let job = JobId::new(job).unwrap();
    TriggerRecord {
        trigger_id: TriggerId::scheduled(job, 1_000 + n),
        log_id: 900_000 + n,
        job_id: job,
        app: AppName::parse(app).unwrap(),
        handler: "count".into(),
        params: format!("forged {n}"),
        shard_index: 0,
        shard_total: 1,
        block_strategy: BlockStrategy::Concurrent,
        timeout_ms: 0,
        trigger_type: TriggerType::Manual,
        scheduled_at_ms: 0,
        emitted_at_ms: 0,
        attempt: 0,
        glue_type: GlueType::Bean,
        glue_source: None,
        glue_updated_at_ms: None,
        replay_of: None,
        expires_at_ms: None,
    }
}

/// Produces `payload` to partition 0 of `topic` with `headers`, as anyone with write access
/// to the topic could.
async fn produce(app: &TestApp, topic: &str, payload: &[u8], headers: Option<OwnedHeaders>) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &app.brokers)
        .create()
        .expect("test producer");
    let mut record = FutureRecord::<str, [u8]>::to(topic)
        .partition(0)
        .key("forged")
        .payload(payload);
    if let Some(headers) = headers {
        record = record.headers(headers);
    }
    producer
        .send(record, Timeout::After(Duration::from_secs(10)))
        .await
        .map_err(|(error, _)| error)
        .expect("produce");
}

/// The key id header of every record of partition 0 of `topic` from the start, until
/// `count` were read: (trigger id, key id).
async fn signing_key_ids(app: &TestApp, topic: &str, count: usize) -> Vec<(String, String)> {
    trigger_messages(app, topic, count)
        .await
        .into_iter()
        .map(|(trigger, message)| {
            let key_id = message
                .headers()
                .and_then(|headers| {
                    headers
                        .iter()
                        .find(|header| header.key == headers::SIGNATURE_KEY)
                        .and_then(|header| header.value)
                        .map(|value| String::from_utf8_lossy(value).into_owned())
                })
                .unwrap_or_default();
            (trigger.trigger_id.to_string(), key_id)
        })
        .collect()
}

/// The first `count` records of partition 0 of `topic`, decoded and as they were read
/// (value and headers, as anyone who can read the topic captures them).
async fn trigger_messages(
    app: &TestApp,
    topic: &str,
    count: usize,
) -> Vec<(TriggerRecord, OwnedMessage)> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &app.brokers)
        .set("group.id", unique(&format!("{topic}.capture")))
        .set("enable.auto.commit", "false")
        .create()
        .expect("test consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).expect("assign");
    let mut found = Vec::new();
    while found.len() < count {
        let message = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("trigger records arrive in time")
            .expect("receive")
            .detach();
        let trigger: TriggerRecord = codec::decode(message.payload().unwrap()).unwrap();
        found.push((trigger, message));
    }
    found
}

/// Triggers `job` through the node at `url`; returns the trigger id.
async fn trigger_on(app: &TestApp, url: &str, job: i64) -> String {
    let path = format!("/api/jobs/{job}/trigger");
    let (status, body) = app
        .call_node(url, Method::POST, &path, Some(json!({})))
        .await;
    assert_eq!(status, 202, "{body}");
    body["trigger_id"].as_str().unwrap().to_owned()
}

/// The finished run of trigger `trigger_id` of `job`.
async fn finished_run(app: &TestApp, job: i64, trigger_id: &str) -> Run {
    wait_for(
        Duration::from_secs(30),
        &format!("a result for trigger {trigger_id}"),
        || async {
            app.runs(job)
                .await
                .into_iter()
                .find(|run| run.trigger_id.as_str() == trigger_id && run.handle_code.is_some())
        },
    )
    .await
}

/// Signed triggers run; an unsigned one, one signed by a foreign key, one changed after
/// signing, one signed for another topic and one with a malformed signature go to the DLQ
/// with their reasons, and none of them runs.
async fn forged_unsigned_and_tampered_triggers_go_to_the_dlq(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("signed", 1).await;
    let public_key = app.signing_public_key().await;
    app.start_executor_with("signed", |builder| builder.trusted_key(public_key));
    let job = app
        .create_job(json!({"app": "signed", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let first = app.trigger(job.id, None).await;
    assert_eq!(
        finished_run(&app, job.id, &first).await.handle_code,
        Some(200)
    );

    let topic = format!("{}.triggers.signed", app.prefix);
    let real = scheduler_key(&app).await;
    let foreign = RecordSigner::generate().unwrap();
    let bytes = |n: i64| codec::encode(&count_trigger("signed", job.id, n)).unwrap();
    let malformed = OwnedHeaders::new()
        .insert(Header {
            key: headers::SIGNATURE_KEY,
            value: Some(real.key_id()),
        })
        .insert(Header {
            key: headers::SIGNATURE,
            value: Some("not base64!"),
        });
    let forgeries: Vec<(Vec<u8>, Option<OwnedHeaders>, String)> = vec![
        (bytes(1), None, "unsigned record".to_owned()),
        (
            bytes(2),
            Some(foreign.headers(&topic, &bytes(2))),
            format!("signed by unknown key {}", foreign.key_id()),
        ),
        // Signed, then changed: the signature is of trigger 3, the value is trigger 4.
        (
            bytes(4),
            Some(real.headers(&topic, &bytes(3))),
            format!("bad signature by key {}", real.key_id()),
        ),
        // A genuine signature, for another app's topic.
        (
            bytes(5),
            Some(real.headers(&format!("{}.triggers.other", app.prefix), &bytes(5))),
            format!("bad signature by key {}", real.key_id()),
        ),
        (
            bytes(6),
            Some(malformed),
            "malformed signature header kadence.signature: not base64".to_owned(),
        ),
    ];
    for (payload, headers, _) in &forgeries {
        produce(&app, &topic, payload, headers.clone()).await;
    }
    // A genuine trigger behind them in the same partition: once it has run, the executor has
    // been through every forgery.
    let last = app.trigger(job.id, None).await;
    assert_eq!(
        finished_run(&app, job.id, &last).await.handle_code,
        Some(200)
    );

    let letters = app.dead_letters(forgeries.len()).await;
    for (payload, _, reason) in &forgeries {
        let letter = letters.iter().find(|(_, bytes)| bytes == payload);
        let (found, _) = letter.unwrap_or_else(|| panic!("no dead letter for {reason}"));
        assert!(
            found.starts_with("refused trigger record: ") && found.contains(reason.as_str()),
            "expected {reason:?}, got {found:?}"
        );
    }
    for n in 1..=6 {
        let trigger_id = TriggerId::scheduled(JobId::new(job.id).unwrap(), 1_000 + n);
        assert_eq!(executions(trigger_id.as_str()), 0, "forgery {n} ran");
    }
    app.shutdown().await;
}

/// After a rotation on one node, every node signs with the new key within the refresh
/// interval; an executor trusting the old and the new key runs what either signed; the old
/// key can then be retired, the last active one cannot.
async fn a_rotation_reaches_every_node(backend: Backend) {
    let mut app = spawn_app_with(backend, |config| {
        config.signing.key_refresh_interval = Duration::from_millis(200);
    })
    .await;
    let (other_node, other_url) = app.start_node().await;
    app.create_app("rotating", 1).await;
    let old = app.signing_keys().await;
    assert_eq!(old.len(), 1, "one key for both nodes: {old:?}");
    let old = old.into_iter().next().unwrap();
    assert!(old.signing);
    app.start_executor_with("rotating", |builder| builder.trusted_key(&old.public_key));
    let job = app
        .create_job(json!({"app": "rotating", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let mut fired = Vec::new();
    for url in [app.api_url().to_owned(), other_url.clone()] {
        let trigger_id = trigger_on(&app, &url, job.id).await;
        assert_eq!(
            finished_run(&app, job.id, &trigger_id).await.handle_code,
            Some(200)
        );
        fired.push(trigger_id);
    }

    let (status, rotated) = app
        .call_node(&other_url, Method::POST, "/api/signing-keys/rotate", None)
        .await;
    assert_eq!(status, 201, "{rotated}");
    let new_id = rotated["key_id"].as_str().unwrap().to_owned();
    let keys = app.signing_keys().await;
    let listed: Vec<(&str, bool)> = keys
        .iter()
        .map(|key| (key.key_id.as_str(), key.signing))
        .collect();
    assert_eq!(
        listed,
        [(new_id.as_str(), true), (old.key_id.as_str(), false)]
    );
    // The executors learn the new public key, keeping the old one.
    app.stop_executors().await;
    let new_public = keys[0].public_key.clone();
    app.start_executor_with("rotating", |builder| {
        builder.trusted_key(&old.public_key).trusted_key(new_public)
    });
    tokio::time::sleep(Duration::from_secs(1)).await; // five key refreshes
    for url in [app.api_url().to_owned(), other_url.clone()] {
        let trigger_id = trigger_on(&app, &url, job.id).await;
        assert_eq!(
            finished_run(&app, job.id, &trigger_id).await.handle_code,
            Some(200)
        );
        fired.push(trigger_id);
    }
    let topic = format!("{}.triggers.rotating", app.prefix);
    let signed_by = signing_key_ids(&app, &topic, fired.len()).await;
    let expected: Vec<(String, String)> = fired
        .iter()
        .zip([&old.key_id, &old.key_id, &new_id, &new_id])
        .map(|(trigger, key)| (trigger.clone(), key.to_string()))
        .collect();
    assert_eq!(signed_by, expected, "each node signs with the newest key");

    let retire = |id: &str| {
        let (app, path) = (&app, format!("/api/signing-keys/{id}/retire"));
        async move { app.call(Method::POST, &path, None).await }
    };
    let (status, retired) = retire(&old.key_id).await;
    assert_eq!(status, 200, "{retired}");
    assert!(retired["retired_at_ms"].as_i64().is_some(), "{retired}");
    let (status, refused) = retire(&new_id).await;
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("the only active one"),
        "{refused}"
    );
    other_node.stop(Duration::from_secs(10)).await;
    app.shutdown().await;
}

/// A KILL the scheduler signed stops the run with the kill's reason; a forged one and an
/// unsigned one are ignored, counted by reason on the executor's `/metrics`, and the run
/// finishes.
async fn signed_kills_stop_runs_and_forged_ones_are_ignored(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("killable", 1).await;
    let public_key = app.signing_public_key().await;
    let metrics_address = free_address();
    app.start_executor_with("killable", |builder| {
        builder
            .trusted_key(public_key)
            .metrics_address(metrics_address)
    });
    let refused = |reason: &str| {
        format!("kadence_executor_control_refused_total{{app=\"killable\",reason=\"{reason}\"}}")
    };
    let refusals = || async {
        let (_, metrics) = scrape(&format!("http://{metrics_address}")).await;
        ["unsigned", "unknown_key", "bad_signature"]
            .map(|reason| metrics.get(&refused(reason)).copied())
    };
    let job = app
        .create_job(json!({"app": "killable", "handler": "sleep", "schedule_type": "NONE"}))
        .await;
    let running_job = |view: &kadence_scheduler::http::api::ExecutorView| {
        view.entry.running_jobs.contains(&job.id)
    };

    // Forged and unsigned KILLs of a 4 s run: ignored, the run succeeds.
    let survivor = app.trigger(job.id, Some("4000")).await;
    app.wait_for_beat("killable", "the job running", running_job)
        .await;
    let kill = ControlRecord {
        command: ControlCommand::Kill,
        app: AppName::parse("killable").unwrap(),
        job_id: Some(JobId::new(job.id).unwrap()),
        trigger_id: None,
        reason: Some("forged".into()),
        requested_at_ms: 0,
    };
    let control = format!("{}.control", app.prefix);
    let payload = codec::encode(&kill).unwrap();
    let stranger = RecordSigner::generate().unwrap();
    produce(&app, &control, &payload, None).await;
    produce(
        &app,
        &control,
        &payload,
        Some(stranger.headers(&control, &payload)),
    )
    .await;
    let run = finished_run(&app, job.id, &survivor).await;
    assert_eq!(
        (run.handle_code, run.handle_msg.as_deref()),
        (Some(200), None),
        "forged kills are ignored: {run:?}"
    );
    wait_for(
        Duration::from_secs(30),
        "the forged kills counted as refused",
        || async { (refusals().await == [Some(1.0), Some(1.0), Some(0.0)]).then_some(()) },
    )
    .await;

    // The scheduler's own KILL of a 30 s run: obeyed, with its reason. As in the kill test
    // of main.rs, the run is known to be running (a beat says so) before the kill is sent:
    // a beat without the job first, so that the running one is about the new run.
    app.wait_for_beat("killable", "the job idle", |view| !running_job(view))
        .await;
    let doomed = app.trigger(job.id, Some("30000")).await;
    app.wait_for_beat("killable", "the job running again", running_job)
        .await;
    let (status, body) = app
        .call(
            Method::POST,
            &format!("/api/jobs/{}/kill", job.id),
            Some(json!({"reason": "signed and sealed"})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let run = finished_run(&app, job.id, &doomed).await;
    assert_eq!(
        (run.handle_code, run.handle_msg.as_deref()),
        (Some(500), Some("killed: signed and sealed")),
        "{run:?}"
    );
    assert!(
        run.handle_at_ms.unwrap() - run.started_at_ms.unwrap() < 20_000,
        "stopped long before its 30 s: {run:?}"
    );
    assert_eq!(
        refusals().await,
        [Some(1.0), Some(1.0), Some(0.0)],
        "the signed kill is not counted as refused"
    );
    app.shutdown().await;
}

on_every_backend!(a_rotation_reaches_every_node);
/// A genuine trigger the executor refuses (it trusts another key: the scheduler's is not
/// rolled out to it yet) goes to the DLQ, and its run ends as failed with the reason instead
/// of staying DISPATCHED, so that alarms and retries see it.
async fn a_dead_lettered_trigger_fails_its_run_with_the_reason(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("untrusting", 1).await;
    let other = RecordSigner::generate().unwrap();
    app.start_executor_with("untrusting", |builder| {
        builder.trusted_key(other.public_key().to_base64())
    });
    let job = app
        .create_job(json!({"app": "untrusting", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let trigger = app.trigger(job.id, None).await;
    let run = finished_run(&app, job.id, &trigger).await;
    assert_eq!(run.handle_code, Some(500), "{run:?}");
    let message = run.handle_msg.unwrap_or_default();
    assert!(
        message
            .starts_with("an executor refused the trigger and sent it to the dead-letter queue: ")
            && message.contains("signed by unknown key"),
        "{message}"
    );
    app.shutdown().await;
}

/// A trigger captured off its topic (value and signature headers, verbatim) and produced
/// again: within its validity window the executor that ran it recognises it and does not run
/// it twice; after the window every executor refuses it as expired, to the DLQ with the
/// reason, and the finished run stays as it was.
async fn a_captured_trigger_copy_is_refused_after_its_validity_window(backend: Backend) {
    const VALIDITY: Duration = Duration::from_secs(3);
    let mut app = spawn_app_with(backend, |config| {
        config.signing.trigger_validity = VALIDITY;
    })
    .await;
    app.create_app("windowed", 1).await;
    let public_key = app.signing_public_key().await;
    app.start_executor_with("windowed", |builder| builder.trusted_key(public_key));
    let job = app
        .create_job(json!({"app": "windowed", "handler": "count", "schedule_type": "NONE"}))
        .await;
    let trigger_id = app.trigger(job.id, None).await;
    assert_eq!(
        finished_run(&app, job.id, &trigger_id).await.handle_code,
        Some(200)
    );
    let topic = format!("{}.triggers.windowed", app.prefix);
    let (trigger, captured) = trigger_messages(&app, &topic, 1).await.remove(0);
    assert_eq!(trigger.trigger_id.as_str(), trigger_id);
    assert_eq!(
        trigger.expires_at_ms,
        Some(trigger.scheduled_at_ms.max(trigger.emitted_at_ms) + 3_000),
        "the window is in the signed record"
    );
    let payload = captured.payload().unwrap().to_vec();
    let signature = captured.headers().cloned();

    // Within the window: a redelivery to the executor that ran it, which does not run it again.
    produce(&app, &topic, &payload, signature.clone()).await;
    let behind = app.trigger(job.id, None).await;
    finished_run(&app, job.id, &behind).await;
    assert_eq!(executions(&trigger_id), 1, "the copy within the window ran");

    // After the window: refused as expired, whoever receives it.
    let expires_at_ms = trigger.expires_at_ms.unwrap();
    let wait_ms = expires_at_ms + 500 - kadence_tests::now_ms();
    tokio::time::sleep(Duration::from_millis(u64::try_from(wait_ms).unwrap_or(0))).await;
    produce(&app, &topic, &payload, signature).await;
    let letters = app.dead_letters(1).await;
    let (reason, letter) = &letters[0];
    assert_eq!(letter, &payload);
    assert!(
        reason.starts_with(&format!(
            "expired trigger record: {trigger_id} was valid until {expires_at_ms}"
        )),
        "{reason}"
    );
    assert_eq!(executions(&trigger_id), 1, "the expired copy ran");
    let run = finished_run(&app, job.id, &trigger_id).await;
    assert_eq!(
        run.handle_code,
        Some(200),
        "the finished run was changed: {run:?}"
    );
    app.shutdown().await;
}

on_sqlite_only!(
    a_captured_trigger_copy_is_refused_after_its_validity_window,
    forged_unsigned_and_tampered_triggers_go_to_the_dlq,
    signed_kills_stop_runs_and_forged_ones_are_ignored,
    a_dead_lettered_trigger_fails_its_run_with_the_reason,
);
