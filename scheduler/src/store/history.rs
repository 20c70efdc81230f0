//! The store's history: the daily report rows, and the retention that deletes old runs and
//! reports or counts and drops the runs their job's history policy does not keep (rows, and
//! the sets of runs that never had one).

use crate::store::{AppScope, PageRequest, StoreError};

/// How long ago the job-log ids up to the fold's mark must have been given out before the
/// rows below it are folded (see [`History::fold_runs`]): far longer than a transaction that
/// takes an id as it inserts its row stays open.
pub const FOLD_GRACE_MS: i64 = 30_000;

/// Reports and retention (see the module docs).
#[async_trait::async_trait]
pub trait History: Send + Sync {
    /// Recounts the daily report rows of runs scheduled in `[from_ms, to_ms)`; returns the rows
    /// written. The runs are counted from `run_counts`, the rows not folded yet and the open
    /// runs (see [`History::fold_runs`]).
    async fn refresh_reports(&self, from_ms: i64, to_ms: i64) -> Result<u64, StoreError>;

    /// Folds up to `limit` job-log ids at `now_ms` into the run counts, in one transaction: a
    /// run settled (it has its result) is counted in `run_counts`, one not settled yet is
    /// listed open (see the SQL store's `run_counts` module). Returns whether there is more to
    /// fold now; once there is not, the same transaction counts the open runs settled since.
    async fn fold_runs(&self, now_ms: i64, limit: u32) -> Result<bool, StoreError>;

    /// A page of report rows of days in `[from_ms, to_ms)` of `apps`, by day, app and job;
    /// the key is (day, app, job).
    async fn list_reports(
        &self,
        from_ms: i64,
        to_ms: i64,
        apps: AppScope<'_>,
        page: &PageRequest<(i64, String, i64)>,
    ) -> Result<Vec<crate::domain::model::DailyReport>, StoreError>;

    /// Deletes up to `limit` finished or cancelled runs scheduled before `before_ms`, with
    /// their log lines; returns the runs deleted.
    async fn delete_old_runs(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError>;

    /// Deletes up to `limit` report rows and up to `limit` `run_counts` rows of days before
    /// `before_ms`; returns how many.
    async fn delete_old_reports(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError>;

    /// Counts in `run_counts` and deletes, with their log lines, up to `limit` finished and
    /// followed-up runs that ended before `finished_before_ms` and that their job's history
    /// policy does not keep (see [`crate::domain::model::HistoryPolicy`]); returns the runs dropped.
    /// A run is counted by the node whose delete removed it, so concurrent nodes never count
    /// one twice.
    async fn drop_unkept_runs(
        &self,
        finished_before_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// Counts in `run_counts` up to `limit` sets of runs that never had a row (see
    /// [`crate::store::unkept_run_set`]) not counted yet, and marks them counted. Each set is
    /// counted by one node.
    async fn count_unkept_run_sets(&self, limit: u32) -> Result<CountedSets, StoreError>;

    /// Deletes up to `limit` counted sets of runs that never had a row whose runs all ended
    /// before `ended_before_ms`, with their runs' log lines; returns the sets deleted.
    async fn forget_unkept_run_sets(
        &self,
        ended_before_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError>;
}

/// What [`History::count_unkept_run_sets`] counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CountedSets {
    /// Sets marked counted.
    pub sets: u64,
    /// Runs added to `run_counts` (those of deleted jobs are not).
    pub runs: u64,
}
