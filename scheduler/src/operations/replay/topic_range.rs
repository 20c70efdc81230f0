//! Reading a stretch of a trigger topic back: by offsets per partition, or by time.
//!
//! A time range `[from, to)` is found with the broker's offsets-for-times (the first record
//! produced at or after an instant) and then cut exactly by each record's `scheduled_at_ms`.
//! A trigger is produced up to the emit lead before its time, and later when it was late (a
//! misfire fired at once, a claim after a node died), so the lookup starts [`TIME_MARGIN`]
//! before `from` and the reading ends at the first record produced [`TIME_MARGIN`] after
//! `to` (or at the partition's end): a trigger produced further from its time than that is
//! not found by a time range (choose it by offsets).
//!
//! The reader is a plain consumer with partitions assigned, never subscribed: it joins no
//! group and commits nothing, so it leaves nothing behind on the broker. It reads each
//! partition up to the end offset it found when it started; triggers produced meanwhile are
//! not part of the range.
//!
//! Records older than the topic's retention are gone: a range that starts before the
//! earliest offset still there (by offsets: below it; by time: the earliest record still there
//! was produced after `from`, and some were deleted) is an error naming that offset and when
//! its record was produced, never a silently shorter replay.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kadence_kafka::{KafkaSettings, TrustedKeys};
use kadence_schemas::{TriggerRecord, codec};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

/// How far from a time range's ends a record may have been produced and still be found.
pub const TIME_MARGIN: Duration = Duration::from_secs(60);

/// How long the broker may keep the reader waiting for the next record of a partition that
/// is not read to its end yet before the reading fails.
const STALL_LIMIT: Duration = Duration::from_secs(15);

/// How long each broker request (watermarks, offsets-for-times) may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Offsets `[from, to)` of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PartitionOffsets {
    /// The partition.
    pub partition: i32,
    /// First offset (inclusive).
    pub from: i64,
    /// End offset (exclusive).
    pub to: i64,
}

/// Which stretch of a trigger topic to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicRange {
    /// These offsets of these partitions.
    Offsets(Vec<PartitionOffsets>),
    /// Every partition, the triggers scheduled in `[from_ms, to_ms)`.
    Time {
        /// Start, ms (inclusive).
        from_ms: i64,
        /// End, ms (exclusive).
        to_ms: i64,
    },
}

/// A trigger read back, with where it was.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTrigger {
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// The record.
    pub record: TriggerRecord,
}

/// What a reading went through, besides the triggers it handed over.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RangeRead {
    /// The offsets read, per partition (a time range resolved to offsets).
    pub partitions: Vec<PartitionOffsets>,
    /// Records read.
    pub records: u64,
    /// Records skipped: not decodable, or not signed by a key of this cluster (a trigger
    /// nobody trusted would be signed by the replay).
    pub refused: u64,
}

/// Why a stretch could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RangeError {
    /// The range is not a range of this topic.
    #[error("{0}")]
    Invalid(String),
    /// Part of the range is older than the topic's retention.
    #[error(
        "partition {partition} of {topic} no longer holds what the range asks for: its earliest \
         offset still there is {earliest}{}; records before it were deleted by retention",
        earliest_time_ms.map(|ms| format!(" (produced at {})", crate::operations::replay::format_ms(ms))).unwrap_or_default()
    )]
    Retention {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// Its earliest offset still there.
        earliest: i64,
        /// When the record there was produced, ms.
        earliest_time_ms: Option<i64>,
    },
    /// The broker failed or stalled.
    #[error("cannot read {topic}: {message}")]
    Broker {
        /// The topic.
        topic: String,
        /// What went wrong.
        message: String,
    },
}

