//! `hostile-input`: malformed and hostile records on every topic and abusive requests to the
//! API, during a steady load of fires.
//!
//! Injected on `{p}.triggers.{app}`, `{p}.results`, `{p}.beats`, `{p}.logs` and
//! `{p}.control`, one of each: a truncated record (the right frame, the body cut short), an
//! oversized one (900 000 random bytes), one with a schema id no catalog has, and random
//! bytes. Then what only looks right: a result for a trigger that never existed, beats of an
//! app that does not exist and claiming partitions the app does not have, and an unsigned
//! KILL of a run in progress. The API gets the bodies of [`super::abuse`], its floods of
//! wrong logins and of writes with a made-up token, then its slow-loris burst.
//!
//! What must hold: every malformed record and every refused one is in `{p}.dlq` with a
//! reason, once, from the reader of its topic (executors for triggers, the scheduler for the
//! rest), except control records, which every executor reads and refuses on its own (logged,
//! never dead-lettered: each would write its own copy, see PROTOCOL.md) and count
//! (`kadence_executor_control_refused_total`, read from the executor's metrics); the forged
//! KILL is not applied (its run succeeds); every abusive request is refused clearly, and
//! each flood stands in the audit trail as one entry per status counting it; the fires keep
//! completing; the scheduler keeps running.

use std::collections::HashMap;
use std::time::Duration;

use kadence_schemas::{
    AppName, AvroRecord, ControlCommand, ControlRecord, ExecutorBeat, ExecutorState, JobId,
    LogRecord, ResultRecord, TriggerId, TriggerRecord, codec, headers,
};
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

/// A record the scenario produced, and whether a reader must dead-letter it.
struct Injected {
    topic: String,
    what: String,
    payload: Vec<u8>,
    dead_lettered: bool,
}

/// A record of `{p}.dlq`: where it came from, why, and its bytes.
struct Letter {
    source: String,
    reason: String,
    payload: Vec<u8>,
}

/// The four malformed records for a topic of `R` records.
fn malformed<R: AvroRecord>() -> Vec<(&'static str, Vec<u8>)> {
    let frame = |schema_id: u32, body: &[u8]| {
        let mut bytes = vec![codec::MAGIC_BYTE];
        bytes.extend_from_slice(&schema_id.to_be_bytes());
        bytes.extend_from_slice(body);
        bytes
    };
    let random = |length: usize| {
        (0..length)
            .map(|_| rand::random::<u8>())
            .collect::<Vec<u8>>()
    };
    let mut random_bytes = random(64);
    random_bytes[0] = 0xA5;
    vec![
        ("truncated", frame(R::schema_id(), &[0x02, 0x31])),
        ("oversized", frame(R::schema_id(), &random(900_000))),
        ("unknown schema id", frame(987_654, &random(40))),
        ("random bytes", random_bytes),
    ]
}

