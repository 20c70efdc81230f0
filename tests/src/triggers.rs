//! The trigger records a scheduler emitted, read back from `{prefix}.triggers.{app}` (and
//! any other topic's records, e.g. the results executors published), and an audit of jobs
//! that fire every second.
//!
//! The topic, not the database, is the ground truth for "fired exactly once": a fire skipped
//! as a DO_NOTHING misfire leaves no row anywhere, and a fire emitted twice (its lease ended
//! before its acknowledgement was recorded, so a claim emitted it again) has one row but two
//! records.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use kadence_schemas::{AvroRecord, TriggerRecord, TriggerType, codec};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use crate::percentile;

/// Silence that ends the reading once every record the broker reported is read: its high
/// watermark can trail records still being appended.
///
/// tansu 0.6's high watermark trails the records it serves; Apache Kafka's is exact. The
/// quiet is kept on both because it is harmless on Kafka (two seconds per reading) and
/// because the tests also read topics whose producers may still be finishing (a last beat,
/// a late result), which the watermark read at the start would leave out.
const QUIET: Duration = Duration::from_secs(2);

/// Longest wait for the next record while the broker says more exist.
const STALL_LIMIT: Duration = Duration::from_secs(30);

/// Every record of `topic` (partitions `0..partitions`) from the beginning, decoded: reads
/// at least as many as the partitions' high watermarks promised, then until none arrives for
/// two seconds. Panics on a record that is not a trigger record.
pub async fn read_triggers(brokers: &str, topic: &str, partitions: i32) -> Vec<TriggerRecord> {
    read_records(brokers, topic, partitions).await
}

/// [`read_triggers`] for any record type, e.g. the results an executor published.
pub async fn read_records<R: AvroRecord>(brokers: &str, topic: &str, partitions: i32) -> Vec<R> {
    read_placed_records(brokers, topic, partitions)
        .await
        .into_iter()
        .map(|placed| placed.record)
        .collect()
}

/// A record with where it was read: partition and offset.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed<R> {
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// The record.
    pub record: R,
}

/// [`read_records`] with each record's partition and offset.
pub async fn read_placed_records<R: AvroRecord>(
    brokers: &str,
    topic: &str,
    partitions: i32,
) -> Vec<Placed<R>> {
    read_placed(brokers, topic, partitions, true).await
}

/// [`read_triggers`] on a topic that also holds records that are not triggers (a test put
/// them there): those are passed over.
pub async fn read_triggers_among_others(
    brokers: &str,
    topic: &str,
    partitions: i32,
) -> Vec<TriggerRecord> {
    read_placed(brokers, topic, partitions, false)
        .await
        .into_iter()
        .map(|placed| placed.record)
        .collect()
}

/// How many records partitions `0..partitions` of `topic` hold, by their watermarks.
async fn records_held(config: &ClientConfig, topic: &str, partitions: i32) -> usize {
    let (config, topic) = (config.clone(), topic.to_owned());
    // Watermark queries block: off the runtime's threads.
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = config.create().expect("watermark client");
        (0..partitions)
            .map(|partition| {
                let (low, high) = consumer
                    .fetch_watermarks(&topic, partition, Duration::from_secs(10))
                    .unwrap_or_else(|error| {
                        panic!("watermarks of {topic} partition {partition}: {error}")
                    });
                usize::try_from(high - low).unwrap_or(0)
            })
            .sum::<usize>()
    })
    .await
    .expect("watermark query")
}

/// Reads as [`read_placed_records`] says; `strict`: a record that does not decode panics,
/// otherwise it is passed over.
async fn read_placed<R: AvroRecord>(
    brokers: &str,
    topic: &str,
    partitions: i32,
    strict: bool,
) -> Vec<Placed<R>> {
    let config = {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", brokers)
            .set(
                "group.id",
                format!("{topic}.audit-{:08x}", rand::random::<u32>()),
            )
            .set("enable.auto.commit", "false");
        config
    };
    let mut promised = records_held(&config, topic, partitions).await;
    let consumer: StreamConsumer = config.create().expect("trigger topic reader");
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .expect("partition offset");
    }
    consumer
        .assign(&assignment)
        .expect("assign the trigger topic");
    let mut records = Vec::with_capacity(promised);
    loop {
        let wait = if records.len() < promised {
            STALL_LIMIT
        } else {
            QUIET
        };
        match tokio::time::timeout(wait, consumer.recv()).await {
            Ok(received) => {
                let message = received.unwrap_or_else(|error| panic!("reading {topic}: {error}"));
                let payload = message.payload().unwrap_or_default();
                let record = match codec::decode::<R>(payload) {
                    Ok(record) => record,
                    Err(_) if !strict => {
                        promised = promised.saturating_sub(1);
                        continue;
                    }
                    Err(error) => panic!(
                        "{topic} offset {}: not a {}: {error}",
                        message.offset(),
                        R::RECORD
                    ),
                };
                records.push(Placed {
                    partition: message.partition(),
                    offset: message.offset(),
                    record,
                });
            }
            Err(_) if records.len() >= promised => return records,
            Err(_) => panic!(
                "{topic}: read {} of the {promised} records the broker reported, then none for {STALL_LIMIT:?}",
                records.len()
            ),
        }
    }
}

