//! Cancelled fires: stopping a job stops its fires, whichever node holds them.
//!
//! The pre-read loop plans a job's fires up to the pre-read window ahead and every node keeps
//! the ones it wrote in its in-memory wheel. A stop, or an edit that changes the schedule,
//! cancels the job's planned fires in the same transaction (state CANCELLED, see
//! [`Store::set_job_status`](crate::store::Store::set_job_status)); that alone keeps a claim
//! from ever emitting them. The copies already in a wheel are dropped here, at emission:
//! [`CancelledFires`] holds, per job, the highest cancelled job-log id, and dispatch drops a
//! scheduled fire of that job whose id is not above it (fires planned after the change get
//! higher ids, so they pass).
//!
//! The node that served the stop records it at once; every node also reads the recent
//! cancellations from the store every `schedule.cancel_poll_interval` ([`CancellationPoller`]),
//! so a fire planned before a stop and due later than `emit_lead + cancel_poll_interval` after
//! it is never emitted by any node. (A fire emitted ahead of its time through the emit lead is
//! already on the broker; its executor holds it until its scheduled time and runs it. Its row
//! then shows the result it reports.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kadence_schemas::{JobId, TriggerType};
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::model::PendingFire;
use crate::store::{FireCancellation, Store, StoreError};

/// Per job, the cancellation that dispatch must respect: fires of the job's schedule with a
/// job-log id up to `up_to_log_id` are not emitted.
#[derive(Default)]
pub struct CancelledFires {
    by_job: Mutex<HashMap<JobId, FireCancellation>>,
}

impl CancelledFires {
    /// An empty set.
    pub fn new() -> Self {
        CancelledFires::default()
    }

    /// Records a cancellation (merging with one known for the same job).
    pub fn record(&self, cancellation: FireCancellation) {
        let mut by_job = self.by_job.lock().expect("cancellations lock");
        by_job
            .entry(cancellation.job_id)
            .and_modify(|known| {
                known.up_to_log_id = known.up_to_log_id.max(cancellation.up_to_log_id);
                known.until_ms = known.until_ms.max(cancellation.until_ms);
            })
            .or_insert(cancellation);
    }

    /// Whether `fire` was cancelled: planned by the job's schedule, and written before the
    /// job's latest stop or schedule change.
    pub fn is_cancelled(&self, fire: &PendingFire) -> bool {
        let planned_by_schedule = matches!(
            fire.trigger_type,
            TriggerType::Cron | TriggerType::FixRate | TriggerType::FixDelay | TriggerType::Misfire
        );
        planned_by_schedule
            && self
                .by_job
                .lock()
                .expect("cancellations lock")
                .get(&fire.job_id)
                .is_some_and(|cancelled| fire.log_id <= cancelled.up_to_log_id)
    }

    /// Forgets cancellations whose fires can no longer be held by any node: their lease ended
    /// more than `grace_ms` before `now_ms` (a claim never takes a cancelled row).
    pub fn forget_before(&self, now_ms: i64, grace_ms: i64) {
        self.by_job
            .lock()
            .expect("cancellations lock")
            .retain(|_, cancelled| cancelled.until_ms + grace_ms > now_ms);
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
    store: Arc<dyn Store>,
    cancelled: Arc<CancelledFires>,
    /// How long a cancellation is kept after its fires' lease ended.
    grace_ms: i64,
}

impl CancellationPoller {
    /// A poller reading through `store` into `cancelled`; entries are kept `grace` past their
    /// lease.
    pub fn new(store: Arc<dyn Store>, cancelled: Arc<CancelledFires>, grace: Duration) -> Self {
        CancellationPoller {
            store,
            cancelled,
            grace_ms: crate::preread::millis(grace),
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
        loop {
            if let Err(error) = self.poll_once(clock.now_ms()).await {
                tracing::warn!(%error, "reading cancelled fires failed; retrying");
            }
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

    fn cancellation(job: i64, up_to_log_id: i64, until_ms: i64) -> FireCancellation {
        FireCancellation {
            job_id: JobId::new(job).unwrap(),
            up_to_log_id,
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
    fn merges_and_forgets_after_the_lease_and_grace() {
        let cancelled = CancelledFires::new();
        cancelled.record(cancellation(1, 10, 5_000));
        cancelled.record(cancellation(1, 7, 9_000));
        assert!(cancelled.is_cancelled(&fire(1, 10, TriggerType::Cron)));
        cancelled.forget_before(9_500, 1_000);
        assert_eq!(cancelled.len(), 1, "the later lease keeps it");
        cancelled.forget_before(10_000, 1_000);
        assert!(cancelled.is_empty());
    }
}
