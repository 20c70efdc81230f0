//! The beats reader: every scheduler node reads the whole compacted topic `{prefix}.beats`
//! itself, without a consumer group (each node needs every beat for routing), from the
//! beginning: compaction keeps the latest beat of each executor, so a restarted node knows the
//! cluster at once. What it reads goes two ways:
//! - into the in-memory [`Registry`], which routing reads;
//! - into the `executors` table ([`crate::store::Store::upsert_executors`], newer beats only),
//!   for listing (`GET /api/executors`, `kadence executor list`) and for the lost-run monitor.
//!
//! A beat of an app that does not exist, or claiming partitions its app's trigger topic does
//! not have, is refused to the dead-letter queue ([`BeatsReader::checking_claims`]). Beats are
//! signed with an executor key of their app, as results are (`crate::readers::executor_auth`):
//! a beat signed by no key of its app is dropped.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::{BatchConsumer, BatchStep, DeadLetters, KafkaSettings, run_steps};
use kadence_schemas::{ExecutorBeat, Topics, codec};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::domain::model::ExecutorEntry;
use crate::engine::partitions::{PartitionDirectory, PartitionsError};
use crate::engine::registry::{Registry, entry_from_beat};
use crate::readers::executor_auth::{ExecutorKeyring, app_mismatch};
use crate::store::{Store, StoreError};

/// A failed beats step.
#[derive(Debug, thiserror::Error)]
pub enum BeatsError {
    /// The beats consumer could not be created or assigned.
    #[error("cannot start the beats reader: {0}")]
    Start(KafkaError),
    /// Receiving from the broker failed.
    #[error("cannot receive beats: {0}")]
    Receive(KafkaError),
    /// Writing the registry table failed; the beats are written with the next batch.
    #[error("cannot record executor beats: {0}")]
    Write(#[from] StoreError),
    /// Sending an unreadable beat to the dead-letter queue failed; it is retried.
    #[error("cannot send a beat to the dead-letter queue: {0}")]
    DeadLetter(KafkaError),
}

/// What one beats step did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BeatsSummary {
    /// Beats taken into the registry.
    pub observed: usize,
    /// Unreadable records sent to the dead-letter queue.
    pub dead_lettered: usize,
}

/// Reads `{prefix}.beats` from the beginning into the [`Registry`] and the store.
pub struct BeatsReader {
    consumer: BatchConsumer,
    registry: Arc<Registry>,
    store: Arc<dyn Store>,
    dead_letters: DeadLetters,
    clock: Arc<dyn Clock>,
    keyring: Arc<ExecutorKeyring>,
    /// Entries taken into memory but not yet written to the table (a database outage).
    unwritten: HashMap<String, ExecutorEntry>,
    /// Unreadable records not yet in the dead-letter queue.
    undelivered: Vec<(OwnedMessage, String)>,
    /// The apps' partition counts, against which a beat's claims are checked (none: beats
    /// are taken unchecked, as by a reader built for a test of the registry alone).
    partitions: Option<Arc<PartitionDirectory>>,
}

impl BeatsReader {
    /// Assigns every partition (`partitions` of them) of the beats topic from the beginning;
    /// checks each beat's executor signature with `keyring`.
    pub fn new(
        settings: &KafkaSettings,
        (topics, partitions): (&Topics, i32),
        registry: Arc<Registry>,
        store: Arc<dyn Store>,
        dead_letters: DeadLetters,
        clock: Arc<dyn Clock>,
        keyring: Arc<ExecutorKeyring>,
    ) -> Result<BeatsReader, BeatsError> {
        // librdkafka wants a group id even for assigned partitions; nothing is committed:
        // every start reads the compacted topic again, which is what rebuilds the registry.
        let group = format!("{}.scheduler.beats", topics.prefix());
        let consumer = BatchConsumer::assign_from_beginning(
            settings,
            &group,
            &topics.beats(),
            partitions,
            "beats",
            1_000,
        )
        .map_err(BeatsError::Start)?;
        Ok(BeatsReader {
            consumer,
            registry,
            store,
            dead_letters,
            clock,
            keyring,
            unwritten: HashMap::new(),
            undelivered: Vec::new(),
            partitions: None,
        })
    }

    /// Checks every beat against the apps' partition counts: a beat of an app that does not
    /// exist, or claiming a partition its app's trigger topic does not have, goes to the
    /// dead-letter queue with the reason instead of into the registry (it could only be a
    /// misconfigured or hostile producer, and routing by it would send triggers nowhere).
    pub fn checking_claims(mut self, partitions: Arc<PartitionDirectory>) -> BeatsReader {
        self.partitions = Some(partitions);
        self
    }

