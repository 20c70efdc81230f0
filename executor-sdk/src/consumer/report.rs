//! What ended, told to the loop ([`Ended`] through a [`Reporter`]): runs whose lane may
//! move on, records no longer in flight. Run tasks, refusals, dead letters and the
//! acknowledgement task (`answers`) all report this way.

use std::sync::{Arc, Mutex};

use kadence_schemas::{JobId, TriggerId};
use tokio::sync::mpsc;

use crate::offsets::OffsetTracker;

/// What the loop hears from runs, refusals and the acknowledgement task.
pub(super) enum Ended {
    /// The run `trigger_id` of `job` is over here (its handler returned, or it left): its
    /// lane may start what it queued. `forget`: it did not run to a result here (handed back,
    /// or its partition moved before it started), so its id is forgotten and it runs again
    /// if the partition comes back.
    Run {
        job: JobId,
        trigger_id: TriggerId,
        forget: bool,
    },
    /// A record is done with (answered, skipped, dead-lettered, or given up): one fewer in
    /// flight. Its offset was completed in the tracker already when it was handled.
    Record,
    /// The result of the run `trigger_id` could not be published: its id is forgotten, so
    /// that the trigger, redelivered below the uncommitted offset, runs again here too.
    Unanswered { trigger_id: TriggerId },
}

/// Reports to the loop, and marks handled records complete in the offset tracker at once
/// (the revocation callback commits from it while the loop waits).
#[derive(Clone)]
pub(super) struct Reporter {
    tracker: Arc<Mutex<OffsetTracker>>,
    loop_tx: mpsc::UnboundedSender<Ended>,
}

impl Reporter {
    pub(super) fn new(
        tracker: Arc<Mutex<OffsetTracker>>,
        loop_tx: mpsc::UnboundedSender<Ended>,
    ) -> Reporter {
        Reporter { tracker, loop_tx }
    }

    /// The record at `offset` of `partition` is done with; `handled` is false when its result
    /// could not be published or its run was left to another executor: its offset then stays
    /// uncommitted so the trigger is redelivered.
    pub(super) fn record_done(&self, partition: i32, offset: i64, handled: bool) {
        if handled {
            self.tracker
                .lock()
                .expect("offset tracker lock")
                .complete(partition, offset);
        }
        let _ = self.loop_tx.send(Ended::Record);
    }

    /// The result of `trigger_id` will not be published (see [`Ended::Unanswered`]).
    pub(super) fn unanswered(&self, trigger_id: TriggerId) {
        let _ = self.loop_tx.send(Ended::Unanswered { trigger_id });
    }

    /// The run `trigger_id` of `job` is over here.
    pub(super) fn run_ended(&self, job: JobId, trigger_id: TriggerId, forget: bool) {
        let _ = self.loop_tx.send(Ended::Run {
            job,
            trigger_id,
            forget,
        });
    }
}
