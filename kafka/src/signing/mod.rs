//! Signed records: the scheduler signs every trigger and control record it produces with
//! Ed25519, and executors that trust its public key verify each one before reading it, so a
//! record someone else wrote to the topic never runs.
//!
//! What is signed is not the value alone but
//! `kadence-trigger-v1\n{topic}\n{value bytes}`: the prefix separates these signatures from
//! any other use of the key, and the topic binds a record to the topic it was produced to, so
//! a genuine trigger of one app copied onto another app's topic (or onto the control topic)
//! fails verification. The key (job id or app) and the partition are not signed: they only
//! route, and everything a run depends on is in the value.
//!
//! Two headers carry the signature ([`headers::SIGNATURE_KEY`], [`headers::SIGNATURE`]):
//! the key id, and the signature in base64. The key id is the first 8 bytes of the SHA-256
//! of the 32-byte public key, as 16 hex digits: derived from the key itself, so scheduler and
//! executors agree on it without any registry, and one public key always has the same id.
//! Public keys are exchanged as the base64 (standard, padded) of their 32 raw bytes.
//!
//! A trigger may instead be signed with the other records of its dispatch round: one
//! signature over the round's Merkle root, and the record's own proof of inclusion
//! ([`rounds`] has the format and why). Executors accept both forms; a record with a
//! `kadence.signature.round` header is checked as round-signed.
//!
//! - [`RecordSigner`]: a private key, signing records ([`RecordSigner::headers`]) or a
//!   round of them ([`RecordSigner::round_headers`]).
//! - [`PublicKey`]: a public key parsed from its base64 form, with its id.
//! - [`TrustedKeys`]: the keys an executor accepts (several during a rotation), and
//!   [`TrustedKeys::verify_message`], which says why a record is refused ([`VerifyError`]).

mod rounds;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use kadence_schemas::headers;
use rand::TryRngCore as _;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use sha2::{Digest, Sha256};

pub use rounds::{ROUND_SIGNATURE_LEN, RoundRecord};
use rounds::{RoundProof, RoundSignature, VerifiedRounds, sign_round};

/// What every signed message starts with (its version: a new format gets a new prefix).
const DOMAIN: &[u8] = b"kadence-trigger-v1\n";

/// The bytes a record's signature covers: domain, topic, value.
fn signed_message(topic: &str, value: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(DOMAIN.len() + topic.len() + 1 + value.len());
    message.extend_from_slice(DOMAIN);
    message.extend_from_slice(topic.as_bytes());
    message.push(b'\n');
    message.extend_from_slice(value);
    message
}

/// The id of a public key: the first 8 bytes of its SHA-256, as 16 hex digits.
pub fn key_id(public_key: &[u8; 32]) -> String {
    let digest = Sha256::digest(public_key);
    digest[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// A key could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The operating system gave no randomness for a new key.
    #[error("cannot generate a signing key: the operating system's random source failed: {0}")]
    Randomness(String),
    /// A key's text is not base64 of 32 bytes, or not an Ed25519 point.
    #[error(
        "invalid Ed25519 {what} key {text:?}: {reason} (expected the base64 of its 32 bytes, \
         as `kadence key list` shows public keys)"
    )]
    Invalid {
        /// "public" or "private".
        what: &'static str,
        /// The text as given (public keys only; a private key's text is never repeated).
        text: String,
        /// Why it is not one.
        reason: String,
    },
}

/// 32 bytes from their base64 text.
fn decode_32(text: &str, what: &'static str, shown: &str) -> Result<[u8; 32], KeyError> {
    let invalid = |reason: String| KeyError::Invalid {
        what,
        text: shown.to_owned(),
        reason,
    };
    let bytes = BASE64
        .decode(text.trim())
        .map_err(|error| invalid(format!("not base64: {error}")))?;
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| invalid(format!("{} bytes instead of 32", bytes.len())))
}

/// A private signing key and its id. Its `Debug` shows only the id.
#[derive(Clone)]
pub struct RecordSigner {
    key: SigningKey,
    key_id: String,
}

