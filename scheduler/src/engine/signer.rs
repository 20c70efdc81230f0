//! Signing what the scheduler produces for executors: every trigger record (dispatch) and
//! every control record (kill) leaves the node through a [`SignedProducer`], which adds the
//! key id and the Ed25519 signature of the record's exact value bytes on its topic as
//! headers (`kadence_kafka::signing` has the format). Executors that trust the public key
//! refuse anything else, so a trigger topic is safe to share with whoever may only read it.
//!
//! The keys live in the database ([`SigningKeys`]): every node of a cluster signs with the
//! same key, the newest one not retired. The first node to start on a database without a key
//! makes one (several starting at once still make one). A [`Signer`] holds the key in use
//! behind a lock taken only to clone an `Arc`, and [`Signer::refresh_once`] — run every
//! `signing.key_refresh_interval` by [`run_refresh`] — swaps in the newest key after a
//! rotation (`POST /api/signing-keys/rotate`), so all nodes sign with it within that
//! interval. The private key never leaves the database and this process; `Debug` never shows
//! it.

use std::num::NonZeroUsize;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kadence_kafka::{DeliveryFuture, KafkaProducer, KeyError, RecordSigner, RoundRecord};
use rdkafka::error::KafkaError;
use rdkafka::message::OwnedHeaders;
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
use secrecy::{ExposeSecret, SecretString};
use tokio_util::sync::CancellationToken;

use crate::store::{NewSigningKey, SigningKeys, StoreError, StoredSigningKey};

/// The signing key could not be made, read or used.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A new key could not be made.
    #[error(transparent)]
    NewKey(#[from] KeyError),
    /// A stored key is not a valid Ed25519 key (edited by hand?).
    #[error("stored signing key {key_id} cannot be read: {source}; retire it (kadence key retire)")]
    CorruptKey {
        /// The key.
        key_id: String,
        /// Why.
        source: KeyError,
    },
}

/// A fresh key and the record of it for the store.
pub fn new_signing_key() -> Result<(RecordSigner, NewSigningKey), KeyError> {
    let signer = RecordSigner::generate()?;
    let record = NewSigningKey {
        key_id: signer.key_id().to_owned(),
        public_key: signer.public_key().to_base64(),
        private_key: SecretString::from(signer.private_base64()),
    };
    Ok((signer, record))
}

fn signer_of(stored: &StoredSigningKey) -> Result<RecordSigner, SignerError> {
    let signer =
        RecordSigner::from_base64(stored.private_key.expose_secret()).map_err(|source| {
            SignerError::CorruptKey {
                key_id: stored.info.key_id.clone(),
                source,
            }
        })?;
    if signer.key_id() != stored.info.key_id {
        return Err(SignerError::CorruptKey {
            key_id: stored.info.key_id.clone(),
            source: KeyError::Invalid {
                what: "private",
                text: "<hidden>".to_owned(),
                reason: format!("it belongs to key {}, not to this row", signer.key_id()),
            },
        });
    }
    Ok(signer)
}

/// The key this node signs with now.
#[derive(Debug)]
pub struct Signer {
    current: RwLock<Arc<RecordSigner>>,
}

impl Signer {
    /// A signer with a fixed `key` (tests and tools; a node loads its key with
    /// [`Signer::load`]).
    pub fn new(key: RecordSigner) -> Signer {
        Signer {
            current: RwLock::new(Arc::new(key)),
        }
    }

    /// The newest active key of the database, made there first if it has none.
    pub async fn load(store: &dyn SigningKeys, now_ms: i64) -> Result<Signer, SignerError> {
        let (_, candidate) = new_signing_key()?;
        let stored = store.ensure_signing_key(&candidate, now_ms).await?;
        let signer = signer_of(&stored)?;
        if stored.info.key_id == candidate.key_id {
            tracing::info!(key_id = signer.key_id(), public_key = %stored.info.public_key,
                "made the first signing key: give executors this public key (kadence key list)");
        }
        Ok(Signer::new(signer))
    }

