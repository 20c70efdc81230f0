//! Signing trigger records by the round: one Ed25519 signature over the Merkle root of the
//! records of a dispatch round, and each record carrying that signature and its own inclusion
//! proof, so that it is still checked alone, on its partition, by an executor that reads no
//! other record of the round.
//!
//! Why: an Ed25519 signature costs the scheduler about 13–20 µs and an executor about 35–50
//! µs to check, once per trigger, more than everything else either of them does for a no-op
//! run. A round's records share one signature: the scheduler signs once per round, and an
//! executor checks a round's signature once and remembers it ([`VerifiedRounds`]); for every
//! other record of the round it hashes the record and its proof, a few microseconds. The
//! alternative measured beside it (a signed manifest per partition, `benches/batch_signatures.rs`)
//! was cheaper still per record, but a record is then checked only with its manifest in hand,
//! which an executor reading from an offset in the middle of a partition does not have.
//!
//! The tree is RFC 6962's Merkle Tree Hash over SHA-256 (leaves prefixed `0x00`, nodes
//! `0x01`), built and proved with `ct-merkle`; a proof is RFC 9162's inclusion path, so an
//! implementation in another language follows those RFCs. A leaf is a record where it was
//! produced:
//!
//! ```text
//! leaf   = SHA-256(0x00 || "kadence-trigger-leaf-v1\n" || topic || "\n" || partition (decimal) || "\n" || value)
//! signed = "kadence-trigger-round-v1\n" || size (u64 big-endian) || root (32 bytes)
//! ```
//!
//! The partition is part of the leaf (a record signed alone binds only its topic): the
//! scheduler picks every trigger's partition before it signs, so a genuine trigger copied to
//! another partition of the same topic, where another executor owns it, fails too.
//!
//! Headers ([`headers::ROUND_SIGNATURE`], [`headers::ROUND_PROOF`]; bytes, not text, since a
//! proof is a few hundred of them):
//! - `kadence.signature.round`: size (8 bytes, big-endian), root (32), signature (64): 104
//!   bytes, the same on every record of the round;
//! - `kadence.signature.proof`: the record's index in the round (8 bytes, big-endian), then
//!   the proof's hashes, 32 bytes each (⌈log₂ size⌉ of them at most).
//!
//! [`headers::ROUND_SIGNATURE`]: kadence_schemas::headers::ROUND_SIGNATURE
//! [`headers::ROUND_PROOF`]: kadence_schemas::headers::ROUND_PROOF

use std::collections::HashSet;
use std::sync::Mutex;

use ct_merkle::array::Array;
use ct_merkle::mem_backed_tree::MemoryBackedTree;
use ct_merkle::{HashableLeaf, InclusionProof, RootHash};
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use sha2_v011::Sha256;

/// What the round's signature covers begins with this (its version: a new format gets a new
/// prefix).
const ROUND_DOMAIN: &[u8] = b"kadence-trigger-round-v1\n";
/// What each leaf's hash covers begins with this.
const LEAF_DOMAIN: &[u8] = b"kadence-trigger-leaf-v1\n";
/// The bytes of a SHA-256 hash.
const HASH_LEN: usize = 32;
/// The bytes of the `kadence.signature.round` header: size, root, signature.
pub const ROUND_SIGNATURE_LEN: usize = 8 + HASH_LEN + 64;

/// A record as a round signs it: where it was produced and its exact value bytes.
#[derive(Debug, Clone, Copy)]
pub struct RoundRecord<'a> {
    /// The topic it is produced to.
    pub topic: &'a str,
    /// The partition it is produced to.
    pub partition: i32,
    /// Its value bytes.
    pub value: &'a [u8],
}

impl HashableLeaf for RoundRecord<'_> {
    fn hash<H: ct_merkle::digest::Update>(&self, hasher: &mut H) {
        hasher.update(LEAF_DOMAIN);
        hasher.update(self.topic.as_bytes());
        hasher.update(b"\n");
        hasher.update(itoa::Buffer::new().format(self.partition).as_bytes());
        hasher.update(b"\n");
        hasher.update(self.value);
    }
}

/// The bytes a round's signature covers.
fn round_message(size: u64, root: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(ROUND_DOMAIN.len() + 8 + HASH_LEN);
    message.extend_from_slice(ROUND_DOMAIN);
    message.extend_from_slice(&size.to_be_bytes());
    message.extend_from_slice(root);
    message
}

/// A signed round: its `kadence.signature.round` header, and each record's
/// `kadence.signature.proof`, in the records' order.
pub(crate) struct SignedRound {
    pub(crate) signature: Vec<u8>,
    pub(crate) proofs: Vec<Vec<u8>>,
}

