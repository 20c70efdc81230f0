//! The executor registry, built from the `ExecutorBeat`s executors publish to the compacted
//! topic `{prefix}.beats` (XXL-JOB's `xxl_job_registry`, without the HTTP calls).
//!
//! Every scheduler node reads the whole beats topic itself, without a consumer group (each
//! node needs every beat for routing), starting from the beginning: compaction keeps the
//! latest beat of each executor, so a restarted node knows the cluster at once. What it reads
//! goes two ways:
//! - into [`Registry`], in memory, which FAILOVER and BUSYOVER consult on every trigger
//!   ([`Registry::owners`]) — no database read on the dispatch path;
//! - into the `executors` table ([`crate::store::Store::upsert_executors`], newer beats only),
//!   for listing (`GET /api/executors`, `kadence executor list`) and for the lost-run monitor.
//!
//! An executor is **live** while its state is RUNNING and its latest beat is younger than the
//! dead timeout (default 10 s, see [`crate::config::RegistryConfig`]). A beat's time is the
//! earlier of its send time and the time this node read it, so a beat replayed from the topic
//! after a restart is not mistaken for a fresh one. A STOPPING beat (graceful shutdown) takes
//! the executor out of routing at once. [`sweep_once`] marks stale rows DEAD in the table and
//! forgets them after `forget_after`.
//!
//! When two live executors claim the same partition (the moment of a rebalance), the one with
//! the newer beat owns it. A beat of an app that does not exist, or claiming partitions its
//! app's trigger topic does not have, is refused to the dead-letter queue
//! ([`BeatsReader::checking_claims`]). Beats are signed with an executor key of their app, as
//! results are (`crate::executor_auth`): a beat signed by no key of its app is dropped.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kadence_kafka::{BatchConsumer, BatchStep, DeadLetters, KafkaSettings, run_steps};
use kadence_schemas::{AppName, ExecutorBeat, JobId, Topics, codec};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, run_every};
use crate::config::RegistryConfig;
use crate::executor_auth::{ExecutorKeyring, app_mismatch};
use crate::model::{ExecutorEntry, ExecutorStatus};
use crate::partitions::{PartitionDirectory, PartitionsError};
use crate::routing::{OwnerLookup, PartitionOwner};
use crate::store::{Store, StoreError};

/// The live view of executors, per app, from their latest beats.
pub struct Registry {
    dead_timeout_ms: i64,
    apps: RwLock<HashMap<AppName, HashMap<String, ExecutorEntry>>>,
}

impl Registry {
    /// An empty registry that considers an executor dead after `dead_timeout` without a beat.
    pub fn new(dead_timeout: Duration) -> Registry {
        Registry {
            dead_timeout_ms: i64::try_from(dead_timeout.as_millis()).unwrap_or(i64::MAX),
            apps: RwLock::new(HashMap::new()),
        }
    }

    /// Takes in an executor's beat; an older beat than the one held is ignored. Returns whether
    /// the entry was taken.
    pub fn observe(&self, entry: ExecutorEntry) -> bool {
        let mut apps = self.apps.write().expect("registry lock");
        // An executor that moved to another app (same id, restarted with other settings).
        for (app, executors) in apps.iter_mut() {
            if *app != entry.app {
                executors.remove(&entry.executor_id);
            }
        }
        let executors = apps.entry(entry.app.clone()).or_default();
        match executors.get(&entry.executor_id) {
            Some(held) if held.last_beat_at_ms > entry.last_beat_at_ms => false,
            _ => {
                executors.insert(entry.executor_id.clone(), entry);
                true
            }
        }
    }

    /// Whether `entry` takes triggers at `now_ms`: RUNNING with a beat younger than the dead
    /// timeout.
    pub fn is_live(&self, entry: &ExecutorEntry, now_ms: i64) -> bool {
        is_live(entry, now_ms, self.dead_timeout_ms)
    }

