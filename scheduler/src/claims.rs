//! Claims: the recovery half of the durable wheel.
//!
//! Every pending fire row is owned by the node that wrote it until `fire_at + lease`. If that
//! node dies (its wheel is gone) or could not get the trigger acknowledged in time, the lease
//! expires and any live node — including a restarted one — claims the row and puts it in its
//! own wheel, where it fires at once with the **same trigger id**, so a re-emission is
//! recognisable downstream. This is what XXL-JOB's in-memory ring cannot do.
//!
//! A fire this node already got acknowledged, whose DISPATCHED mark is still on its way to a
//! slow database ([`AckLedger`]), is never emitted again: the claim only takes the row back,
//! and the pending mark completes it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::acks::AckLedger;
use crate::clock::Clock;
use crate::clock::millis;
use crate::model::PendingFire;
use crate::store::{Store, StoreError};

/// Claims expired pending fires for this node.
pub struct Claimer {
    store: Arc<dyn Store>,
    node_id: String,
    lease: Duration,
    batch_size: u32,
    wheel: mpsc::Sender<PendingFire>,
    ledger: Arc<AckLedger>,
}

impl Claimer {
    /// A claimer for `node_id` feeding `wheel`, leaving alone the fires whose
    /// acknowledgement `ledger` holds.
    pub fn new(
        store: Arc<dyn Store>,
        node_id: String,
        lease: Duration,
        batch_size: u32,
        wheel: mpsc::Sender<PendingFire>,
        ledger: Arc<AckLedger>,
    ) -> Self {
        Claimer {
            store,
            node_id,
            lease,
            batch_size,
            wheel,
            ledger,
        }
    }

    /// One claim pass at `now_ms`: returns how many fires were taken over.
    pub async fn claim_once(&self, now_ms: i64) -> Result<usize, StoreError> {
        let fires = self
            .store
            .claim_expired_fires(
                &self.node_id,
                now_ms,
                now_ms + millis(self.lease),
                self.batch_size,
            )
            .await?;
        let claimed = fires.len();
        let (acknowledged, fires): (Vec<PendingFire>, Vec<PendingFire>) = fires
            .into_iter()
            .partition(|fire| self.ledger.is_unwritten(fire.log_id));
        if !acknowledged.is_empty() {
            tracing::info!(
                acknowledged = acknowledged.len(),
                "claimed fires already acknowledged by the broker; not emitting them again, their marks are being written"
            );
        }
        if !fires.is_empty() {
            tracing::warn!(claimed = fires.len(), node_id = %self.node_id,
                "claimed pending fires whose lease expired; emitting them with their original trigger ids");
        }
        for fire in fires {
            if self.wheel.send(fire).await.is_err() {
                break;
            }
        }
        Ok(claimed)
    }

    /// Claims every `interval` until `shutdown`; a full batch claims again at once.
    pub async fn run(self, clock: Arc<dyn Clock>, interval: Duration, shutdown: CancellationToken) {
        loop {
            let again = match self.claim_once(clock.now_ms()).await {
                Ok(claimed) => claimed >= self.batch_size as usize,
                Err(error) => {
                    tracing::error!(%error, "claiming expired pending fires failed; retrying next tick");
                    false
                }
            };
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
