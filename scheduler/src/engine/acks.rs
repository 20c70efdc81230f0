//! Acknowledgements: recording that the broker took a trigger, without ever re-emitting it.
//!
//! When the broker acknowledges a trigger, dispatch notes its job-log id in the
//! [`AckLedger`] and hands a [`SettledFire::Acknowledged`] to the [`AckWriter`]; a fire of a
//! batch that dispatch drops because a stop or an edit cancelled it is handed over as
//! [`SettledFire::Cancelled`]. The writer records them in batches, one transaction each
//! ([`Fires::mark_dispatched`]): the run rows of batch fires are written, already
//! DISPATCHED (a run exists from the moment its trigger is on the broker); rows that exist
//! (manual fires, retries, children) are marked DISPATCHED; and the batches concerned are
//! settled: their lease moves to their earliest fire still open ([`OpenBatches`]), or they are
//! deleted. While the node reads every result, the row of a batch fire is first held for
//! its result ([`crate::engine::held_runs`]): the results consumer writes it once, already
//! FINISHED, and the writer settles its batch; a row whose hold ends is written DISPATCHED
//! here. A batch the database refuses (busy, unreachable) is kept and written again with
//! backoff until it lands: an acknowledgement is never forgotten.
//!
//! Until it is written the fire still looks pending (in its batch, or as a pending row), and
//! once its lease ends the claim loop would take it over and emit the trigger a second time.
//! The ledger prevents that on this node: the claimer leaves a claimed fire alone when its
//! acknowledgement is waiting here, so a slow database delays the marks but never turns into
//! re-emitted triggers. (The
//! scheduling loops also have database connections of their own, see
//! [`DatabaseConfig`](crate::config::DatabaseConfig), so API traffic cannot hold the marks
//! back in the first place.)

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kadence_kafka::{Backoff, FailureLog, Severity};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;

use crate::engine::held_runs::HeldRuns;
use crate::engine::open_batches::OpenBatches;
use crate::store::{DispatchAck, DispatchMarks, Fires, StoreError};