    /// The key in use.
    pub fn current(&self) -> Arc<RecordSigner> {
        // A poisoned lock still holds a whole key: the swap is one assignment.
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Switches to the database's newest active key if it is another; returns whether it did.
    pub async fn refresh_once(&self, store: &dyn SigningKeys) -> Result<bool, SignerError> {
        let Some(stored) = store.newest_signing_key().await? else {
            // Only a hand-edited table has no active key (the last one cannot be retired).
            tracing::warn!(
                key_id = self.current().key_id(),
                "the database holds no active signing key; signing with the last one read"
            );
            return Ok(false);
        };
        if stored.info.key_id == self.current().key_id() {
            return Ok(false);
        }
        let signer = Arc::new(signer_of(&stored)?);
        tracing::info!(
            key_id = signer.key_id(),
            "signing with a new key from now on"
        );
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = signer;
        Ok(true)
    }
}

/// Runs [`Signer::refresh_once`] every `interval` until `shutdown`.
pub async fn run_refresh(
    signer: Arc<Signer>,
    store: Arc<dyn SigningKeys>,
    interval: Duration,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        if let Err(error) = signer.refresh_once(store.as_ref()).await {
            tracing::warn!(%error, "cannot refresh the signing key; signing with the one in use");
        }
    }
}

/// A record on its way to the broker, not signed yet.
#[derive(Debug, Clone)]
pub struct OutgoingRecord {
    /// Its topic (part of what is signed).
    pub topic: String,
    /// Its key.
    pub key: String,
    /// Its value, exactly as sent.
    pub payload: Vec<u8>,
    /// Its partition, or `None` for the partitioner's choice.
    pub partition: Option<i32>,
    /// The route strategy the `kadence.route` header names (FAILOVER and BUSYOVER triggers
    /// only: the others are decided by the partition alone); not signed.
    pub route: Option<&'static str>,
    /// Whether it is signed as part of its dispatch round (its app's executors verify round
    /// signatures) rather than alone. A record without a partition is always signed alone:
    /// a round binds each record's partition.
    pub sign_by_round: bool,
}

/// A record with the signature headers of the node's key: what
/// [`SignedProducer::send_signed`] sends. Only [`SignedProducer::sign_all`] makes one.
pub struct SignedRecord {
    record: OutgoingRecord,
    headers: OwnedHeaders,
}

impl SignedRecord {
    /// The record that was signed.
    pub fn record(&self) -> &OutgoingRecord {
        &self.record
    }
}

/// Batches smaller than this are signed on the calling task: handing them to threads costs
/// more than the signatures.
const SIGN_ON_THREADS_FROM: usize = 64;

/// The producer of trigger and control records: every record it sends is signed with the
/// node's current key, and it offers no way to send one unsigned.
///
/// Dispatch signs what it sends in batches ([`sign_all`](Self::sign_all)): the records its
/// executors verify by the round as one round, the others each alone, spread over
/// `signing.threads` blocking threads: those records are independent, and one task signing
/// every trigger in turn was the node's limit (41 % of its CPU at 100 000 due per second).
#[derive(Clone)]
pub struct SignedProducer {
    producer: KafkaProducer,
    signer: Arc<Signer>,
    threads: NonZeroUsize,
}

impl SignedProducer {
    /// Signs what `producer` sends with `signer`'s key, on one thread.
    pub fn new(producer: KafkaProducer, signer: Arc<Signer>) -> Self {
        SignedProducer {
            producer,
            signer,
            threads: NonZeroUsize::MIN,
        }
    }

    /// The same producer signing batches on `threads` threads.
    pub fn with_signing_threads(self, threads: NonZeroUsize) -> Self {
        SignedProducer { threads, ..self }
    }

    /// The signer.
    pub fn signer(&self) -> &Arc<Signer> {
        &self.signer
    }

    /// Signs `records` with the current key, in order: those to be signed by the round
    /// ([`OutgoingRecord::sign_by_round`], with a partition) as one round (see
    /// [`kadence_kafka::RecordSigner::round_headers`]), the others each alone.
    pub async fn sign_all(&self, records: Vec<OutgoingRecord>) -> Vec<SignedRecord> {
        let key = self.signer.current();
        // Whether each record, in order, is in the round.
        let mut in_round = Vec::with_capacity(records.len());
        let (mut round, mut alone) = (Vec::new(), Vec::new());
        for record in records {
            match record.partition {
                Some(partition) if record.sign_by_round => {
                    in_round.push(true);
                    round.push((partition, record));
                }
                _ => {
                    in_round.push(false);
                    alone.push(record);
                }
            }
        }
        let mut round = sign_round(&key, round).into_iter();
        let mut alone = self.sign_each_on_threads(key, alone).await.into_iter();
        in_round
            .into_iter()
            .map(|in_round| if in_round { round.next() } else { alone.next() })
            // Both signers return one signed record per record given.
            .map(|signed| signed.expect("a signed record for every record"))
            .collect()
    }

