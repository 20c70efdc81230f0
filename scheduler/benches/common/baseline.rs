//! What a broker takes with no scheduler in front of it, the throughput benchmark's baseline:
//! the raw produce rate of one producer configured like the scheduler's, for records of a
//! trigger's size, and the broker's acknowledgement latency for single records. Measured on
//! each broker the benchmark runs on, so every row compares the scheduler with its own broker.

use std::time::{Duration, Instant};

use futures::StreamExt;
use kadence_schemas::{
    AppName, BlockStrategy, GlueType, JobId, TriggerId, TriggerRecord, TriggerType, codec,
};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;

use super::PARTITIONS;

/// A representative trigger record's encoded size.
pub fn trigger_payload() -> Vec<u8> {
    let job = JobId::new(123_456).unwrap();
    codec::encode(&TriggerRecord {
        trigger_id: TriggerId::scheduled(job, 1_767_225_600_000),
        log_id: 9_876_543,
        job_id: job,
        app: AppName::parse("bench").unwrap(),
        handler: "tick".into(),
        params: String::new(),
        shard_index: 0,
        shard_total: 1,
        block_strategy: BlockStrategy::SerialExecution,
        timeout_ms: 0,
        trigger_type: TriggerType::Cron,
        scheduled_at_ms: 1_767_225_600_000,
        emitted_at_ms: 1_767_225_600_001,
        attempt: 0,
        glue_type: GlueType::Bean,
        glue_source: None,
        glue_updated_at_ms: None,
        replay_of: None,
        expires_at_ms: Some(1_767_229_200_000),
    })
    .unwrap()
}

/// A new topic with the trigger topics' partition count, and a producer configured like the
/// scheduler's (idempotent, acks=all, linger 2 ms).
async fn fresh_topic_and_producer(brokers: &str, purpose: &str) -> (String, FutureProducer) {
    let topic = format!("kbench{:x}.{purpose}", rand::random::<u32>());
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .unwrap();
    let new_topic = NewTopic::new(&topic, PARTITIONS, TopicReplication::Fixed(-1));
    for created in admin
        .create_topics([&new_topic], &AdminOptions::new())
        .await
        .unwrap()
    {
        created.unwrap_or_else(|(topic, error)| panic!("create {topic}: {error}"));
    }
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "2")
        .create()
        .unwrap();
    (topic, producer)
}

/// The broker's own acknowledgement latency for single records sent at a steady 1 000/s
/// (p50, p99 in ms): the floor under any scheduler's fire lateness on this broker.
pub async fn broker_ack_latency(brokers: &str) -> (f64, f64) {
    let (topic, producer) = fresh_topic_and_producer(brokers, "probe").await;
    let payload = trigger_payload();
    // Warm the connection and the idempotent producer id first.
    producer
        .send(
            FutureRecord::<str, [u8]>::to(&topic).payload(&payload),
            Timeout::Never,
        )
        .await
        .unwrap();
    let mut ticker = tokio::time::interval(Duration::from_millis(1));
    let pending = futures::stream::FuturesUnordered::new();
    for n in 0..3_000 {
        ticker.tick().await;
        let sent = Instant::now();
        let delivery = producer
            .send_result(
                FutureRecord::<str, [u8]>::to(&topic)
                    .payload(&payload)
                    .partition(n % PARTITIONS),
            )
            .unwrap();
        // A task per delivery, so each is timed when the broker answers, not when collected.
        pending.push(tokio::spawn(async move {
            delivery.await.unwrap().map_err(|(error, _)| error).unwrap();
            sent.elapsed().as_secs_f64() * 1000.0
        }));
    }
    let mut latencies: Vec<f64> = pending.map(|joined| joined.unwrap()).collect().await;
    latencies.sort_by(f64::total_cmp);
    let at = |fraction: f64| latencies[((latencies.len() - 1) as f64 * fraction) as usize];
    (at(0.5), at(0.99))
}

/// Records per second the broker takes from one idempotent producer, as fast as it can send.
async fn raw_produce_rate(brokers: &str, records: usize) -> f64 {
    let (topic, producer) = fresh_topic_and_producer(brokers, "raw").await;
    let payload = trigger_payload();
    let started = Instant::now();
    let mut in_flight = futures::stream::FuturesUnordered::new();
    for n in 0..records {
        let key = (n % 100_000).to_string();
        let partition = (n % PARTITIONS as usize) as i32;
        loop {
            match producer.send_result(
                FutureRecord::to(&topic)
                    .key(&key)
                    .payload(&payload)
                    .partition(partition),
            ) {
                Ok(delivery) => {
                    in_flight.push(delivery);
                    break;
                }
                // The producer's queue is full: wait for a delivery to make room.
                Err(_) => {
                    in_flight.next().await;
                }
            }
        }
    }
    while let Some(delivery) = in_flight.next().await {
        delivery.unwrap().map_err(|(error, _)| error).unwrap();
    }
    producer
        .flush(Timeout::After(Duration::from_secs(30)))
        .unwrap();
    records as f64 / started.elapsed().as_secs_f64()
}

/// The median of three raw produce rates measured one after the other on `brokers`.
pub async fn median_raw_rate(brokers: &str, records: usize) -> f64 {
    let mut rates = Vec::with_capacity(3);
    for _ in 0..3 {
        rates.push(raw_produce_rate(brokers, records).await);
    }
    rates.sort_by(f64::total_cmp);
    rates[1]
}