impl fmt::Debug for RecordSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordSigner")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl RecordSigner {
    /// A new key from the operating system's random source.
    pub fn generate() -> Result<RecordSigner, KeyError> {
        let mut secret = [0u8; 32];
        rand::rngs::OsRng
            .try_fill_bytes(&mut secret)
            .map_err(|error| KeyError::Randomness(error.to_string()))?;
        Ok(RecordSigner::from_bytes(&secret))
    }

    /// The key whose 32 secret bytes are `secret`.
    pub fn from_bytes(secret: &[u8; 32]) -> RecordSigner {
        let key = SigningKey::from_bytes(secret);
        let key_id = key_id(key.verifying_key().as_bytes());
        RecordSigner { key, key_id }
    }

    /// The key whose secret bytes are base64 `text` (as [`private_base64`](Self::private_base64)
    /// wrote them).
    pub fn from_base64(text: &str) -> Result<RecordSigner, KeyError> {
        decode_32(text, "private", "<hidden>").map(|secret| RecordSigner::from_bytes(&secret))
    }

    /// The secret bytes in base64, for storing the key. Never log it.
    pub fn private_base64(&self) -> String {
        BASE64.encode(self.key.to_bytes())
    }

    /// The key id.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The public half.
    pub fn public_key(&self) -> PublicKey {
        PublicKey {
            key: self.key.verifying_key(),
            key_id: self.key_id.clone(),
        }
    }

    /// The signature of `value` produced to `topic`.
    pub fn sign(&self, topic: &str, value: &[u8]) -> Signature {
        self.key.sign(&signed_message(topic, value))
    }

    /// The headers of a record with `value` produced to `topic`: the key id and the signature.
    pub fn headers(&self, topic: &str, value: &[u8]) -> OwnedHeaders {
        let signature = BASE64.encode(self.sign(topic, value).to_bytes());
        OwnedHeaders::new_with_capacity(2)
            .insert(Header {
                key: headers::SIGNATURE_KEY,
                value: Some(self.key_id.as_str()),
            })
            .insert(Header {
                key: headers::SIGNATURE,
                value: Some(signature.as_str()),
            })
    }
}

impl RecordSigner {
    /// The headers of each of `records`, signed as one round (in their order): the key id,
    /// the round's signature and the record's proof of inclusion. No records, no signature.
    pub fn round_headers(&self, records: &[RoundRecord<'_>]) -> Vec<OwnedHeaders> {
        if records.is_empty() {
            return Vec::new();
        }
        let round = sign_round(&self.key, records);
        round
            .proofs
            .iter()
            .map(|proof| {
                OwnedHeaders::new_with_capacity(3)
                    .insert(Header {
                        key: headers::SIGNATURE_KEY,
                        value: Some(self.key_id.as_str()),
                    })
                    .insert(Header {
                        key: headers::ROUND_SIGNATURE,
                        value: Some(round.signature.as_slice()),
                    })
                    .insert(Header {
                        key: headers::ROUND_PROOF,
                        value: Some(proof.as_slice()),
                    })
            })
            .collect()
    }
}

/// A public key, as executors are configured with it.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    key: VerifyingKey,
    key_id: String,
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({} {})", self.key_id, self.to_base64())
    }
}

impl PublicKey {
    /// The key whose 32 bytes are base64 `text` (what `kadence key list` shows).
    pub fn parse(text: &str) -> Result<PublicKey, KeyError> {
        let bytes = decode_32(text, "public", text)?;
        let key = VerifyingKey::from_bytes(&bytes).map_err(|error| KeyError::Invalid {
            what: "public",
            text: text.to_owned(),
            reason: error.to_string(),
        })?;
        Ok(PublicKey {
            key_id: key_id(&bytes),
            key,
        })
    }

    /// The key's 32 bytes in base64.
    pub fn to_base64(&self) -> String {
        BASE64.encode(self.key.as_bytes())
    }

    /// The key id.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }
}

