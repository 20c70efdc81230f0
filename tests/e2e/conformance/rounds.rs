//! Round-signed triggers (PROTOCOL.md section 3): with `signing.trigger_signatures = "round"`
//! the scheduler signs each dispatch round once, and every executor runs its triggers, each
//! checked alone; triggers of two rounds signed with the scheduler's key and produced
//! interleaved and in reverse order all run; and copies signed or moved otherwise are refused
//! with the protocol's reasons: a trigger moved to another partition and one whose proof's path
//! was changed (bad round proof), one whose round signature was changed (bad signature), and a
//! round signed by a key the executor does not trust, as a retired key is after a rotation
//! (unknown key).
//!
//! And with the default `auto`: every executor lists `round-signatures` in its beats, and the
//! scheduler signs an app's triggers by the round once it has read them, one by one again
//! while an executor of a version before round signatures beats (a v1 beat, no features), and
//! by the round again once that executor's beats list the feature.

use std::time::Duration;

use kadence_kafka::{RecordSigner, RoundRecord};
use kadence_scheduler::config::TriggerSignatures;
use kadence_schemas::{
    AppName, ExecutorBeat, ExecutorState, JobId, TriggerRecord, TriggerType, codec, headers,
};
use rdkafka::Message;
use rdkafka::message::{Header, Headers, OwnedHeaders, OwnedMessage};
use serde_json::json;

use super::intake::assert_refused_as;
use super::lifecycle::read_until_quiet;
use super::logs::{end_offsets, read_up_to};
use super::runs::{hand_made_trigger, result_of};
use super::{ExecutorProcess, Implementation, finished_results};
use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use kadence_tests::fixtures::{Backend, wait_for};

const APP: &str = "rounds";

async fn round_signed_triggers_run_and_forged_ones_are_refused(executor: Implementation) {
    let app = spawn_app_with(Backend::Sqlite, |config| {
        config.signing.trigger_signatures = TriggerSignatures::Round;
    })
    .await;
    app.create_app(APP, 2).await;
    let _process = start_verifying(executor, &app, "rounds-1").await;
    app.wait_for_executors(APP, 1, 2).await;
    let topic = format!("{}.triggers.{APP}", app.prefix);

    // The scheduler's own rounds: four jobs due on the same second, all on partition 0.
    let mut jobs = Vec::new();
    for _ in 0..4 {
        let job = app
            .create_job(json!({"app": APP, "handler": "ok", "schedule_type": "CRON",
                "schedule_conf": "* * * * * ?", "route_strategy": "FIRST", "start": true}))
            .await;
        jobs.push(job.id);
    }
    for &job in &jobs {
        let runs = finished_results(&app, job, 2).await;
        assert!(
            runs.iter().all(|run| run.handle_code == Some(200)),
            "{runs:?}"
        );
    }
    for &job in &jobs {
        app.stop_job(job).await;
    }
    let emitted = read_until_quiet(&app.brokers, &topic).await;
    assert!(
        emitted.iter().all(
            |trigger| header_of(trigger, headers::ROUND_SIGNATURE).is_some()
                && header_of(trigger, headers::SIGNATURE).is_none()
        ),
        "every trigger round-signed"
    );
    let largest = emitted.iter().map(round_size).max().unwrap_or_default();
    assert!(
        largest >= 2,
        "rounds of several triggers, the largest {largest}"
    );

    // Hand-made rounds, signed with the scheduler's key, produced interleaved and reversed.
    let job = JobId::new(jobs[0]).unwrap();
    let scheduler = crate::signing::scheduler_key(&app).await;
    let first = signed_round(&scheduler, &topic, job, 10, 3);
    let second = signed_round(&scheduler, &topic, job, 20, 2);
    for (_, value, signed) in [&first[2], &second[1], &first[0], &second[0], &first[1]] {
        app.produce_with_headers(&topic, 0, "reordered", value, Some(signed.clone()))
            .await;
    }
    for (trigger, _, _) in first.iter().chain(&second) {
        // `describe` answers with what it ran: it ran.
        let result = result_of(&app, &trigger.trigger_id).await;
        assert_eq!(
            result.message.as_deref(),
            Some("production run of a MANUAL trigger"),
            "{result:?}"
        );
    }

    // Forged copies, each keyed by its case.
    let moved = signed_round(&scheduler, &topic, job, 30, 2);
    app.produce_with_headers(
        &topic,
        1,
        "moved-partition",
        &moved[0].1,
        Some(moved[0].2.clone()),
    )
    .await;
    let mut path = header_bytes(&moved[1].2, headers::ROUND_PROOF);
    path[20] ^= 1;
    let tampered = replaced(&moved[1].2, headers::ROUND_PROOF, &path);
    app.produce_with_headers(&topic, 0, "tampered-path", &moved[1].1, Some(tampered))
        .await;
    let changed = signed_round(&scheduler, &topic, job, 40, 2);
    let mut signature = header_bytes(&changed[0].2, headers::ROUND_SIGNATURE);
    *signature.last_mut().unwrap() ^= 1;
    let changed_signature = replaced(&changed[0].2, headers::ROUND_SIGNATURE, &signature);
    app.produce_with_headers(
        &topic,
        0,
        "changed-signature",
        &changed[0].1,
        Some(changed_signature),
    )
    .await;
    let retired = RecordSigner::generate().unwrap();
    let by_retired = signed_round(&retired, &topic, job, 50, 2);
    app.produce_with_headers(
        &topic,
        0,
        "retired-key",
        &by_retired[0].1,
        Some(by_retired[0].2.clone()),
    )
    .await;

    // The scheduler dead-letters the hand-made triggers' results later (no run has their
    // ids): wait for the executor's four, by their keys.
    let cases = [
        "moved-partition",
        "tampered-path",
        "changed-signature",
        "retired-key",
    ];
    let dlq = format!("{}.dlq", app.prefix);
    let letters = wait_for(
        Duration::from_secs(60),
        "the four forged copies' dead letters",
        || async {
            let letters = read_until_quiet(&app.brokers, &dlq).await;
            cases
                .iter()
                .all(|case| {
                    letters
                        .iter()
                        .any(|letter| letter.key() == Some(case.as_bytes()))
                })
                .then_some(letters)
        },
    )
    .await;
    let scheduler_id = scheduler.key_id();
    for (case, reason) in [
        (
            "moved-partition",
            format!("refused trigger record: bad round proof by key {scheduler_id}"),
        ),
        (
            "tampered-path",
            format!("refused trigger record: bad round proof by key {scheduler_id}"),
        ),
        (
            "changed-signature",
            format!("refused trigger record: bad signature by key {scheduler_id}"),
        ),
        (
            "retired-key",
            format!(
                "refused trigger record: signed by unknown key {}",
                retired.key_id()
            ),
        ),
    ] {
        assert_refused_as(&letters, case, &reason);
    }
    app.shutdown().await;
}

