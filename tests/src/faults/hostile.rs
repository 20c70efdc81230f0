//! `hostile-input`: malformed and hostile records on every topic and abusive requests to the
//! API, during a steady load of fires.
//!
//! Injected on `{p}.triggers.{app}`, `{p}.results`, `{p}.beats`, `{p}.logs` and
//! `{p}.control`, one of each: a truncated record (the right frame, the body cut short), an
//! oversized one (900 000 random bytes), one with a schema id no catalog has, and random
//! bytes. Then what only looks right: a result for a trigger that never existed, beats of an
//! app that does not exist and claiming partitions the app does not have, an unsigned KILL of
//! a run in progress, and a trigger signed with the scheduler's active key (read from its
//! database, as a thief of a signed copy would hold one) whose validity ended a minute ago
//! (a `TriggerRecord` v3, schema id 1003, with `expires_at_ms` in the past) for a job of its
//! own that is never triggered. The API gets the bodies of [`super::abuse`], its floods of
//! wrong logins and of writes with a made-up token, then its slow-loris burst.
//!
//! What must hold: every malformed record and every refused one is in `{p}.dlq` with a
//! reason, once, from the reader of its topic (executors for triggers, the scheduler for the
//! rest) — the expired trigger's reason beginning `expired trigger record:`, so that it was
//! refused for its window and not for its signature, and its handler never started, nor has
//! its job a run — except control records, which every executor reads and refuses on its own (logged,
//! never dead-lettered: each would write its own copy, see PROTOCOL.md) and count
//! (`kadence_executor_control_refused_total`, read from the executor's metrics); the forged
//! KILL is not applied (its run succeeds); every abusive request is refused clearly, and
//! each flood stands in the audit trail as one entry per status counting it; the fires keep
//! completing; the scheduler keeps running.

use std::collections::HashMap;
use std::time::Duration;

use kadence_schemas::{TriggerId, headers};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use super::abuse::{Abuse, abuse_the_api};
use super::api::APP;
use super::load::Outcome;
use super::proxy::ProxiedBroker;
use super::stack::{Stack, sqlite_url};
use super::{Options, Report};
use crate::now_ms;
use records::{Injected, expired_trigger, hostile_records};

mod records;

/// The defaults: 10 jobs, 10 s before, 45 s for the letters (a result for an unknown trigger
/// waits 30 s for its run's row before it is one), 10 s after.
pub fn defaults() -> Options {
    Options {
        jobs: 10,
        before: Duration::from_secs(10),
        outage: Duration::from_secs(45),
        after: Duration::from_secs(10),
        group_protocol: None,
    }
}

/// A record of `{p}.dlq`: where it came from, why, and its bytes.
struct Letter {
    source: String,
    reason: String,
    payload: Vec<u8>,
}

/// What shows that trigger `id` of `job` ran: an executor saying it started it, or a run of
/// its job (the job is never triggered). Empty if nothing does.
async fn ran(stack: &Stack, job: i64, id: &TriggerId) -> Vec<String> {
    let mut traces = Vec::new();
    let started = format!("started {id}");
    for log in &stack.logs {
        if std::fs::read_to_string(log).is_ok_and(|text| text.contains(&started)) {
            traces.push(format!("{} says {started:?}", log.display()));
        }
    }
    let path = format!("/api/jobs/{job}/runs");
    let runs = stack
        .api
        .call(reqwest::Method::GET, &path, serde_json::Value::Null)
        .await;
    if runs["items"]
        .as_array()
        .is_none_or(|items| !items.is_empty())
    {
        traces.push(format!("its job has runs: {runs}"));
    }
    traces
}

/// Produces each record to partition 0 of its topic.
async fn produce(brokers: &str, records: &[Injected]) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("message.max.bytes", "2000000")
        .create()
        .expect("a producer");
    for record in records {
        let mut future_record = FutureRecord::to(&record.topic)
            .partition(0)
            .key("hostile")
            .payload(&record.payload);
        if let Some(headers) = &record.headers {
            future_record = future_record.headers(headers.clone());
        }
        producer
            .send(future_record, Duration::from_secs(30))
            .await
            .unwrap_or_else(|(error, _)| {
                panic!("producing {} to {}: {error}", record.what, record.topic)
            });
    }
}

/// Every record of `{prefix}.dlq`, read until none came for five seconds.
async fn dead_letters(brokers: &str, prefix: &str) -> Vec<Letter> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("{prefix}.faults-dlq-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("a DLQ reader");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(&format!("{prefix}.dlq"), 0, Offset::Beginning)
        .expect("the DLQ's partition");
    consumer.assign(&assignment).expect("assign the DLQ");
    let mut letters = Vec::new();
    while let Ok(Ok(message)) = tokio::time::timeout(Duration::from_secs(5), consumer.recv()).await
    {
        let header = |key: &str| {
            (message.headers())
                .and_then(|found| found.iter().find(|header| header.key == key))
                .and_then(|header| header.value)
                .map(|value| String::from_utf8_lossy(value).into_owned())
                .unwrap_or_default()
        };
        letters.push(Letter {
            source: header(headers::DLQ_SOURCE_TOPIC),
            reason: header(headers::DLQ_REASON),
            payload: message.payload().unwrap_or_default().to_vec(),
        });
    }
    letters
}

