//! Time as the scheduler sees it. Every loop takes its "now" from a [`Clock`] so tests can
//! drive step functions with exact instants instead of sleeping.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use kadence_kafka::{FailureLog, Severity};
use tokio_util::sync::CancellationToken;

/// One day in ms.
pub const DAY_MS: i64 = 86_400_000;

/// The UTC midnight of `ms`'s day (the days of the daily reports).
pub fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS) * DAY_MS
}

/// A source of wall-clock time in milliseconds since the Unix epoch (UTC).
pub trait Clock: Send + Sync + 'static {
    /// Now, ms since the epoch.
    fn now_ms(&self) -> i64;
}

/// Drives a step function: calls `step(now)` every `interval` until `shutdown`. A failed
/// step runs again at the next tick; failures are logged as `what` by a [`FailureLog`].
pub async fn run_every<F, Fut, E>(
    what: &'static str,
    interval: Duration,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
    mut step: F,
) where
    F: FnMut(i64) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display,
{
    let mut failures = FailureLog::new(what, Severity::Warning);
    loop {
        failures.record(&step(clock.now_ms()).await);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

/// A duration in whole milliseconds, as the store and the records count time (saturating).
pub fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        kadence_schemas::now_ms()
    }
}

/// A clock that only moves when told to, for tests.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        ManualClock {
            now_ms: AtomicI64::new(now_ms),
        }
    }

    /// Sets the time.
    pub fn set(&self, now_ms: i64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the time forward by `delta_ms`.
    pub fn advance(&self, delta_ms: i64) {
        self.now_ms.fetch_add(delta_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}