    /// Signs each of `records` alone, in order: a large batch split over the signing threads,
    /// a small one signed here.
    async fn sign_each_on_threads(
        &self,
        key: Arc<RecordSigner>,
        records: Vec<OutgoingRecord>,
    ) -> Vec<SignedRecord> {
        let threads = self.threads.get();
        if threads == 1 || records.len() < SIGN_ON_THREADS_FROM {
            return sign_each(&key, records);
        }
        let total = records.len();
        let chunk_len = total.div_ceil(threads);
        let mut chunks = Vec::with_capacity(threads);
        let mut rest = records;
        while rest.len() > chunk_len {
            let tail = rest.split_off(chunk_len);
            chunks.push(rest);
            rest = tail;
        }
        chunks.push(rest);
        let signing: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let key = Arc::clone(&key);
                tokio::task::spawn_blocking(move || sign_each(&key, chunk))
            })
            .collect();
        let mut signed = Vec::with_capacity(total);
        for chunk in signing {
            // Signing cannot fail; a panic there is a bug to surface, not to hide.
            signed.extend(
                chunk
                    .await
                    .unwrap_or_else(|error| panic!("a trigger signing thread failed: {error}")),
            );
        }
        signed
    }

    /// Enqueues a signed record carrying the `traceparent` of `trace`, and returns its
    /// delivery; fails at once when it cannot be enqueued (a full local queue is retriable).
    pub fn send_signed(
        &self,
        signed: SignedRecord,
        trace: &opentelemetry::Context,
    ) -> Result<DeliveryFuture, KafkaError> {
        let mut headers = kadence_kafka::trace::inject(trace, signed.headers);
        let record = &signed.record;
        if let Some(route) = record.route {
            headers = headers.insert(rdkafka::message::Header {
                key: kadence_schemas::headers::ROUTE,
                value: Some(route.as_bytes()),
            });
        }
        let mut future_record = FutureRecord::to(&record.topic)
            .key(&record.key)
            .payload(&record.payload)
            .headers(headers);
        if let Some(partition) = record.partition {
            future_record = future_record.partition(partition);
        }
        self.producer
            .send_result(future_record)
            .map_err(|(error, _)| error)
    }

    /// Sends a signed record and waits for the broker's acknowledgement, at most `timeout`
    /// to enqueue it.
    pub async fn send(
        &self,
        topic: &str,
        key: &str,
        payload: &[u8],
        timeout: Duration,
    ) -> Result<(), KafkaError> {
        let headers = self.signer.current().headers(topic, payload);
        let record = FutureRecord::to(topic)
            .key(key)
            .payload(payload)
            .headers(headers);
        self.producer
            .send(record, Timeout::After(timeout))
            .await
            .map(|_| ())
    }
}

/// `records`, each with the partition it goes to, signed as one round. One signature and a
/// Merkle tree of a few thousand hashes at most: no reason to hand it to the signing threads.
fn sign_round(key: &RecordSigner, records: Vec<(i32, OutgoingRecord)>) -> Vec<SignedRecord> {
    let round: Vec<RoundRecord<'_>> = records
        .iter()
        .map(|(partition, record)| RoundRecord {
            topic: &record.topic,
            partition: *partition,
            value: &record.payload,
        })
        .collect();
    let headers = key.round_headers(&round);
    records
        .into_iter()
        .zip(headers)
        .map(|((_, record), headers)| SignedRecord { headers, record })
        .collect()
}

