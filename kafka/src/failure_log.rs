//! [`FailureLog`]: how a loop that retries logs its failed steps, in the scheduler's loops
//! and the batch readers of both sides (see [`crate::batch::run_steps`]).
//!
//! During an outage (the database or the broker away) every loop of a node fails its step
//! every tick: a line per failure would write hundreds of the same lines a minute and bury
//! the one that says when it began. A loop logs a streak of failures instead: its first
//! failure with the error, then at most one line a minute while it lasts (how many so far,
//! the latest error), and one line when a step succeeds again (how many failed, over how
//! long). Every failure still counts where the loop counts them (metrics, health), so fewer
//! lines hide nothing.

use std::borrow::Cow;
use std::fmt::Display;
use std::time::{Duration, Instant};

/// A loop's log of failed steps (see the module docs).
#[derive(Debug)]
pub struct FailureLog {
    what: Cow<'static, str>,
    severity: Severity,
    streak: Option<Streak>,
}

/// How a loop's failures are logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The loop's work waits while it fails (a planned fire, a result): `WARN`.
    Warning,
    /// Nothing new is scheduled while it fails: `ERROR`.
    Error,
}

/// Failures in a row.
#[derive(Debug, Clone, Copy)]
struct Streak {
    began: Instant,
    failures: u64,
    last_logged: Instant,
}

/// What one step's outcome adds to the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// The first failure of a streak.
    Began,
    /// A failure a minute or more after the last line of its streak.
    StillFailing { failures: u64, for_secs: u64 },
    /// The first success after a streak.
    Ended { failures: u64, lasted_secs: u64 },
    /// Nothing: a failure within a minute of the streak's last line, or a success after
    /// successes.
    Nothing,
}

impl FailureLog {
    /// At most one line a minute while a streak lasts.
    pub const REPEAT_EVERY: Duration = Duration::from_secs(60);

    /// The log of the loop doing `what` (e.g. "pre-read scan"), at `severity`.
    pub fn new(what: impl Into<Cow<'static, str>>, severity: Severity) -> FailureLog {
        FailureLog {
            what: what.into(),
            severity,
            streak: None,
        }
    }

    /// Notes a step's outcome, logging what it begins, continues or ends.
    pub fn record<T, E: Display>(&mut self, outcome: &Result<T, E>) {
        match outcome {
            Ok(_) => self.succeeded(),
            Err(error) => self.failed(error),
        }
    }

    /// Notes a failed step, logging it if it begins a streak or the streak's last line is a
    /// minute old.
    pub fn failed(&mut self, error: &dyn Display) {
        // A tracing event's level is part of its static metadata: one event per level.
        macro_rules! at_severity {
            ($($event:tt)*) => {
                match self.severity {
                    Severity::Error => tracing::error!($($event)*),
                    Severity::Warning => tracing::warn!($($event)*),
                }
            };
        }
        let line = self.note_failure(Instant::now());
        let what = &self.what;
        match line {
            Line::Began => at_severity!(%error,
                "{what} failed; retrying (logged again once a minute while it fails)"),
            Line::StillFailing { failures, for_secs } => at_severity!(%error, failures, for_secs,
                "{what} still failing; retrying"),
            Line::Ended { .. } | Line::Nothing => {}
        }
    }

    /// Notes a successful step, logging the end of a streak.
    pub fn succeeded(&mut self) {
        if let Line::Ended {
            failures,
            lasted_secs,
        } = self.note_success(Instant::now())
        {
            tracing::info!(failures, lasted_secs, "{} succeeds again", self.what);
        }
    }

    fn note_failure(&mut self, now: Instant) -> Line {
        let Some(streak) = &mut self.streak else {
            self.streak = Some(Streak {
                began: now,
                failures: 1,
                last_logged: now,
            });
            return Line::Began;
        };
        streak.failures += 1;
        if now.duration_since(streak.last_logged) < Self::REPEAT_EVERY {
            return Line::Nothing;
        }
        streak.last_logged = now;
        Line::StillFailing {
            failures: streak.failures,
            for_secs: now.duration_since(streak.began).as_secs(),
        }
    }

    fn note_success(&mut self, now: Instant) -> Line {
        match self.streak.take() {
            Some(streak) => Line::Ended {
                failures: streak.failures,
                lasted_secs: now.duration_since(streak.began).as_secs(),
            },
            None => Line::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_is_logged_when_it_begins_once_a_minute_and_when_it_ends() {
        let mut log = FailureLog::new("pre-read scan", Severity::Error);
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        assert_eq!(log.note_success(at(0)), Line::Nothing);
        assert_eq!(log.note_failure(at(1)), Line::Began);
        for secs in 2..61 {
            assert_eq!(log.note_failure(at(secs)), Line::Nothing, "at {secs} s");
        }
        assert_eq!(
            log.note_failure(at(61)),
            Line::StillFailing {
                failures: 61,
                for_secs: 60
            }
        );
        assert_eq!(log.note_failure(at(62)), Line::Nothing);
        assert_eq!(
            log.note_success(at(70)),
            Line::Ended {
                failures: 62,
                lasted_secs: 69
            }
        );
        assert_eq!(log.note_success(at(71)), Line::Nothing);
        // The next failure begins a new streak.
        assert_eq!(log.note_failure(at(72)), Line::Began);
    }
}
