//! The one body of the readers that take signed records into the store: logs, shadow results
//! and beats. A [`BatchReader`] does what they share, and a [`RecordReader`] what is theirs.
//!
//! One step of a batch reader:
//! 1. receive what is ready, unless a batch a failed step kept is still there;
//! 2. check each record's executor signature with the node's keyring (see
//!    [`crate::readers::executor_auth`]) and decode it ([`RecordReader::decode`]); a record
//!    that names its app ([`RecordReader::app_of`]) must be signed by a key of that app;
//! 3. hand the records that pass to [`RecordReader::apply`], which writes them and may refuse
//!    more (a log record for another app's run, a beat claiming partitions that do not exist);
//! 4. send every refused record to the dead-letter queue with its reason;
//! 5. commit past the batch ([`Offsets::Committed`]), or not at all for a reader that reads
//!    its topic from the beginning at every start ([`Offsets::FromTheBeginning`]).
//!
//! A step that fails (the database, the dead-letter queue or the commit) keeps the batch, and
//! the next step reads it again: nothing is committed past a record that was not applied, and
//! [`RecordReader::apply`] must take a repeat as the same record (every store write here skips
//! what it already has). A record already in the dead-letter queue is not sent there again.
//!
//! The results and dead-letter readers keep bodies of their own (results wait for their run's
//! row; dead letters fail runs and send nothing on), and share [`ReaderError`].

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kadence_kafka::{
    BatchConsumer, BatchStep, DeadLetters, ExecutorAuthError, KafkaSettings, run_steps,
};
use kadence_schemas::Topics;
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::engine::pressure::SchedulingPressure;
use crate::metrics::SchedulerMetrics;
use crate::readers::executor_auth::{ExecutorKeyring, app_mismatch};
use crate::store::StoreError;

/// A failed step of one of the readers, or a reader that could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReaderError {
    /// The consumer could not be created, subscribed or assigned.
    #[error("cannot start the {reader} reader: {source}")]
    Start {
        reader: &'static str,
        source: KafkaError,
    },
    /// Receiving from the broker failed.
    #[error("the {reader} reader cannot receive records: {source}")]
    Receive {
        reader: &'static str,
        source: KafkaError,
    },
    /// Reading or writing the store failed; the batch is read again by the next step.
    #[error("the {reader} reader cannot write what it read: {source}")]
    Write {
        reader: &'static str,
        source: StoreError,
    },
    /// Sending to the dead-letter queue failed; the batch is read again by the next step.
    #[error("the {reader} reader cannot send a record to the dead-letter queue: {source}")]
    DeadLetter {
        reader: &'static str,
        source: KafkaError,
    },
    /// Committing offsets failed; the records will be read again and recognised.
    #[error("the {reader} reader cannot commit its offsets: {source}")]
    Commit {
        reader: &'static str,
        source: KafkaError,
    },
}

/// For `map_err`: each kind of failure of the `reader` reader.
impl ReaderError {
    pub fn start(reader: &'static str) -> impl FnOnce(KafkaError) -> ReaderError {
        move |source| ReaderError::Start { reader, source }
    }

    pub fn receive(reader: &'static str) -> impl FnOnce(KafkaError) -> ReaderError {
        move |source| ReaderError::Receive { reader, source }
    }

    pub fn write(reader: &'static str) -> impl FnOnce(StoreError) -> ReaderError {
        move |source| ReaderError::Write { reader, source }
    }

    pub fn dead_letter(reader: &'static str) -> impl FnOnce(KafkaError) -> ReaderError {
        move |source| ReaderError::DeadLetter { reader, source }
    }

    pub fn commit(reader: &'static str) -> impl FnOnce(KafkaError) -> ReaderError {
        move |source| ReaderError::Commit { reader, source }
    }
}

/// What one step of a [`BatchReader`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BatchSummary {
    /// Records applied (repeats, and what the reader set aside, are not counted).
    pub applied: u64,
    /// Records sent to the dead-letter queue.
    pub dead_lettered: usize,
}

/// Where a reader starts and whether it commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offsets {
    /// In its consumer group, from where the group committed; commits past each batch.
    Committed {
        /// The group, under the node's scheduler group (`{prefix}.scheduler.{suffix}`).
        group_suffix: &'static str,
    },
    /// Every partition (there are `partitions`) assigned from the beginning at every start;
    /// nothing is committed (a compacted topic that rebuilds state in memory).
    FromTheBeginning { partitions: i32 },
}

/// A record that passed the signature check and decoded, for [`RecordReader::apply`].
#[derive(Debug)]
pub struct Signed<R> {
    /// Its place in the batch, by which [`Applied::refused`] names it.
    pub index: usize,
    pub record: R,
    /// The app of the executor key that signed it (`None`: the keyring takes unsigned
    /// records, as when executor keys are not required).
    pub key_app: Option<String>,
}

