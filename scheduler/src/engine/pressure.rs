//! Scheduling pressure: whether the fire path is falling behind, so that history waits.
//!
//! Run history (log lines, retention's deletes, the report refresh) and scheduling share one
//! database and, on a small deployment, one machine. History can always wait: what executors
//! publish stays in its Kafka topic until a reader stores it, and old rows can be deleted a
//! little later. A fire cannot: one planned too late is emitted late, and one later than its
//! pre-read window follows its misfire strategy (DO_NOTHING skips it). So when the two
//! compete, history yields.
//!
//! Two places see scheduling fall behind, and each presses:
//! - **The pre-read**, by its slack: how long before its time the earliest fire a scan
//!   planned is due (its `fire_at`, a misfire's "now"). A job is read once its next fire is
//!   within the read-ahead (3 s by default: two scan intervals and the emit lead), so a scan
//!   that keeps up plans its earliest fire at least `read_ahead - pre_read_interval` ahead
//!   (2 s by default); a scan that runs behind plans fires that are due sooner
//!   ([`SchedulingPressure::slack_floor`]).
//! - **Dispatch**, by late acknowledgements: a trigger the broker acknowledged more than
//!   [`LATE_ACK_TOLERANCE`] after the time it was due, when the wheel, the signer, the
//!   producer or the broker run behind although the pre-read kept up.
//!
//! Each signal presses for [`PRESSURE_HOLD`] from when it was seen: pressure ends once
//! neither has been seen for that long, so one slow scan does not keep history waiting. A
//! started job's first fire is one pre-read window away (XXL-JOB's rule), so new jobs do not
//! press; a fire missed while no node ran (a misfire fired once now) does, for a moment.
//!
//! **The rule for history** ([`SchedulingPressure::yield_to_scheduling`]): before each step a
//! history writer waits while scheduling is pressed, but at most `schedule.history_yield`
//! (default 2 s); then it does one step (the logs reader stores one batch of up to 1 000
//! records) and waits again if the pressure has not passed. So under sustained pressure
//! history goes on at a trickle rather than not at all, nothing is lost (the records wait in
//! their topic, the rows in their table), and once the pressure passes it catches up at full
//! speed. The results reader does not yield: a result recorded within the run-row hold costs
//! one insert, a later one an insert and an update, so deferring results would cost the
//! database more, not less.

use std::fmt::Display;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, millis, run_every};
use crate::metrics::PressureMetrics;

/// How late after its time a trigger may be acknowledged before dispatch presses: well
/// beyond the few milliseconds a healthy broker takes, so that a trigger emitted with no
/// lead (`emit_lead = 0s`) does not press by itself.
pub const LATE_ACK_TOLERANCE: Duration = Duration::from_millis(250);

/// How long one sign of scheduling falling behind presses: two scans at the default
/// interval, so that a node behind by a few scans stays pressed between them.
pub const PRESSURE_HOLD: Duration = Duration::from_secs(2);

/// How often a history writer waiting for the pressure to pass looks again.
const RECHECK: Duration = Duration::from_millis(100);

/// Whether scheduling is falling behind (see the module docs). Shared by the pre-read and
/// dispatch, which press, and the history writers, which yield.
pub struct SchedulingPressure {
    /// A scan whose earliest fire is due sooner than this after the scan presses.
    slack_floor_ms: i64,
    /// Longest a history writer waits per step (`schedule.history_yield`); 0: never.
    yield_at_most: Duration,
    /// Pressed until this time (ms since the epoch); in the past when not pressed.
    pressed_until_ms: AtomicI64,
    metrics: PressureMetrics,
}

impl SchedulingPressure {
    /// Pressure for a node whose pre-read scans every `pre_read_interval` and reads a job
    /// `read_ahead` before its next fire; a history writer waits at most `history_yield` per
    /// step.
    pub fn new(
        pre_read_interval: Duration,
        read_ahead: Duration,
        history_yield: Duration,
    ) -> SchedulingPressure {
        SchedulingPressure {
            slack_floor_ms: Self::slack_floor(pre_read_interval, read_ahead),
            yield_at_most: history_yield,
            pressed_until_ms: AtomicI64::new(i64::MIN),
            metrics: PressureMetrics::new(),
        }
    }

