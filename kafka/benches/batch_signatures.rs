//! What it would cost to sign triggers by the batch instead of one by one: CPU per record on
//! one core, on each side, and the bytes each record carries, for three designs. Prints a
//! table; `cargo bench -p kadence-kafka --bench batch_signatures`.
//!
//! - **per record** (today's protocol): an Ed25519 signature of each record.
//! - **Merkle root per round**: the dispatcher hashes each record of a round (its topic and
//!   partition among the hashed bytes, so a record moved elsewhere no longer matches), builds
//!   a Merkle tree of the round and signs its root once; each record carries the root, its
//!   signature and its own path, so it can be checked alone on its partition. An executor
//!   checks the path, and verifies a root's signature once, the first time it meets it.
//! - **manifest per partition**: the dispatcher signs, once per partition and round, the list
//!   of the round's record hashes on that partition; a record is checked against its
//!   manifest, so it cannot be checked before the manifest has arrived.
//!
//! Costs are per record, for rounds of `N` records spread over [`PARTITIONS`] partitions; an
//! executor is taken to read one partition, so it meets each root (or manifest) once per
//! `N / PARTITIONS` records. The Merkle tree is `rs_merkle`'s, SHA-256.

use std::collections::HashSet;
use std::time::Instant;

use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _};
use rs_merkle::algorithms::Sha256;
use rs_merkle::{Hasher as _, MerkleProof, MerkleTree};

/// A trigger-sized record value (the throughput benchmark's records are 74 bytes).
const RECORD_BYTES: usize = 200;

/// The partitions a round's records are spread over.
const PARTITIONS: usize = 6;

/// The records of one round: `(partition, value)`.
fn round(records: usize) -> Vec<(usize, Vec<u8>)> {
    (0..records)
        .map(|index| {
            let mut value = vec![0u8; RECORD_BYTES];
            value[..8].copy_from_slice(&(index as u64).to_be_bytes());
            (index % PARTITIONS, value)
        })
        .collect()
}

/// A record's leaf: its topic and partition are hashed with its bytes.
fn leaf(partition: usize, value: &[u8]) -> [u8; 32] {
    let mut bytes = Vec::with_capacity(48 + value.len());
    bytes.extend_from_slice(b"kadence.triggers.billing");
    bytes.extend_from_slice(&(partition as u32).to_be_bytes());
    bytes.extend_from_slice(value);
    Sha256::hash(&bytes)
}

/// µs per record of `work` over `rounds` rounds of `records` records.
fn micros_per_record(rounds: usize, records: usize, mut work: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..rounds {
        work();
    }
    start.elapsed().as_secs_f64() * 1e6 / (rounds * records) as f64
}

/// One row of the table.
struct Costs {
    sign_us: f64,
    verify_us: f64,
    bytes: f64,
}

fn per_record(key: &SigningKey, records: &[(usize, Vec<u8>)], rounds: usize) -> Costs {
    let signatures: Vec<Signature> = records.iter().map(|(_, value)| key.sign(value)).collect();
    let verifying = key.verifying_key();
    Costs {
        sign_us: micros_per_record(rounds, records.len(), || {
            for (_, value) in records {
                std::hint::black_box(key.sign(value));
            }
        }),
        verify_us: micros_per_record(rounds, records.len(), || {
            for ((_, value), signature) in records.iter().zip(&signatures) {
                assert!(verifying.verify(value, signature).is_ok());
            }
        }),
        bytes: 64.0,
    }
}

