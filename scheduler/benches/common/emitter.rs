//! Triggers as a scheduler would emit them, produced by the benchmark itself: the end-to-end
//! benchmark's run without a scheduler or a database, which measures the executors and the
//! broker alone.

use std::time::Duration;

use kadence_kafka::{KafkaSettings, RecordSigner, RoundRecord};
use kadence_scheduler::engine::dispatch::EMIT_BATCH;
use kadence_schemas::{
    AppName, BlockStrategy, GlueType, JobId, Topics, TriggerId, TriggerRecord, TriggerType, codec,
};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::message::OwnedHeaders;
use rdkafka::producer::FutureRecord;

use super::executors::RESULTS_PARTITIONS;
use super::{APP, PARTITIONS, now_ms, sleep_until_ms};

/// Creates on the broker at `brokers` the topics `kadence serve` creates for [`APP`] under
/// `topics`' prefix: the trigger topic ([`PARTITIONS`]), results, control, beats
/// (compacted), logs, dead letters.
pub async fn create_topics(brokers: &str, topics: &Topics) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .expect("admin client");
    let app = AppName::parse(APP).expect("the benchmark app's name is valid");
    let names = [
        (topics.triggers(&app), PARTITIONS),
        (topics.results(), RESULTS_PARTITIONS),
        (topics.control(), 1),
        (topics.beats(), 1),
        (topics.logs(), RESULTS_PARTITIONS),
        (topics.dlq(), 1),
    ];
    let beats = topics.beats();
    let new_topics: Vec<NewTopic<'_>> = names
        .iter()
        .map(|(name, partitions)| {
            let topic = NewTopic::new(name, *partitions, TopicReplication::Fixed(-1));
            if *name == beats {
                topic.set("cleanup.policy", "compact")
            } else {
                topic
            }
        })
        .collect();
    for created in admin
        .create_topics(&new_topics, &AdminOptions::new())
        .await
        .expect("create topics")
    {
        created.unwrap_or_else(|(topic, error)| panic!("create {topic}: {error}"));
    }
}

/// Deletes the topics of `topics`' prefix (those `kadence serve` or [`create_topics`] made)
/// from the broker at `brokers`, so that runs of a benchmark do not slow the next ones down:
/// the development broker's per-request cost grows with the number of topics it holds.
pub async fn delete_topics(brokers: &str, topics: &Topics) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .expect("admin client");
    let prefix = format!("{}.", topics.prefix());
    let names: Vec<String> = {
        let metadata = admin
            .inner()
            .fetch_metadata(None, Duration::from_secs(10))
            .expect("list topics");
        metadata
            .topics()
            .iter()
            .map(|topic| topic.name().to_owned())
            .filter(|name| name.starts_with(&prefix))
            .collect()
    };
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    if let Err(error) = admin.delete_topics(&names, &AdminOptions::new()).await {
        eprintln!("  could not delete the run's topics: {error}");
    }
}

/// Emits to the broker at `brokers` a trigger of each job `1..=jobs` (handler `noop`) for
/// every second from `first_second_ms` for `seconds`, each second's `lead` ahead of it, as
/// the scheduler's wheel does with its emit lead, signed with `signer` as the scheduler signs
/// them for executors of this version: by the round, each round as many triggers as the
/// scheduler's dispatch takes at once ([`EMIT_BATCH`]), or each alone when
/// `KADENCE_SIGNING__TRIGGER_SIGNATURES` is `record`. `partition` routes a job. Returns once
/// the last second's triggers are acknowledged.
pub async fn emit_every_second(
    (brokers, topics): (&str, &Topics),
    jobs: usize,
    partition: fn(JobId) -> i32,
    (first_second_ms, seconds): (i64, usize),
    lead: Duration,
    signer: &RecordSigner,
) {
    let producer = KafkaSettings {
        brokers: brokers.to_owned(),
        ..KafkaSettings::default()
    }
    .idempotent_producer()
    .expect("producer");
    let app = AppName::parse(APP).expect("the benchmark app's name is valid");
    let topic = topics.triggers(&app);
    // Once: the consistent-hash ring is built for every call (the scheduler keeps its own).
    let routed: Vec<(JobId, i32)> = (1..=jobs as i64)
        .map(|job| JobId::new(job).expect("jobs count from 1"))
        .map(|job| (job, partition(job)))
        .collect();
    let by_round = std::env::var("KADENCE_SIGNING__TRIGGER_SIGNATURES").as_deref() != Ok("record");
    let mut deliveries = Vec::new();
    for second in 0..seconds as i64 {
        let scheduled_at_ms = first_second_ms + second * 1000;
        sleep_until_ms(scheduled_at_ms - lead.as_millis() as i64).await;
        for round in routed.chunks(EMIT_BATCH) {
            let payloads: Vec<Vec<u8>> = (round.iter())
                .map(|&(job, _)| codec::encode(&trigger(job, &app, scheduled_at_ms)))
                .collect::<Result<_, _>>()
                .expect("encode a trigger");
            let headers: Vec<OwnedHeaders> = if by_round {
                let records: Vec<RoundRecord<'_>> = (round.iter().zip(&payloads))
                    .map(|(&(_, partition), value)| RoundRecord {
                        topic: &topic,
                        partition,
                        value,
                    })
                    .collect();
                signer.round_headers(&records)
            } else {
                (payloads.iter())
                    .map(|payload| signer.headers(&topic, payload))
                    .collect()
            };
            for ((&(job, partition), payload), headers) in round.iter().zip(&payloads).zip(headers)
            {
                let key = job.to_string();
                let sent = FutureRecord::<str, [u8]>::to(&topic)
                    .key(&key)
                    .payload(payload)
                    .headers(headers)
                    .partition(partition);
                match producer.send_result(sent) {
                    Ok(delivery) => deliveries.push(delivery),
                    Err((error, _)) => panic!("produce a trigger: {error}"),
                }
            }
        }
    }
    for delivery in deliveries {
        delivery
            .await
            .expect("delivery")
            .map_err(|(error, _)| error)
            .expect("trigger acknowledged");
    }
}

/// The trigger of `job` for `scheduled_at_ms`, as the scheduler writes a cron fire.
fn trigger(job: JobId, app: &AppName, scheduled_at_ms: i64) -> TriggerRecord {
    TriggerRecord {
        trigger_id: TriggerId::scheduled(job, scheduled_at_ms),
        log_id: job.get(),
        job_id: job,
        app: app.clone(),
        handler: "noop".into(),
        params: String::new(),
        shard_index: 0,
        shard_total: 1,
        block_strategy: BlockStrategy::SerialExecution,
        timeout_ms: 0,
        trigger_type: TriggerType::Cron,
        scheduled_at_ms,
        emitted_at_ms: now_ms(),
        attempt: 0,
        glue_type: GlueType::Bean,
        glue_source: None,
        glue_updated_at_ms: None,
        replay_of: None,
        // The scheduler's default window: an hour after the fire's time.
        expires_at_ms: Some(scheduled_at_ms + 3_600_000),
    }
}
