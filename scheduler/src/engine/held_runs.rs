//! Run rows held back for their results, so that a run that finishes quickly is written once.
//!
//! A fire of a batch has no row until the broker acknowledged its trigger; the
//! [`AckWriter`](crate::engine::acks::AckWriter) then inserts it DISPATCHED, and the run's
//! result later updates it FINISHED. On PostgreSQL neither write of a row is cheap: the
//! update changes columns that partial indexes select on, so it cannot be done in place (no
//! HOT update) and takes a new entry in every index of `job_logs`. With the default emit lead
//! the result of a short handler comes about a second after the acknowledgement.
//!
//! So the ack writer holds an acknowledged batch fire here instead of writing it at once, for
//! `schedule.run_row_hold` plus how far behind the results consumer is (see
//! [`HeldRuns::hold_now`]). If the run's result comes meanwhile, the
//! [results consumer](crate::readers::results) takes the held run ([`HeldRuns::take`]) and
//! writes its row once, already FINISHED, in the transaction that records the batch's
//! results; the ack writer then settles the fire's batch ([`HeldRuns::due`] hands it the log
//! ids). A run still held when its time is up is written DISPATCHED by the ack writer, as
//! before, and its result completes it by the update. A quick success that its job's history
//! policy would drop is not written at all: it goes into a set of unkept runs
//! ([`crate::store::unkept_run_set`]).
//!
//! What holding changes, and why it is safe:
//! - Until its row is written the fire stays open in its batch and in the
//!   [`AckLedger`](crate::engine::acks::AckLedger), exactly as a fire whose acknowledgement
//!   waits for a slow database: this node's claims leave it alone, and the batch's lease
//!   (which `run_row_hold` must stay well inside, see
//!   [`ScheduleConfig::check_run_row_hold`](crate::config::ScheduleConfig::check_run_row_hold)) keeps other
//!   nodes off it. If the node dies meanwhile, a claimer emits the fire again under the same
//!   trigger id, which executors recognise; the window is the hold instead of the 50 ms
//!   linger.
//! - A run shows in the API and the console when its result comes or when the hold ends,
//!   not when its trigger reaches the broker: at most the hold later.
//! - Why the hold grows while results lag: a result is worth holding for only if the results
//!   consumer takes it before the hold ends, and a consumer behind by a second takes every
//!   result a second later. A fixed hold therefore lost its point exactly under load: at
//!   10 000 runs a second with handlers that log, the results delay crept up by a tenth of a
//!   second a minute, fewer and fewer results found their run still held, most rows were
//!   written twice again, and the database's extra work pushed the results further behind
//!   until fires misfired (benchmarks, "Scheduling first, history after"). Held for the
//!   consumer's lag on top, each row stays written once, and the hold is back at
//!   `run_row_hold` once the consumer catches up; the longer window a node death re-emits
//!   (same trigger ids) exists only while results lag. The lag is the age of the oldest
//!   result in the batch the consumer just received, by its record timestamp (the
//!   executor's clock): a skewed clock can only lengthen the hold up to its bound or leave it
//!   at `run_row_hold`, both safe.
//! - Only this node's results consumer can take a run this node holds. With several
//!   scheduler nodes, a result read by another node waits for the row (up to the hold) and
//!   nothing is gained, so a node holds runs only while it reads every partition of the
//!   results topic ([`HeldRuns::set_reading_every_result`], from the consumer's statistics).
//! - Shutdown: the ack writer stops handing runs out ([`HeldRuns::close`]), waits for the
//!   results consumer to report the runs it took, and writes every run still held.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use kadence_schemas::TriggerId;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::domain::model::Completion;
use crate::metrics::HeldRunsMetrics;
use crate::store::DispatchAck;

/// Acknowledged batch fires whose rows wait for their results (see the module docs).
pub struct HeldRuns {
    /// The hold while results keep up (`schedule.run_row_hold`).
    hold: Duration,
    /// The longest hold, however far the results lag (half the lease).
    longest: Duration,
    /// How far behind the results consumer is, in milliseconds ([`HeldRuns::results_lag`]).
    results_lag_ms: AtomicU64,
    /// This node's results consumer reads every partition of the results topic.
    reading_every_result: AtomicBool,
    inner: Mutex<Inner>,
    metrics: HeldRunsMetrics,
    /// Woken when the ack writer has something new to write: a run given back, a run
    /// written by the results consumer, the last taken run reported.
    changed: Notify,
}

#[derive(Default)]
struct Inner {
    held: HashMap<TriggerId, DispatchAck>,
    /// Trigger ids in the order they were held, with the instant each hold ends. A hold never
    /// ends before the one held before it (see [`HeldRuns::hold`]), so this is also the order
    /// they end in. An entry whose run was taken is skipped when its turn comes.
    ends: VecDeque<(Instant, TriggerId)>,
    /// Runs to write DISPATCHED at once: given back by a results write that failed.
    given_back: Vec<DispatchAck>,
    /// Log ids of runs the results consumer wrote, for the ack writer to settle.
    written: Vec<i64>,
    /// Runs the results consumer took and has not reported yet.
    taken: usize,
    closed: bool,
}