    /// The least slack of a scan that keeps up, ms: a job becomes due for reading between two
    /// scans, so the earliest fire a scan plans is at least `read_ahead - pre_read_interval`
    /// ahead, and half an interval more is left for the scan's own duration and the clock's
    /// tick, so that a healthy scan does not press. With the defaults (`read_ahead` 3 s: two
    /// intervals and the emit lead) 1.5 s, the emit lead and half an interval; negative when
    /// a short `pre_read_window` caps the read-ahead, and then only fires already late press.
    pub fn slack_floor(pre_read_interval: Duration, read_ahead: Duration) -> i64 {
        millis(read_ahead) - millis(pre_read_interval) * 3 / 2
    }

    /// Its metrics, for the node's registry.
    pub fn metrics(&self) -> &PressureMetrics {
        &self.metrics
    }

    /// A scan at `now_ms` planned fires, the earliest due at `earliest_fire_at_ms`
    /// (`None`: it planned none, which says nothing about pressure).
    pub fn scan_planned(&self, now_ms: i64, earliest_fire_at_ms: Option<i64>) {
        let Some(earliest) = earliest_fire_at_ms else {
            return;
        };
        let slack = earliest - now_ms;
        self.metrics.pre_read_slack.set(slack as f64 / 1000.0);
        if slack < self.slack_floor_ms {
            self.press(now_ms);
        }
    }

    /// The broker acknowledged at `now_ms` a trigger due at `fire_at_ms`.
    pub fn acknowledged(&self, fire_at_ms: i64, now_ms: i64) {
        if now_ms - fire_at_ms > millis(LATE_ACK_TOLERANCE) {
            self.press(now_ms);
        }
    }

    fn press(&self, now_ms: i64) {
        let until = now_ms + millis(PRESSURE_HOLD);
        self.pressed_until_ms.fetch_max(until, Ordering::Relaxed);
    }

    /// Whether scheduling is pressed at `now_ms`.
    pub fn is_pressed(&self, now_ms: i64) -> bool {
        now_ms < self.pressed_until_ms.load(Ordering::Relaxed)
    }

    /// Waits while scheduling is pressed, but at most `schedule.history_yield`, and returns
    /// how long it waited: the history writer `writer` calls this before each step (see the
    /// module docs for the rule).
    pub async fn yield_to_scheduling(&self, clock: &dyn Clock, writer: &str) -> Duration {
        let started = clock.now_ms();
        // Not pressed: no wait, and none counted (the clock may tick between two readings).
        if !self.is_pressed(started) {
            return Duration::ZERO;
        }
        let deadline = started + millis(self.yield_at_most);
        loop {
            let now = clock.now_ms();
            if !self.is_pressed(now) || now >= deadline {
                let waited = Duration::from_millis((now - started).max(0) as u64);
                if !waited.is_zero() {
                    (self.metrics.history_yield.with_label_values(&[writer]))
                        .inc_by(waited.as_secs_f64());
                }
                return waited;
            }
            let pressed_until = self.pressed_until_ms.load(Ordering::Relaxed);
            let next = (pressed_until.min(deadline) - now).clamp(1, millis(RECHECK));
            tokio::time::sleep(Duration::from_millis(next as u64)).await;
        }
    }
}

