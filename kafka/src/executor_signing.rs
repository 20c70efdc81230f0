//! Executor keys: every record an executor writes (results, shadow results, log records,
//! beats, dead letters) carries an HMAC-SHA256 by a secret its app's executors share with the
//! scheduler, so that whoever can write `{p}.results` cannot complete another app's runs, nor
//! steer routing through `{p}.beats`. The scheduler makes the keys (one or more per app, for
//! rotations) and verifies every record it reads; `schemas/PROTOCOL.md` section 3 is the
//! contract.
//!
//! What is signed is `kadence-executor-v1\n{topic}\n{value bytes}`, as for triggers
//! ([`crate::signing`]) but with its own prefix, so a trigger signature and an executor
//! signature can never stand for each other. The record key and every other header are not
//! covered: the key only routes, and everything the scheduler acts on is in the value.
//!
//! Why an HMAC and not Ed25519 as for triggers: the scheduler verifies every result, log
//! record and beat, at the rate runs finish, and an HMAC over a small record costs it about a
//! microsecond where an Ed25519 verification costs about 35. The price is that the scheduler
//! holds the secrets (in its database, beside its own signing key, whose holder can already
//! do far more).
//!
//! - [`ExecutorKey`]: the key an executor is configured with (`{key id}.{secret}`), which
//!   signs ([`ExecutorKey::headers`]).
//! - [`verify_executor_record`]: the scheduler's check, given a lookup from key id to secret;
//!   it says why a record is refused ([`ExecutorAuthError`]).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD as BASE64_URL};
use hmac::{Hmac, Mac};
use kadence_schemas::headers;
use rand::TryRngCore as _;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use sha2::Sha256;

/// What every signed message starts with (its version: a new format gets a new prefix).
const DOMAIN: &[u8] = b"kadence-executor-v1\n";

/// Length of a key id: 16 lowercase hex digits (8 random bytes).
const KEY_ID_LEN: usize = 16;

/// The secret: 32 random bytes.
pub const SECRET_LEN: usize = 32;

/// The HMAC of `value` produced to `topic`, keyed with `secret`.
fn mac_of(secret: &[u8; SECRET_LEN], topic: &str, value: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(DOMAIN);
    mac.update(topic.as_bytes());
    mac.update(b"\n");
    mac.update(value);
    mac
}

/// An executor key text could not be read, or a key could not be made. The secret is never
/// repeated in the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecutorKeyError {
    /// The text is not `{16 lowercase hex}.{43 base64url characters}`.
    #[error(
        "invalid executor key: {reason} (expected `{{key id}}.{{secret}}`: 16 lowercase hex \
         digits, a dot, and the base64url of 32 bytes, as `kadence executor-key create` \
         prints it)"
    )]
    Invalid {
        /// What is wrong with it.
        reason: String,
    },
    /// The operating system gave no randomness for a new key.
    #[error("cannot generate an executor key: the operating system's random source failed: {0}")]
    Randomness(String),
}