/// What the ack writer has to do for held runs (see [`HeldRuns::due`]).
#[derive(Debug, Default)]
pub struct DueRuns {
    /// Runs whose rows must be written DISPATCHED now.
    pub unwritten: Vec<DispatchAck>,
    /// Log ids of runs whose rows the results consumer wrote: their batches settle.
    pub written: Vec<i64>,
}

impl HeldRuns {
    /// Holds for `hold` while results keep up, longer while they lag but never past
    /// `longest` (zero `hold`: never holds).
    pub fn new(hold: Duration, longest: Duration) -> Self {
        HeldRuns {
            hold,
            longest: longest.max(hold),
            results_lag_ms: AtomicU64::new(0),
            metrics: HeldRunsMetrics::new(),
            reading_every_result: AtomicBool::new(false),
            inner: Mutex::default(),
            changed: Notify::new(),
        }
    }

    /// Whether an acknowledged batch fire is held now rather than written.
    pub fn holds(&self) -> bool {
        self.holds_with(&self.lock())
    }

    fn holds_with(&self, inner: &Inner) -> bool {
        !self.hold.is_zero() && self.reading_every_result.load(Ordering::Relaxed) && !inner.closed
    }

    /// Whether this node's results consumer reads every partition of the results topic.
    pub fn set_reading_every_result(&self, every: bool) {
        let was = self.reading_every_result.swap(every, Ordering::Relaxed);
        self.show_hold();
        if was != every && !self.hold.is_zero() {
            tracing::info!(
                holding = every,
                "run rows {} for their results: this node {} every partition of the results topic",
                if every {
                    "are held"
                } else {
                    "are no longer held"
                },
                if every { "reads" } else { "no longer reads" },
            );
        }
    }

    /// How far behind its records this node's results consumer is: the age of the oldest
    /// result in the batch it just received (zero when it found nothing waiting).
    pub fn results_lag(&self, lag: Duration) {
        let lag_ms = u64::try_from(lag.as_millis()).unwrap_or(u64::MAX);
        self.results_lag_ms.store(lag_ms, Ordering::Relaxed);
        self.show_hold();
    }

    /// The hold in effect, in its gauge: [`HeldRuns::hold_now`] while rows are held, else 0.
    fn show_hold(&self) {
        let holding = !self.hold.is_zero() && self.reading_every_result.load(Ordering::Relaxed);
        let hold = if holding {
            self.hold_now()
        } else {
            Duration::ZERO
        };
        self.metrics.hold.set(hold.as_secs_f64());
    }

    /// The gauges of the hold in effect and of the runs held, for the node's registry.
    pub fn metrics(&self) -> &HeldRunsMetrics {
        &self.metrics
    }

    /// How long a run held now is held: `run_row_hold`, plus how far behind the results
    /// consumer is ([`HeldRuns::results_lag`]), up to the longest hold. A result that comes
    /// `run_row_hold` after its trigger's acknowledgement while results keep up comes that
    /// much later while they lag, and must still find its run held.
    pub fn hold_now(&self) -> Duration {
        let lag = Duration::from_millis(self.results_lag_ms.load(Ordering::Relaxed));
        (self.hold + lag).min(self.longest)
    }

    /// Holds the row of `ack`, an acknowledged fire of a batch, until the run's result comes
    /// or the hold ([`HeldRuns::hold_now`]) ends, if this node holds rows now
    /// ([`HeldRuns::holds`]); otherwise, or for an acknowledgement without its fire, hands
    /// `ack` back to be written at once. When the hold shrinks (the results caught up), a run
    /// held now still waits for the runs held before it: holds end in the order they began,
    /// which keeps [`HeldRuns::due`] a walk from the front, and the hold shrinks by no more
    /// than the time that passes.
    pub fn hold(&self, ack: DispatchAck) -> Option<DispatchAck> {
        let Some(trigger_id) = ack.fire.as_deref().map(|fire| fire.trigger_id.clone()) else {
            return Some(ack);
        };
        let mut inner = self.lock();
        if !self.holds_with(&inner) {
            return Some(ack);
        }
        let end = Instant::now() + self.hold_now();
        let end = inner.ends.back().map_or(end, |(last, _)| end.max(*last));
        inner.ends.push_back((end, trigger_id.clone()));
        inner.held.insert(trigger_id, ack);
        self.count_held(&inner);
        None
    }

