//! Acknowledgements: recording that the broker took a trigger, without ever re-emitting it.
//!
//! When the broker acknowledges a trigger, dispatch notes its job-log id in the
//! [`AckLedger`] and hands a [`DispatchAck`] to the [`AckWriter`], which marks the runs
//! DISPATCHED in batches. A batch the database refuses (busy, unreachable) is kept and written
//! again with backoff until it lands: an acknowledgement is never forgotten.
//!
//! Until its mark is written the run's row still looks pending, and once its lease ends the
//! claim loop would take it over and emit the trigger a second time. The ledger prevents that
//! on this node: the claimer leaves a claimed fire alone when its acknowledgement is waiting
//! here, so a slow database delays the marks but never turns into re-emitted triggers. (The
//! scheduling loops also have database connections of their own, see
//! [`DatabaseConfig`](crate::config::DatabaseConfig), so API traffic cannot hold the marks
//! back in the first place.)

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use kadence_kafka::Backoff;
use tokio::sync::mpsc;

use crate::store::{DispatchAck, Store, StoreError};

/// Job-log ids of triggers the broker acknowledged whose DISPATCHED mark is not written yet.
#[derive(Default)]
pub struct AckLedger {
    unwritten: Mutex<HashSet<i64>>,
}

impl AckLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        AckLedger::default()
    }

    /// The broker acknowledged the trigger of run `log_id`.
    pub fn acknowledged(&self, log_id: i64) {
        self.unwritten.lock().expect("ledger lock").insert(log_id);
    }

    /// The marks of these runs are written.
    fn written(&self, acks: &[DispatchAck]) {
        let mut unwritten = self.unwritten.lock().expect("ledger lock");
        for ack in acks {
            unwritten.remove(&ack.log_id);
        }
    }

    /// Whether run `log_id` was acknowledged and its mark is still to be written.
    pub fn is_unwritten(&self, log_id: i64) -> bool {
        self.unwritten
            .lock()
            .expect("ledger lock")
            .contains(&log_id)
    }

    /// Acknowledgements waiting to be written.
    pub fn len(&self) -> usize {
        self.unwritten.lock().expect("ledger lock").len()
    }

    /// Whether every acknowledgement is written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Writes acknowledgements to the store in batches of what is ready.
pub struct AckWriter {
    store: Arc<dyn Store>,
    ledger: Arc<AckLedger>,
    acks: mpsc::Receiver<DispatchAck>,
    batch_max: usize,
    /// The batch being written: kept across failed attempts.
    batch: Vec<DispatchAck>,
}

impl AckWriter {
    /// A writer of the acknowledgements arriving on `acks`, at most `batch_max` a batch.
    pub fn new(
        store: Arc<dyn Store>,
        ledger: Arc<AckLedger>,
        acks: mpsc::Receiver<DispatchAck>,
        batch_max: usize,
    ) -> Self {
        AckWriter {
            store,
            ledger,
            acks,
            batch_max: batch_max.max(1),
            batch: Vec::with_capacity(batch_max),
        }
    }

    /// One attempt: fills the batch with what has arrived (waiting for the first when it is
    /// empty) and writes it. Returns how many marks were written, or `None` once the channel
    /// is closed and everything is written. On an error the batch is kept for the next call.
    pub async fn write_once(&mut self) -> Result<Option<usize>, StoreError> {
        if self.batch.is_empty() {
            match self.acks.recv().await {
                Some(ack) => self.batch.push(ack),
                None => return Ok(None),
            }
        }
        while self.batch.len() < self.batch_max {
            match self.acks.try_recv() {
                Ok(ack) => self.batch.push(ack),
                Err(_) => break,
            }
        }
        self.store.mark_dispatched(&self.batch).await?;
        self.ledger.written(&self.batch);
        let written = self.batch.len();
        self.batch.clear();
        Ok(Some(written))
    }

    /// Writes until the channel closes (dispatch stopped) and every mark is written. A failed
    /// batch is retried with backoff (50 ms doubling to 5 s) for as long as it takes.
    pub async fn run(mut self) {
        let mut backoff = Backoff::standard();
        loop {
            match self.write_once().await {
                Ok(Some(_)) => backoff.reset(),
                Ok(None) => return,
                Err(error) => {
                    tracing::warn!(%error, batch = self.batch.len(),
                        "cannot mark acknowledged triggers dispatched; retrying (they are not emitted again meanwhile)");
                    tokio::time::sleep(backoff.next_delay()).await;
                }
            }
        }
    }
}