/// Whether `text` is a key id: 16 lowercase hex digits.
pub fn is_key_id(text: &str) -> bool {
    text.len() == KEY_ID_LEN
        && text
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// The secret of an executor key from its base64url text (unpadded, as in the key text and as
/// the scheduler stores it).
pub fn decode_secret(text: &str) -> Result<[u8; SECRET_LEN], ExecutorKeyError> {
    let invalid = |reason: String| ExecutorKeyError::Invalid { reason };
    let bytes = BASE64_URL
        .decode(text)
        .map_err(|_| invalid("its secret is not unpadded base64url".to_owned()))?;
    <[u8; SECRET_LEN]>::try_from(bytes.as_slice())
        .map_err(|_| invalid(format!("its secret is {} bytes instead of 32", bytes.len())))
}

/// An executor key: its id and its secret. `Debug` shows only the id.
#[derive(Clone, PartialEq, Eq)]
pub struct ExecutorKey {
    key_id: String,
    secret: [u8; SECRET_LEN],
}

impl fmt::Debug for ExecutorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecutorKey")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl ExecutorKey {
    /// A new key from the operating system's random source.
    pub fn generate() -> Result<ExecutorKey, ExecutorKeyError> {
        let mut id = [0u8; KEY_ID_LEN / 2];
        let mut secret = [0u8; SECRET_LEN];
        let mut random = rand::rngs::OsRng;
        random
            .try_fill_bytes(&mut id)
            .and_then(|()| random.try_fill_bytes(&mut secret))
            .map_err(|error| ExecutorKeyError::Randomness(error.to_string()))?;
        let key_id = id.iter().map(|byte| format!("{byte:02x}")).collect();
        Ok(ExecutorKey { key_id, secret })
    }

    /// The key from its text, `{key id}.{secret}`.
    pub fn parse(text: &str) -> Result<ExecutorKey, ExecutorKeyError> {
        let invalid = |reason: &str| ExecutorKeyError::Invalid {
            reason: reason.to_owned(),
        };
        let (key_id, secret) = text
            .trim()
            .split_once('.')
            .ok_or_else(|| invalid("it has no dot between key id and secret"))?;
        if !is_key_id(key_id) {
            return Err(invalid("its key id is not 16 lowercase hex digits"));
        }
        Ok(ExecutorKey {
            key_id: key_id.to_owned(),
            secret: decode_secret(secret)?,
        })
    }

    /// The key id.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The secret in base64url (unpadded), for the scheduler's store. Never log it.
    pub fn secret_text(&self) -> String {
        BASE64_URL.encode(self.secret)
    }

    /// The whole key as executors are configured with it. Never log it.
    pub fn text(&self) -> String {
        format!("{}.{}", self.key_id, self.secret_text())
    }

    /// The signature of `value` produced to `topic`, base64.
    pub fn sign(&self, topic: &str, value: &[u8]) -> String {
        BASE64.encode(mac_of(&self.secret, topic, value).finalize().into_bytes())
    }

    /// `headers` (or none) with the key id and the signature of `value` produced to `topic`
    /// added.
    pub fn headers(
        &self,
        topic: &str,
        value: &[u8],
        headers: Option<OwnedHeaders>,
    ) -> OwnedHeaders {
        let signature = self.sign(topic, value);
        headers
            .unwrap_or_else(|| OwnedHeaders::new_with_capacity(2))
            .insert(Header {
                key: headers::EXECUTOR_KEY,
                value: Some(self.key_id.as_str()),
            })
            .insert(Header {
                key: headers::EXECUTOR_SIGNATURE,
                value: Some(signature.as_str()),
            })
    }
}

/// Why the scheduler refuses a record an executor wrote. `record` names it as the reason
/// should ("result record", "log record", "beat", …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecutorAuthError {
    /// No executor signature headers.
    #[error(
        "unsigned {record}: it has no kadence.executor headers, and this scheduler takes only \
         records signed with an executor key of their app (kadence executor-key create)"
    )]
    Unsigned {
        /// What the record is.
        record: &'static str,
    },
    /// Signed by a key the scheduler does not know (never made, or revoked).
    #[error(
        "{record} signed by unknown executor key {key_id}: never made, or revoked (kadence \
         executor-key list)"
    )]
    UnknownKey {
        /// What the record is.
        record: &'static str,
        /// The key id the record names.
        key_id: String,
    },
    /// The signature does not match.
    #[error(
        "bad executor signature on {record} by key {key_id}: changed after signing, copied \
         from another topic, or forged"
    )]
    BadSignature {
        /// What the record is.
        record: &'static str,
        /// The key id the record names.
        key_id: String,
    },
    /// A header is present but unreadable, or one of the two is missing.
    #[error("malformed executor signature header {header} on {record}: {reason}")]
    Malformed {
        /// What the record is.
        record: &'static str,
        /// The header.
        header: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

impl ExecutorAuthError {
    /// The kind of refusal in snake case, for metric labels.
    pub fn kind(&self) -> &'static str {
        match self {
            ExecutorAuthError::Unsigned { .. } => "unsigned",
            ExecutorAuthError::UnknownKey { .. } => "unknown_key",
            ExecutorAuthError::BadSignature { .. } => "bad_signature",
            ExecutorAuthError::Malformed { .. } => "malformed_signature",
        }
    }
}