/// [`run_every`] for a history writer: before each step it yields to scheduling
/// ([`SchedulingPressure::yield_to_scheduling`], counted as `writer`), and the step is given
/// the time after the wait.
pub async fn run_every_yielding<F, Fut, E>(
    (what, writer): (&'static str, &'static str),
    interval: Duration,
    (clock, pressure): (Arc<dyn Clock>, Arc<SchedulingPressure>),
    shutdown: CancellationToken,
    step: F,
) where
    F: Fn(i64) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display,
{
    let step = &step;
    run_every(what, interval, Arc::clone(&clock), shutdown, |now_ms| {
        let (clock, pressure) = (Arc::clone(&clock), Arc::clone(&pressure));
        async move {
            let waited = pressure.yield_to_scheduling(clock.as_ref(), writer).await;
            step(now_ms + millis(waited)).await
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    /// Wall-clock time that moves with tokio's paused clock.
    struct TokioClock {
        start: tokio::time::Instant,
        start_ms: i64,
    }

    impl TokioClock {
        fn at(start_ms: i64) -> TokioClock {
            TokioClock {
                start: tokio::time::Instant::now(),
                start_ms,
            }
        }
    }

    impl Clock for TokioClock {
        fn now_ms(&self) -> i64 {
            self.start_ms + self.start.elapsed().as_millis() as i64
        }
    }

    fn pressure() -> SchedulingPressure {
        SchedulingPressure::new(SECOND, SECOND * 3, SECOND * 2)
    }

    #[test]
    fn a_scan_that_keeps_up_does_not_press_and_one_behind_does() {
        let pressure = pressure();
        // Defaults: the floor is the emit lead and half an interval.
        assert_eq!(SchedulingPressure::slack_floor(SECOND, SECOND * 3), 1_500);
        // A read-ahead capped by a short window: only fires already late press.
        assert_eq!(SchedulingPressure::slack_floor(SECOND, SECOND), -500);
        pressure.scan_planned(10_000, Some(12_100));
        pressure.scan_planned(10_000, None);
        assert!(!pressure.is_pressed(10_000));
        assert_eq!(pressure.metrics().pre_read_slack.get(), 2.1);
        pressure.scan_planned(11_000, Some(12_200));
        assert!(pressure.is_pressed(11_000));
        assert!(pressure.is_pressed(12_999), "pressed for the hold");
        assert!(!pressure.is_pressed(13_000), "and no longer");
    }

    #[test]
    fn a_late_acknowledgement_presses_and_a_timely_one_does_not() {
        let pressure = pressure();
        pressure.acknowledged(10_000, 10_250);
        assert!(!pressure.is_pressed(10_250));
        pressure.acknowledged(10_000, 10_251);
        assert!(pressure.is_pressed(10_251));
        // A later sign extends the pressure; an earlier one does not shorten it.
        pressure.acknowledged(11_000, 12_000);
        pressure.acknowledged(10_000, 10_300);
        assert!(pressure.is_pressed(13_999));
        assert!(!pressure.is_pressed(14_000));
    }

    #[tokio::test(start_paused = true)]
    async fn history_waits_while_pressed_but_no_longer_than_its_yield() {
        let clock = TokioClock::at(10_000);
        let pressure = pressure();
        assert_eq!(
            pressure.yield_to_scheduling(&clock, "logs").await,
            Duration::ZERO
        );
        // Pressed for 2 s from 10 s: the wait ends when the pressure does.
        pressure.acknowledged(9_000, 10_000);
        let waited = pressure.yield_to_scheduling(&clock, "logs").await;
        assert_eq!(waited, SECOND * 2);
        // Pressed on and on: the wait ends at the yield's limit.
        pressure.scan_planned(clock.now_ms(), Some(clock.now_ms()));
        let waited = {
            let wait = pressure.yield_to_scheduling(&clock, "logs");
            tokio::pin!(wait);
            loop {
                tokio::select! {
                    waited = &mut wait => break waited,
                    _ = tokio::time::sleep(RECHECK) => {
                        pressure.scan_planned(clock.now_ms(), Some(clock.now_ms()));
                    }
                }
            }
        };
        assert_eq!(waited, SECOND * 2);
        let yielded = pressure
            .metrics()
            .history_yield
            .with_label_values(&["logs"]);
        assert_eq!(yielded.get(), 4.0);
    }

    /// A clock a millisecond later at every reading, as a busy machine's can be.
    struct TickingClock(std::sync::atomic::AtomicI64);

    impl Clock for TickingClock {
        fn now_ms(&self) -> i64 {
            self.0.fetch_add(1, Ordering::Relaxed)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn no_wait_is_counted_while_not_pressed() {
        let clock = TickingClock(AtomicI64::new(10_000));
        let pressure = pressure();
        assert_eq!(
            pressure.yield_to_scheduling(&clock, "logs").await,
            Duration::ZERO
        );
        let yielded = pressure
            .metrics()
            .history_yield
            .with_label_values(&["logs"]);
        assert_eq!(yielded.get(), 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_yield_never_waits() {
        let clock = TokioClock::at(10_000);
        let pressure = SchedulingPressure::new(SECOND, SECOND * 3, Duration::ZERO);
        pressure.acknowledged(0, 10_000);
        assert_eq!(
            pressure.yield_to_scheduling(&clock, "logs").await,
            Duration::ZERO
        );
    }
}