/// Runs the scenario.
pub async fn run(options: &Options) -> Report {
    let broker = ProxiedBroker::start().await;
    let prefix = crate::unique("kfaults");
    let database = tempfile::tempdir().expect("a database directory");
    let database_url = sqlite_url(database.path());
    let mut stack = Stack::start(&database_url, &broker.address, &prefix).await;
    let jobs = stack
        .api
        .every_second_jobs(options.jobs, "DO_NOTHING")
        .await;
    let from_ms = now_ms() + 6_000;
    tokio::time::sleep(options.before).await;
    let victim = stack.api.manual_job(("sleep", "4000")).await;
    let victim_trigger = stack.api.trigger(victim).await;
    let expired_job = stack.api.manual_job(("ok", "")).await;
    let topic = format!("{prefix}.triggers.{APP}");
    let (expired_id, expired) = expired_trigger(&database_url, &topic, expired_job).await;
    // The run has begun (its trigger is emitted at once and starts within milliseconds).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut injected = hostile_records(&prefix, &jobs, &victim_trigger);
    injected.push(expired);
    produce(&broker.address, &injected).await;
    let abuse = abuse_the_api(&stack).await;
    tokio::time::sleep(options.outage + options.after).await;
    let window = (from_ms, now_ms());
    let outcome = Outcome::collect(&stack, &broker.address, &prefix, &jobs, window).await;
    let letters = dead_letters(&broker.address, &prefix).await;
    let victim_succeeded = outcome.succeeded.contains_key(&victim_trigger);
    let expired_ran = ran(&stack, expired_job, &expired_id).await;
    let running = stack.scheduler_running();
    // The executor verifies: every control record injected is unsigned to it.
    let control_refused = stack
        .executor_metric(
            0,
            "kadence_executor_control_refused_total",
            &["reason=\"unsigned\""],
        )
        .await;
    report(
        &outcome,
        (&injected, &letters),
        &abuse,
        (victim_succeeded, running, control_refused),
        &expired_ran,
    )
    .keeping_logs_on_failure(&stack.log_files())
}

/// Matches each injected record with its dead letters: one with a reason for each record
/// that should have one, none for the others (each mismatch added to `failures`). Returns
/// how many were dead-lettered as they should be, and how many by each reason (its first 60
/// characters).
fn match_letters(
    injected: &[Injected],
    letters: &[Letter],
    failures: &mut Vec<String>,
) -> (usize, HashMap<String, usize>) {
    let mut reasons: HashMap<String, usize> = HashMap::new();
    let mut lettered = 0;
    for record in injected {
        let copies: Vec<&Letter> = (letters.iter())
            .filter(|letter| letter.source == record.topic && letter.payload == record.payload)
            .collect();
        match (record.dead_lettered, copies.as_slice()) {
            (true, [letter])
                if record
                    .reason
                    .is_some_and(|reason| !letter.reason.starts_with(reason)) =>
            {
                failures.push(format!(
                    "{} on {}: dead-lettered as {:?}, not {:?}…",
                    record.what,
                    record.topic,
                    letter.reason,
                    record.reason.unwrap_or_default()
                ));
            }
            (true, [letter]) if !letter.reason.is_empty() => {
                lettered += 1;
                *reasons
                    .entry(letter.reason.chars().take(60).collect())
                    .or_default() += 1;
            }
            (false, []) => {}
            (expected, found) => failures.push(format!(
                "{} on {}: {} dead letters (expected {})",
                record.what,
                record.topic,
                found.len(),
                u8::from(expected)
            )),
        }
    }
    (lettered, reasons)
}

/// The table: the load's columns, then what became of the hostile records and requests.
fn report(
    outcome: &Outcome,
    (injected, letters): (&[Injected], &[Letter]),
    abuse: &Abuse,
    (victim_succeeded, running, control_refused): (bool, bool, Option<f64>),
    expired_ran: &[String],
) -> Report {
    let mut failures = Vec::new();
    let (lettered, reasons) = match_letters(injected, letters, &mut failures);
    if !victim_succeeded {
        failures.push("the run the forged KILL named did not succeed".to_owned());
    }
    for trace in expired_ran {
        failures.push(format!("the expired trigger ran: {trace}"));
    }
    let control_records = (injected.iter())
        .filter(|record| record.topic.ends_with(".control"))
        .count();
    if control_refused != Some(control_records as f64) {
        failures.push(format!(
            "the executor counted {control_refused:?} refused control records, not {control_records}"
        ));
    }
    if !running {
        failures.push("the scheduler's process exited".to_owned());
    }
    failures.extend(abuse.failures.iter().cloned());
    let mut details = outcome.lost_details();
    details.push(format!(
        "dead-letter reasons (first 60 characters): {reasons:#?}"
    ));
    details.extend(abuse.answers.iter().cloned());
    let expected = injected
        .iter()
        .filter(|record| record.dead_lettered)
        .count();
    let mut columns = outcome.columns();
    columns.extend([
        ("hostile records", injected.len().to_string()),
        (
            "dead-lettered with a reason",
            format!("{lettered} of {expected}"),
        ),
        (
            "forged KILL applied",
            if victim_succeeded { "no" } else { "yes" }.to_owned(),
        ),
        (
            "expired trigger ran",
            if expired_ran.is_empty() { "no" } else { "yes" }.to_owned(),
        ),
        (
            "control records refused (executor's count)",
            format!("{} of {control_records}", control_refused.unwrap_or(0.0)),
        ),
        (
            "abusive requests answered 4xx",
            format!("{} of {}", abuse.refused, abuse.sent),
        ),
        ("slow-loris burst", abuse.slow_loris.clone()),
        ("scheduler RSS before → after", abuse.memory.clone()),
    ]);
    Report {
        scenario: "hostile-input",
        injected: format!(
            "{} malformed or hostile records on the trigger, results, beats, logs and control \
             topics (one a signed trigger past its validity) and {} abusive API requests",
            injected.len(),
            abuse.sent
        ),
        columns,
        lost: outcome.lost(),
        failures,
        details,
    }
}
