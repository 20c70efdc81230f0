//! The database watch: whether this node can reach its database, asked every second and
//! reported three ways: one log line when the database goes out of reach and one when it is
//! back (the loops' own retries would otherwise be the only trace, one warning per failed
//! step), the gauge `kadence_scheduler_database_reachable` with the counter
//! `kadence_scheduler_database_outages_total`, and the readiness answer
//! `GET /health/ready` (503 while it is out of reach; see [`crate::http::api`]).
//!
//! The node itself keeps running through an outage: nothing the loops do is lost by waiting.
//! Fires already planned are emitted, their acknowledgements wait in the ack writer, results
//! stay in their topic until written, and after the outage the pre-read scan applies each
//! job's misfire strategy to the fires it could not plan in time (see [`crate::domain::planning`]).
//!
//! A database that answers but cannot write (its disk is full or read-only) is out of reach
//! too: the store notes such failures of any operation of the node
//! ([`recent_storage_failure`]), and a check that follows one within its timeout fails.
//!
//! One failed check is not an outage: a check that times out on a saturated pool, or a
//! connection the database closed, is retried at the next tick. The database counts as out
//! of reach after [`FAILURES_BEFORE_OUTAGE`] failed checks in a row, from the first of them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::core::Collector;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, run_every};
use crate::metrics::DatabaseMetrics;
use crate::store::{Store, recent_storage_failure};

/// How often the database is asked.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How long one check waits for an answer.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Failed checks in a row that make an outage.
pub const FAILURES_BEFORE_OUTAGE: u32 = 2;

/// What the node knows of its database, as `GET /health/ready` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct DatabaseState {
    /// Whether the database answers.
    pub reachable: bool,
    /// Since when (ms since the epoch): the first answer, or the first failed check of the
    /// outage.
    pub since_ms: i64,
    /// Why the checks of the outage fail (the latest error); none while it answers.
    pub error: Option<String>,
}

/// The database's state as seen by this node's checks, shared by the watch and the API.
pub struct DatabaseHealth {
    state: Mutex<Tracked>,
    metrics: DatabaseMetrics,
}

#[derive(Debug)]
struct Tracked {
    shown: DatabaseState,
    /// Failed checks in a row, and when the first of them was made.
    failures: u32,
    first_failure_ms: i64,
}

impl DatabaseHealth {
    /// A database reachable since `now_ms` (the node has just opened its pools).
    pub fn new(now_ms: i64) -> DatabaseHealth {
        DatabaseHealth {
            state: Mutex::new(Tracked {
                shown: DatabaseState {
                    reachable: true,
                    since_ms: now_ms,
                    error: None,
                },
                failures: 0,
                first_failure_ms: now_ms,
            }),
            metrics: DatabaseMetrics::new(),
        }
    }

    /// The state now.
    pub fn state(&self) -> DatabaseState {
        self.tracked().shown.clone()
    }

    /// The gauge and the counter, for the node's registry.
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        self.metrics.collectors()
    }

    /// A check answered at `now_ms`.
    pub fn record_answer(&self, now_ms: i64) {
        let mut tracked = self.tracked();
        tracked.failures = 0;
        if !tracked.shown.reachable {
            let away_ms = now_ms - tracked.shown.since_ms;
            tracing::info!(
                away_ms,
                "the database answers again after {:.1} s out of reach",
                away_ms as f64 / 1000.0
            );
            tracked.shown = DatabaseState {
                reachable: true,
                since_ms: now_ms,
                error: None,
            };
            self.metrics.reachable.set(1);
        }
    }

    /// A check failed at `now_ms` with `error`.
    pub fn record_failure(&self, now_ms: i64, error: String) {
        let mut tracked = self.tracked();
        if tracked.failures == 0 {
            tracked.first_failure_ms = now_ms;
        }
        tracked.failures = tracked.failures.saturating_add(1);
        if tracked.shown.reachable && tracked.failures >= FAILURES_BEFORE_OUTAGE {
            tracing::error!(%error, "the database is out of reach: fires are not planned and \
                results not written until it answers again (the node keeps running)");
            tracked.shown = DatabaseState {
                reachable: false,
                since_ms: tracked.first_failure_ms,
                error: Some(error),
            };
            self.metrics.reachable.set(0);
            self.metrics.outages.inc();
        } else if !tracked.shown.reachable {
            tracked.shown.error = Some(error);
        }
    }

    fn tracked(&self) -> std::sync::MutexGuard<'_, Tracked> {
        // The state is replaced whole under the lock: a panic elsewhere leaves it consistent.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Checks the database every [`CHECK_INTERVAL`] until `shutdown`, recording each outcome in
/// `health`.
pub async fn run_database_watch(
    store: Arc<dyn Store>,
    health: Arc<DatabaseHealth>,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
) {
    run_every(
        "checking the database",
        CHECK_INTERVAL,
        Arc::clone(&clock),
        shutdown,
        |now_ms| {
            let (store, health) = (Arc::clone(&store), Arc::clone(&health));
            async move {
                check_once(store.as_ref(), &health, now_ms).await;
                Ok::<(), std::convert::Infallible>(())
            }
        },
    )
    .await;
}

/// One check, at `now_ms`: the database answers, and the node's writes did not fail within
/// the last [`CHECK_TIMEOUT`] for want of a disk that takes them (a full or read-only disk
/// answers reads, and `SELECT 1`, all the same).
pub async fn check_once(store: &dyn Store, health: &DatabaseHealth, now_ms: i64) {
    match tokio::time::timeout(CHECK_TIMEOUT, store.ping()).await {
        Ok(Ok(())) => match recent_storage_failure(CHECK_TIMEOUT) {
            None => health.record_answer(now_ms),
            Some(why) => health.record_failure(now_ms, format!("the database cannot write: {why}")),
        },
        Ok(Err(error)) => health.record_failure(now_ms, error.to_string()),
        Err(_) => health.record_failure(
            now_ms,
            format!("no answer within {} s", CHECK_TIMEOUT.as_secs()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_failed_check_is_not_an_outage() {
        let health = DatabaseHealth::new(1_000);
        health.record_failure(2_000, "connection reset".to_owned());
        assert!(health.state().reachable);
        health.record_answer(3_000);
        health.record_failure(4_000, "connection reset".to_owned());
        assert!(
            health.state().reachable,
            "the answer between reset the count"
        );
        assert_eq!(health.metrics.reachable.get(), 1);
        assert_eq!(health.metrics.outages.get(), 0);
    }

    #[test]
    fn failures_in_a_row_make_an_outage_from_the_first_and_an_answer_ends_it() {
        let health = DatabaseHealth::new(1_000);
        health.record_failure(2_000, "refused".to_owned());
        health.record_failure(3_000, "refused again".to_owned());
        assert_eq!(
            health.state(),
            DatabaseState {
                reachable: false,
                since_ms: 2_000,
                error: Some("refused again".to_owned())
            }
        );
        health.record_failure(4_000, "timed out".to_owned());
        assert_eq!(health.state().error.as_deref(), Some("timed out"));
        assert_eq!(health.state().since_ms, 2_000);
        assert_eq!(
            (health.metrics.reachable.get(), health.metrics.outages.get()),
            (0, 1)
        );
        health.record_answer(9_000);
        assert_eq!(
            health.state(),
            DatabaseState {
                reachable: true,
                since_ms: 9_000,
                error: None
            }
        );
        assert_eq!(
            (health.metrics.reachable.get(), health.metrics.outages.get()),
            (1, 1)
        );
    }
}
