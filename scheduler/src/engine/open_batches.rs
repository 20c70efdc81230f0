//! The fire batches this node is emitting, and how far each got.
//!
//! A pre-read scan writes its fires as one batch per schedule shard (see
//! [`crate::store::fire_batch`]); a claim takes over a dead node's batch. Either way the node
//! registers the batch's fires here ([`OpenBatches::open`]) before they enter the wheel. As the
//! broker acknowledges them (or dispatch drops one a stop cancelled), the
//! [`AckWriter`](crate::engine::acks::AckWriter) asks where each batch concerned would stand
//! ([`OpenBatches::progress_with`]), writes the run rows and that progress in one
//! transaction, and only then forgets the fires ([`OpenBatches::settle`]). A batch's lease
//! follows its earliest fire still open; once none is, the batch row is deleted.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Mutex;

use crate::domain::model::PendingFire;
use crate::store::BatchProgress;

/// The open fires of this node's batches (see the module docs).
pub struct OpenBatches {
    node_id: String,
    lease_ms: i64,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Log id of an open fire → its batch and its emission time: with both, settling a fire
    /// finds its entry in `open` directly (a batch holds thousands of fires, and settles
    /// them a few hundred at a time).
    batch_of: HashMap<i64, OpenFire>,
    /// Batch → its open fires as (emission time, log id), earliest first.
    open: HashMap<i64, BTreeSet<(i64, i64)>>,
}

/// Where an open fire is registered.
#[derive(Debug, Clone, Copy)]
struct OpenFire {
    batch: i64,
    fire_at_ms: i64,
}

impl OpenBatches {
    /// No batch of `node_id` open yet; a batch stays the node's until its earliest open fire
    /// + `lease_ms`.
    pub fn new(node_id: impl Into<String>, lease_ms: i64) -> Self {
        OpenBatches {
            node_id: node_id.into(),
            lease_ms,
            inner: Mutex::default(),
        }
    }

    /// The node whose batches these are.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// How long past its earliest open fire a batch stays the node's, ms.
    pub fn lease_ms(&self) -> i64 {
        self.lease_ms
    }

    /// Registers `fires` as the open fires of batch `id` (replacing what was registered for
    /// it: this node claimed back a batch of its own).
    pub fn open<'a>(&self, id: i64, fires: impl IntoIterator<Item = &'a PendingFire>) {
        let mut inner = self.inner.lock().expect("open batches lock");
        if let Some(previous) = inner.open.remove(&id) {
            for (_, log_id) in previous {
                inner.batch_of.remove(&log_id);
            }
        }
        let mut open = BTreeSet::new();
        for fire in fires {
            open.insert((fire.fire_at_ms, fire.log_id));
            let registered = OpenFire {
                batch: id,
                fire_at_ms: fire.fire_at_ms,
            };
            inner.batch_of.insert(fire.log_id, registered);
        }
        inner.open.insert(id, open);
    }

    /// Whether run `log_id` is a fire of an open batch (its row is not written yet).
    pub fn contains(&self, log_id: i64) -> bool {
        self.inner
            .lock()
            .expect("open batches lock")
            .batch_of
            .contains_key(&log_id)
    }

    /// Where each batch with a fire among `done` would stand once those are settled: the
    /// emission time of its earliest fire still open, or `None` when no fire would be. Changes
    /// nothing (the caller writes this first, then [`settle`](Self::settle)s).
    pub fn progress_with(&self, done: &[i64]) -> Vec<BatchProgress> {
        let inner = self.inner.lock().expect("open batches lock");
        let mut done_by_batch: HashMap<i64, HashSet<i64>> = HashMap::new();
        for log_id in done {
            if let Some(fire) = inner.batch_of.get(log_id) {
                done_by_batch.entry(fire.batch).or_default().insert(*log_id);
            }
        }
        let mut progress: Vec<BatchProgress> = done_by_batch
            .into_iter()
            .map(|(id, done)| {
                let pending_from_ms = inner.open.get(&id).and_then(|open| {
                    open.iter()
                        .find(|(_, log_id)| !done.contains(log_id))
                        .map(|(fire_at_ms, _)| *fire_at_ms)
                });
                BatchProgress {
                    id,
                    pending_from_ms,
                }
            })
            .collect();
        progress.sort_by_key(|batch| batch.id);
        progress
    }

    /// Forgets the fires `done` (written); a batch left with no open fire is closed.
    pub fn settle(&self, done: &[i64]) {
        let mut inner = self.inner.lock().expect("open batches lock");
        for log_id in done {
            let Some(fire) = inner.batch_of.remove(log_id) else {
                continue;
            };
            if let Some(open) = inner.open.get_mut(&fire.batch) {
                open.remove(&(fire.fire_at_ms, *log_id));
                if open.is_empty() {
                    inner.open.remove(&fire.batch);
                }
            }
        }
    }

    /// Open batches.
    pub fn len(&self) -> usize {
        self.inner.lock().expect("open batches lock").open.len()
    }

    /// Whether no batch is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fire(log_id: i64, fire_at_ms: i64) -> PendingFire {
        PendingFire {
            log_id,
            fire_at_ms,
            ..PendingFire::for_test(1, fire_at_ms)
        }
    }

    #[test]
    fn a_batch_follows_its_earliest_open_fire_and_closes_when_none_is() {
        let batches = OpenBatches::new("node-a", 1_000);
        let fires = [fire(10, 1_000), fire(11, 2_000), fire(12, 3_000)];
        batches.open(7, &fires);
        batches.open(8, &[fire(20, 1_500)]);
        assert!(batches.contains(11) && !batches.contains(99));

        // Out of order: the second fire acknowledged first leaves the first open.
        assert_eq!(
            batches.progress_with(&[11]),
            [BatchProgress {
                id: 7,
                pending_from_ms: Some(1_000)
            }]
        );
        batches.settle(&[11]);
        assert_eq!(
            batches.progress_with(&[10, 20, 99]),
            [
                BatchProgress {
                    id: 7,
                    pending_from_ms: Some(3_000)
                },
                BatchProgress {
                    id: 8,
                    pending_from_ms: None
                },
            ]
        );
        assert_eq!(batches.len(), 2, "progress alone changes nothing");
        batches.settle(&[10, 20]);
        assert_eq!(batches.len(), 1);
        batches.settle(&[12]);
        assert!(batches.is_empty());
    }

    #[test]
    fn opening_a_batch_again_replaces_its_fires() {
        let batches = OpenBatches::new("node-a", 1_000);
        batches.open(7, &[fire(10, 1_000), fire(11, 2_000)]);
        batches.open(7, &[fire(11, 2_000)]);
        assert!(!batches.contains(10));
        assert_eq!(
            batches.progress_with(&[11]),
            [BatchProgress {
                id: 7,
                pending_from_ms: None
            }]
        );
    }
}