fn merkle_round(key: &SigningKey, records: &[(usize, Vec<u8>)], rounds: usize) -> Costs {
    let build = || {
        let leaves: Vec<[u8; 32]> = (records.iter())
            .map(|(partition, value)| leaf(*partition, value))
            .collect();
        let tree = MerkleTree::<Sha256>::from_leaves(&leaves);
        let root = tree.root().expect("a round has records");
        let signature = key.sign(&root);
        let paths: Vec<Vec<u8>> = (0..records.len())
            .map(|index| tree.proof(&[index]).to_bytes())
            .collect();
        (root, signature, paths)
    };
    let (root, signature, paths) = build();
    let verifying = key.verifying_key();
    let count = records.len();
    // An executor reads one partition: it meets this round's root once, then checks paths.
    let mine: Vec<usize> = (0..count).filter(|index| index % PARTITIONS == 0).collect();
    let verify_us = micros_per_record(rounds, mine.len(), || {
        let mut verified_roots = HashSet::new();
        for &index in &mine {
            let (partition, value) = &records[index];
            if verified_roots.insert(root) {
                assert!(verifying.verify(&root, &signature).is_ok());
            }
            let proof = MerkleProof::<Sha256>::try_from(paths[index].as_slice()).expect("a path");
            assert!(proof.verify(root, &[index], &[leaf(*partition, value)], count));
        }
    });
    let path_bytes = paths.iter().map(Vec::len).sum::<usize>() as f64 / count as f64;
    Costs {
        sign_us: micros_per_record(rounds, count, || {
            std::hint::black_box(build());
        }),
        verify_us,
        // The root, its signature, the record's index and its path.
        bytes: 32.0 + 64.0 + 4.0 + path_bytes,
    }
}

fn manifest_per_partition(key: &SigningKey, records: &[(usize, Vec<u8>)], rounds: usize) -> Costs {
    let build = || {
        // A partition the round put nothing on gets no manifest.
        (0..PARTITIONS)
            .map(|partition| {
                (records.iter())
                    .filter(|(on, _)| *on == partition)
                    .flat_map(|(on, value)| leaf(*on, value))
                    .collect::<Vec<u8>>()
            })
            .filter(|hashes| !hashes.is_empty())
            .map(|hashes| {
                let signature = key.sign(&hashes);
                (hashes, signature)
            })
            .collect::<Vec<_>>()
    };
    let manifests = build();
    let verifying = key.verifying_key();
    let (hashes, signature) = &manifests[0];
    let mine: Vec<&(usize, Vec<u8>)> = records.iter().filter(|(on, _)| *on == 0).collect();
    let verify_us = micros_per_record(rounds, mine.len(), || {
        assert!(verifying.verify(hashes, signature).is_ok());
        let listed: HashSet<&[u8]> = hashes.chunks(32).collect();
        for (partition, value) in &mine {
            assert!(listed.contains(leaf(*partition, value).as_slice()));
        }
    });
    let on_partition = (records.len() as f64 / PARTITIONS as f64).max(1.0);
    Costs {
        sign_us: micros_per_record(rounds, records.len(), || {
            std::hint::black_box(build());
        }),
        verify_us,
        // Its hash in the manifest, and its share of the manifest's signature.
        bytes: 32.0 + 64.0 / on_partition,
    }
}

fn main() {
    let key = SigningKey::from_bytes(&[7; 32]);
    println!(
        "records of {RECORD_BYTES} bytes over {PARTITIONS} partitions; CPU µs per record on \
         one core; bytes each record carries for its signature"
    );
    println!();
    println!(
        "| records per round | design | dispatcher µs per record | executor µs per record | bytes per record |"
    );
    println!("|---:|---|---:|---:|---:|");
    for records in [1usize, 6, 60, 600, 6_000] {
        let round = round(records);
        let rounds = (12_000 / records).max(3);
        let designs = [
            ("per record", per_record(&key, &round, rounds)),
            ("Merkle root per round", merkle_round(&key, &round, rounds)),
            (
                "manifest per partition",
                manifest_per_partition(&key, &round, rounds),
            ),
        ];
        for (design, costs) in designs {
            println!(
                "| {records} | {design} | {:.1} | {:.1} | {:.0} |",
                costs.sign_us, costs.verify_us, costs.bytes
            );
        }
    }
}
