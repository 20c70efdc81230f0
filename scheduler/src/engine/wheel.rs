//! The in-memory time wheel: releases each pending fire at its millisecond.
//!
//! A hashed wheel of one-millisecond slots covering [`SLOTS`] ms (about 8 s, more than the
//! pre-read window), so insertion is O(1): a fire goes into slot `fire_at % SLOTS`. The rare
//! fire further ahead waits in an overflow map until it comes within range; a fire already due
//! is released on the next advance. The wheel only holds fires that are also durable job-log
//! rows, so losing it (a crash) loses nothing: the rows are claimed again once their lease
//! ends (see [`crate::engine::claims`]).
//!
//! [`TimeWheel`] is the pure structure (tested without time); [`run_wheel`] drives it with a
//! clock, a sleep until the next deadline, and a channel of new fires.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, millis};
use crate::domain::model::PendingFire;

/// Slots in the wheel: one per millisecond, a power of two.
pub const SLOTS: usize = 8192;
const MASK: i64 = SLOTS as i64 - 1;

/// A hashed timing wheel of pending fires.
pub struct TimeWheel {
    slots: Vec<Vec<PendingFire>>,
    in_slots: usize,
    overflow: BTreeMap<i64, Vec<PendingFire>>,
    ready: VecDeque<PendingFire>,
    /// Every fire due at or before this instant has been released.
    cursor_ms: i64,
    /// Fires are released this long before their fire time (see [`run_wheel`]).
    lead_ms: i64,
}

impl TimeWheel {
    /// An empty wheel whose time starts at `now_ms`, releasing each fire at its fire time.
    pub fn new(now_ms: i64) -> Self {
        TimeWheel::with_lead(now_ms, 0)
    }

    /// An empty wheel that releases each fire `lead_ms` before its fire time.
    pub fn with_lead(now_ms: i64, lead_ms: i64) -> Self {
        TimeWheel {
            slots: (0..SLOTS).map(|_| Vec::new()).collect(),
            in_slots: 0,
            overflow: BTreeMap::new(),
            ready: VecDeque::new(),
            cursor_ms: now_ms,
            lead_ms: lead_ms.max(0),
        }
    }

    /// When `fire` leaves the wheel.
    fn release_at(&self, fire: &PendingFire) -> i64 {
        fire.fire_at_ms - self.lead_ms
    }

    /// Fires held (not yet released).
    pub fn len(&self) -> usize {
        self.in_slots + self.ready.len() + self.overflow.values().map(Vec::len).sum::<usize>()
    }

    /// Whether no fire is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a fire; O(1) unless it is more than [`SLOTS`] ms ahead.
    pub fn insert(&mut self, fire: PendingFire) {
        let at = self.release_at(&fire);
        if at <= self.cursor_ms {
            self.ready.push_back(fire);
        } else if at - self.cursor_ms < SLOTS as i64 {
            self.slots[(at & MASK) as usize].push(fire);
            self.in_slots += 1;
        } else {
            self.overflow.entry(at).or_default().push(fire);
        }
    }

    /// Moves time to `now_ms` and returns every fire due by then, in time order.
    pub fn advance(&mut self, now_ms: i64) -> Vec<PendingFire> {
        let mut due: Vec<PendingFire> = self.ready.drain(..).collect();
        if now_ms <= self.cursor_ms {
            return due;
        }
        if self.in_slots == 0 {
            // Nothing in the slots: jump instead of stepping through empty milliseconds.
            self.cursor_ms = now_ms;
        } else {
            while self.cursor_ms < now_ms && self.in_slots > 0 {
                self.cursor_ms += 1;
                // Taken, not drained: a drained slot would keep its capacity, and the jobs
                // due on the same millisecond of every second (cron's `0` millisecond) fill a
                // thousand slots in turn, so the wheel would keep a thousand vectors sized for
                // its busiest millisecond (hundreds of MiB at 2 000 jobs, found by the soak).
                let slot = std::mem::take(&mut self.slots[(self.cursor_ms & MASK) as usize]);
                self.in_slots -= slot.len();
                if due.is_empty() {
                    due = slot;
                } else {
                    due.extend(slot);
                }
            }
            self.cursor_ms = now_ms;
        }
        self.pull_overflow(&mut due);
        due
    }

