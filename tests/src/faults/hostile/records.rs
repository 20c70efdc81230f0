//! What the `hostile-input` scenario produces: each record, the topic it goes to, whether a
//! reader must dead-letter it and why (see [`super`]).

use kadence_executor::testing::TestWorker;
use kadence_scheduler::engine::signer::Signer;
use kadence_scheduler::store::{PoolSettings, SqliteStore};
use kadence_schemas::{
    AppName, AvroRecord, ControlCommand, ControlRecord, ExecutorBeat, ExecutorState, JobId,
    LogRecord, ResultRecord, TriggerId, TriggerRecord, codec,
};
use rdkafka::message::OwnedHeaders;

use crate::faults::api::APP;
use crate::now_ms;

/// A record the scenario produced, and whether a reader must dead-letter it.
pub(super) struct Injected {
    pub(super) topic: String,
    pub(super) what: String,
    pub(super) payload: Vec<u8>,
    pub(super) dead_lettered: bool,
    /// How its dead letter's reason must begin, when that matters.
    pub(super) reason: Option<&'static str>,
    /// Its signature headers, if signed.
    pub(super) headers: Option<OwnedHeaders>,
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
        features: Vec::new(),
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
pub(super) fn hostile_records(prefix: &str, jobs: &[i64], victim_trigger: &str) -> Vec<Injected> {
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
                reason: None,
                headers: None,
            });
        }
    }
    for (topic, what, payload, dead_lettered) in plausible(jobs, victim_trigger) {
        injected.push(Injected {
            topic: format!("{prefix}.{topic}"),
            what: what.to_owned(),
            payload,
            dead_lettered,
            reason: None,
            headers: None,
        });
    }
    injected
}

/// The reason an executor gives a trigger received past its validity begins so
/// (`schemas/PROTOCOL.md`, section 4).
const EXPIRED_REASON: &str = "expired trigger record:";

/// A trigger for `job` (handler `ok`) under a fresh id, signed with the active key of the
/// scheduler whose database is at `database_url`, whose validity ended a minute ago.
pub(super) async fn expired_trigger(
    database_url: &str,
    topic: &str,
    job: i64,
) -> (TriggerId, Injected) {
    let database = SqliteStore::connect(database_url, PoolSettings::new(1))
        .await
        .expect("the scheduler's database");
    let signer = Signer::load(&database, now_ms())
        .await
        .expect("the scheduler's signing key");
    let emitted_at_ms = now_ms() - 120_000;
    let record = TriggerRecord {
        app: AppName::parse(APP).expect("the app's name"),
        scheduled_at_ms: emitted_at_ms,
        emitted_at_ms,
        expires_at_ms: Some(emitted_at_ms + 60_000),
        ..TestWorker::trigger("ok").job(job).record()
    };
    let payload = codec::encode(&record).expect("an encoding");
    assert_eq!(
        payload[1..5],
        codec::TRIGGER_RECORD_V3.to_be_bytes(),
        "a TriggerRecord v3"
    );
    let headers = signer.current().headers(topic, &payload);
    let injected = Injected {
        topic: topic.to_owned(),
        what: "signed trigger past its validity".to_owned(),
        payload,
        dead_lettered: true,
        reason: Some(EXPIRED_REASON),
        headers: Some(headers),
    };
    (record.trigger_id, injected)
}