/// Why a record was refused: it names what was wrong, for the dead-letter reason and logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// No signature headers at all.
    #[error(
        "unsigned record: it has no kadence.signature headers, and this executor runs only \
         records signed by a trusted scheduler key"
    )]
    Unsigned,
    /// Signed by a key this executor does not trust.
    #[error(
        "signed by unknown key {key_id}: not one of this executor's trusted keys (forged, or \
         signed by a newer scheduler key: add its public key from `kadence key list`)"
    )]
    UnknownKey {
        /// The key id the record names.
        key_id: String,
    },
    /// The signature does not match the record.
    #[error(
        "bad signature by key {key_id}: the record was changed after signing, copied from \
         another topic, or forged"
    )]
    BadSignature {
        /// The key id the record names.
        key_id: String,
    },
    /// A round-signed record whose proof does not lead to its round's root.
    #[error(
        "bad round proof by key {key_id}: the record was changed after signing, moved to \
         another topic or partition, or forged"
    )]
    BadProof {
        /// The key id the record names.
        key_id: String,
    },
    /// A signature header is present but unreadable.
    #[error("malformed signature header {header}: {reason}")]
    Malformed {
        /// The header.
        header: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// The public keys an executor accepts, by key id. Several during a key rotation: the
/// scheduler signs with its newest key, and every key here is accepted.
#[derive(Clone, Default)]
pub struct TrustedKeys {
    keys: HashMap<String, VerifyingKey>,
    /// Round signatures checked already, shared by the clones.
    verified_rounds: Arc<VerifiedRounds>,
}

impl fmt::Debug for TrustedKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids: Vec<&String> = self.keys.keys().collect();
        ids.sort();
        f.debug_tuple("TrustedKeys").field(&ids).finish()
    }
}

impl TrustedKeys {
    /// Trusts `keys`.
    pub fn new(keys: impl IntoIterator<Item = PublicKey>) -> TrustedKeys {
        TrustedKeys {
            keys: keys.into_iter().map(|key| (key.key_id, key.key)).collect(),
            verified_rounds: Arc::default(),
        }
    }

