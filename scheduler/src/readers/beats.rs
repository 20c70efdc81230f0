//! The beats reader: every scheduler node reads the whole compacted topic `{prefix}.beats`
//! itself, without a consumer group (each node needs every beat for routing), from the
//! beginning: compaction keeps the latest beat of each executor, so a restarted node knows the
//! cluster at once. What it reads goes two ways:
//! - into the in-memory [`Registry`], which routing reads;
//! - into the `executors` table ([`crate::store::ExecutorRegistry::upsert_executors`], newer beats only),
//!   for listing (`GET /api/executors`, `kadence executor list`) and for the lost-run monitor.
//!
//! A beat of an app that does not exist, or claiming partitions its app's trigger topic does
//! not have, is refused to the dead-letter queue ([`BeatsReader::start`]). Beats are
//! signed with an executor key of their app, as results are (`crate::readers::executor_auth`):
//! a beat signed by no key of its app goes to the dead-letter queue, or is dropped when it is
//! too old to matter ([`Beats::drops_unsigned`]).
//!
//! It is a batch reader ([`crate::readers::batch`]) that commits nothing: every start reads
//! the compacted topic again, which is what rebuilds the registry.

use std::collections::HashMap;
use std::sync::Arc;

use kadence_schemas::{ExecutorBeat, Topics};
use rdkafka::message::OwnedMessage;

use crate::clock::Clock;
use crate::domain::model::ExecutorEntry;
use crate::engine::partitions::{PartitionDirectory, PartitionsError};
use crate::engine::registry::{Registry, entry_from_beat};
use crate::readers::batch::{
    Applied, BatchReader, Offsets, ReaderError, ReaderSources, RecordReader, Signed, decode_value,
};
use crate::store::{ExecutorRegistry, StoreError};

/// Reads `{prefix}.beats` from the beginning into the [`Registry`] and the store.
pub type BeatsReader = BatchReader<Beats>;

impl BeatsReader {
    /// Assigns every partition (`partitions` of them) of the beats topic from the beginning.
    ///
    /// With `directory`, every beat is checked against the apps' partition counts: a beat of
    /// an app that does not exist, or claiming a partition its app's trigger topic does not
    /// have, goes to the dead-letter queue with the reason instead of into the registry (it
    /// could only be a misconfigured or hostile producer, and routing by it would send
    /// triggers nowhere). Without, beats are taken unchecked, as by a reader built for a
    /// test of the registry alone.
    pub fn start(
        sources: ReaderSources<'_>,
        partitions: i32,
        beats: Beats,
    ) -> Result<BeatsReader, ReaderError> {
        BatchReader::open(sources, Offsets::FromTheBeginning { partitions }, beats)
    }
}

/// The beats reader's own part: taking beats into the registry and the `executors` table.
pub struct Beats {
    registry: Arc<Registry>,
    store: Arc<dyn ExecutorRegistry>,
    clock: Arc<dyn Clock>,
    /// The apps' partition counts, against which a beat's claims are checked.
    directory: Option<Arc<PartitionDirectory>>,
    /// Entries taken into memory but not yet written to the table (a database outage).
    unwritten: HashMap<String, ExecutorEntry>,
}

impl Beats {
    /// Beats for `registry` and the `executors` table of `store`, received by `clock`, checked
    /// against `directory` if there is one (see [`BeatsReader::start`]).
    pub fn new(
        registry: Arc<Registry>,
        store: Arc<dyn ExecutorRegistry>,
        clock: Arc<dyn Clock>,
        directory: Option<Arc<PartitionDirectory>>,
    ) -> Beats {
        Beats {
            registry,
            store,
            clock,
            directory,
            unwritten: HashMap::new(),
        }
    }

    /// Why `beat` is refused, if it is (see [`BeatsReader::start`]). A store that cannot be
    /// read refuses nothing: liveness is not withheld for an outage.
    async fn refusal(&self, beat: &ExecutorBeat) -> Option<String> {
        let directory = self.directory.as_ref()?;
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
}

impl RecordReader for Beats {
    type Record = ExecutorBeat;
    const NAME: &'static str = "beats";
    const RECORD: &'static str = "beat";

    fn topic(topics: &Topics) -> String {
        topics.beats()
    }

    fn decode(&self, message: &OwnedMessage) -> Result<ExecutorBeat, String> {
        decode_value(message, "executor beat")
    }

    fn app_of(beat: &ExecutorBeat) -> Option<&str> {
        Some(beat.app.as_str())
    }

    /// Whether `beat` is older than the registry's dead timeout: it could make no executor
    /// live. The topic is compacted and read from its beginning at every start, so the last
    /// beats of long-gone executors come back each time; one that fails its signature check
    /// (unsigned from before executor keys, signed by a key revoked since) is dropped without
    /// a dead letter, rather than dead-lettered again at every start.
    fn drops_unsigned(&self, beat: &ExecutorBeat) -> bool {
        let now_ms = self.clock.now_ms();
        beat.sent_at_ms < now_ms.saturating_sub(self.registry.dead_timeout_ms())
    }

    /// Takes each beat its claims allow into the registry, and writes the newest per executor
    /// to the table. An entry the table could not take is written with the next batch, and
    /// the write's failure deferred ([`Applied::deferred`]): the in-memory registry, which
    /// routing reads, stays current through a database outage.
    async fn apply(&mut self, beats: Vec<Signed<ExecutorBeat>>) -> Result<Applied, StoreError> {
        let mut applied = Applied::default();
        for signed in beats {
            if let Some(reason) = self.refusal(&signed.record).await {
                applied.refused.push((signed.index, reason));
                continue;
            }
            let entry = entry_from_beat(signed.record, self.clock.now_ms());
            if self.registry.observe(entry.clone()) {
                applied.count += 1;
                self.unwritten.insert(entry.executor_id.clone(), entry);
            }
        }
        if !self.unwritten.is_empty() {
            let entries: Vec<ExecutorEntry> = self.unwritten.values().cloned().collect();
            match self.store.upsert_executors(&entries).await {
                Ok(()) => self.unwritten.clear(),
                Err(error) => applied.deferred = Some(error),
            }
        }
        Ok(applied)
    }
}
