//! Claims: the recovery half of the durable wheel.
//!
//! Every fire batch is owned by the node that wrote it until its earliest unacknowledged fire
//! plus the lease (every pending fire row, for manual fires, retries and children: until its
//! fire time plus the lease). If that node dies (its wheel is gone) or could not get a trigger
//! acknowledged in time, the lease expires and any live node — including a restarted one —
//! claims the batch (or row) and puts the fires not yet recorded in its own wheel, where they
//! fire at once with the **same trigger ids**, so a re-emission is recognisable downstream.
//! This is what XXL-JOB's in-memory ring cannot do.
//!
//! A fire this node already got acknowledged, whose run is still on its way to a slow
//! database ([`AckLedger`]), is never emitted again: the claim only takes it back, and the
//! pending write completes it.

use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::{FailureLog, Severity};
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::engine::acks::AckLedger;
use crate::engine::intake::FireIntake;
use crate::store::StoreError;

/// Claims expired pending fires for this node.
pub struct Claimer {
    intake: FireIntake,
    batch_size: u32,
    ledger: Arc<AckLedger>,
}

impl Claimer {
    /// A claimer taking over up to `batch_size` fires a pass through `intake` (which owns
    /// them for this node), leaving alone the fires whose acknowledgement `ledger` holds.
    pub fn new(intake: FireIntake, batch_size: u32, ledger: Arc<AckLedger>) -> Self {
        Claimer {
            intake,
            batch_size,
            ledger,
        }
    }

    /// One claim pass at `now_ms`: returns how many fires were taken over.
    pub async fn claim_once(&self, now_ms: i64) -> Result<usize, StoreError> {
        self.intake
            .claim_expired(now_ms, self.batch_size, &self.ledger)
            .await
    }

    /// Claims every `interval` until `shutdown`; a full batch claims again at once.
    pub async fn run(self, clock: Arc<dyn Clock>, interval: Duration, shutdown: CancellationToken) {
        let mut failures = FailureLog::new("claiming expired pending fires", Severity::Error);
        loop {
            let claimed = self.claim_once(clock.now_ms()).await;
            failures.record(&claimed);
            let again = claimed.is_ok_and(|claimed| claimed >= self.batch_size as usize);
            if again {
                continue;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
        }
    }
}