/// Reads `range` of `topic` (which has `partitions` partitions), handing each trigger signed
/// by one of `keys` to `visit` in the order read, and returns what it went through. Blocking:
/// call it from a blocking thread.
pub fn read_range(
    settings: &KafkaSettings,
    topic: &str,
    partitions: i32,
    range: &TopicRange,
    keys: &TrustedKeys,
    visit: impl FnMut(StoredTrigger),
) -> Result<RangeRead, RangeError> {
    let broker = |error: KafkaError| RangeError::Broker {
        topic: topic.to_owned(),
        message: error.to_string(),
    };
    let consumer: BaseConsumer = settings
        .client_config_with(&[
            // Required by the client, never joined: the reader assigns, and never commits.
            (
                "group.id",
                &format!("kadence.replay-reader.{}", uuid::Uuid::new_v4().simple()),
            ),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            ("auto.offset.reset", "earliest"),
        ])
        .create()
        .map_err(broker)?;
    let (bounds, ends) = resolve(&consumer, topic, partitions, range)?;
    let mut read = RangeRead {
        partitions: bounds.clone(),
        ..RangeRead::default()
    };
    let mut assignment = TopicPartitionList::new();
    let mut remaining = HashMap::new();
    for (bound, (low, reported_end)) in bounds.iter().zip(&ends) {
        if bound.from >= bound.to {
            continue;
        }
        let start = (bound.from - BATCH_REACH).max(*low);
        assignment
            .add_partition_offset(topic, bound.partition, Offset::Offset(start))
            .map_err(broker)?;
        let reading = Reading {
            from: bound.from,
            // A time range reads to where the records stop: the reported end may trail them.
            to: match range {
                TopicRange::Offsets(_) => bound.to,
                TopicRange::Time { .. } => i64::MAX,
            },
            reported_end: *reported_end,
            next: start,
        };
        remaining.insert(bound.partition, reading);
    }
    if remaining.is_empty() {
        return Ok(read);
    }
    consumer.assign(&assignment).map_err(broker)?;
    let end_time_ms = match range {
        TopicRange::Time { to_ms, .. } => Some(to_ms + crate::clock::millis(TIME_MARGIN)),
        TopicRange::Offsets(_) => None,
    };
    read_assigned(
        &consumer,
        (topic, remaining, end_time_ms),
        keys,
        &mut read,
        visit,
    )?;
    Ok(read)
}

/// How far before the first wanted offset a partition is fetched from. A broker may serve a
/// fetch that starts inside a record batch from the next batch on (tansu 0.6 does), which
/// would skip the wanted records at the batch's start; fetching from a batch's length
/// earlier (the producers' batches hold fewer records than this) and skipping what comes
/// before the wanted offset reads them all.
///
/// Only tansu needs it, and it is kept because it is harmless on Apache Kafka, which serves a
/// fetch from the exact offset asked (the records before it in its batch are dropped by the
/// client): there it costs reading up to this many records per partition that the reader
/// passes over, a fraction of a second, once per replay. Brokers cannot be told apart
/// through the standard APIs, so one rule serves both.
const BATCH_REACH: i64 = 10_000;

/// How long a partition that reached its reported end must stay quiet to count as read: a
/// broker's high watermark can trail the records it serves (tansu 0.6 reports a batch's
/// first offset + 1), so the end is where the records stop, not the number it reported.
///
/// Only tansu needs it, and it is kept because it is harmless on Apache Kafka, whose high
/// watermark is exact (a consumer is never served a record above it): there a time range's
/// reading ends this much later than it could, once per replay; a range by offsets ends at
/// its last offset and never waits.
const QUIET: Duration = Duration::from_secs(2);

/// One partition being read: wanted `[from, to)`, the end the broker reported, and the next
/// offset expected.
#[derive(Debug, Clone, Copy)]
struct Reading {
    from: i64,
    to: i64,
    reported_end: i64,
    next: i64,
}

/// Reads the assigned partitions of `consumer` until each reaches its wanted end (or, for a
/// time range, a record produced after `end_time_ms`), or reached its reported end and went
/// quiet; hands each trigger signed by one of `keys` to `visit` and counts into `read`.
fn read_assigned(
    consumer: &BaseConsumer,
    (topic, mut remaining, end_time_ms): (&str, HashMap<i32, Reading>, Option<i64>),
    keys: &TrustedKeys,
    read: &mut RangeRead,
    mut visit: impl FnMut(StoredTrigger),
) -> Result<(), RangeError> {
    let mut last_record = Instant::now();
    while !remaining.is_empty() {
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            let quiet = last_record.elapsed();
            if quiet > QUIET {
                remaining.retain(|_, reading| reading.next < reading.reported_end);
            }
            if let Some((partition, reading)) = remaining.iter().next()
                && quiet > STALL_LIMIT
            {
                return Err(RangeError::Broker {
                    topic: topic.to_owned(),
                    message: format!(
                        "partition {partition} stalled at offset {}: no record for {} s before its end offset {}",
                        reading.next,
                        STALL_LIMIT.as_secs(),
                        reading.reported_end
                    ),
                });
            }
            continue;
        };
        let message = message.map_err(|error| RangeError::Broker {
            topic: topic.to_owned(),
            message: error.to_string(),
        })?;
        last_record = Instant::now();
        let (partition, offset) = (message.partition(), message.offset());
        let Some(reading) = remaining.get_mut(&partition) else {
            continue;
        };
        reading.next = reading.next.max(offset + 1);
        if offset < reading.from {
            continue;
        }
        let past_time = end_time_ms
            .zip(message.timestamp().to_millis())
            .is_some_and(|(end_ms, produced_ms)| produced_ms > end_ms);
        if offset >= reading.to || past_time {
            // Past the range (by offset, or produced past its margin): the rest is later still.
            remaining.remove(&partition);
            continue;
        }
        if offset + 1 >= reading.to {
            remaining.remove(&partition);
        }
        read.records += 1;
        let verified = keys.verify_message(&message).is_ok();
        match message.payload().map(codec::decode::<TriggerRecord>) {
            Some(Ok(record)) if verified => visit(StoredTrigger {
                partition,
                offset,
                record,
            }),
            _ => read.refused += 1,
        }
    }
    Ok(())
}