/// The last header named `name` (as Kafka's `lastHeader` reads them), its value or empty.
fn last_header<'m, M: Message>(message: &'m M, name: &str) -> Option<&'m [u8]> {
    message.headers().and_then(|headers| {
        headers
            .iter()
            .filter(|header| header.key == name)
            .last()
            .map(|header| header.value.unwrap_or_default())
    })
}

/// Checks the executor signature of a consumed record, `record` naming it for the reasons.
/// `secret_of` gives the secret of a key id the scheduler knows, with what it is bound to
/// (the key's app). Returns `Ok(None)` for a record with neither header (the caller decides
/// whether unsigned records are taken), `Ok(Some(binding))` for a valid signature.
pub fn verify_executor_record<M: Message, B>(
    message: &M,
    record: &'static str,
    secret_of: impl FnOnce(&str) -> Option<([u8; SECRET_LEN], B)>,
) -> Result<Option<B>, ExecutorAuthError> {
    let malformed = |header: &'static str, reason: &str| ExecutorAuthError::Malformed {
        record,
        header,
        reason: reason.to_owned(),
    };
    let (key_id, signature) = match (
        last_header(message, headers::EXECUTOR_KEY),
        last_header(message, headers::EXECUTOR_SIGNATURE),
    ) {
        (None, None) => return Ok(None),
        (Some(_), None) => return Err(malformed(headers::EXECUTOR_SIGNATURE, "missing")),
        (None, Some(_)) => return Err(malformed(headers::EXECUTOR_KEY, "missing")),
        (Some(key_id), Some(signature)) => (key_id, signature),
    };
    let key_id = std::str::from_utf8(key_id)
        .ok()
        .filter(|key_id| is_key_id(key_id))
        .ok_or_else(|| malformed(headers::EXECUTOR_KEY, "not 16 lowercase hex digits"))?;
    let signature = BASE64
        .decode(signature)
        .map_err(|_| malformed(headers::EXECUTOR_SIGNATURE, "not base64"))?;
    let (secret, binding) = secret_of(key_id).ok_or_else(|| ExecutorAuthError::UnknownKey {
        record,
        key_id: key_id.to_owned(),
    })?;
    let value = message.payload().unwrap_or_default();
    // `verify_slice` compares in constant time.
    mac_of(&secret, message.topic(), value)
        .verify_slice(&signature)
        .map_err(|_| ExecutorAuthError::BadSignature {
            record,
            key_id: key_id.to_owned(),
        })?;
    Ok(Some(binding))
}

#[cfg(test)]
mod tests {
    use rdkafka::Timestamp;
    use rdkafka::message::OwnedMessage;

    use super::*;

    const VECTOR_KEY: &str = "0123456789abcdef.AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";
    const VECTOR_VALUE: &[u8] = &[0x00, 0x00, 0x00, 0x07, 0xd1, b'h', b'e', b'l', b'l', b'o'];

    fn message(topic: &str, value: &[u8], headers: Option<OwnedHeaders>) -> OwnedMessage {
        OwnedMessage::new(
            Some(value.to_vec()),
            Some(b"key".to_vec()),
            topic.to_owned(),
            Timestamp::NotAvailable,
            0,
            0,
            headers,
        )
    }

    fn lookup(key: &ExecutorKey) -> impl Fn(&str) -> Option<([u8; SECRET_LEN], &'static str)> {
        let (key_id, secret) = (key.key_id.clone(), key.secret);
        move |id: &str| (id == key_id).then_some((secret, "billing"))
    }