/// The hostile records that decode: what the readers must refuse on their meaning.
fn plausible(
    jobs: &[i64],
    victim_trigger: &str,
) -> Vec<(&'static str, &'static str, Vec<u8>, bool)> {
    let app = AppName::parse(APP).expect("the app's name");
    let stranger = JobId::new(987_654).expect("a job id");
    let result = ResultRecord {
        trigger_id: TriggerId::scheduled(stranger, 1_000),
        log_id: 1,
        job_id: stranger,
        app: app.clone(),
        executor_id: "intruder".into(),
        code: 200,
        message: None,
        started_at_ms: 1,
        finished_at_ms: 2,
        attempt: 0,
        retry_after_ms: None,
    };
    let beat = |app: &str, partitions: Vec<i32>| ExecutorBeat {
        executor_id: "intruder".to_owned(),
        app: AppName::parse(app).expect("an app name"),
        host: "elsewhere".to_owned(),
        version: "hostile".to_owned(),
        handlers: vec!["noop".to_owned()],
        owned_partitions: partitions,
        running_jobs: jobs.to_vec(),
        queued_jobs: Vec::new(),
        state: ExecutorState::Running,
        sent_at_ms: now_ms(),
    };
    let kill = ControlRecord {
        command: ControlCommand::Kill,
        app,
        job_id: victim_trigger
            .split_once('-')
            .and_then(|(job, _)| job.parse().ok())
            .and_then(|job| JobId::new(job).ok()),
        trigger_id: TriggerId::parse(victim_trigger).ok(),
        reason: Some("forged".to_owned()),
        requested_at_ms: now_ms(),
    };
    let encode = |bytes: Result<Vec<u8>, codec::CodecError>| bytes.expect("an encoding");
    vec![
        (
            "results",
            "result for a trigger that never existed",
            encode(codec::encode(&result)),
            true,
        ),
        (
            "beats",
            "beat of an app that does not exist",
            encode(codec::encode(&beat("nowhere", vec![0]))),
            true,
        ),
        (
            "beats",
            "beat claiming partitions the app does not have",
            encode(codec::encode(&beat(APP, vec![0, 1, 2, 5, 9]))),
            true,
        ),
        (
            "control",
            "unsigned KILL of a run in progress",
            encode(codec::encode(&kill)),
            false,
        ),
    ]
}

/// Every injected record: the malformed ones on each topic, then the plausible ones.
fn hostile_records(prefix: &str, jobs: &[i64], victim_trigger: &str) -> Vec<Injected> {
    let topics = [
        (
            format!("{prefix}.triggers.{APP}"),
            malformed::<TriggerRecord>(),
            true,
        ),
        (
            format!("{prefix}.results"),
            malformed::<ResultRecord>(),
            true,
        ),
        (format!("{prefix}.beats"), malformed::<ExecutorBeat>(), true),
        (format!("{prefix}.logs"), malformed::<LogRecord>(), true),
        (
            format!("{prefix}.control"),
            malformed::<ControlRecord>(),
            false,
        ),
    ];
    let mut injected = Vec::new();
    for (topic, records, dead_lettered) in topics {
        for (what, payload) in records {
            injected.push(Injected {
                topic: topic.clone(),
                what: what.to_owned(),
                payload,
                dead_lettered,
            });
        }
    }
    for (topic, what, payload, dead_lettered) in plausible(jobs, victim_trigger) {
        injected.push(Injected {
            topic: format!("{prefix}.{topic}"),
            what: what.to_owned(),
            payload,
            dead_lettered,
        });
    }
    injected
}

/// Produces each record to partition 0 of its topic.
async fn produce(brokers: &str, records: &[Injected]) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("message.max.bytes", "2000000")
        .create()
        .expect("a producer");
    for record in records {
        producer
            .send(
                FutureRecord::to(&record.topic)
                    .partition(0)
                    .key("hostile")
                    .payload(&record.payload),
                Duration::from_secs(30),
            )
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
    // The run has begun (its trigger is emitted at once and starts within milliseconds).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let injected = hostile_records(&prefix, &jobs, &victim_trigger);
    produce(&broker.address, &injected).await;
    let abuse = abuse_the_api(&stack).await;
    tokio::time::sleep(options.outage + options.after).await;
    let window = (from_ms, now_ms());
    let outcome = Outcome::collect(&stack, &broker.address, &prefix, &jobs, window).await;
    let letters = dead_letters(&broker.address, &prefix).await;
    let victim_succeeded = outcome.succeeded.contains_key(&victim_trigger);
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
) -> Report {
    let mut failures = Vec::new();
    let (lettered, reasons) = match_letters(injected, letters, &mut failures);
    if !victim_succeeded {
        failures.push("the run the forged KILL named did not succeed".to_owned());
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
             topics and {} abusive API requests",
            injected.len(),
            abuse.sent
        ),
        columns,
        lost: outcome.lost(),
        failures,
        details,
    }
}