fn sign_each(key: &RecordSigner, records: Vec<OutgoingRecord>) -> Vec<SignedRecord> {
    records
        .into_iter()
        .map(|record| SignedRecord {
            headers: key.headers(&record.topic, &record.payload),
            record,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use kadence_kafka::TrustedKeys;
    use rdkafka::ClientConfig;
    use rdkafka::message::Headers;

    use super::*;

    fn producer() -> KafkaProducer {
        // Never connects: the test only signs.
        KafkaProducer::new(ClientConfig::new().set("bootstrap.servers", "127.0.0.1:1"))
            .expect("a producer")
    }

    fn header<'a>(signed: &'a SignedRecord, name: &str) -> Option<&'a [u8]> {
        signed
            .headers
            .iter()
            .find(|header| header.key == name)
            .and_then(|header| header.value)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_split_over_threads_keeps_its_order_and_signs_every_record() {
        let key = RecordSigner::generate().unwrap();
        let trusted = TrustedKeys::new([key.public_key()]);
        let producer = SignedProducer::new(producer(), Arc::new(Signer::new(key)))
            .with_signing_threads(NonZeroUsize::new(3).unwrap());
        for total in [0, 1, SIGN_ON_THREADS_FROM - 1, SIGN_ON_THREADS_FROM, 301] {
            let records: Vec<OutgoingRecord> = (0..total)
                .map(|index| OutgoingRecord {
                    topic: format!("topic-{}", index % 3),
                    key: index.to_string(),
                    payload: format!("value {index}").into_bytes(),
                    partition: Some(index as i32 % 4),
                    route: None,
                    sign_by_round: false,
                })
                .collect();
            let signed = producer.sign_all(records.clone()).await;
            assert_eq!(signed.len(), total);
            for (original, signed) in records.iter().zip(&signed) {
                assert_eq!(signed.record().key, original.key, "order kept");
                assert_eq!(signed.record().payload, original.payload);
                assert_eq!(signed.record().partition, original.partition);
                let verified = trusted.verify(
                    &original.topic,
                    &original.payload,
                    header(signed, kadence_schemas::headers::SIGNATURE_KEY),
                    header(signed, kadence_schemas::headers::SIGNATURE),
                );
                assert!(verified.is_ok(), "record {}: {verified:?}", original.key);
                let other_topic = trusted.verify(
                    "another-topic",
                    &original.payload,
                    header(signed, kadence_schemas::headers::SIGNATURE_KEY),
                    header(signed, kadence_schemas::headers::SIGNATURE),
                );
                assert!(other_topic.is_err(), "signed for its own topic only");
            }
        }
    }

    #[tokio::test]
    async fn signing_by_the_round_gives_every_record_the_rounds_signature_and_its_own_proof() {
        use kadence_schemas::headers::{ROUND_PROOF, ROUND_SIGNATURE, SIGNATURE, SIGNATURE_KEY};
        let key = RecordSigner::generate().unwrap();
        let trusted = TrustedKeys::new([key.public_key()]);
        let producer = SignedProducer::new(producer(), Arc::new(Signer::new(key)));
        // Records 2 and 5 are of an app whose executors verify records signed alone only.
        let records: Vec<OutgoingRecord> = (0..6)
            .map(|index| OutgoingRecord {
                topic: "kadence.triggers.app".to_owned(),
                key: index.to_string(),
                payload: format!("value {index}").into_bytes(),
                partition: Some(index % 2),
                route: None,
                sign_by_round: index % 3 != 2,
            })
            .collect();
        let signed = producer.sign_all(records.clone()).await;
        assert_eq!(signed.len(), records.len());
        let round = header(&signed[0], ROUND_SIGNATURE).expect("a round signature");
        for (original, signed) in records.iter().zip(&signed) {
            assert_eq!(signed.record().key, original.key, "order kept");
            if !original.sign_by_round {
                let alone = trusted.verify(
                    &original.topic,
                    &original.payload,
                    header(signed, SIGNATURE_KEY),
                    header(signed, SIGNATURE),
                );
                assert!(alone.is_ok(), "record {}: {alone:?}", original.key);
                assert!(header(signed, ROUND_SIGNATURE).is_none());
                continue;
            }
            assert_eq!(
                header(signed, ROUND_SIGNATURE),
                Some(round),
                "one signature"
            );
            assert!(header(signed, SIGNATURE).is_none());
            let verified = trusted.verify_round(
                RoundRecord {
                    topic: &original.topic,
                    partition: original.partition.unwrap(),
                    value: &original.payload,
                },
                header(signed, SIGNATURE_KEY),
                round,
                header(signed, ROUND_PROOF),
            );
            assert!(verified.is_ok(), "record {}: {verified:?}", original.key);
        }
        // A record without a partition (none comes from dispatch) is signed alone.
        let unplaced = OutgoingRecord {
            partition: None,
            ..records[0].clone()
        };
        let alone = producer.sign_all(vec![unplaced]).await;
        assert!(header(&alone[0], SIGNATURE).is_some());
        assert!(header(&alone[0], ROUND_SIGNATURE).is_none());
    }
}