/// What [`RecordReader::apply`] did with a batch.
#[derive(Debug, Default)]
pub struct Applied {
    /// Records written (repeats not counted).
    pub count: u64,
    /// Records refused, by [`Signed::index`], with the reason for the dead-letter queue.
    pub refused: Vec<(usize, String)>,
    /// A write that failed after the records were taken in: the reader keeps what it could
    /// not write and writes it with its next batch, so this batch is done and the next one is
    /// received; the step reports the failure. Only a reader that keeps state of its own may
    /// defer (the beats reader, whose registry must stay current through a database outage);
    /// the others fail [`RecordReader::apply`] and have their batch read again.
    pub deferred: Option<StoreError>,
}

/// What a reader does with its own records (the reader's own part); the [`BatchReader`] does
/// the rest.
pub trait RecordReader: Send + Sync {
    /// A record as decoded.
    type Record: Send;
    /// The reader's name, in logs, errors and the consumer's metric label.
    const NAME: &'static str;
    /// What a record is called in the signature check's reasons ("log record").
    const RECORD: &'static str;

    /// The topic it reads.
    fn topic(topics: &Topics) -> String;

    /// The record `message` holds, or why it cannot be read.
    fn decode(&self, message: &OwnedMessage) -> Result<Self::Record, String>;

    /// The app `record` names, which must be the signing key's app; `None` when the record
    /// does not name one (its app is checked in [`apply`](Self::apply)).
    fn app_of(record: &Self::Record) -> Option<&str>;

    /// Whether a record whose signature is refused is dropped without a dead letter (by
    /// default it is dead-lettered).
    fn drops_unsigned(&self, _record: &Self::Record) -> bool {
        false
    }

    /// Writes `records`, refusing any that fail the reader's own checks. Must take a repeat
    /// of a record as the same record: a failed step's batch is applied again.
    fn apply(
        &mut self,
        records: Vec<Signed<Self::Record>>,
    ) -> impl Future<Output = Result<Applied, StoreError>> + Send;
}

/// What every batch reader is built from.
pub struct ReaderSources<'a> {
    pub kafka: &'a KafkaSettings,
    pub topics: &'a Topics,
    pub session_timeout: Duration,
    pub dead_letters: DeadLetters,
    pub keyring: Arc<ExecutorKeyring>,
}

/// Reads a topic of signed records in batches for a [`RecordReader`] (see the module docs).
pub struct BatchReader<R: RecordReader> {
    reader: R,
    consumer: BatchConsumer,
    topic: String,
    offsets: Offsets,
    dead_letters: DeadLetters,
    keyring: Arc<ExecutorKeyring>,
    /// A batch not yet done: a failed step keeps it for the next.
    unapplied: Vec<OwnedMessage>,
    /// Which records of `unapplied` are in the dead-letter queue already (partition, offset).
    dead_lettered: HashSet<(i32, i64)>,
    /// A history reader waits before each batch while scheduling falls behind (see
    /// [`crate::engine::pressure`]).
    yields_to: Option<(Arc<SchedulingPressure>, Arc<dyn Clock>)>,
}

/// Most records in one batch.
const BATCH_MAX: usize = 1_000;

impl<R: RecordReader> BatchReader<R> {
    /// Joins the reader's group and subscribes to its topic, or assigns every partition of it
    /// from the beginning, as `offsets` says.
    pub fn open(
        sources: ReaderSources<'_>,
        offsets: Offsets,
        reader: R,
    ) -> Result<Self, ReaderError> {
        let topic = R::topic(sources.topics);
        let consumer = match offsets {
            Offsets::Committed { group_suffix } => BatchConsumer::subscribe(
                sources.kafka,
                &format!("{}.{group_suffix}", sources.topics.scheduler_group()),
                &topic,
                sources.session_timeout,
                R::NAME,
                BATCH_MAX,
            ),
            // librdkafka wants a group id even for assigned partitions; nothing is committed.
            Offsets::FromTheBeginning { partitions } => BatchConsumer::assign_from_beginning(
                sources.kafka,
                &format!("{}.{}", sources.topics.scheduler_group(), R::NAME),
                &topic,
                partitions,
                R::NAME,
                BATCH_MAX,
            ),
        };
        let consumer = consumer.map_err(ReaderError::start(R::NAME))?;
        Ok(BatchReader {
            reader,
            consumer,
            topic,
            offsets,
            dead_letters: sources.dead_letters,
            keyring: sources.keyring,
            unapplied: Vec::new(),
            dead_lettered: HashSet::new(),
            yields_to: None,
        })
    }

    /// The same reader yielding to scheduling: before each new batch it waits while
    /// `pressure` says scheduling falls behind (at most `schedule.history_yield`).
    pub fn yielding_to(self, pressure: Arc<SchedulingPressure>, clock: Arc<dyn Clock>) -> Self {
        BatchReader {
            yields_to: Some((pressure, clock)),
            ..self
        }
    }

