//! Claims: the recovery half of the durable wheel.
//!
//! Every pending fire row is owned by the node that wrote it until `fire_at + lease`. If that
//! node dies (its wheel is gone) or could not get the trigger acknowledged in time, the lease
//! expires and any live node — including a restarted one — claims the row and puts it in its
//! own wheel, where it fires at once with the **same trigger id**, so a re-emission is
//! recognisable downstream. This is what XXL-JOB's in-memory ring cannot do.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::model::PendingFire;
use crate::preread::millis;
use crate::store::{Store, StoreError};

/// Claims expired pending fires for this node.
pub struct Claimer {
    store: Arc<dyn Store>,
    node_id: String,
    lease: Duration,
    batch_size: u32,
    wheel: mpsc::Sender<PendingFire>,
}

impl Claimer {
    /// A claimer for `node_id` feeding `wheel`.
    pub fn new(
        store: Arc<dyn Store>,
        node_id: String,
        lease: Duration,
        batch_size: u32,
        wheel: mpsc::Sender<PendingFire>,
    ) -> Self {
        Claimer {
            store,
            node_id,
            lease,
            batch_size,
            wheel,
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
        if claimed > 0 {
            tracing::warn!(claimed, node_id = %self.node_id,
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
