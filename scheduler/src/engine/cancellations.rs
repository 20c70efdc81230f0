//! Cancelled fires: stopping a job stops its fires, whichever node holds them.
//!
//! The pre-read loop plans a job's fires up to the pre-read window ahead and every node keeps
//! the ones it wrote in its in-memory wheel. A stop, or an edit that changes the schedule,
//! takes effect `settle = emit_lead + cancel_poll_interval` after it (1.25 s by default):
//!
//! - Fires due within the settle time are left alone: a node may have released them to the
//!   broker already (the emit lead sends triggers ahead of their time), so cancelling them
//!   could not be honoured everywhere, and replacing them would emit the instant twice.
//! - Fires due later are cancelled in the change's own transaction: the cancellation is
//!   recorded ([`FireCancellation`]: the job, the highest job-log id given out so far, the
//!   cutoff). The fires themselves sit in fire batches, which are not rewritten; a claim of a
//!   batch reads the cancellations and never emits a fire one covers, and no run is ever
//!   written for it.
//! - The node that serves the change holds a provisional cancellation of the job's fires after
//!   the cutoff from the moment the request arrives ([`CancelledFires::provisional`]) until
//!   it records the real one: its own dispatch never emits those fires, however long the
//!   change's transaction takes to commit (a slow database must not reopen the window).
//! - The node that served the change records it in its [`CancelledFires`] at once; every node
//!   reads the recent ones every `cancel_poll_interval` ([`CancellationPoller`]). Dispatch
//!   drops a scheduled fire of the job whose id is not above the cancellation's and whose time
//!   is after its cutoff; fires planned after the change have higher ids and pass. Since a
//!   node releases a fire `emit_lead` before its time and learns of a change within
//!   `cancel_poll_interval`, no node emits a cancelled fire.
//! - An edited schedule starts after the settle time too, so its fires never meet the old
//!   schedule's kept ones; where both schedules fire at the same later instant the new fire
//!   replaces the cancelled one (same trigger id, a log id above the cancellation's).
//!
//! Should a node be unable to read the cancellations for longer (its database is out of
//! reach), it may still emit a cancelled fire; it carries its usual trigger id, so executors
//! recognise a second copy.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kadence_kafka::{FailureLog, Severity};
use kadence_schemas::JobId;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::domain::model::PendingFire;
use crate::store::{FireCancellation, Fires, StoreError};

/// Per job, the cancellations dispatch must respect (see the module docs).
#[derive(Default)]
pub struct CancelledFires {
    by_job: Mutex<HashMap<JobId, Vec<FireCancellation>>>,
}

/// A provisional cancellation, in force until dropped (see [`CancelledFires::provisional`]).
#[must_use = "the provisional cancellation ends when this is dropped"]
pub struct ProvisionalCancellation<'a> {
    fires: &'a CancelledFires,
    cancellation: FireCancellation,
}

impl Drop for ProvisionalCancellation<'_> {
    fn drop(&mut self) {
        self.fires.remove(&self.cancellation);
    }
}

impl CancelledFires {
    /// An empty set.
    pub fn new() -> Self {
        CancelledFires::default()
    }

    /// Records a cancellation (once, however often it is read).
    pub fn record(&self, cancellation: FireCancellation) {
        let mut by_job = self.by_job.lock().expect("cancellations lock");
        let known = by_job.entry(cancellation.job_id).or_default();
        if !known.contains(&cancellation) {
            known.push(cancellation);
        }
    }

    /// Cancels every scheduled fire of `job_id` due after `from_ms` until the returned guard
    /// is dropped: held while a stop or an edit with that cutoff is being written, so this
    /// node's dispatch skips the fires the change is about to cancel. The change's own
    /// cancellation, [`record`](Self::record)ed once it commits, then stays in force; should
    /// the change fail, dropping the guard lets the fires go again.
    pub fn provisional(&self, job_id: JobId, from_ms: i64) -> ProvisionalCancellation<'_> {
        let cancellation = FireCancellation {
            job_id,
            up_to_log_id: i64::MAX,
            from_ms,
            until_ms: i64::MAX,
        };
        self.record(cancellation);
        ProvisionalCancellation {
            fires: self,
            cancellation,
        }
    }

    fn remove(&self, cancellation: &FireCancellation) {
        let mut by_job = self.by_job.lock().expect("cancellations lock");
        if let Some(known) = by_job.get_mut(&cancellation.job_id) {
            known.retain(|kept| kept != cancellation);
            if known.is_empty() {
                by_job.remove(&cancellation.job_id);
            }
        }
    }

    /// Whether `fire` was cancelled: planned by the job's schedule before a stop or a
    /// schedule change, and due after that change's cutoff.
    pub fn is_cancelled(&self, fire: &PendingFire) -> bool {
        self.by_job
            .lock()
            .expect("cancellations lock")
            .get(&fire.job_id)
            .is_some_and(|cancellations| {
                cancellations.iter().any(|cancelled| cancelled.covers(fire))
            })
    }

    /// Forgets cancellations whose fires can no longer be held by any node: their lease ended
    /// more than `grace_ms` before `now_ms` (a claim never takes a cancelled row).
    pub fn forget_before(&self, now_ms: i64, grace_ms: i64) {
        self.by_job
            .lock()
            .expect("cancellations lock")
            .retain(|_, cancellations| {
                cancellations
                    .retain(|cancelled| cancelled.until_ms.saturating_add(grace_ms) > now_ms);
                !cancellations.is_empty()
            });
    }

    /// Jobs with a cancellation in force.
    pub fn len(&self) -> usize {
        self.by_job.lock().expect("cancellations lock").len()
    }

    /// Whether no cancellation is in force.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Reads the cancellations other nodes made into this node's [`CancelledFires`].