    /// Whether no key is trusted (records are then not verified at all).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The trusted key ids, sorted.
    pub fn key_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.keys.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }

    /// Checks the signature of a consumed record against its own topic, value and headers;
    /// returns the id of the key that signed it.
    pub fn verify_message<M: Message>(&self, message: &M) -> Result<String, VerifyError> {
        let header = |name: &str| {
            message.headers().and_then(|headers| {
                // The last one wins, as Kafka's own `lastHeader` reads them.
                headers
                    .iter()
                    .filter(|header| header.key == name)
                    .last()
                    .map(|header| header.value.unwrap_or_default())
            })
        };
        let value = message.payload().unwrap_or_default();
        match header(headers::ROUND_SIGNATURE) {
            Some(round) => self.verify_round(
                RoundRecord {
                    topic: message.topic(),
                    partition: message.partition(),
                    value,
                },
                header(headers::SIGNATURE_KEY),
                round,
                header(headers::ROUND_PROOF),
            ),
            None => self.verify(
                message.topic(),
                value,
                header(headers::SIGNATURE_KEY),
                header(headers::SIGNATURE),
            ),
        }
    }

    /// Checks a round-signed `record`: key `key_id` signed `round` (the
    /// `kadence.signature.round` header's bytes), and `proof` shows the record in it. In
    /// this order: the key id, the two headers' shapes, the proof, the round's signature
    /// (checked once per round, see [`rounds`]).
    pub fn verify_round(
        &self,
        record: RoundRecord<'_>,
        key_id: Option<&[u8]>,
        round: &[u8],
        proof: Option<&[u8]>,
    ) -> Result<String, VerifyError> {
        let key_id = key_id.ok_or_else(|| missing(headers::SIGNATURE_KEY))?;
        let (key_id, key) = self.trusted(key_id)?;
        let round = RoundSignature::parse(round)
            .map_err(|reason| malformed(headers::ROUND_SIGNATURE, reason))?;
        let proof = proof.ok_or_else(|| {
            malformed(
                headers::ROUND_PROOF,
                format!("missing while {} is there", headers::ROUND_SIGNATURE),
            )
        })?;
        let proof =
            RoundProof::parse(proof).map_err(|reason| malformed(headers::ROUND_PROOF, reason))?;
        if !round.includes(&record, &proof) {
            return Err(VerifyError::BadProof {
                key_id: key_id.to_owned(),
            });
        }
        if !self.verified_rounds.signed_by(key, &round) {
            return Err(VerifyError::BadSignature {
                key_id: key_id.to_owned(),
            });
        }
        Ok(key_id.to_owned())
    }

    /// The key id of a header's bytes, and the trusted key it names.
    fn trusted<'a>(&self, key_id: &'a [u8]) -> Result<(&'a str, &VerifyingKey), VerifyError> {
        let key_id = std::str::from_utf8(key_id)
            .map_err(|_| malformed(headers::SIGNATURE_KEY, "not UTF-8 text".to_owned()))?;
        let key = self
            .keys
            .get(key_id)
            .ok_or_else(|| VerifyError::UnknownKey {
                key_id: printable(key_id),
            })?;
        Ok((key_id, key))
    }

    /// Checks `signature` (the header's bytes) by key `key_id` over `value` on `topic`.
    pub fn verify(
        &self,
        topic: &str,
        value: &[u8],
        key_id: Option<&[u8]>,
        signature: Option<&[u8]>,
    ) -> Result<String, VerifyError> {
        let (key_id, signature) = match (key_id, signature) {
            (None, None) => return Err(VerifyError::Unsigned),
            (Some(_), None) => return Err(missing(headers::SIGNATURE)),
            (None, Some(_)) => return Err(missing(headers::SIGNATURE_KEY)),
            (Some(key_id), Some(signature)) => (key_id, signature),
        };
        let (key_id, key) = self.trusted(key_id)?;
        let bytes = BASE64
            .decode(signature)
            .map_err(|error| malformed(headers::SIGNATURE, format!("not base64: {error}")))?;
        let bytes = <[u8; 64]>::try_from(bytes.as_slice()).map_err(|_| {
            malformed(
                headers::SIGNATURE,
                format!("{} bytes instead of 64", bytes.len()),
            )
        })?;
        key.verify_strict(
            &signed_message(topic, value),
            &Signature::from_bytes(&bytes),
        )
        .map_err(|_| VerifyError::BadSignature {
            key_id: key_id.to_owned(),
        })?;
        Ok(key_id.to_owned())
    }
}

fn missing(header: &'static str) -> VerifyError {
    malformed(
        header,
        "missing while the other signature header is there".to_owned(),
    )
}

fn malformed(header: &'static str, reason: String) -> VerifyError {
    VerifyError::Malformed { header, reason }
}

