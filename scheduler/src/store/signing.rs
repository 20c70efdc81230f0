//! The signing keys' half of the store: [`SigningKeys`], which every [`Store`](super::Store)
//! also implements (table `signing_keys`).
//!
//! The keys live in the database so that every scheduler node signs with the same key and a
//! rotation reaches all of them: each node reads the newest active key every
//! `signing.key_refresh_interval` (see [`crate::engine::signer`]). "Newest" is the highest row id
//! among the keys not retired, so two keys made in the same millisecond still have an order.
//!
//! The private key is stored as text (base64 of its 32 bytes) beside the public one: whoever
//! can read this table can sign triggers, so database access must be guarded like the
//! scheduler itself. The store only moves the text; making and reading keys is
//! `kadence_kafka::signing`'s.
//!
//! Every change of the key set (the first key, a rotation, a retirement) runs in a write
//! transaction that first updates the `signing_keys` row of `schedule_lock`: PostgreSQL
//! then serialises such changes between nodes (SQLite's write lock already does), so two
//! nodes starting at once on an empty table make one key, and two retirements at once cannot
//! leave no active key.

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::StoreError;

/// A key to record: made by the caller, text only.
#[derive(Debug, Clone)]
pub struct NewSigningKey {
    /// Its id (16 hex digits derived from the public key).
    pub key_id: String,
    /// The public key, base64 of its 32 bytes.
    pub public_key: String,
    /// The private key, base64 of its 32 bytes. Never logged.
    pub private_key: SecretString,
}

/// A signing key as listed: everything but the private half.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningKeyInfo {
    /// Its id, as the `kadence.signature.key` header names it.
    pub key_id: String,
    /// The public key executors are configured with (base64 of its 32 bytes).
    pub public_key: String,
    /// When it was made, ms since the epoch.
    pub created_at_ms: i64,
    /// When it was retired (no node signs with it any more), ms; `None` while active.
    pub retired_at_ms: Option<i64>,
}

/// A signing key with its private half, for the nodes that sign with it.
#[derive(Debug, Clone)]
pub struct StoredSigningKey {
    /// What is listed of it.
    pub info: SigningKeyInfo,
    /// The private key, base64 of its 32 bytes. Never logged.
    pub private_key: SecretString,
}

/// What a retirement did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetireOutcome {
    /// Retired now.
    Retired(SigningKeyInfo),
    /// It was retired already (nothing changed).
    AlreadyRetired(SigningKeyInfo),
    /// Refused: it is the only active key, and the scheduler must always have one to sign
    /// with. Rotate first.
    OnlyActiveKey,
    /// No key has this id.
    NotFound,
}

/// The keys the scheduler signs triggers and control records with.
#[async_trait::async_trait]
pub trait SigningKeys: Send + Sync {
    /// The newest active key; if there is none (a first start), records `candidate` and
    /// returns it. Several nodes calling this at once on an empty table record one key, and
    /// all of them get it.
    async fn ensure_signing_key(
        &self,
        candidate: &NewSigningKey,
        now_ms: i64,
    ) -> Result<StoredSigningKey, StoreError>;

    /// Records `key` as the newest: every node signs with it from its next refresh on.
    async fn add_signing_key(
        &self,
        key: &NewSigningKey,
        now_ms: i64,
    ) -> Result<SigningKeyInfo, StoreError>;

    /// The newest active key, the one every node signs with.
    async fn newest_signing_key(&self) -> Result<Option<StoredSigningKey>, StoreError>;

    /// Every key, retired ones included, newest first.
    async fn list_signing_keys(&self) -> Result<Vec<SigningKeyInfo>, StoreError>;

    /// Retires key `key_id`, unless it is the only active one.
    async fn retire_signing_key(
        &self,
        key_id: &str,
        now_ms: i64,
    ) -> Result<RetireOutcome, StoreError>;
}