pub struct CancellationPoller {
    store: Arc<dyn Fires>,
    cancelled: Arc<CancelledFires>,
    /// How long a cancellation is kept after its fires' lease ended.
    grace_ms: i64,
}

impl CancellationPoller {
    /// A poller reading through `store` into `cancelled`; entries are kept `grace` past their
    /// lease.
    pub fn new(store: Arc<dyn Fires>, cancelled: Arc<CancelledFires>, grace: Duration) -> Self {
        CancellationPoller {
            store,
            cancelled,
            grace_ms: crate::clock::millis(grace),
        }
    }

    /// One read at `now_ms`: records the recent cancellations and forgets expired ones;
    /// returns how many jobs have a cancellation in force.
    pub async fn poll_once(&self, now_ms: i64) -> Result<usize, StoreError> {
        for cancellation in self.store.recent_cancellations(now_ms).await? {
            self.cancelled.record(cancellation);
        }
        self.cancelled.forget_before(now_ms, self.grace_ms);
        Ok(self.cancelled.len())
    }

    /// Polls every `interval` until `shutdown`; errors are logged and retried.
    pub async fn run(self, clock: Arc<dyn Clock>, interval: Duration, shutdown: CancellationToken) {
        let mut failures = FailureLog::new("reading cancelled fires", Severity::Warning);
        loop {
            failures.record(&self.poll_once(clock.now_ms()).await);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kadence_schemas::TriggerType;

    fn cancellation(job: i64, up_to_log_id: i64, until_ms: i64) -> FireCancellation {
        FireCancellation {
            job_id: JobId::new(job).unwrap(),
            up_to_log_id,
            from_ms: 500,
            until_ms,
        }
    }

    fn fire(job: i64, log_id: i64, trigger_type: TriggerType) -> PendingFire {
        PendingFire {
            log_id,
            job_id: JobId::new(job).unwrap(),
            trigger_type,
            ..PendingFire::for_test(job, 1_000)
        }
    }

    #[test]
    fn drops_scheduled_fires_written_before_the_change_only() {
        let cancelled = CancelledFires::new();
        cancelled.record(cancellation(1, 10, 5_000));
        let due_before_the_cutoff = PendingFire {
            fire_at_ms: 500,
            ..fire(1, 4, TriggerType::Cron)
        };
        assert!(
            !cancelled.is_cancelled(&due_before_the_cutoff),
            "left alone: maybe emitted already"
        );
        assert!(cancelled.is_cancelled(&fire(1, 10, TriggerType::Cron)));
        assert!(cancelled.is_cancelled(&fire(1, 3, TriggerType::FixRate)));
        assert!(cancelled.is_cancelled(&fire(1, 9, TriggerType::Misfire)));
        assert!(
            !cancelled.is_cancelled(&fire(1, 11, TriggerType::Cron)),
            "planned after the change"
        );
        assert!(
            !cancelled.is_cancelled(&fire(1, 5, TriggerType::Manual)),
            "someone asked for it"
        );
        assert!(!cancelled.is_cancelled(&fire(1, 5, TriggerType::Retry)));
        assert!(
            !cancelled.is_cancelled(&fire(2, 5, TriggerType::Cron)),
            "other job"
        );
    }

    #[test]
    fn keeps_each_cancellation_and_forgets_it_after_its_lease_and_grace() {
        let cancelled = CancelledFires::new();
        cancelled.record(cancellation(1, 10, 5_000));
        cancelled.record(cancellation(1, 10, 5_000));
        cancelled.record(FireCancellation {
            from_ms: 2_000,
            ..cancellation(1, 30, 9_000)
        });
        // Planned after the first stop, kept by the second (due before its cutoff).
        assert!(!cancelled.is_cancelled(&fire(1, 20, TriggerType::Cron)));
        assert!(cancelled.is_cancelled(&fire(1, 10, TriggerType::Cron)));
        cancelled.forget_before(9_500, 1_000);
        assert!(!cancelled.is_cancelled(&fire(1, 10, TriggerType::Cron)));
        assert_eq!(cancelled.len(), 1, "the later lease keeps the second");
        cancelled.forget_before(10_000, 1_000);
        assert!(cancelled.is_empty());
    }

    #[test]
    fn a_provisional_cancellation_holds_while_the_change_is_written() {
        let cancelled = CancelledFires::new();
        let job = JobId::new(1).unwrap();
        {
            let _writing = cancelled.provisional(job, 500);
            assert!(
                cancelled.is_cancelled(&fire(1, 1_000_000, TriggerType::Cron)),
                "every scheduled fire after the cutoff, whatever its id"
            );
            let due_before_the_cutoff = PendingFire {
                fire_at_ms: 500,
                ..fire(1, 4, TriggerType::Cron)
            };
            assert!(!cancelled.is_cancelled(&due_before_the_cutoff));
            // The change commits: its own cancellation is recorded beside the provisional one.
            cancelled.record(cancellation(1, 10, 5_000));
            cancelled.forget_before(1_000, 1_000);
            assert!(
                cancelled.is_cancelled(&fire(1, 1_000_000, TriggerType::Cron)),
                "a poll's clean-up leaves the provisional one alone"
            );
        }
        assert!(cancelled.is_cancelled(&fire(1, 10, TriggerType::Cron)));
        assert!(
            !cancelled.is_cancelled(&fire(1, 11, TriggerType::Cron)),
            "planned after the change: free again once the provisional one is gone"
        );
        {
            let _failed_change = cancelled.provisional(JobId::new(2).unwrap(), 500);
        }
        assert!(!cancelled.is_cancelled(&fire(2, 5, TriggerType::Cron)));
        assert_eq!(cancelled.len(), 1, "nothing left of the failed change");
    }
}