    /// The same reader reporting its consumer lag per partition into `metrics`.
    pub fn with_lag_metrics(self, metrics: Arc<SchedulerMetrics>) -> Self {
        let topic = self.topic.clone();
        self.consumer.on_statistics(move |statistics| {
            metrics.record_consumer_lag(R::NAME, &topic, statistics)
        });
        self
    }

    /// One step (see the module docs). Waits up to `wait` for the first record.
    pub async fn apply_once(&mut self, wait: Duration) -> Result<BatchSummary, ReaderError> {
        if self.unapplied.is_empty() {
            if let Some((pressure, clock)) = &self.yields_to {
                pressure.yield_to_scheduling(clock.as_ref(), R::NAME).await;
            }
            self.unapplied =
                (self.consumer.receive(wait).await).map_err(ReaderError::receive(R::NAME))?;
        }
        if self.unapplied.is_empty() {
            return Ok(BatchSummary::default());
        }
        let (signed, mut refused) = self.read_batch().await;
        let mut applied = (self.reader.apply(signed).await).map_err(ReaderError::write(R::NAME))?;
        refused.append(&mut applied.refused);
        let mut summary = BatchSummary {
            applied: applied.count,
            dead_lettered: 0,
        };
        for (index, reason) in refused {
            let message = &self.unapplied[index];
            let place = (message.partition(), message.offset());
            if self.dead_lettered.contains(&place) {
                continue;
            }
            (self.dead_letters.send_message(message, &reason).await)
                .map_err(ReaderError::dead_letter(R::NAME))?;
            self.dead_lettered.insert(place);
            summary.dead_lettered += 1;
        }
        if let Offsets::Committed { .. } = self.offsets {
            (self.consumer.commit(&self.unapplied)).map_err(ReaderError::commit(R::NAME))?;
        }
        self.unapplied.clear();
        self.dead_lettered.clear();
        match applied.deferred {
            Some(error) => Err(ReaderError::write(R::NAME)(error)),
            None => Ok(summary),
        }
    }

    /// The batch's records that are signed and decode, and the others with the reason.
    async fn read_batch(&self) -> (Vec<Signed<R::Record>>, Vec<(usize, String)>) {
        let mut signed = Vec::with_capacity(self.unapplied.len());
        let mut refused = Vec::new();
        let received = Instant::now();
        for (index, message) in self.unapplied.iter().enumerate() {
            let signature = (self.keyring)
                .authenticate(message, R::RECORD, received)
                .await;
            match self.judge(signature, self.reader.decode(message)) {
                Judged::Signed(record, key_app) => signed.push(Signed {
                    index,
                    record,
                    key_app,
                }),
                Judged::Refused(reason) => refused.push((index, reason)),
                Judged::Dropped => {}
            }
        }
        (signed, refused)
    }

    /// A record's signature check and decoding, taken together: a refused signature is the
    /// reason even when the record does not decode either.
    fn judge(
        &self,
        signature: Result<Option<String>, ExecutorAuthError>,
        decoded: Result<R::Record, String>,
    ) -> Judged<R::Record> {
        match (signature, decoded) {
            (Err(_), Ok(record)) if self.reader.drops_unsigned(&record) => Judged::Dropped,
            (Err(refused), _) => Judged::Refused(refused.to_string()),
            (Ok(_), Err(reason)) => Judged::Refused(reason),
            (Ok(key_app), Ok(record)) => {
                let mismatch = R::app_of(&record)
                    .and_then(|app| app_mismatch(R::RECORD, app, key_app.as_deref()));
                match mismatch {
                    Some(reason) => Judged::Refused(reason),
                    None => Judged::Signed(record, key_app),
                }
            }
        }
    }

    /// Runs steps until `shutdown` (see [`run_steps`]), then closes the consumer.
    pub async fn run(mut self, shutdown: CancellationToken) {
        run_steps(&mut self, &shutdown).await;
        self.consumer.close().await;
    }
}

/// What became of one record before [`RecordReader::apply`].
enum Judged<R> {
    Signed(R, Option<String>),
    Refused(String),
    /// Left out without a dead letter ([`RecordReader::drops_unsigned`]).
    Dropped,
}

impl<R: RecordReader> BatchStep for BatchReader<R> {
    type Summary = BatchSummary;
    type Error = ReaderError;

    fn name(&self) -> &'static str {
        R::NAME
    }

    async fn step(&mut self, wait: Duration) -> Result<BatchSummary, ReaderError> {
        self.apply_once(wait).await
    }
}

/// The `T` a record's value holds, or why not: `what` names the record in the reason.
pub fn decode_value<T: kadence_schemas::codec::AvroRecord>(
    message: &OwnedMessage,
    what: &str,
) -> Result<T, String> {
    let bytes = (message.payload()).ok_or_else(|| format!("{what} has no value"))?;
    kadence_schemas::codec::decode::<T>(bytes)
        .map_err(|error| format!("undecodable {what}: {error}"))
}