/// A key id from a record, made safe to log: at most 64 characters, no control characters.
fn printable(key_id: &str) -> String {
    key_id
        .chars()
        .take(64)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use rdkafka::Timestamp;
    use rdkafka::message::OwnedMessage;

    use super::*;

    const TOPIC: &str = "kadence.triggers.billing";

    fn message(topic: &str, value: &[u8], headers: Option<OwnedHeaders>) -> OwnedMessage {
        OwnedMessage::new(
            Some(value.to_vec()),
            Some(b"12".to_vec()),
            topic.to_owned(),
            Timestamp::NotAvailable,
            0,
            7,
            headers,
        )
    }

    fn trusting(signer: &RecordSigner) -> TrustedKeys {
        TrustedKeys::new([PublicKey::parse(&signer.public_key().to_base64()).unwrap()])
    }

    #[test]
    fn a_signed_record_verifies_with_its_key_id() {
        let signer = RecordSigner::generate().unwrap();
        let value = b"\0\0\0\0\x01trigger bytes";
        let record = message(TOPIC, value, Some(signer.headers(TOPIC, value)));
        assert_eq!(
            trusting(&signer).verify_message(&record),
            Ok(signer.key_id().to_owned())
        );
        assert_eq!(signer.key_id().len(), 16);
        assert!(signer.key_id().bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn a_changed_byte_or_another_topic_breaks_the_signature() {
        let signer = RecordSigner::generate().unwrap();
        let trusted = trusting(&signer);
        let value = b"params=eu".to_vec();
        let headers = signer.headers(TOPIC, &value);
        let mut tampered = value.clone();
        tampered[7] ^= 1;
        let bad = VerifyError::BadSignature {
            key_id: signer.key_id().to_owned(),
        };
        assert_eq!(
            trusted.verify_message(&message(TOPIC, &tampered, Some(headers.clone()))),
            Err(bad.clone())
        );
        let elsewhere = message("kadence.triggers.other", &value, Some(headers));
        assert_eq!(trusted.verify_message(&elsewhere), Err(bad));
    }

    #[test]
    fn unsigned_and_unknown_keys_are_refused() {
        let trusted = trusting(&RecordSigner::generate().unwrap());
        assert_eq!(
            trusted.verify_message(&message(TOPIC, b"v", None)),
            Err(VerifyError::Unsigned)
        );
        assert_eq!(
            trusted.verify_message(&message(TOPIC, b"v", Some(OwnedHeaders::new()))),
            Err(VerifyError::Unsigned)
        );
        let stranger = RecordSigner::generate().unwrap();
        let forged = message(TOPIC, b"v", Some(stranger.headers(TOPIC, b"v")));
        let refused = trusted.verify_message(&forged).unwrap_err();
        assert_eq!(
            refused,
            VerifyError::UnknownKey {
                key_id: stranger.key_id().to_owned()
            }
        );
        assert!(refused.to_string().starts_with("signed by unknown key "));
    }

    #[test]
    fn malformed_headers_say_which_and_why() {
        let signer = RecordSigner::generate().unwrap();
        let trusted = trusting(&signer);
        let with = |pairs: &[(&str, &[u8])]| {
            let mut headers = OwnedHeaders::new();
            for (key, value) in pairs {
                headers = headers.insert(Header {
                    key,
                    value: Some(*value),
                });
            }
            trusted.verify_message(&message(TOPIC, b"v", Some(headers)))
        };
        let id = signer.key_id().as_bytes();
        let only_key = with(&[(headers::SIGNATURE_KEY, id)]).unwrap_err();
        assert!(
            matches!(&only_key, VerifyError::Malformed { header, .. } if *header == headers::SIGNATURE),
            "{only_key}"
        );
        let not_base64 = with(&[(headers::SIGNATURE_KEY, id), (headers::SIGNATURE, b"%%")]);
        assert!(
            matches!(&not_base64, Err(VerifyError::Malformed { reason, .. }) if reason.starts_with("not base64")),
            "{not_base64:?}"
        );
        let short = with(&[(headers::SIGNATURE_KEY, id), (headers::SIGNATURE, b"AAAA")]);
        assert_eq!(
            short.unwrap_err().to_string(),
            "malformed signature header kadence.signature: 3 bytes instead of 64"
        );
        let binary_id = with(&[
            (headers::SIGNATURE_KEY, b"\xff"),
            (headers::SIGNATURE, b"x"),
        ]);
        assert!(
            matches!(&binary_id, Err(VerifyError::Malformed { header, .. }) if *header == headers::SIGNATURE_KEY)
        );
    }

    /// The records of a round of seven triggers over three partitions, and their values.
    fn seven_values() -> Vec<Vec<u8>> {
        (0..7)
            .map(|i| format!("trigger {i}").into_bytes())
            .collect()
    }

    fn round_of(values: &[Vec<u8>]) -> Vec<RoundRecord<'_>> {
        values
            .iter()
            .enumerate()
            .map(|(i, value)| RoundRecord {
                topic: TOPIC,
                partition: (i % 3) as i32,
                value,
            })
            .collect()
    }

    /// `record` as consumed from where it was produced, with `headers`.
    fn consumed(record: &RoundRecord<'_>, headers: &OwnedHeaders) -> OwnedMessage {
        OwnedMessage::new(
            Some(record.value.to_vec()),
            None,
            record.topic.to_owned(),
            Timestamp::NotAvailable,
            record.partition,
            7,
            Some(headers.clone()),
        )
    }

    fn header_bytes<'a>(headers: &'a OwnedHeaders, name: &str) -> &'a [u8] {
        headers
            .iter()
            .find(|header| header.key == name)
            .and_then(|header| header.value)
            .expect("the header")
    }

    /// `headers` with `name`'s value replaced by `value` (or left out, `None`).
    fn replaced(headers: &OwnedHeaders, name: &str, value: Option<&[u8]>) -> OwnedHeaders {
        let mut changed = OwnedHeaders::new();
        for header in headers.iter() {
            let value = if header.key == name {
                match value {
                    Some(value) => Some(value),
                    None => continue,
                }
            } else {
                header.value
            };
            changed = changed.insert(Header {
                key: header.key,
                value,
            });
        }
        changed
    }

    #[test]
    fn each_record_of_a_round_verifies_alone_and_in_any_order() {
        let signer = RecordSigner::generate().unwrap();
        let values = seven_values();
        let records = round_of(&values);
        let headers = signer.round_headers(&records);
        let shared = trusting(&signer);
        for (record, headers) in records.iter().zip(&headers).rev() {
            let message = consumed(record, headers);
            // Alone: an executor that saw no other record of the round.
            assert_eq!(
                trusting(&signer).verify_message(&message),
                Ok(signer.key_id().to_owned())
            );
            // After others: the round's signature is remembered, the proof still checked.
            assert_eq!(
                shared.verify_message(&message),
                Ok(signer.key_id().to_owned())
            );
        }
        assert_eq!(
            header_bytes(&headers[0], headers::ROUND_SIGNATURE).len(),
            ROUND_SIGNATURE_LEN
        );
        // Seven leaves: an index and three hashes.
        assert_eq!(
            header_bytes(&headers[0], headers::ROUND_PROOF).len(),
            8 + 3 * 32
        );
        assert!(signer.round_headers(&[]).is_empty());
        let lone = signer.round_headers(&records[..1]);
        assert_eq!(header_bytes(&lone[0], headers::ROUND_PROOF).len(), 8);
        assert!(
            shared
                .verify_message(&consumed(&records[0], &lone[0]))
                .is_ok()
        );
    }

    #[test]
    fn a_round_record_changed_moved_or_given_another_proof_is_refused() {
        let signer = RecordSigner::generate().unwrap();
        let trusted = trusting(&signer);
        let values = seven_values();
        let records = round_of(&values);
        let headers = signer.round_headers(&records);
        let bad_proof = Err(VerifyError::BadProof {
            key_id: signer.key_id().to_owned(),
        });
        let record = records[4];
        assert!(
            trusted
                .verify_message(&consumed(&record, &headers[4]))
                .is_ok()
        );
        let other_partition = RoundRecord {
            partition: 0,
            ..record
        };
        assert_eq!(
            trusted.verify_message(&consumed(&other_partition, &headers[4])),
            bad_proof
        );
        let other_topic = RoundRecord {
            topic: "kadence.triggers.other",
            ..record
        };
        assert_eq!(
            trusted.verify_message(&consumed(&other_topic, &headers[4])),
            bad_proof
        );
        let mut changed = record.value.to_vec();
        changed[0] ^= 1;
        let changed = RoundRecord {
            value: &changed,
            ..record
        };
        assert_eq!(
            trusted.verify_message(&consumed(&changed, &headers[4])),
            bad_proof
        );
        // Another record's proof, and this record's proof with one bit of its path flipped.
        assert_eq!(
            trusted.verify_message(&consumed(&record, &headers[5])),
            bad_proof
        );
        let mut tampered = header_bytes(&headers[4], headers::ROUND_PROOF).to_vec();
        tampered[20] ^= 1;
        let tampered = replaced(&headers[4], headers::ROUND_PROOF, Some(&tampered));
        assert_eq!(
            trusted.verify_message(&consumed(&record, &tampered)),
            bad_proof
        );
    }

    #[test]
    fn a_round_signed_by_another_key_or_with_its_signature_changed_is_refused() {
        let retired = RecordSigner::generate().unwrap();
        let newest = RecordSigner::generate().unwrap();
        let values = seven_values();
        let records = round_of(&values);
        // After a rotation the executor trusts the newest key only.
        let old_round = retired.round_headers(&records);
        let refused = trusting(&newest)
            .verify_message(&consumed(&records[2], &old_round[2]))
            .unwrap_err();
        assert_eq!(
            refused,
            VerifyError::UnknownKey {
                key_id: retired.key_id().to_owned()
            }
        );
        // A signature byte flipped fails even once the genuine round was checked.
        let trusted = trusting(&newest);
        let headers = newest.round_headers(&records);
        assert!(
            trusted
                .verify_message(&consumed(&records[2], &headers[2]))
                .is_ok()
        );
        let mut forged = header_bytes(&headers[2], headers::ROUND_SIGNATURE).to_vec();
        forged[ROUND_SIGNATURE_LEN - 1] ^= 1;
        let forged = replaced(&headers[2], headers::ROUND_SIGNATURE, Some(&forged));
        assert_eq!(
            trusted.verify_message(&consumed(&records[2], &forged)),
            Err(VerifyError::BadSignature {
                key_id: newest.key_id().to_owned()
            })
        );
        // A round whose root the forger chose: the proofs lead elsewhere.
        let mut other_root = header_bytes(&headers[2], headers::ROUND_SIGNATURE).to_vec();
        other_root[8] ^= 1;
        let other_root = replaced(&headers[2], headers::ROUND_SIGNATURE, Some(&other_root));
        assert_eq!(
            trusted.verify_message(&consumed(&records[2], &other_root)),
            Err(VerifyError::BadProof {
                key_id: newest.key_id().to_owned()
            })
        );
    }

    #[test]
    fn malformed_round_headers_say_which_and_why() {
        let signer = RecordSigner::generate().unwrap();
        let trusted = trusting(&signer);
        let values = seven_values();
        let records = round_of(&values);
        let headers = signer.round_headers(&records);
        let refusal = |headers: OwnedHeaders| {
            trusted
                .verify_message(&consumed(&records[1], &headers))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            refusal(replaced(
                &headers[1],
                headers::ROUND_SIGNATURE,
                Some(b"short")
            )),
            "malformed signature header kadence.signature.round: 5 bytes instead of 104"
        );
        assert_eq!(
            refusal(replaced(&headers[1], headers::ROUND_PROOF, None)),
            "malformed signature header kadence.signature.proof: missing while \
             kadence.signature.round is there"
        );
        assert_eq!(
            refusal(replaced(&headers[1], headers::ROUND_PROOF, Some(&[0; 9]))),
            "malformed signature header kadence.signature.proof: 9 bytes, not an 8-byte index \
             and 32-byte hashes"
        );
        assert_eq!(
            refusal(replaced(&headers[1], headers::SIGNATURE_KEY, None)),
            "malformed signature header kadence.signature.key: missing while the other \
             signature header is there"
        );
    }

    #[test]
    fn keys_round_trip_through_base64_and_bad_text_is_refused() {
        let signer = RecordSigner::generate().unwrap();
        let again = RecordSigner::from_base64(&signer.private_base64()).unwrap();
        assert_eq!(again.key_id(), signer.key_id());
        let public = signer.public_key();
        assert_eq!(PublicKey::parse(&public.to_base64()).unwrap(), public);
        assert_eq!(public.key_id(), key_id(public.key.as_bytes()));
        let error = PublicKey::parse("c2hvcnQ=").unwrap_err().to_string();
        assert!(error.contains("5 bytes instead of 32"), "{error}");
        assert!(PublicKey::parse("not base64!").is_err());
        let hidden = RecordSigner::from_base64("c2VjcmV0")
            .unwrap_err()
            .to_string();
        assert!(!hidden.contains("c2VjcmV0"), "{hidden}");
        assert!(!format!("{signer:?}").contains(&signer.private_base64()));
    }
}