    /// The live executors of `app` at `now_ms`, by id.
    pub fn live_executors(&self, app: &AppName, now_ms: i64) -> Vec<ExecutorEntry> {
        let apps = self.apps.read().expect("registry lock");
        let mut live: Vec<ExecutorEntry> = apps
            .get(app)
            .map(|executors| {
                executors
                    .values()
                    .filter(|entry| self.is_live(entry, now_ms))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        live.sort_by(|a, b| a.executor_id.cmp(&b.executor_id));
        live
    }

    /// Per app known to the registry: its live executors and the distinct partitions they
    /// own at `now_ms` (for the metrics).
    pub fn liveness(&self, now_ms: i64) -> Vec<(AppName, usize, usize)> {
        let apps: Vec<AppName> = self
            .apps
            .read()
            .expect("registry lock")
            .keys()
            .cloned()
            .collect();
        apps.into_iter()
            .map(|app| {
                let live = self.live_executors(&app, now_ms);
                let owned: std::collections::BTreeSet<i32> = live
                    .iter()
                    .flat_map(|entry| entry.owned_partitions.iter().copied())
                    .collect();
                (app, live.len(), owned.len())
            })
            .collect()
    }

    /// The live executor owning `partition` of `app`'s trigger topic at `now_ms` (the newest
    /// claim, as in [`Registry::owners`]).
    pub fn owner_of(&self, app: &AppName, partition: i32, now_ms: i64) -> Option<String> {
        self.live_executors(app, now_ms)
            .into_iter()
            .filter(|entry| entry.owned_partitions.contains(&partition))
            .max_by_key(|entry| entry.last_beat_at_ms)
            .map(|entry| entry.executor_id)
    }

    /// Who owns each partition of `app`'s trigger topic at `now_ms`, and whether `job` is busy
    /// there: what FAILOVER and BUSYOVER route by.
    pub fn owners(&self, app: &AppName, job: JobId, now_ms: i64) -> AppOwners {
        let mut newest: HashMap<i32, (i64, PartitionOwner)> = HashMap::new();
        for entry in self.live_executors(app, now_ms) {
            let job_busy =
                entry.running_jobs.contains(&job.get()) || entry.queued_jobs.contains(&job.get());
            for &partition in &entry.owned_partitions {
                let claim = (entry.last_beat_at_ms, PartitionOwner::Live { job_busy });
                match newest.get(&partition) {
                    Some((held, _)) if *held >= entry.last_beat_at_ms => {}
                    _ => {
                        newest.insert(partition, claim);
                    }
                }
            }
        }
        AppOwners {
            owners: newest
                .into_iter()
                .map(|(partition, (_, owner))| (partition, owner))
                .collect(),
        }
    }
}

/// Whether `entry` takes triggers at `now_ms`: RUNNING, with a beat at most `dead_timeout_ms`
/// old.
pub fn is_live(entry: &ExecutorEntry, now_ms: i64, dead_timeout_ms: i64) -> bool {
    entry.state == ExecutorStatus::Running
        && now_ms.saturating_sub(entry.last_beat_at_ms) <= dead_timeout_ms
}

/// The owners of one app's partitions at one instant (see [`Registry::owners`]).
#[derive(Debug, Clone, Default)]
pub struct AppOwners {
    owners: HashMap<i32, PartitionOwner>,
}

impl OwnerLookup for AppOwners {
    fn owner(&self, partition: i32) -> PartitionOwner {
        self.owners
            .get(&partition)
            .copied()
            .unwrap_or(PartitionOwner::Unknown)
    }
}

/// The registry entry a beat read at `received_at_ms` stands for.
pub fn entry_from_beat(beat: ExecutorBeat, received_at_ms: i64) -> ExecutorEntry {
    let state = match beat.state {
        kadence_schemas::ExecutorState::Running => ExecutorStatus::Running,
        kadence_schemas::ExecutorState::Stopping => ExecutorStatus::Stopping,
    };
    let last_beat_at_ms = beat.sent_at_ms.min(received_at_ms);
    ExecutorEntry {
        executor_id: beat.executor_id,
        app: beat.app,
        host: beat.host,
        version: beat.version,
        handlers: beat.handlers,
        owned_partitions: beat.owned_partitions,
        running_jobs: beat.running_jobs,
        queued_jobs: beat.queued_jobs,
        state,
        first_seen_at_ms: last_beat_at_ms,
        last_beat_at_ms,
    }
}

/// A failed registry step.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
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
    ) -> Result<BeatsReader, RegistryError> {
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
        .map_err(RegistryError::Start)?;
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
        beat.sent_at_ms < now_ms.saturating_sub(self.registry.dead_timeout_ms)
    }

    /// One step: reads what is ready (waiting up to `wait` for the first record), takes each
    /// beat into the registry, writes the newest per executor to the table, and sends
    /// unreadable records to the dead-letter queue. On a store or DLQ error the pending work
    /// is kept for the next step (the in-memory registry is already current).
    pub async fn apply_beats_once(
        &mut self,
        wait: Duration,
    ) -> Result<BeatsSummary, RegistryError> {
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
                .map_err(RegistryError::DeadLetter)?;
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

    async fn receive(&self, wait: Duration) -> Result<Vec<OwnedMessage>, RegistryError> {
        self.consumer
            .receive(wait)
            .await
            .map_err(RegistryError::Receive)
    }
}

impl BatchStep for BeatsReader {
    type Summary = BeatsSummary;
    type Error = RegistryError;

    fn name(&self) -> &'static str {
        "beats"
    }

    async fn step(&mut self, wait: Duration) -> Result<BeatsSummary, RegistryError> {
        self.apply_beats_once(wait).await
    }
}

/// What one sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepSummary {
    /// Executors newly marked DEAD.
    pub marked_dead: Vec<String>,
    /// Dead executors deleted from the table.
    pub forgotten: u64,
}