    #[test]
    fn the_protocol_test_vector_holds() {
        let key = ExecutorKey::parse(VECTOR_KEY).unwrap();
        assert_eq!(key.key_id(), "0123456789abcdef");
        assert_eq!(key.secret.to_vec(), (0..32).collect::<Vec<u8>>());
        assert_eq!(
            key.sign("kadence.results", VECTOR_VALUE),
            "NWdDj5mX85f2963FIKyZ1SaPJJgjDZmOPqgfu4HvdiI="
        );
        assert_eq!(key.text(), VECTOR_KEY);
    }

    #[test]
    fn a_signed_record_verifies_and_names_its_binding() {
        let key = ExecutorKey::generate().unwrap();
        let signed = message(
            "k.results",
            b"value",
            Some(key.headers("k.results", b"value", None)),
        );
        let verified = verify_executor_record(&signed, "result record", lookup(&key));
        assert_eq!(verified, Ok(Some("billing")));
        assert_eq!(ExecutorKey::parse(&key.text()).unwrap(), key);
    }

    #[test]
    fn a_changed_byte_another_topic_or_another_key_is_refused() {
        let key = ExecutorKey::generate().unwrap();
        let headers = key.headers("k.results", b"value", None);
        for (topic, value) in [("k.results", &b"valuE"[..]), ("k.beats", &b"value"[..])] {
            let copied = message(topic, value, Some(headers.clone()));
            let refused = verify_executor_record(&copied, "result record", lookup(&key));
            assert!(
                matches!(refused, Err(ExecutorAuthError::BadSignature { .. })),
                "{refused:?}"
            );
        }
        let other = ExecutorKey::generate().unwrap();
        let signed = message(
            "k.results",
            b"value",
            Some(other.headers("k.results", b"value", None)),
        );
        let refused = verify_executor_record(&signed, "beat", lookup(&key)).unwrap_err();
        assert_eq!(refused.kind(), "unknown_key");
        assert!(
            refused
                .to_string()
                .starts_with("beat signed by unknown executor key"),
            "{refused}"
        );
    }

    #[test]
    fn unsigned_half_signed_and_malformed_records_say_which() {
        let key = ExecutorKey::generate().unwrap();
        let unsigned = message("k.results", b"v", None);
        assert_eq!(
            verify_executor_record(&unsigned, "log record", lookup(&key)),
            Ok(None)
        );
        let half = OwnedHeaders::new().insert(Header {
            key: headers::EXECUTOR_KEY,
            value: Some(key.key_id()),
        });
        let refused = verify_executor_record(
            &message("k.results", b"v", Some(half)),
            "beat",
            lookup(&key),
        );
        assert!(
            matches!(&refused, Err(ExecutorAuthError::Malformed { header, .. }) if *header == headers::EXECUTOR_SIGNATURE),
            "{refused:?}"
        );
        let upper = OwnedHeaders::new()
            .insert(Header {
                key: headers::EXECUTOR_KEY,
                value: Some("0123456789ABCDEF"),
            })
            .insert(Header {
                key: headers::EXECUTOR_SIGNATURE,
                value: Some("AAAA"),
            });
        let refused = verify_executor_record(
            &message("k.results", b"v", Some(upper)),
            "beat",
            lookup(&key),
        );
        assert_eq!(refused.unwrap_err().kind(), "malformed_signature");
    }

    #[test]
    fn bad_key_texts_are_refused_without_repeating_the_secret() {
        let secret = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";
        for text in [
            format!("0123456789abcde.{secret}"),
            format!("0123456789ABCDEF.{secret}"),
            format!("0123456789abcdef{secret}"),
            format!("0123456789abcdef.{}", &secret[..40]),
            format!("0123456789abcdef.{secret}AAAA"),
            format!("0123456789abcdef.{}", secret.replace('A', "+")),
        ] {
            let error = ExecutorKey::parse(&text).unwrap_err().to_string();
            assert!(error.starts_with("invalid executor key: "), "{error}");
            assert!(!error.contains(&secret[4..20]), "{error}");
        }
        let debug = format!("{:?}", ExecutorKey::parse(VECTOR_KEY).unwrap());
        assert!(!debug.contains("AAEC"), "{debug}");
    }
}