async fn auto_signs_by_the_round_while_every_executor_verifies_round_signatures(
    executor: Implementation,
) {
    let app = spawn_app(Backend::Sqlite).await;
    app.create_app(APP, 1).await;
    let _process = start_verifying(executor, &app, "auto-1").await;
    let live = app.wait_for_executors(APP, 1, 1).await;
    assert_eq!(
        live[0].entry.features,
        [ExecutorBeat::ROUND_SIGNATURES],
        "the executor says it verifies round signatures: {:?}",
        live[0].entry
    );
    let job = app
        .create_job(json!({"app": APP, "handler": "ok", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?", "route_strategy": "FIRST", "start": true}))
        .await;
    let topic = format!("{}.triggers.{APP}", app.prefix);
    wait_for_form(&app, &topic, Form::Round, "by the round").await;

    // An executor of a version before features joins the app: its beats are v1.
    produce_beat(&app, "auto-old", Vec::new()).await;
    wait_for_form(
        &app,
        &topic,
        Form::Alone,
        "one by one beside an older executor",
    )
    .await;

    // The same executor, upgraded, says it verifies round signatures.
    produce_beat(
        &app,
        "auto-old",
        vec![ExecutorBeat::ROUND_SIGNATURES.to_owned()],
    )
    .await;
    wait_for_form(
        &app,
        &topic,
        Form::Round,
        "by the round once it is upgraded",
    )
    .await;

    app.stop_job(job.id).await;
    let emitted = read_until_quiet(&app.brokers, &topic).await;
    let forms: Vec<Option<Form>> = emitted.iter().map(form_of).collect();
    assert!(forms.contains(&Some(Form::Alone)) && forms.contains(&Some(Form::Round)));
    // Every trigger that ran, of either form, ran well, and the executor refused none.
    let runs = finished_results(&app, job.id, 3).await;
    assert!(
        runs.iter().all(|run| run.handle_code == Some(200)),
        "{runs:?}"
    );
    let letters = read_until_quiet(&app.brokers, &format!("{}.dlq", app.prefix)).await;
    assert!(letters.is_empty(), "{} dead letters", letters.len());
    app.shutdown().await;
}

/// `executor` as `id` of [`APP`], trusting the scheduler's key: it verifies every trigger.
async fn start_verifying(executor: Implementation, app: &TestApp, id: &str) -> ExecutorProcess {
    let key = app.signing_public_key().await;
    let trusting = [("KADENCE_TRUSTED_KEYS", key.as_str())];
    ExecutorProcess::start_with(executor, app, APP, id, &trusting).await
}

/// How a trigger is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Alone,
    Round,
}

fn form_of(trigger: &OwnedMessage) -> Option<Form> {
    if header_of(trigger, headers::ROUND_SIGNATURE).is_some() {
        Some(Form::Round)
    } else {
        header_of(trigger, headers::SIGNATURE).map(|_| Form::Alone)
    }
}

/// Waits until the newest trigger on `topic` (one partition) is one emitted after the wait
/// began and signed in `form`.
async fn wait_for_form(app: &TestApp, topic: &str, form: Form, what: &str) {
    let before = read_to_the_end(&app.brokers, topic).await.len();
    wait_for(
        Duration::from_secs(30),
        &format!("triggers signed {what}"),
        || async {
            let emitted = read_to_the_end(&app.brokers, topic).await;
            let newest = emitted.get(before..)?.last()?;
            (form_of(newest) == Some(form)).then_some(())
        },
    )
    .await;
}

/// Every record of `topic` up to its high watermarks now (a job still fires there, so the
/// topic never goes quiet).
async fn read_to_the_end(brokers: &str, topic: &str) -> Vec<OwnedMessage> {
    let (brokers, topic) = (brokers.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let ends = end_offsets(&brokers, &topic);
        read_up_to(&brokers, &topic, &ends, false)
    })
    .await
    .expect("the topic read")
}

/// Produces, signed with the app's executor key, a RUNNING beat of `executor` that owns no
/// partition and lists `features` (none: written as v1, as by a version before features).
async fn produce_beat(app: &TestApp, executor: &str, features: Vec<String>) {
    let beat = ExecutorBeat {
        executor_id: executor.to_owned(),
        app: AppName::parse(APP).unwrap(),
        host: "elsewhere".to_owned(),
        version: "older".to_owned(),
        handlers: vec!["ok".to_owned()],
        owned_partitions: Vec::new(),
        running_jobs: Vec::new(),
        queued_jobs: Vec::new(),
        state: ExecutorState::Running,
        sent_at_ms: kadence_schemas::now_ms(),
        features,
    };
    let payload = codec::encode(&beat).unwrap();
    let beats = format!("{}.beats", app.prefix);
    app.produce_signed(APP, (&beats, 0), executor, &payload)
        .await;
}

/// A round of `count` hand-made triggers of `job` (scheduled at `first_at_ms` and after, long
/// past), for partition 0 of `topic`, signed by `signer`: each trigger, its bytes and headers.
fn signed_round(
    signer: &RecordSigner,
    topic: &str,
    job: JobId,
    first_at_ms: i64,
    count: i64,
) -> Vec<(TriggerRecord, Vec<u8>, OwnedHeaders)> {
    let triggers: Vec<(TriggerRecord, Vec<u8>)> = (0..count)
        .map(|n| {
            let trigger = hand_made_trigger(job, APP, TriggerType::Manual, first_at_ms + n);
            let bytes = codec::encode(&trigger).unwrap();
            (trigger, bytes)
        })
        .collect();
    let round: Vec<RoundRecord<'_>> = triggers
        .iter()
        .map(|(_, value)| RoundRecord {
            topic,
            partition: 0,
            value,
        })
        .collect();
    let headers = signer.round_headers(&round);
    triggers
        .into_iter()
        .zip(headers)
        .map(|((trigger, bytes), headers)| (trigger, bytes, headers))
        .collect()
}

/// The size of `trigger`'s round, from its `kadence.signature.round` header.
fn round_size(trigger: &OwnedMessage) -> u64 {
    header_of(trigger, headers::ROUND_SIGNATURE)
        .and_then(|round| round.get(..8))
        .map_or(0, |size| u64::from_be_bytes(size.try_into().unwrap()))
}

fn header_of<'a>(message: &'a OwnedMessage, name: &str) -> Option<&'a [u8]> {
    message
        .headers()?
        .iter()
        .filter(|header| header.key == name)
        .last()
        .and_then(|header| header.value)
}

fn header_bytes(all: &OwnedHeaders, name: &str) -> Vec<u8> {
    all.iter()
        .find(|header| header.key == name)
        .and_then(|header| header.value)
        .expect("the header")
        .to_vec()
}

/// `all` with the value of `name` replaced by `value`.
fn replaced(all: &OwnedHeaders, name: &str, value: &[u8]) -> OwnedHeaders {
    all.iter().fold(OwnedHeaders::new(), |changed, header| {
        changed.insert(Header {
            key: header.key,
            value: if header.key == name {
                Some(value)
            } else {
                header.value
            },
        })
    })
}

on_every_executor!(
    round_signed_triggers_run_and_forged_ones_are_refused,
    auto_signs_by_the_round_while_every_executor_verifies_round_signatures
);