    /// Why `beat` is refused, if it is (see [`checking_claims`](Self::checking_claims)). A
    /// store that cannot be read refuses nothing: liveness is not withheld for an outage.
    async fn refusal(&self, beat: &ExecutorBeat) -> Option<String> {
        let directory = self.partitions.as_ref()?;
        let count = match directory.partitions(&beat.app).await {
            Ok(count) => count,
            Err(PartitionsError::UnknownApp(app)) => {
                return Some(format!(
                    "beat of executor {} for app {app}, which does not exist",
                    beat.executor_id
                ));
            }
            Err(PartitionsError::Store(_)) => return None,
        };
        let outside: Vec<i32> = (beat.owned_partitions.iter())
            .copied()
            .filter(|partition| !(0..count).contains(partition))
            .collect();
        (!outside.is_empty()).then(|| {
            format!(
                "beat of executor {} claims partitions {outside:?} of app {}, whose trigger \
                 topic has {count}",
                beat.executor_id, beat.app
            )
        })
    }

    /// Whether `beat` is older than the registry's dead timeout: it could make no executor
    /// live. The topic is compacted and read from its beginning at every start, so the last
    /// beats of long-gone executors come back each time; one that fails its signature check
    /// (unsigned from before executor keys, signed by a key revoked since) is dropped without
    /// a dead letter, rather than dead-lettered again at every start.
    fn is_stale(&self, beat: &ExecutorBeat, now_ms: i64) -> bool {
        beat.sent_at_ms < now_ms.saturating_sub(self.registry.dead_timeout_ms())
    }

    /// One step: reads what is ready (waiting up to `wait` for the first record), takes each
    /// beat into the registry, writes the newest per executor to the table, and sends
    /// unreadable records to the dead-letter queue. On a store or DLQ error the pending work
    /// is kept for the next step (the in-memory registry is already current).
    pub async fn apply_beats_once(&mut self, wait: Duration) -> Result<BeatsSummary, BeatsError> {
        let mut summary = BeatsSummary::default();
        let batch = self.receive(wait).await?;
        let received = std::time::Instant::now();
        for message in batch {
            let received_at_ms = self.clock.now_ms();
            let signed = self.keyring.authenticate(&message, "beat", received).await;
            let decoded = match message.payload() {
                None => Err("beat record has no value".to_owned()),
                Some(bytes) => codec::decode::<ExecutorBeat>(bytes)
                    .map_err(|error| format!("undecodable executor beat: {error}")),
            };
            let decoded = match (signed, decoded) {
                (Err(refused), Ok(beat)) if self.is_stale(&beat, received_at_ms) => {
                    tracing::debug!(executor_id = %beat.executor_id, %refused,
                        "stale beat refused without a dead letter");
                    continue;
                }
                (Err(refused), _) => Err(refused.to_string()),
                (Ok(key_app), Ok(beat)) => {
                    match app_mismatch("beat", beat.app.as_str(), key_app.as_deref()) {
                        Some(reason) => Err(reason),
                        None => match self.refusal(&beat).await {
                            Some(reason) => Err(reason),
                            None => Ok(beat),
                        },
                    }
                }
                (Ok(_), Err(reason)) => Err(reason),
            };
            match decoded {
                Ok(beat) => {
                    let entry = entry_from_beat(beat, received_at_ms);
                    if self.registry.observe(entry.clone()) {
                        summary.observed += 1;
                        self.unwritten.insert(entry.executor_id.clone(), entry);
                    }
                }
                Err(reason) => self.undelivered.push((message, reason)),
            }
        }
        while let Some((message, reason)) = self.undelivered.first() {
            self.dead_letters
                .send_message(message, reason)
                .await
                .map_err(BeatsError::DeadLetter)?;
            self.undelivered.remove(0);
            summary.dead_lettered += 1;
        }
        if !self.unwritten.is_empty() {
            let entries: Vec<ExecutorEntry> = self.unwritten.values().cloned().collect();
            self.store.upsert_executors(&entries).await?;
            self.unwritten.clear();
        }
        Ok(summary)
    }

    /// Runs steps until `shutdown` (see [`run_steps`]), then closes the consumer.
    pub async fn run(mut self, shutdown: CancellationToken) {
        run_steps(&mut self, &shutdown).await;
        self.consumer.close().await;
    }

    async fn receive(&self, wait: Duration) -> Result<Vec<OwnedMessage>, BeatsError> {
        self.consumer
            .receive(wait)
            .await
            .map_err(BeatsError::Receive)
    }
}

impl BatchStep for BeatsReader {
    type Summary = BeatsSummary;
    type Error = BeatsError;

    fn name(&self) -> &'static str {
        "beats"
    }

    async fn step(&mut self, wait: Duration) -> Result<BeatsSummary, BeatsError> {
        self.apply_beats_once(wait).await
    }
}
