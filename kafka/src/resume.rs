//! Where a group member starts a partition it has just been assigned.
//!
//! Apache Kafka serves a fetch from the record batch that holds the fetch offset, and the
//! client drops the records before it, so a member resumes exactly at its group's committed
//! offset. tansu 0.6 serves such a fetch from the *next* batch. Kadence's readers commit
//! after the records they finished, and that offset need not end a batch: an executor whose
//! runs were handed back at a rebalance commits the first of them, mid-batch; a results
//! reader commits after the records of its last step. On tansu the member that resumes there
//! never sees the rest of that batch: triggers that never run, results never recorded. (Seen
//! as two fires lost when a frozen executor thawed, found its session expired and took its
//! partitions again from the offset it had committed.)
//!
//! [`ResumePoints`] works round it when the settings say the broker is tansu
//! ([`BrokerKind::Tansu`]): as partitions are assigned it moves each one's start up to
//! [`REWIND`] records before the committed offset (never before the log start), and the
//! reader drops what arrives below the committed offset ([`ResumePoints::admits`]). The
//! rewound fetch may itself start inside a batch; tansu then serves from the next one, which
//! is still at or before the committed offset as long as a batch holds fewer than [`REWIND`]
//! records. On Kafka it does nothing: the re-read would cost up to [`REWIND`] records per
//! partition at every assignment for nothing.
//!
//! A consumer context uses it by applying its rebalances with [`rebalance_resuming`] instead
//! of rust-rdkafka's default, which has no way to change the offsets being assigned.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance, RebalanceProtocol};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};

use crate::settings::BrokerKind;

/// How many records before its committed offset a partition is started on tansu: more than
/// any one batch holds (a producer's batch is at most `batch.size`, 1 MB by default, and
/// Kadence's records are a few hundred bytes), as the replay reader reaches back.
pub const REWIND: i64 = 10_000;

/// The committed offsets a reader's partitions resume at, on a broker that needs the detour
/// (module docs).
#[derive(Debug)]
pub struct ResumePoints {
    enabled: bool,
    topic: String,
    /// Per partition started early: the committed offset, until a record at or past it
    /// arrives.
    pending: Mutex<HashMap<i32, i64>>,
}

impl ResumePoints {
    /// Resume points for a reader of `topic` on a broker of `kind`; inert unless it is tansu.
    pub fn new(kind: BrokerKind, topic: &str) -> ResumePoints {
        ResumePoints {
            enabled: kind == BrokerKind::Tansu,
            topic: topic.to_owned(),
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// Moves the start of each partition of `assigned` that the group has an offset for to
    /// [`REWIND`] records before it (never before the log start), remembering the offset.
    /// Called as the partitions are assigned, before the client fetches; `timeout` bounds each
    /// lookup. A lookup that fails leaves that partition where the client would start it.
    pub fn rewind<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        assigned: &mut TopicPartitionList,
        timeout: Duration,
    ) {
        if !self.enabled {
            return;
        }
        let committed = match consumer.committed_offsets(assigned.clone(), timeout) {
            Ok(committed) => committed,
            Err(error) => {
                tracing::warn!(topic = %self.topic, %error,
                    "cannot read the group's offsets to start before them (tansu); a committed offset inside a record batch may skip the rest of that batch");
                return;
            }
        };
        let mut pending = self.pending.lock().expect("resume points lock");
        for element in committed.elements_for_topic(&self.topic) {
            // No committed offset: `auto.offset.reset` starts it at an end, where batches begin.
            let Offset::Offset(resume) = element.offset() else {
                continue;
            };
            let partition = element.partition();
            let low = match consumer.fetch_watermarks(&self.topic, partition, timeout) {
                Ok((low, _)) => low,
                Err(error) => {
                    tracing::warn!(topic = %self.topic, partition, %error,
                        "cannot find the start of a partition to start before the committed offset (tansu)");
                    continue;
                }
            };
            let start = (resume - REWIND).max(low);
            if start >= resume {
                continue;
            }
            if assigned
                .set_partition_offset(&self.topic, partition, Offset::Offset(start))
                .is_ok()
            {
                pending.insert(partition, resume);
            }
        }
    }

    /// Whether the record at `offset` of `partition` is the reader's to take: not one of
    /// those read again before the partition's committed offset.
    pub fn admits(&self, partition: i32, offset: i64) -> bool {
        if !self.enabled {
            return true;
        }
        let mut pending = self.pending.lock().expect("resume points lock");
        match pending.get(&partition) {
            Some(&resume) if offset < resume => false,
            Some(_) => {
                pending.remove(&partition);
                true
            }
            None => true,
        }
    }

    /// Forgets `partitions`, revoked: whoever is assigned them next resumes afresh.
    pub fn forget(&self, partitions: &[i32]) {
        if self.enabled {
            let mut pending = self.pending.lock().expect("resume points lock");
            for partition in partitions {
                pending.remove(partition);
            }
        }
    }
}

/// Applies a group rebalance as rust-rdkafka's default `ConsumerContext::rebalance` does
/// (`pre_rebalance`, then the assignment, whole or incremental by the rebalance protocol,
/// then `post_rebalance`), with `points` rewinding the partitions being assigned first.
pub fn rebalance_resuming<C: ConsumerContext>(
    context: &C,
    consumer: &BaseConsumer<C>,
    err: RDKafkaRespErr,
    partitions: &mut TopicPartitionList,
    points: &ResumePoints,
    timeout: Duration,
) {
    let cooperative = matches!(
        consumer.rebalance_protocol(),
        RebalanceProtocol::Cooperative
    );
    let assigning = err == RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
    if assigning {
        points.rewind(consumer, partitions, timeout);
    }
    let rebalance = match err {
        RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => Rebalance::Assign(partitions),
        RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => Rebalance::Revoke(partitions),
        other => {
            // As the default: any other outcome drops the assignment, to be given afresh.
            tracing::error!(error = ?other, "error rebalancing");
            Rebalance::Error(KafkaError::Rebalance(other.into()))
        }
    };
    context.pre_rebalance(consumer, &rebalance);
    let applied = match (assigning, cooperative) {
        (true, true) => consumer.incremental_assign(partitions),
        (true, false) => consumer.assign(partitions),
        (false, true) => consumer.incremental_unassign(partitions),
        (false, false) => consumer.unassign(),
    };
    context.post_rebalance(consumer, &rebalance);
    if let Err(error) = applied {
        tracing::error!(%error, "cannot apply the group's rebalance");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_before_the_resume_point_are_dropped_until_it_is_reached() {
        let points = ResumePoints::new(BrokerKind::Tansu, "t");
        points.pending.lock().unwrap().insert(0, 25);
        assert!(!points.admits(0, 15));
        assert!(!points.admits(0, 24));
        assert!(points.admits(1, 3), "a partition not rewound is untouched");
        assert!(points.admits(0, 25));
        assert!(
            points.pending.lock().unwrap().is_empty(),
            "reached: forgotten"
        );
        assert!(points.admits(0, 26));
    }

    #[test]
    fn revoked_partitions_are_forgotten_and_kafka_takes_no_detour() {
        let points = ResumePoints::new(BrokerKind::Tansu, "t");
        points.pending.lock().unwrap().insert(2, 100);
        points.forget(&[2]);
        assert!(points.admits(2, 5));
        let on_kafka = ResumePoints::new(BrokerKind::Kafka, "t");
        on_kafka.pending.lock().unwrap().insert(0, 100);
        assert!(on_kafka.admits(0, 5), "never filters on Kafka");
    }
}
