//! The store's runs: results recorded (first result wins), log lines, the follow-up of
//! finished runs (retries, alarms, children) and the runs the lost-run monitor looks for.

use kadence_schemas::{AppName, JobId};

use crate::domain::model::{Completion, CompletionOutcome, PendingFire, Run};
use crate::store::{DispatchAck, LogLines, PageRequest, RunLogLines, StoreError};

/// A finished run claimed for its follow-up (retry, alarm, child jobs).
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedRun {
    /// The run as it was fired (copied into a retry).
    pub fire: PendingFire,
    /// Its result code.
    pub code: i32,
    /// Its result message.
    pub message: Option<String>,
    /// The executor that reported it.
    pub executor_id: Option<String>,
    /// When the result came, ms.
    pub finished_at_ms: Option<i64>,
    /// The first attempt's log id, for a retry.
    pub first_log_id: Option<i64>,
    /// The handler's "retry after" hint, ms.
    pub retry_after_ms: Option<i64>,
}

/// An unfinished run the lost-run monitor looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfinishedRun {
    /// Its trigger id.
    pub trigger_id: kadence_schemas::TriggerId,
    /// Its job.
    pub job_id: JobId,
    /// Its app.
    pub app: AppName,
    /// The executor expected to run it.
    pub executor_id: String,
    /// When the broker acknowledged its trigger, ms.
    pub dispatched_at_ms: i64,
}

/// Runs, their results and logs (see the module docs).
#[async_trait::async_trait]
pub trait Runs: Send + Sync {
    /// Records results, first result wins (compare-and-set on an unfinished row), in one
    /// transaction; returns what happened to each, in order.
    async fn complete_runs(
        &self,
        completions: &[Completion],
    ) -> Result<Vec<CompletionOutcome>, StoreError> {
        self.complete_runs_writing_rows(completions, &[]).await
    }

    /// Records results as [`Runs::complete_runs`] does, in the same transaction as the rows of
    /// `unwritten`: acknowledged fires of batches whose rows were held back for their results
    /// (see [`crate::engine::held_runs`]). A run among them whose result is in `completions`
    /// (the first of its trigger id, of the run's own app) has its row written once, already
    /// FINISHED, or, a success needing no follow-up of a job whose history policy drops
    /// successes, no row at all (see [`crate::store::unkept_run_set`]); any other is written
    /// DISPATCHED (unless its row exists) and completed like any run. A result for a run in a
    /// set of unkept runs is a repeat. The write fails as a whole if the row of a run it would
    /// write FINISHED exists already (another node emitted the fire again): the caller then
    /// has those rows written DISPATCHED and tries again without them.
    async fn complete_runs_writing_rows(
        &self,
        completions: &[Completion],
        unwritten: &[&DispatchAck],
    ) -> Result<Vec<CompletionOutcome>, StoreError>;

    /// A page of a job's runs, newest first: `page.after` is the log id of the last run of
    /// the previous page (the runs listed next are older).
    async fn list_runs(&self, job: JobId, page: &PageRequest<i64>) -> Result<Vec<Run>, StoreError>;

    /// One run by its log id.
    async fn get_run(&self, log_id: i64) -> Result<Option<Run>, StoreError>;

    /// The app of each run of `log_ids` that has a row (a run's lines may come before it:
    /// those have none yet).
    async fn run_apps(
        &self,
        log_ids: &[i64],
    ) -> Result<std::collections::HashMap<i64, String>, StoreError>;

    /// Stores log lines, a chunk per record (see [`crate::store::LogChunk`]), each (log id,
    /// run start, first line) once, keeping at most `max_lines_per_run` lines per run of a
    /// trigger; lines of runs that do not exist are dropped. Returns the chunks stored
    /// (repeats not counted).
    async fn append_log_lines(
        &self,
        batches: &[LogLines],
        max_lines_per_run: i64,
    ) -> Result<u64, StoreError>;

    /// Up to `limit` lines of a run's log from line `from_line` on, of the run of its trigger
    /// that started last (see [`RunLogLines`]).
    async fn read_log_lines(
        &self,
        log_id: i64,
        from_line: i64,
        limit: u32,
    ) -> Result<RunLogLines, StoreError>;

    /// Claims up to `limit` finished runs not yet followed up (or whose follow-up lock expired
    /// before `now_ms`) until `locked_until_ms`; each run is claimed by one caller. A failed
    /// run's alarm status becomes LOCKED, a succeeded one's NOT_NEEDED.
    async fn claim_finished_runs(
        &self,
        now_ms: i64,
        locked_until_ms: i64,
        limit: u32,
    ) -> Result<Vec<FinishedRun>, StoreError>;

    /// Marks a run's follow-up done with its final alarm status.
    async fn finish_follow_up(
        &self,
        log_id: i64,
        alarm_status: crate::domain::model::AlarmStatus,
    ) -> Result<(), StoreError>;

    /// How many distinct shards of `job`'s fire whose trigger ids start with `fire_prefix-`
    /// succeeded (any attempt).
    async fn succeeded_shards(&self, job: JobId, fire_prefix: &str) -> Result<i64, StoreError>;

    /// Up to `limit` runs dispatched before `dispatched_before_ms` to a known executor and
    /// still without a result, oldest first.
    async fn unfinished_runs(
        &self,
        dispatched_before_ms: i64,
        limit: u32,
    ) -> Result<Vec<UnfinishedRun>, StoreError>;
}