    /// The instant of the next fire held, if any.
    pub fn next_deadline(&self) -> Option<i64> {
        if !self.ready.is_empty() {
            return Some(self.cursor_ms);
        }
        if self.in_slots > 0 {
            for offset in 1..=SLOTS as i64 {
                let at = self.cursor_ms + offset;
                if !self.slots[(at & MASK) as usize].is_empty() {
                    return Some(at);
                }
            }
        }
        self.overflow.keys().next().copied()
    }

    /// Moves overflow fires that are now due or within the wheel's range.
    fn pull_overflow(&mut self, due: &mut Vec<PendingFire>) {
        let limit = self.cursor_ms + SLOTS as i64;
        while let Some(entry) = self.overflow.first_entry() {
            if *entry.key() >= limit {
                break;
            }
            for fire in entry.remove() {
                let at = self.release_at(&fire);
                if at <= self.cursor_ms {
                    due.push(fire);
                } else {
                    self.slots[(at & MASK) as usize].push(fire);
                    self.in_slots += 1;
                }
            }
        }
    }
}

/// How a driven wheel spaces its releases: at most one round every `round_ms`, each taking
/// every fire whose release instant has come. Pure arithmetic, so the rule is tested without
/// time.
///
/// Fires spread over the second (each job at its own millisecond, as FIX_RATE jobs and jobs
/// created at different times fire) would otherwise leave the wheel one at a time, and each
/// would wake the dispatcher, the producer's threads, the broker and the ack writer on its own:
/// at 1 000 such fires a second the scheduler spent several times the CPU per trigger of the
/// same load due on the second, nearly all of it in thread wake-ups. A round is one wake-up,
/// one signing pass, one produce request per partition and one acknowledgement write for
/// every fire it holds.
///
/// A round never releases a fire before its release instant (`emit_lead` before its time), so
/// what the lead promises holds as before: no trigger reaches the broker earlier than that,
/// and a stop still settles `emit_lead + cancel_poll_interval` after it
/// ([`crate::engine::cancellations`]). A fire waits at most one round past its release
/// instant instead: with the default lead of 1 s and round of 20 ms it still reaches the
/// broker 980 ms or more before its time; with no lead it is at most a round late.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseRounds {
    round_ms: i64,
}

impl ReleaseRounds {
    /// Rounds at most every `round`; a zero round releases each millisecond on its own.
    pub fn new(round: Duration) -> Self {
        ReleaseRounds {
            round_ms: millis(round).max(1),
        }
    }

    /// When the round after one at `last_round_ms` runs, given the next release instant the
    /// wheel holds: at that instant, but no sooner than a round after the last.
    pub fn next_round(&self, last_round_ms: i64, next_release_ms: i64) -> i64 {
        next_release_ms.max(last_round_ms + self.round_ms)
    }
}

/// Fires taken from `incoming` per wake-up at most: a pre-read hands over thousands at once,
/// and each wake-up looks for the next deadline.
const INTAKE_BATCH: usize = 4096;