    /// Takes the held runs of the trigger ids of `completions`, for the results consumer to
    /// write with their results (the store decides which result completes a run: a result of
    /// another app does not, and the run is then written DISPATCHED). Nothing once closed.
    pub fn take(&self, completions: &[Completion]) -> TakenRuns<'_> {
        let mut inner = self.lock();
        let mut acks = Vec::new();
        if !inner.closed {
            for completion in completions {
                if let Some(ack) = inner.held.remove(&completion.trigger_id) {
                    acks.push(ack);
                }
            }
            inner.taken += acks.len();
            self.count_held(&inner);
        }
        TakenRuns { runs: self, acks }
    }

    /// What the ack writer must write or settle now: the runs whose hold ended by `now` and
    /// those given back, and the runs the results consumer wrote.
    pub fn due(&self, now: Instant) -> DueRuns {
        let mut inner = self.lock();
        let mut due = DueRuns {
            unwritten: std::mem::take(&mut inner.given_back),
            written: std::mem::take(&mut inner.written),
        };
        while inner.ends.front().is_some_and(|(end, _)| *end <= now) {
            let (_, trigger_id) = inner.ends.pop_front().expect("checked");
            if let Some(ack) = inner.held.remove(&trigger_id) {
                due.unwritten.push(ack);
            }
        }
        self.count_held(&inner);
        due
    }

    /// When the earliest hold still running ends.
    pub fn next_end(&self) -> Option<Instant> {
        let mut inner = self.lock();
        // Entries of taken runs are dropped here, so the writer does not wake for them.
        while let Some((_, trigger_id)) = inner.ends.front() {
            if inner.held.contains_key(trigger_id) {
                break;
            }
            inner.ends.pop_front();
        }
        inner.ends.front().map(|(end, _)| *end)
    }

    /// Resolves once something was given back or written, or the last taken run reported.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Stops holding and handing runs out (shutdown): every run still held is due now.
    pub fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        let now = Instant::now();
        for (end, _) in inner.ends.iter_mut() {
            *end = now;
        }
    }

    /// Runs held now.
    pub fn len(&self) -> usize {
        self.lock().held.len()
    }

    /// Whether no run is held now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs the results consumer took and has not reported yet.
    pub fn taken(&self) -> usize {
        self.lock().taken
    }

    /// The runs held, in their gauge.
    fn count_held(&self, inner: &Inner) {
        self.metrics.held.set(inner.held.len() as i64);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("held runs lock")
    }
}

/// Held runs the results consumer took ([`HeldRuns::take`]). Reported written with
/// [`TakenRuns::written`]; dropped unreported (the write failed), they are given back for the
/// ack writer to write DISPATCHED, and their results are completed by the update next time.
pub struct TakenRuns<'a> {
    runs: &'a HeldRuns,
    /// The runs not reported yet.
    acks: Vec<DispatchAck>,
}

impl TakenRuns<'_> {
    /// The runs taken.
    pub fn acks(&self) -> Vec<&DispatchAck> {
        self.acks.iter().collect()
    }

    /// Their rows are written (committed): their batches may settle.
    pub fn written(mut self) {
        let acks = std::mem::take(&mut self.acks);
        let mut inner = self.runs.lock();
        inner.taken -= acks.len();
        inner.written.extend(acks.iter().map(|ack| ack.log_id));
        drop(inner);
        self.runs.changed.notify_one();
    }
}