/// One sweep at `now_ms`: marks executors whose beats stopped DEAD and deletes those dead for
/// longer than `forget_after`. Safe on several nodes (each row is marked once).
pub async fn sweep_once(
    store: &dyn Store,
    config: &RegistryConfig,
    now_ms: i64,
) -> Result<SweepSummary, StoreError> {
    let dead_timeout_ms = i64::try_from(config.dead_timeout.as_millis()).unwrap_or(i64::MAX);
    let forget_after_ms = i64::try_from(config.forget_after.as_millis()).unwrap_or(i64::MAX);
    let marked_dead = store
        .mark_dead_executors(now_ms.saturating_sub(dead_timeout_ms))
        .await?;
    for executor in &marked_dead {
        tracing::warn!(executor_id = %executor, "executor stopped beating; marked dead");
    }
    let forgotten = store
        .forget_executors(
            now_ms
                .saturating_sub(dead_timeout_ms)
                .saturating_sub(forget_after_ms),
        )
        .await?;
    Ok(SweepSummary {
        marked_dead,
        forgotten,
    })
}

/// Sweeps every `config.sweep_interval` until `shutdown`.
pub async fn run_sweeper(
    store: Arc<dyn Store>,
    config: RegistryConfig,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
) {
    let interval = config.sweep_interval;
    run_every("registry sweep", interval, clock, shutdown, |now_ms| {
        let (store, config) = (Arc::clone(&store), config.clone());
        async move {
            sweep_once(store.as_ref(), &config, now_ms)
                .await
                .map(|_| ())
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app() -> AppName {
        AppName::parse("billing").unwrap()
    }

    fn entry(id: &str, partitions: &[i32], running: &[i64], beat_ms: i64) -> ExecutorEntry {
        ExecutorEntry {
            executor_id: id.to_owned(),
            app: app(),
            host: "h".to_owned(),
            version: "1".to_owned(),
            handlers: vec!["x".to_owned()],
            owned_partitions: partitions.to_vec(),
            running_jobs: running.to_vec(),
            queued_jobs: Vec::new(),
            state: ExecutorStatus::Running,
            first_seen_at_ms: beat_ms,
            last_beat_at_ms: beat_ms,
        }
    }

    #[test]
    fn owners_come_from_fresh_running_executors_only() {
        let registry = Registry::new(Duration::from_secs(10));
        let job = JobId::new(5).unwrap();
        registry.observe(entry("a", &[0, 1], &[5], 1_000));
        registry.observe(entry("b", &[2], &[], 1_000));
        let owners = registry.owners(&app(), job, 11_000);
        assert_eq!(owners.owner(0), PartitionOwner::Live { job_busy: true });
        assert_eq!(owners.owner(2), PartitionOwner::Live { job_busy: false });
        assert_eq!(owners.owner(3), PartitionOwner::Unknown);
        // One millisecond past the dead timeout both are gone.
        let owners = registry.owners(&app(), job, 11_001);
        assert_eq!(owners.owner(0), PartitionOwner::Unknown);
        // A STOPPING beat takes the executor out at once.
        let mut stopping = entry("b", &[2], &[], 2_000);
        stopping.state = ExecutorStatus::Stopping;
        registry.observe(stopping);
        assert_eq!(
            registry.owners(&app(), job, 2_000).owner(2),
            PartitionOwner::Unknown
        );
    }

    #[test]
    fn older_beats_never_replace_newer_ones_and_the_newest_claim_owns_a_partition() {
        let registry = Registry::new(Duration::from_secs(10));
        let job = JobId::new(5).unwrap();
        assert!(registry.observe(entry("a", &[0], &[], 5_000)));
        assert!(!registry.observe(entry("a", &[1], &[], 4_000)));
        assert_eq!(
            registry.live_executors(&app(), 5_000)[0].owned_partitions,
            vec![0]
        );
        // During a rebalance b already claims partition 0 while a's last beat still does.
        registry.observe(entry("b", &[0], &[5], 6_000));
        assert_eq!(
            registry.owners(&app(), job, 6_000).owner(0),
            PartitionOwner::Live { job_busy: true }
        );
    }

    #[test]
    fn a_beat_counts_from_the_earlier_of_its_send_and_receive_times() {
        let beat = ExecutorBeat {
            executor_id: "e".to_owned(),
            app: app(),
            host: "h".to_owned(),
            version: "1".to_owned(),
            handlers: vec![],
            owned_partitions: vec![0],
            running_jobs: vec![],
            queued_jobs: vec![],
            state: kadence_schemas::ExecutorState::Running,
            sent_at_ms: 1_000,
        };
        // Replayed long after it was sent: as old as it is.
        assert_eq!(entry_from_beat(beat.clone(), 90_000).last_beat_at_ms, 1_000);
        // Sent by a clock running ahead: as of when it arrived.
        assert_eq!(entry_from_beat(beat, 400).last_beat_at_ms, 400);
    }
}
