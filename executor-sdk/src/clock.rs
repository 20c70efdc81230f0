//! Where the executor reads the time: [`Clock`].
//!
//! Trigger times are wall-clock milliseconds since the Unix epoch (`scheduled_at_ms`), so the
//! executor compares them with the system clock. The logic that waits for them (the hold) takes
//! its clock as a value instead of reading the system time itself, so its tests can run under
//! tokio's paused time: there a clock follows tokio's `Instant`, and `tokio::time::advance`
//! moves it by exact milliseconds without anyone sleeping for real.

use std::time::{Duration, SystemTime};

/// A source of "now" in ms since the Unix epoch, and a way to sleep until such a moment.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Clock {
    /// The system's wall clock: what production uses.
    System,
    /// Reads `start_ms` at `origin` and moves with tokio's clock from there, so that under
    /// `tokio::time::pause` it stands still until the test advances it.
    #[cfg(test)]
    Tokio {
        start_ms: i64,
        origin: tokio::time::Instant,
    },
}

/// `time` in ms since the Unix epoch, the unit of the records' times.
pub(crate) fn millis_since_epoch(time: SystemTime) -> i64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}

impl Clock {
    /// A clock that reads `start_ms` now and follows tokio's (possibly paused) time.
    #[cfg(test)]
    pub(crate) fn following_tokio(start_ms: i64) -> Clock {
        Clock::Tokio {
            start_ms,
            origin: tokio::time::Instant::now(),
        }
    }

    /// Now, as a point in time (spans take these).
    pub(crate) fn now(&self) -> SystemTime {
        match self {
            Clock::System => SystemTime::now(),
            #[cfg(test)]
            Clock::Tokio { .. } => {
                SystemTime::UNIX_EPOCH + Duration::from_millis(self.now_ms().max(0) as u64)
            }
        }
    }

    /// Now, in ms since the Unix epoch.
    pub(crate) fn now_ms(&self) -> i64 {
        match self {
            Clock::System => kadence_schemas::now_ms(),
            #[cfg(test)]
            Clock::Tokio { start_ms, origin } => start_ms + origin.elapsed().as_millis() as i64,
        }
    }

    /// Sleeps until this clock reads `at_ms` (at once when it already does).
    #[cfg(test)]
    pub(crate) async fn sleep_until_ms(&self, at_ms: i64) {
        tokio::time::sleep_until(self.instant_at(at_ms)).await;
    }

    /// The tokio instant at which this clock reads `at_ms`, never earlier: "now" is read in
    /// whole milliseconds (rounded down), so the wait is rounded up.
    pub(crate) fn instant_at(&self, at_ms: i64) -> tokio::time::Instant {
        let wait = u64::try_from(at_ms.saturating_sub(self.now_ms())).unwrap_or(0);
        tokio::time::Instant::now() + Duration::from_millis(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_tokio_clock_moves_only_with_tokio_time_and_wakes_on_the_millisecond() {
        let clock = Clock::following_tokio(10_000);
        assert_eq!(clock.now_ms(), 10_000);
        tokio::time::advance(Duration::from_millis(250)).await;
        assert_eq!(clock.now_ms(), 10_250);
        clock.sleep_until_ms(12_000).await;
        assert_eq!(
            clock.now_ms(),
            12_000,
            "woken on the millisecond, not after"
        );
        clock.sleep_until_ms(11_000).await;
        assert_eq!(
            clock.now_ms(),
            12_000,
            "a moment passed already does not wait"
        );
    }

    #[test]
    fn the_system_clock_reads_the_epoch_time() {
        // 2024-01-01 in ms: a clock reading less is not the wall clock.
        assert!(Clock::System.now_ms() > 1_704_067_200_000);
    }
}