/// Drives a wheel: inserts fires from `incoming`, releases each `emit_lead` before its time
/// into `due`, in [`ReleaseRounds`] of `release_round`. A full `due` channel (dispatch is
/// behind) holds the wheel back, which in turn holds back the pre-read loop: backpressure all
/// the way, never a dropped fire.
///
/// With a lead, the trigger reaches the broker before its scheduled time and the executor
/// holds it until `scheduled_at_ms` (see the executor SDK): a burst of thousands of triggers
/// due on the same second no longer queues behind itself at the broker, so each run still
/// starts on its millisecond.
///
/// `waiting` is set to the number of fires in the wheel (the `wheel` stage of
/// `kadence_scheduler_pending_fires`).
pub async fn run_wheel(
    mut incoming: mpsc::Receiver<PendingFire>,
    due: mpsc::Sender<PendingFire>,
    clock: Arc<dyn Clock>,
    emit_lead: Duration,
    release_round: Duration,
    waiting: prometheus::IntGauge,
    shutdown: CancellationToken,
) {
    let rounds = ReleaseRounds::new(release_round);
    let mut wheel = TimeWheel::with_lead(clock.now_ms(), millis(emit_lead));
    let mut arrived = Vec::with_capacity(INTAKE_BATCH);
    // No round has run yet: the first may run at once.
    let mut last_round_ms = i64::MIN / 2;
    loop {
        let now = clock.now_ms();
        if now >= last_round_ms + rounds.round_ms {
            let released = wheel.advance(now);
            if !released.is_empty() {
                last_round_ms = now;
            }
            for fire in released {
                if due.send(fire).await.is_err() {
                    return;
                }
            }
        }
        waiting.set(wheel.len() as i64);
        let sleep_for = wheel.next_deadline().map(|at| {
            let wake_at = rounds.next_round(last_round_ms, at);
            Duration::from_millis((wake_at - clock.now_ms()).max(0) as u64)
        });
        tokio::select! {
            _ = shutdown.cancelled() => return,
            received = incoming.recv_many(&mut arrived, INTAKE_BATCH) => {
                if received == 0 {
                    return;
                }
                for fire in arrived.drain(..) {
                    wheel.insert(fire);
                }
            },
            _ = tokio::time::sleep(sleep_for.unwrap_or_default()), if sleep_for.is_some() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fire(at: i64) -> PendingFire {
        PendingFire::for_test(1, at)
    }

    fn times(fires: &[PendingFire]) -> Vec<i64> {
        fires.iter().map(|f| f.fire_at_ms).collect()
    }

    #[test]
    fn releases_each_fire_at_its_millisecond_in_order() {
        let mut wheel = TimeWheel::new(1_000);
        for at in [1_005, 1_001, 1_003, 1_003] {
            wheel.insert(fire(at));
        }
        assert_eq!(wheel.next_deadline(), Some(1_001));
        assert!(times(&wheel.advance(1_000)).is_empty());
        assert_eq!(times(&wheel.advance(1_001)), vec![1_001]);
        assert_eq!(wheel.next_deadline(), Some(1_003));
        assert!(times(&wheel.advance(1_002)).is_empty());
        assert_eq!(times(&wheel.advance(1_004)), vec![1_003, 1_003]);
        assert_eq!(times(&wheel.advance(1_010)), vec![1_005]);
        assert!(wheel.is_empty());
        assert_eq!(wheel.next_deadline(), None);
    }

    #[test]
    fn a_lead_releases_each_fire_that_much_earlier() {
        let mut wheel = TimeWheel::with_lead(1_000, 300);
        for at in [1_200, 1_400, 1_000 + SLOTS as i64 + 500] {
            wheel.insert(fire(at));
        }
        // 1 200 is already within the lead: released at once.
        assert_eq!(times(&wheel.advance(1_000)), vec![1_200]);
        assert_eq!(wheel.next_deadline(), Some(1_100));
        assert!(times(&wheel.advance(1_099)).is_empty());
        assert_eq!(times(&wheel.advance(1_100)), vec![1_400]);
        // The far one goes through the overflow and still leaves 300 ms early.
        let far = 1_000 + SLOTS as i64 + 500;
        assert!(times(&wheel.advance(far - 301)).is_empty());
        assert_eq!(times(&wheel.advance(far - 300)), vec![far]);
    }

    #[test]
    fn released_slots_keep_no_memory() {
        // Every second's fires due on its millisecond 0, as cron jobs are: a slot that kept
        // its capacity after release would hold it until the process ends.
        let mut wheel = TimeWheel::new(0);
        for second in 1..=3 {
            for _ in 0..1_000 {
                wheel.insert(fire(second * 1_000));
            }
        }
        for second in 1..=3 {
            assert_eq!(wheel.advance(second * 1_000).len(), 1_000);
        }
        let kept: usize = wheel.slots.iter().map(Vec::capacity).sum();
        assert_eq!(kept, 0, "capacity left in released slots");
    }

    #[test]
    fn late_fires_are_released_at_once() {
        let mut wheel = TimeWheel::new(5_000);
        wheel.insert(fire(4_000));
        assert_eq!(wheel.next_deadline(), Some(5_000));
        assert_eq!(times(&wheel.advance(5_000)), vec![4_000]);
    }

    #[test]
    fn fires_beyond_the_wheel_wait_in_overflow_until_in_range() {
        let mut wheel = TimeWheel::new(0);
        let far = SLOTS as i64 * 3 + 7;
        wheel.insert(fire(far));
        wheel.insert(fire(10));
        assert_eq!(wheel.len(), 2);
        assert_eq!(times(&wheel.advance(10)), vec![10]);
        assert_eq!(wheel.next_deadline(), Some(far));
        assert!(wheel.advance(far - 1).is_empty());
        assert_eq!(times(&wheel.advance(far)), vec![far]);
    }

    /// Drives `wheel` through its rounds as [`run_wheel`] does, each round at the instant
    /// [`ReleaseRounds::next_round`] gives: the instant of each round and what it released.
    fn run_rounds(wheel: &mut TimeWheel, rounds: ReleaseRounds) -> Vec<(i64, Vec<i64>)> {
        let mut last_round = i64::MIN / 2;
        let mut run = Vec::new();
        while let Some(next) = wheel.next_deadline() {
            let at = rounds.next_round(last_round, next);
            run.push((at, times(&wheel.advance(at))));
            last_round = at;
        }
        run
    }

    #[test]
    fn spread_fires_leave_in_rounds_never_before_their_release_instant() {
        // A fire every millisecond, as a thousand jobs spread over the second fire, with the
        // default lead: released from 1 ms on, in rounds of 5 ms.
        let mut wheel = TimeWheel::with_lead(0, 1_000);
        for at in 1_001..=1_012 {
            wheel.insert(fire(at));
        }
        let run = run_rounds(&mut wheel, ReleaseRounds::new(Duration::from_millis(5)));
        assert_eq!(
            run,
            vec![
                (1, vec![1_001]),
                (6, vec![1_002, 1_003, 1_004, 1_005, 1_006]),
                (11, vec![1_007, 1_008, 1_009, 1_010, 1_011]),
                (16, vec![1_012]),
            ]
        );
        for (round_at, fires) in &run {
            for fire_at in fires {
                let release_at = fire_at - 1_000;
                assert!(release_at <= *round_at, "fire {fire_at} released early");
                assert!(
                    round_at - release_at < 5,
                    "fire {fire_at} waited a round or more"
                );
            }
        }
    }

    #[test]
    fn a_lone_fire_leaves_on_its_millisecond_and_a_zero_round_is_one_millisecond() {
        let mut wheel = TimeWheel::new(0);
        for at in [10, 40, 41] {
            wheel.insert(fire(at));
        }
        // Far apart, each leaves on time; 41 waits for the round after 40.
        let run = run_rounds(&mut wheel, ReleaseRounds::new(Duration::from_millis(2)));
        assert_eq!(run, vec![(10, vec![10]), (40, vec![40]), (42, vec![41])]);
        let every_ms = ReleaseRounds::new(Duration::ZERO);
        assert_eq!(every_ms.next_round(100, 90), 101);
        assert_eq!(every_ms.next_round(100, 150), 150);
    }

    #[test]
    fn a_long_idle_gap_does_not_lose_or_repeat_fires() {
        let mut wheel = TimeWheel::new(0);
        wheel.insert(fire(100));
        wheel.insert(fire(SLOTS as i64 - 1));
        // Jump far past both: both come out once, in order.
        assert_eq!(
            times(&wheel.advance(SLOTS as i64 * 10)),
            vec![100, SLOTS as i64 - 1]
        );
        assert!(wheel.advance(SLOTS as i64 * 20).is_empty());
    }
}