/// What the trigger topic says about jobs due every second, over a window of seconds.
#[derive(Debug, Clone, Default)]
pub struct FireAudit {
    /// The window's first second, ms.
    pub from_ms: i64,
    /// Fires expected: one per job and second of the window.
    pub expected: usize,
    /// Expected fires without a record: `(job, scheduled ms)`.
    pub missing: Vec<(i64, i64)>,
    /// Trigger ids of the audited jobs (at any time) emitted more than once: `(trigger id,
    /// scheduled ms, copies)`.
    pub doubled: Vec<(String, i64, usize)>,
    /// Records of the audited jobs with trigger type MISFIRE.
    pub misfires: usize,
    /// Trigger ids of the audited jobs' records that are not `{job}-{scheduled_at_ms}`.
    pub malformed: Vec<String>,
    /// `emitted_at_ms − scheduled_at_ms` of the first copy of each fire in the window, sorted.
    /// Negative: emitted ahead of its time (the scheduler's emit lead).
    pub emitted_lateness_ms: Vec<i64>,
}

impl FireAudit {
    /// Audits `records` for `jobs`, each due every second, over the seconds in
    /// `[from_ms, to_ms)`.
    pub fn of(records: &[TriggerRecord], jobs: &[i64], from_ms: i64, to_ms: i64) -> FireAudit {
        let audited: BTreeSet<i64> = jobs.iter().copied().collect();
        let first_second = (from_ms + 999).div_euclid(1000) * 1000;
        let seconds: Vec<i64> = (first_second..to_ms).step_by(1000).collect();
        let mut audit = FireAudit {
            from_ms: first_second,
            expected: seconds.len() * jobs.len(),
            ..FireAudit::default()
        };
        let mut copies: HashMap<&str, (i64, usize)> = HashMap::new();
        for record in records
            .iter()
            .filter(|record| audited.contains(&record.job_id.get()))
        {
            let id = record.trigger_id.as_str();
            let entry = copies.entry(id).or_insert((record.scheduled_at_ms, 0));
            entry.1 += 1;
            if entry.1 == 1 && (first_second..to_ms).contains(&record.scheduled_at_ms) {
                audit
                    .emitted_lateness_ms
                    .push(record.emitted_at_ms - record.scheduled_at_ms);
            }
            if record.trigger_type == TriggerType::Misfire {
                audit.misfires += 1;
            }
            if id != format!("{}-{}", record.job_id, record.scheduled_at_ms) {
                audit.malformed.push(id.to_owned());
            }
        }
        for &job in jobs {
            for &second in &seconds {
                if !copies.contains_key(format!("{job}-{second}").as_str()) {
                    audit.missing.push((job, second));
                }
            }
        }
        audit.doubled = copies
            .into_iter()
            .filter(|(_, (_, count))| *count > 1)
            .map(|(id, (scheduled, count))| (id.to_owned(), scheduled, count))
            .collect();
        audit.doubled.sort_by_key(|(_, scheduled, _)| *scheduled);
        audit.emitted_lateness_ms.sort_unstable();
        audit
    }

    /// Every expected fire once, nothing twice, no misfire, every id deterministic.
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty()
            && self.doubled.is_empty()
            && self.misfires == 0
            && self.malformed.is_empty()
    }

    /// One line: counts, and which seconds of the window (from its start) were hit.
    pub fn summary(&self) -> String {
        let span = |times: &mut dyn Iterator<Item = i64>| {
            let offsets: BTreeSet<i64> = times.map(|ms| (ms - self.from_ms) / 1000).collect();
            match (offsets.first(), offsets.last()) {
                (Some(first), Some(last)) => {
                    format!(
                        " in {} distinct seconds, {first:+} s..{last:+} s",
                        offsets.len()
                    )
                }
                _ => String::new(),
            }
        };
        format!(
            "fires expected {}, missing {}{}, emitted twice {}{}, misfires {}, malformed ids {}, \
             emitted − scheduled p50 {} ms, max {} ms",
            self.expected,
            self.missing.len(),
            span(&mut self.missing.iter().map(|(_, ms)| *ms)),
            self.doubled.len(),
            span(&mut self.doubled.iter().map(|(_, ms, _)| *ms)),
            self.misfires,
            self.malformed.len(),
            percentile(&self.emitted_lateness_ms, 0.5),
            self.emitted_lateness_ms.last().copied().unwrap_or_default(),
        )
    }
}