impl Drop for TakenRuns<'_> {
    fn drop(&mut self) {
        if self.acks.is_empty() {
            return;
        }
        let mut inner = self.runs.lock();
        inner.taken -= self.acks.len();
        inner.given_back.append(&mut self.acks);
        drop(inner);
        self.runs.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::model::PendingFire;

    /// The acknowledged fire `log_id` of job 7 due at `at_ms` (trigger id `7-{at_ms}`), of app
    /// `demo`.
    fn ack(log_id: i64, at_ms: i64) -> DispatchAck {
        let mut fire = PendingFire::for_test(7, at_ms);
        fire.log_id = log_id;
        DispatchAck {
            log_id,
            partition: 0,
            dispatched_at_ms: 0,
            executor_id: None,
            fire: Some(Box::new(fire)),
        }
    }

    /// A success of the fire of job 7 due at `at_ms`.
    fn result(at_ms: i64) -> Completion {
        Completion {
            trigger_id: PendingFire::for_test(7, at_ms).trigger_id,
            app: Some("demo".to_owned()),
            executor_id: "executor-1".into(),
            code: 200,
            message: None,
            started_at_ms: 0,
            finished_at_ms: 0,
            retry_after_ms: None,
        }
    }

    fn holding(hold: Duration) -> HeldRuns {
        let runs = HeldRuns::new(hold, Duration::from_secs(5));
        runs.set_reading_every_result(true);
        runs
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_is_held_only_while_this_node_reads_every_result() {
        let runs = HeldRuns::new(Duration::from_secs(2), Duration::from_secs(5));
        assert!(!runs.holds(), "not before the consumer's first statistics");
        runs.set_reading_every_result(true);
        assert!(runs.holds());
        runs.set_reading_every_result(false);
        assert!(!runs.holds());
        let handed_back = runs.hold(ack(1, 1000)).expect("not held: written at once");
        assert_eq!(handed_back.log_id, 1);
        let off = holding(Duration::ZERO);
        assert!(!off.holds(), "a zero hold turns holding off");
        assert!(off.hold(ack(1, 1000)).is_some());
        let closed = holding(Duration::from_secs(2));
        closed.close();
        assert!(!closed.holds());
        assert!(closed.hold(ack(1, 1000)).is_some());
        let without_fire = DispatchAck {
            fire: None,
            ..ack(1, 1000)
        };
        let open = holding(Duration::from_secs(2));
        assert!(
            open.hold(without_fire).is_some(),
            "a row that exists is marked at once"
        );
        assert!(open.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_result_takes_its_run_and_a_run_without_one_is_due_when_its_hold_ends() {
        let runs = holding(Duration::from_secs(2));
        assert!(runs.hold(ack(1, 1000)).is_none());
        assert!(runs.hold(ack(2, 2000)).is_none());
        // An unknown trigger takes nothing.
        assert!(runs.take(&[result(3000)]).acks().is_empty());
        let taken = runs.take(&[result(1000)]);
        assert_eq!(taken.acks().len(), 1);
        assert_eq!(runs.taken(), 1);
        taken.written();
        assert_eq!(runs.taken(), 0);
        let due = runs.due(Instant::now());
        assert_eq!(due.written, [1]);
        assert!(due.unwritten.is_empty(), "run 2 is still held");
        // Run 1's hold entry is skipped: the next end is run 2's.
        assert_eq!(
            runs.next_end(),
            Some(Instant::now() + Duration::from_secs(2))
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        let due = runs.due(Instant::now());
        let logs: Vec<i64> = due.unwritten.iter().map(|ack| ack.log_id).collect();
        assert_eq!(logs, [2]);
        assert_eq!(runs.next_end(), None);
        assert!(runs.take(&[result(2000)]).acks().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn while_results_lag_runs_are_held_longer_up_to_the_longest_hold() {
        let runs = holding(Duration::from_secs(2));
        let start = Instant::now();
        runs.results_lag(Duration::from_millis(1_500));
        assert_eq!(runs.hold_now(), Duration::from_millis(3_500));
        assert!(runs.hold(ack(1, 1000)).is_none());
        assert_eq!(runs.next_end(), Some(start + Duration::from_millis(3_500)));
        runs.results_lag(Duration::from_secs(60));
        assert_eq!(
            runs.hold_now(),
            Duration::from_secs(5),
            "half the lease at most"
        );
        // The results caught up: a run held now ends no earlier than the one before it.
        runs.results_lag(Duration::ZERO);
        assert_eq!(runs.hold_now(), Duration::from_secs(2));
        assert!(runs.hold(ack(2, 2000)).is_none());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(
            runs.due(Instant::now()).unwritten.is_empty(),
            "run 1 ends first"
        );
        tokio::time::advance(Duration::from_millis(1_500)).await;
        let due = runs.due(Instant::now());
        let logs: Vec<i64> = due.unwritten.iter().map(|ack| ack.log_id).collect();
        assert_eq!(logs, [1, 2]);
        // Once it has passed, a run held now is held for the hold of now.
        assert!(runs.hold(ack(3, 3000)).is_none());
        assert_eq!(
            runs.next_end(),
            Some(Instant::now() + Duration::from_secs(2))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn runs_of_a_failed_write_are_given_back_to_be_written_dispatched() {
        let runs = holding(Duration::from_secs(2));
        assert!(runs.hold(ack(1, 1000)).is_none());
        {
            let taken = runs.take(&[result(1000)]);
            assert_eq!(taken.acks().len(), 1);
            // The write failed: the guard is dropped unreported.
        }
        assert_eq!(runs.taken(), 0);
        let due = runs.due(Instant::now());
        assert_eq!(
            due.unwritten.len(),
            1,
            "due at once, not at the end of its hold"
        );
        assert!(due.written.is_empty());
        assert!(
            runs.take(&[result(1000)]).acks().is_empty(),
            "a run given back is not taken again: its row is written DISPATCHED first"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn closing_makes_every_held_run_due_and_hands_none_out() {
        let runs = holding(Duration::from_secs(2));
        assert!(runs.hold(ack(1, 1000)).is_none());
        runs.close();
        assert!(runs.take(&[result(1000)]).acks().is_empty());
        assert_eq!(runs.due(Instant::now()).unwritten.len(), 1);
    }
}