/// Signs `records` as one round with `key`.
pub(crate) fn sign_round(key: &SigningKey, records: &[RoundRecord<'_>]) -> SignedRound {
    let mut tree = MemoryBackedTree::<Sha256, RoundRecord<'_>>::new();
    for record in records {
        tree.push(*record);
    }
    let size = tree.len();
    let root = tree.root();
    let root = root.as_bytes().as_slice();
    let mut signature = Vec::with_capacity(ROUND_SIGNATURE_LEN);
    signature.extend_from_slice(&size.to_be_bytes());
    signature.extend_from_slice(root);
    signature.extend_from_slice(&key.sign(&round_message(size, root)).to_bytes());
    let proofs = (0..records.len())
        .map(|index| {
            let path = tree.prove_inclusion(index);
            let mut proof = Vec::with_capacity(8 + path.as_bytes().len());
            proof.extend_from_slice(&(index as u64).to_be_bytes());
            proof.extend_from_slice(path.as_bytes());
            proof
        })
        .collect();
    SignedRound { signature, proofs }
}

/// A `kadence.signature.round` header, read.
pub(crate) struct RoundSignature<'a> {
    size: u64,
    root: &'a [u8],
    signature: &'a [u8],
    /// The header as it came, which is what [`VerifiedRounds`] remembers.
    bytes: &'a [u8],
}

impl<'a> RoundSignature<'a> {
    /// Reads the header; the error says what is wrong with it.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<RoundSignature<'a>, String> {
        if bytes.len() != ROUND_SIGNATURE_LEN {
            return Err(format!(
                "{} bytes instead of {ROUND_SIGNATURE_LEN}",
                bytes.len()
            ));
        }
        let (size, rest) = bytes.split_at(8);
        let (root, signature) = rest.split_at(HASH_LEN);
        Ok(RoundSignature {
            size: u64::from_be_bytes(size.try_into().expect("8 bytes")),
            root,
            signature,
            bytes,
        })
    }

    /// Whether `key` signed this round.
    pub(crate) fn signed_by(&self, key: &VerifyingKey) -> bool {
        let signature =
            Signature::from_bytes(self.signature.try_into().expect("64 bytes, parsed so"));
        key.verify_strict(&round_message(self.size, self.root), &signature)
            .is_ok()
    }

    /// Whether `proof` shows `record` in this round.
    pub(crate) fn includes(&self, record: &RoundRecord<'_>, proof: &RoundProof<'_>) -> bool {
        let root = RootHash::<Sha256>::new(
            Array::try_from(self.root).expect("32 bytes, parsed so"),
            self.size,
        );
        let path = InclusionProof::<Sha256>::from_bytes(proof.path.to_vec());
        root.verify_inclusion(record, proof.index, &path).is_ok()
    }
}

/// A `kadence.signature.proof` header, read.
pub(crate) struct RoundProof<'a> {
    index: u64,
    path: &'a [u8],
}

impl<'a> RoundProof<'a> {
    /// Reads the header; the error says what is wrong with it.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<RoundProof<'a>, String> {
        if bytes.len() < 8 || !(bytes.len() - 8).is_multiple_of(HASH_LEN) {
            return Err(format!(
                "{} bytes, not an 8-byte index and 32-byte hashes",
                bytes.len()
            ));
        }
        let (index, path) = bytes.split_at(8);
        Ok(RoundProof {
            index: u64::from_be_bytes(index.try_into().expect("8 bytes")),
            path,
        })
    }
}

/// The rounds whose signatures this executor has checked, by public key and header: a round's
/// other records then need only their proofs. Bounded: when it holds [`VerifiedRounds::LIMIT`]
/// rounds it starts again empty, which costs at most one more signature check per round
/// still arriving (a round's records reach a partition together). Entries are fixed-size
/// arrays, so the lookup every round-signed record makes allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct VerifiedRounds {
    rounds: Mutex<HashSet<CheckedRound>>,
}

/// A round whose signature was checked: the key that signed it and its header.
type CheckedRound = (
    [u8; ed25519_dalek::PUBLIC_KEY_LENGTH],
    [u8; ROUND_SIGNATURE_LEN],
);

impl VerifiedRounds {
    const LIMIT: usize = 4096;

    /// Whether the round `signature` was checked with `key` before; if not, checks it and
    /// remembers it when it holds.
    pub(crate) fn signed_by(&self, key: &VerifyingKey, signature: &RoundSignature<'_>) -> bool {
        let entry: CheckedRound = (
            key.to_bytes(),
            (signature.bytes.try_into()).expect("a round header is parsed at its length"),
        );
        if self.lock().contains(&entry) {
            return true;
        }
        if !signature.signed_by(key) {
            return false;
        }
        let mut rounds = self.lock();
        if rounds.len() >= Self::LIMIT {
            rounds.clear();
        }
        rounds.insert(entry);
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<CheckedRound>> {
        // A poisoned set still holds only checked rounds: an insert is one step.
        self.rounds.lock().unwrap_or_else(|e| e.into_inner())
    }
}
