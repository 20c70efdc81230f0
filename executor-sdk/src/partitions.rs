//! Which partitions of `{prefix}.triggers.{app}` the consumer group assigns to this executor:
//! [`Assignment`], kept by the rebalance callbacks and read by the beats, the run tasks and
//! the loop (a change wakes it, so that a beat announces it at once), and [`OwnedPartitions`],
//! the same seen from outside through [`Executor::partitions`](crate::Executor::partitions).
//!
//! A production executor's beats tell the scheduler (and a test) what it owns; a shadow
//! executor has no beats, so `OwnedPartitions` is how its operator, or a test, learns that
//! its group has assigned it partitions and its start in them is fixed.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch;

/// The partitions the group assigns to this executor now. Cheap to clone; every clone is the
/// same assignment.
#[derive(Clone)]
pub(crate) struct Assignment {
    partitions: Arc<watch::Sender<BTreeSet<i32>>>,
}

impl Default for Assignment {
    fn default() -> Self {
        Assignment {
            partitions: Arc::new(watch::Sender::new(BTreeSet::new())),
        }
    }
}

impl Assignment {
    /// Partitions added by the group.
    pub(crate) fn assign(&self, partitions: &[i32]) {
        self.partitions
            .send_modify(|owned| owned.extend(partitions.iter().copied()));
    }

    /// Partitions taken away by the group.
    pub(crate) fn revoke(&self, partitions: &[i32]) {
        self.partitions.send_modify(|owned| {
            for partition in partitions {
                owned.remove(partition);
            }
        });
    }

    /// The partitions owned now, ascending.
    pub(crate) fn owned(&self) -> Vec<i32> {
        self.partitions.borrow().iter().copied().collect()
    }

    /// Whether the group assigns `partition` to this executor now.
    pub(crate) fn owns(&self, partition: i32) -> bool {
        self.partitions.borrow().contains(&partition)
    }

    /// A receiver that sees every change from now on (the loop's, and [`OwnedPartitions`]).
    pub(crate) fn subscribe(&self) -> watch::Receiver<BTreeSet<i32>> {
        self.partitions.subscribe()
    }
}

/// The partitions of `{prefix}.triggers.{app}` the consumer group assigns to an executor, as
/// they change; from [`Executor::partitions`](crate::Executor::partitions), taken before
/// [`run`](crate::Executor::run). Cheap to clone.
///
/// A partition appears here once the executor consumes it: for a shadow executor, once its
/// start in the partition is fixed, so every trigger emitted after that reaches the shadow.
///
/// ```no_run
/// # async fn example(executor: kadence_executor::Executor) -> Result<(), kadence_executor::ExecutorError> {
/// let mut partitions = executor.partitions();
/// tokio::spawn(async move {
///     // Partitions 0 and 1 are this executor's (say, the only member of its group).
///     let owned = partitions.wait_until(|owned| owned == [0, 1]).await;
///     println!("consuming {owned:?}");
/// });
/// executor.run(kadence_executor::shutdown_signal()).await
/// # }
/// ```
#[derive(Clone)]
pub struct OwnedPartitions {
    changes: watch::Receiver<BTreeSet<i32>>,
}

impl OwnedPartitions {
    pub(crate) fn new(assignment: &Assignment) -> OwnedPartitions {
        OwnedPartitions {
            changes: assignment.subscribe(),
        }
    }

    /// The partitions owned now, ascending (none before the group's first assignment).
    pub fn current(&self) -> Vec<i32> {
        self.changes.borrow().iter().copied().collect()
    }

    /// Waits until the group assigns or revokes partitions, and returns the partitions owned
    /// then; `None` once the executor has stopped (nothing will change any more).
    pub async fn changed(&mut self) -> Option<Vec<i32>> {
        self.changes.changed().await.ok()?;
        Some(self.changes.borrow_and_update().iter().copied().collect())
    }

    /// Waits until `wanted` holds for the partitions owned, ascending (at once if it holds
    /// now), and returns them; `None` if the executor stopped first.
    pub async fn wait_until(&mut self, mut wanted: impl FnMut(&[i32]) -> bool) -> Option<Vec<i32>> {
        let owned = self
            .changes
            .wait_for(|owned| wanted(&owned.iter().copied().collect::<Vec<_>>()))
            .await
            .ok()?;
        Some(owned.iter().copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn owned_partitions_follow_the_assignment_until_the_executor_stops() {
        let assignment = Assignment::default();
        let mut seen = OwnedPartitions::new(&assignment);
        assert!(seen.current().is_empty());
        let waiting = tokio::spawn({
            let mut seen = seen.clone();
            async move { seen.wait_until(|owned| owned == [0, 2]).await }
        });
        assignment.assign(&[2]);
        assert_eq!(seen.changed().await, Some(vec![2]));
        assignment.assign(&[0, 1]);
        assignment.revoke(&[1]);
        assert_eq!(waiting.await.unwrap(), Some(vec![0, 2]));
        assert_eq!(seen.current(), [0, 2]);
        assert!(assignment.owns(0) && !assignment.owns(1));
        assert_eq!(assignment.owned(), [0, 2]);
        let mut after = seen.clone();
        drop(assignment);
        assert_eq!(
            seen.changed().await,
            Some(vec![0, 2]),
            "the last change is still news"
        );
        assert_eq!(seen.changed().await, None, "stopped: nothing will change");
        assert_eq!(after.wait_until(|owned| owned.is_empty()).await, None);
    }
}