/// What became of a fire dispatch took from the wheel, for the [`AckWriter`].
#[derive(Debug)]
pub enum SettledFire {
    /// The broker acknowledged its trigger.
    Acknowledged(DispatchAck),
    /// Not emitted: a stop or a schedule edit cancelled it (the fire's log id). Only its
    /// batch needs to know.
    Cancelled(i64),
}

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

    /// The marks of these runs (log ids) are written.
    fn written(&self, log_ids: impl IntoIterator<Item = i64>) {
        let mut unwritten = self.unwritten.lock().expect("ledger lock");
        for log_id in log_ids {
            unwritten.remove(&log_id);
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

/// How long the writer goes on collecting after the first acknowledgement of a batch.
///
/// Fires spread over the second (each job at its own millisecond) reach the writer one at a
/// time; writing each alone cost a transaction, a run insert and a batch update per trigger
/// (2.4 rows per trigger and several times the CPU of the same load in bursts). A write also
/// moves the lease of every fire batch it touches, and spread fires touch most of the
/// node's batches (one per shard and scan) in every write, so at 1 000 spread fires a
/// second a 10 ms linger still cost PostgreSQL more per trigger than the scheduler's whole
/// fire path; 50 ms writes five times fewer batch rows. Nothing waits for the write: the
/// trigger is on the broker and in the ledger already (no claim re-emits it), and with the
/// default emit lead its run's row is written long before its run can start; a result that
/// arrives first waits for its row ([`crate::readers::results`]).
pub const ACK_LINGER: Duration = Duration::from_millis(50);

/// Writes acknowledgements to the store in batches of what is ready.
pub struct AckWriter {
    store: Arc<dyn Fires>,
    ledger: Arc<AckLedger>,
    batches: Arc<OpenBatches>,
    settled: mpsc::Receiver<SettledFire>,
    /// Batch fires whose rows wait for their results ([`crate::engine::held_runs`]).
    held: Arc<HeldRuns>,
    batch_max: usize,
    /// The acknowledgements being written: kept across failed attempts.
    batch: Vec<DispatchAck>,
    /// Log ids of fires of this node's batches that the attempt settles.
    done: Vec<i64>,
    /// Dispatch stopped: nothing more will be settled.
    closed: bool,
}

impl AckWriter {
    /// A writer of what arrives on `settled`, at most `batch_max` a transaction, settling the
    /// node's `batches`.
    pub fn new(
        store: Arc<dyn Fires>,
        ledger: Arc<AckLedger>,
        batches: Arc<OpenBatches>,
        settled: mpsc::Receiver<SettledFire>,
        batch_max: usize,
    ) -> Self {
        AckWriter {
            store,
            ledger,
            batches,
            settled,
            held: Arc::new(HeldRuns::new(Duration::ZERO, Duration::ZERO)),
            batch_max: batch_max.max(1),
            batch: Vec::with_capacity(batch_max),
            done: Vec::with_capacity(batch_max),
            closed: false,
        }
    }

    /// The same writer holding the rows of acknowledged batch fires in `held` for their
    /// results (see [`crate::engine::held_runs`]).
    pub fn holding_runs_in(self, held: Arc<HeldRuns>) -> Self {
        AckWriter { held, ..self }
    }

    /// Takes in what dispatch settled: a fire of an open batch has its row written with the
    /// mark (or held for its result) and settles its batch; any other acknowledged fire has a
    /// row to mark.
    fn take(&mut self, settled: SettledFire) {
        match settled {
            SettledFire::Acknowledged(mut ack) => {
                if self.batches.contains(ack.log_id) {
                    match self.held.hold(ack) {
                        None => return,
                        Some(unheld) => ack = unheld,
                    }
                    self.done.push(ack.log_id);
                } else {
                    ack.fire = None;
                }
                self.batch.push(ack);
            }
            SettledFire::Cancelled(log_id) => {
                if self.batches.contains(log_id) {
                    self.done.push(log_id);
                }
            }
        }
    }

    /// Takes in what held runs have for the writer now: rows whose hold ended (or that
    /// were given back) to write DISPATCHED, and rows the results consumer wrote, whose
    /// batches settle.
    fn take_due_runs(&mut self) {
        let due = self.held.due(tokio::time::Instant::now());
        for ack in due.unwritten {
            self.done.push(ack.log_id);
            self.batch.push(ack);
        }
        // Rows the results consumer wrote: only their batches and the ledger are left.
        self.done.extend(due.written);
    }

    /// Collects for [`ACK_LINGER`] after the first acknowledgement, or until the batch is
    /// full. It sleeps through the linger and then takes what arrived in one go, rather than
    /// waking for each acknowledgement: dispatch settles a round's triggers one by one, and a
    /// wake-up per trigger is the very cost the rounds remove. The channel holds far more
    /// than a linger's worth, so dispatch does not wait on the sleep.
    async fn linger(&mut self) {
        let lingered = tokio::time::Instant::now() + ACK_LINGER;
        loop {
            while !self.closed && self.batch.len() < self.batch_max {
                match self.settled.try_recv() {
                    Ok(settled) => self.take(settled),
                    Err(TryRecvError::Empty) => break,
                    // Dispatch stopped: write what there is.
                    Err(TryRecvError::Disconnected) => self.closed = true,
                }
            }
            if self.closed
                || self.batch.len() >= self.batch_max
                || tokio::time::Instant::now() >= lingered
            {
                self.take_due_runs();
                return;
            }
            tokio::time::sleep_until(lingered).await;
        }
    }

    fn pending(&self) -> usize {
        self.batch.len() + self.done.len()
    }

    /// Waits until there is something to write: an acknowledgement or cancellation, a held
    /// row whose hold ended, a held row given back or written by the results consumer.
    /// Returns `false` once dispatch stopped and every held row is handed over.
    async fn wait_for_work(&mut self) -> bool {
        loop {
            self.take_due_runs();
            if self.pending() > 0 {
                return true;
            }
            if self.closed {
                // Shutdown: wait for the runs the results consumer took (its write ends
                // one way or the other), then write every row still held.
                self.held.close();
                if self.held.taken() == 0 {
                    self.take_due_runs();
                    return self.pending() > 0;
                }
                self.held.changed().await;
                continue;
            }
            let hold_ends = self.held.next_end();
            tokio::select! {
                settled = self.settled.recv() => match settled {
                    Some(settled) => self.take(settled),
                    None => self.closed = true,
                },
                () = self.held.changed() => {}
                () = sleep_until_some(hold_ends) => {}
            }
        }
    }

    /// One attempt: fills the batch with what arrives (waiting for the first when it is
    /// empty, then until [`ACK_LINGER`] has passed or the batch is full) and writes it.
    /// Returns how many marks were written, or `None` once the channel is closed and
    /// everything is written. On an error the batch is kept for the next call.
    pub async fn write_once(&mut self) -> Result<Option<usize>, StoreError> {
        if self.pending() == 0 {
            if !self.wait_for_work().await {
                return Ok(None);
            }
            self.linger().await;
        }
        let progress = self.batches.progress_with(&self.done);
        self.store
            .mark_dispatched(&DispatchMarks {
                node_id: self.batches.node_id(),
                acks: &self.batch,
                batches: &progress,
                lease_ms: self.batches.lease_ms(),
            })
            .await?;
        // The rows written here, and the batch fires settled: among them the rows the
        // results consumer wrote (a cancelled fire was never in the ledger).
        let written = self.batch.iter().map(|ack| ack.log_id);
        self.ledger
            .written(written.chain(self.done.iter().copied()));
        self.batches.settle(&self.done);
        let written = self.batch.len();
        self.batch.clear();
        self.done.clear();
        Ok(Some(written))
    }

    /// Writes until the channel closes (dispatch stopped) and every mark is written. A failed
    /// batch is retried with backoff (50 ms doubling to 5 s) for as long as it takes.
    pub async fn run(mut self) {
        let mut backoff = Backoff::standard();
        // Acknowledged triggers are not emitted again while their marks wait.
        let mut failures = FailureLog::new(
            "marking acknowledged triggers dispatched",
            Severity::Warning,
        );
        loop {
            let written = self.write_once().await;
            failures.record(&written);
            match written {
                Ok(Some(_)) => backoff.reset(),
                Ok(None) => return,
                Err(_) => tokio::time::sleep(backoff.next_delay()).await,
            }
        }
    }
}

/// Sleeps until `instant`, or forever without one.
async fn sleep_until_some(instant: Option<tokio::time::Instant>) {
    match instant {
        Some(instant) => tokio::time::sleep_until(instant).await,
        None => std::future::pending().await,
    }
}