/// A partition's earliest offset and the end the broker reported.
type Watermarks = (i64, i64);

/// The offsets to read of each partition (the range's, checked against what the topic still
/// holds, or the offsets a time range covers, up to the end reported), each with the
/// partition's earliest offset and reported end.
fn resolve(
    consumer: &BaseConsumer,
    topic: &str,
    partitions: i32,
    range: &TopicRange,
) -> Result<(Vec<PartitionOffsets>, Vec<Watermarks>), RangeError> {
    let broker = |error: KafkaError| RangeError::Broker {
        topic: topic.to_owned(),
        message: error.to_string(),
    };
    let retention = |partition: i32, earliest: i64| RangeError::Retention {
        topic: topic.to_owned(),
        partition,
        earliest,
        earliest_time_ms: produced_at(consumer, topic, partition, earliest),
    };
    match range {
        TopicRange::Offsets(wanted) => {
            let (mut bounds, mut ends) = (Vec::with_capacity(wanted.len()), Vec::new());
            for bound in wanted {
                if !(0..partitions).contains(&bound.partition) {
                    return Err(RangeError::Invalid(format!(
                        "{topic} has partitions 0 to {}, not {}",
                        partitions - 1,
                        bound.partition
                    )));
                }
                let (low, high) = consumer
                    .fetch_watermarks(topic, bound.partition, REQUEST_TIMEOUT)
                    .map_err(broker)?;
                if bound.from < low {
                    return Err(retention(bound.partition, low));
                }
                bounds.push(*bound);
                ends.push((low, high));
            }
            Ok((bounds, ends))
        }
        TopicRange::Time { from_ms, .. } => {
            let margin = crate::clock::millis(TIME_MARGIN);
            let starts = offsets_at(consumer, topic, partitions, from_ms - margin)?;
            let (mut bounds, mut ends) = (Vec::with_capacity(partitions as usize), Vec::new());
            for (partition, start) in (0..partitions).zip(starts) {
                let (low, high) = consumer
                    .fetch_watermarks(topic, partition, REQUEST_TIMEOUT)
                    .map_err(broker)?;
                // Something was deleted, and what is left begins after the range's start.
                if low > 0
                    && produced_at(consumer, topic, partition, low)
                        .is_some_and(|at| at > from_ms - margin)
                {
                    return Err(retention(partition, low));
                }
                // A broker that finds no record after the instant may answer -1 or 0: from
                // the earliest then, the cut by scheduled time keeps the answer exact.
                let from = start
                    .filter(|&offset| offset >= low)
                    .unwrap_or(low)
                    .min(high);
                bounds.push(PartitionOffsets {
                    partition,
                    from,
                    to: high,
                });
                ends.push((low, high));
            }
            Ok((bounds, ends))
        }
    }
}

/// The first offset of each partition produced at or after `at_ms`, `None` where the broker
/// has none.
fn offsets_at(
    consumer: &BaseConsumer,
    topic: &str,
    partitions: i32,
    at_ms: i64,
) -> Result<Vec<Option<i64>>, RangeError> {
    let mut query = TopicPartitionList::new();
    for partition in 0..partitions {
        query
            .add_partition_offset(topic, partition, Offset::Offset(at_ms.max(0)))
            .map_err(|error| RangeError::Broker {
                topic: topic.to_owned(),
                message: error.to_string(),
            })?;
    }
    let found = consumer
        .offsets_for_times(query, REQUEST_TIMEOUT)
        .map_err(|error| RangeError::Broker {
            topic: topic.to_owned(),
            message: format!("offsets for time {at_ms}: {error}"),
        })?;
    Ok((0..partitions)
        .map(|partition| match found.find_partition(topic, partition) {
            Some(element) => match element.offset() {
                Offset::Offset(offset) if offset >= 0 => Some(offset),
                _ => None,
            },
            None => None,
        })
        .collect())
}

/// When the record at `offset` of `partition` was produced, if it can be read.
fn produced_at(consumer: &BaseConsumer, topic: &str, partition: i32, offset: i64) -> Option<i64> {
    let mut one = TopicPartitionList::new();
    one.add_partition_offset(topic, partition, Offset::Offset(offset))
        .ok()?;
    consumer.assign(&one).ok()?;
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    while Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200))
            && message.partition() == partition
        {
            return message.timestamp().to_millis();
        }
    }
    None
}
