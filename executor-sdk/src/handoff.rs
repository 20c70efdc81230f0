//! Rebalances: when the group takes partitions away, the executor **finishes or hands back**
//! their runs within `rebalance_timeout` (default 10 s), so that the new owner neither runs a
//! trigger a second time nor loses one.
//!
//! The revocation callback (which the group waits for) blocks until every *running* run of
//! the revoked partitions has published its result, then commits their offsets. Runs still
//! going at the deadline are handed back: cancelled, with no result published and their
//! offsets left uncommitted, so the new owner runs them. Triggers of revoked partitions that
//! were only queued or held never start here (the new owner gets them), and a handed-back
//! trigger id is forgotten, so that if the partition comes back it runs again here. The
//! forgetting cannot wait for the cancelled run to end: on an eager rebalance the partition
//! may come straight back, and its redelivered trigger be received before the cancelled task
//! reports; taken for a redelivery of a run that is still going, it would be committed past
//! and never run. So the callback lists the ids it hands back
//! ([`RunningRuns::take_handed_back`]) and the consumer forgets them before it admits its
//! next record.
//!
//! The wait happens on the consumer's poll, inside librdkafka's callback, so run tasks must be
//! able to progress meanwhile: on a multi-threaded tokio runtime (the default of
//! `#[tokio::main]`) the wait tells tokio that its thread blocks (`block_in_place`), so the
//! runs move to the other workers even when several executors of one process revoke at once;
//! on a current-thread runtime every run of a revoked partition is handed back at the
//! deadline.
//!
//! Leaving the group for good (the executor stopping) goes through
//! [`close_consumer`](kadence_kafka::close_consumer): the consumer is closed on a thread of its
//! own, because librdkafka's close has no deadline.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kadence_schemas::TriggerId;
use tokio::runtime::RuntimeFlavor;
use tokio_util::sync::CancellationToken;

/// How often the revocation callback looks at the runs it waits for.
const POLL: Duration = Duration::from_millis(10);

/// A running run as the revocation callback sees it.
struct RunHandle {
    trigger_id: TriggerId,
    cancellation: CancellationToken,
    handed_back: Arc<AtomicBool>,
}

/// The runs going now, by partition and offset.
#[derive(Clone, Default)]
pub(crate) struct RunningRuns {
    runs: Arc<Mutex<HashMap<(i32, i64), RunHandle>>>,
    /// The trigger ids handed back and not yet taken by the consumer.
    handed_back_ids: Arc<Mutex<Vec<TriggerId>>>,
}

impl RunningRuns {
    /// How many runs of `partition` are going.
    pub(crate) fn count_on(&self, partition: i32) -> usize {
        self.runs
            .lock()
            .expect("running runs lock")
            .keys()
            .filter(|(run_partition, _)| *run_partition == partition)
            .count()
    }

    /// Registers the run of `trigger_id`, the record at (`partition`, `offset`); the flag it
    /// returns is set when the run is handed back.
    pub(crate) fn register(
        &self,
        partition: i32,
        offset: i64,
        trigger_id: TriggerId,
        cancellation: CancellationToken,
    ) -> Arc<AtomicBool> {
        let handed_back = Arc::new(AtomicBool::new(false));
        self.runs.lock().expect("running runs lock").insert(
            (partition, offset),
            RunHandle {
                trigger_id,
                cancellation,
                handed_back: Arc::clone(&handed_back),
            },
        );
        handed_back
    }

    /// The run ended (its result is published, or it was handed back).
    pub(crate) fn unregister(&self, partition: i32, offset: i64) {
        self.runs
            .lock()
            .expect("running runs lock")
            .remove(&(partition, offset));
    }

    fn running_in(&self, partitions: &[i32]) -> usize {
        self.runs
            .lock()
            .expect("running runs lock")
            .keys()
            .filter(|(partition, _)| partitions.contains(partition))
            .count()
    }

    /// Waits (blocking the calling thread) until no run of `partitions` is going, at most
    /// `timeout`; then hands back what still runs. Returns how many were handed back.
    pub(crate) fn finish_or_hand_back(&self, partitions: &[i32], timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        let wait_for_runs = || {
            while self.running_in(partitions) > 0 && Instant::now() < deadline {
                std::thread::sleep(POLL);
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if runtime.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait_for_runs)
            }
            _ => wait_for_runs(),
        }
        let runs = self.runs.lock().expect("running runs lock");
        let mut handed_back = self.handed_back_ids.lock().expect("handed-back ids lock");
        let before = handed_back.len();
        for ((partition, _), handle) in runs.iter() {
            if partitions.contains(partition) {
                handle.handed_back.store(true, Ordering::SeqCst);
                handle.cancellation.cancel();
                handed_back.push(handle.trigger_id.clone());
            }
        }
        handed_back.len() - before
    }

    /// The trigger ids handed back since the last call: the consumer forgets them before it
    /// takes another record (see the module docs).
    pub(crate) fn take_handed_back(&self) -> Vec<TriggerId> {
        std::mem::take(&mut *self.handed_back_ids.lock().expect("handed-back ids lock"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_runs_to_end_then_hands_back_the_rest() {
        let running = RunningRuns::default();
        let id = |at: i64| TriggerId::scheduled(kadence_schemas::JobId::new(1).unwrap(), at);
        let quick = running.register(0, 10, id(10), CancellationToken::new());
        let slow_token = CancellationToken::new();
        let slow = running.register(1, 20, id(20), slow_token.clone());
        let other = running.register(2, 30, id(30), CancellationToken::new());
        let ending = running.clone();
        let ender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            ending.unregister(0, 10);
        });
        // Partition 0's run ends in time; partition 1's does not and is handed back.
        let handed_back = running.finish_or_hand_back(&[0, 1], Duration::from_millis(300));
        ender.join().unwrap();
        assert_eq!(handed_back, 1);
        assert!(!quick.load(Ordering::SeqCst));
        assert!(slow.load(Ordering::SeqCst) && slow_token.is_cancelled());
        assert!(!other.load(Ordering::SeqCst), "partition 2 stays");
        assert_eq!(running.take_handed_back(), vec![id(20)]);
        assert!(running.take_handed_back().is_empty(), "taken once");
    }
}
