//! Offset tracking for at-least-once delivery with concurrent handlers.
//!
//! Triggers of one partition finish out of order, but Kafka commits one offset per partition
//! meaning "everything before this is done". So the committable offset of a partition is the
//! lowest offset still in flight (its run has not published its result yet), or one past the
//! highest offset seen when nothing is in flight. A crash then redelivers at most the runs
//! that had not published their results.

use std::collections::{BTreeSet, HashMap};

/// In-flight offsets per partition of one topic.
#[derive(Debug, Default)]
pub(crate) struct OffsetTracker {
    partitions: HashMap<i32, PartitionOffsets>,
}

#[derive(Debug)]
struct PartitionOffsets {
    in_flight: BTreeSet<i64>,
    next_after_seen: i64,
    committed: Option<i64>,
}

impl PartitionOffsets {
    /// The lowest offset in flight, or one past the highest seen when none is.
    fn committable(&self) -> i64 {
        self.in_flight
            .first()
            .copied()
            .unwrap_or(self.next_after_seen)
    }
}

impl OffsetTracker {
    /// Notes that the record at `offset` of `partition` was received and is in flight.
    pub(crate) fn track(&mut self, partition: i32, offset: i64) {
        let state = self
            .partitions
            .entry(partition)
            .or_insert_with(|| PartitionOffsets {
                in_flight: BTreeSet::new(),
                next_after_seen: offset,
                committed: None,
            });
        state.in_flight.insert(offset);
        state.next_after_seen = state.next_after_seen.max(offset + 1);
    }

    /// Notes that the record at `offset` is done (its result is published). Unknown
    /// partitions (revoked meanwhile) are ignored.
    pub(crate) fn complete(&mut self, partition: i32, offset: i64) {
        if let Some(state) = self.partitions.get_mut(&partition) {
            state.in_flight.remove(&offset);
        }
    }

    /// Offsets to commit now: for each partition whose committable offset moved since the
    /// last call, `(partition, offset)`. Marks them committed.
    pub(crate) fn take_committable(&mut self) -> Vec<(i32, i64)> {
        let mut ready = Vec::new();
        for (&partition, state) in &mut self.partitions {
            let committable = state.committable();
            if state.committed != Some(committable) {
                state.committed = Some(committable);
                ready.push((partition, committable));
            }
        }
        ready.sort_unstable();
        ready
    }

    /// Committable offsets of `partitions` (for a revocation), forgetting them afterwards.
    pub(crate) fn release(&mut self, partitions: &[i32]) -> Vec<(i32, i64)> {
        let mut released = Vec::new();
        for partition in partitions {
            if let Some(state) = self.partitions.remove(partition) {
                let committable = state.committable();
                if state.committed != Some(committable) {
                    released.push((*partition, committable));
                }
            }
        }
        released
    }

    /// Records in flight, over all partitions.
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.partitions
            .values()
            .map(|state| state.in_flight.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_only_up_to_the_lowest_unfinished_offset() {
        let mut tracker = OffsetTracker::default();
        for offset in 10..15 {
            tracker.track(0, offset);
        }
        tracker.complete(0, 11);
        tracker.complete(0, 12);
        assert_eq!(tracker.take_committable(), vec![(0, 10)]);
        tracker.complete(0, 10);
        assert_eq!(tracker.take_committable(), vec![(0, 13)]);
        assert!(tracker.take_committable().is_empty(), "nothing moved");
        tracker.complete(0, 13);
        tracker.complete(0, 14);
        assert_eq!(tracker.take_committable(), vec![(0, 15)]);
        assert_eq!(tracker.in_flight(), 0);
    }

    #[test]
    fn partitions_are_independent_and_revocation_releases_them() {
        let mut tracker = OffsetTracker::default();
        tracker.track(0, 5);
        tracker.track(1, 100);
        tracker.complete(1, 100);
        assert_eq!(tracker.take_committable(), vec![(0, 5), (1, 101)]);
        tracker.track(1, 101);
        tracker.complete(1, 101);
        assert_eq!(tracker.release(&[1]), vec![(1, 102)]);
        tracker.complete(1, 101); // a late completion for a revoked partition is ignored
        assert_eq!(tracker.in_flight(), 1);
    }
}
