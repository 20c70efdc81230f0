//! The [`Runs`] implementation: results (first wins, FIX_DELAY advanced when a run has ended
//! for good), the reads of runs, and the claim of finished runs for their follow-up; the log
//! lines are [`history`](super::history)'s. Written once for every backend ([`SqlBackend`]).

use std::collections::{BTreeSet, HashMap, HashSet};

use kadence_schemas::{JobId, TriggerId};

use super::UPDATE_CHUNK;
use super::backend::{SqlBackend, SqlStore};
use super::batches::{FinishedFire, insert_dispatched_runs, insert_finished_runs};
use super::fire_updates::{claim_finished_runs, update_completions};
use super::statement::Statement;
use super::store::prefer_keyed_joins;
use super::unkept_runs::{unkept_triggers, write_unkept_runs};
use crate::domain::model::{
    AlarmStatus, Completion, CompletionOutcome, HistoryPolicy, PendingFire, Run,
};
use crate::store::rows::{CompletedRunRow, RUN_COLUMNS, RunRow, convert_all};
use crate::store::{
    DispatchAck, FinishedRun, LogLines, PageRequest, RunLogLines, Runs, StoreError, UnfinishedRun,
};

#[async_trait::async_trait]
impl<B: SqlBackend> Runs for SqlStore<B> {
    async fn complete_runs_writing_rows(
        &self,
        completions: &[Completion],
        unwritten: &[&DispatchAck],
    ) -> Result<Vec<CompletionOutcome>, StoreError> {
        complete_runs(self, completions, unwritten).await
    }

    async fn list_runs(&self, job: JobId, page: &PageRequest<i64>) -> Result<Vec<Run>, StoreError> {
        const OPERATION: &str = "list runs";
        let rows: Vec<RunRow> = (Statement::new(format!(
            "SELECT {RUN_COLUMNS} FROM job_logs WHERE job_id = $1 AND id < $2 \
             ORDER BY id DESC LIMIT $3"
        ))
        .bind(job.get())
        .bind(page.after.unwrap_or(i64::MAX))
        .bind(i64::from(page.limit))
        .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        convert_all(rows)
    }

    async fn get_run(&self, log_id: i64) -> Result<Option<Run>, StoreError> {
        const OPERATION: &str = "read a run";
        let row: Option<RunRow> =
            (Statement::new(format!("SELECT {RUN_COLUMNS} FROM job_logs WHERE id = $1"))
                .bind(log_id)
                .fetch_optional::<B, _>(&mut *self.connection(OPERATION).await?))
            .await
            .map_err(StoreError::query(OPERATION))?;
        row.map(Run::try_from).transpose()
    }

    async fn run_apps(&self, log_ids: &[i64]) -> Result<HashMap<i64, String>, StoreError> {
        super::history::run_apps(self, log_ids).await
    }

    async fn append_log_lines(
        &self,
        batches: &[LogLines],
        max_lines_per_run: i64,
    ) -> Result<u64, StoreError> {
        super::history::append_log_lines(self, batches, max_lines_per_run).await
    }

    async fn read_log_lines(
        &self,
        log_id: i64,
        from_line: i64,
        limit: u32,
    ) -> Result<RunLogLines, StoreError> {
        super::history::read_log_lines(self, log_id, from_line, limit).await
    }

    async fn unfinished_runs(
        &self,
        dispatched_before_ms: i64,
        limit: u32,
    ) -> Result<Vec<UnfinishedRun>, StoreError> {
        super::registry::unfinished_runs(self, dispatched_before_ms, limit).await
    }

    async fn claim_finished_runs(
        &self,
        now_ms: i64,
        locked_until_ms: i64,
        limit: u32,
    ) -> Result<Vec<FinishedRun>, StoreError> {
        let rows = claim_finished_runs(self, now_ms, locked_until_ms, limit).await?;
        let mut runs: Vec<FinishedRun> = convert_all(rows)?;
        runs.sort_by_key(|run| run.fire.log_id);
        Ok(runs)
    }

    async fn finish_follow_up(
        &self,
        log_id: i64,
        alarm_status: AlarmStatus,
    ) -> Result<(), StoreError> {
        const OPERATION: &str = "finish a run's follow-up";
        (Statement::new(
            "UPDATE job_logs SET follow_up = 'DONE', follow_up_locked_until = NULL, \
             alarm_status = $1 WHERE id = $2",
        )
        .bind(alarm_status.as_str())
        .bind(log_id)
        .execute::<B>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        Ok(())
    }

    async fn succeeded_shards(&self, job: JobId, fire_prefix: &str) -> Result<i64, StoreError> {
        const OPERATION: &str = "count succeeded shards";
        let (count,): (i64,) = (Statement::new(
            "SELECT COUNT(DISTINCT shard_index) FROM job_logs \
             WHERE job_id = $1 AND trigger_id LIKE $2 AND handle_code = 200",
        )
        .bind(job.get())
        .bind(format!("{fire_prefix}-%"))
        .fetch_one::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        Ok(count)
    }
}

/// Records results (see [`Runs::complete_runs_writing_rows`]).
async fn complete_runs<B: SqlBackend>(
    store: &SqlStore<B>,
    completions: &[Completion],
    unwritten: &[&DispatchAck],
) -> Result<Vec<CompletionOutcome>, StoreError> {
    const OPERATION: &str = "record results";
    let mut tx = store.begin_write(OPERATION).await?;
    prefer_keyed_joins::<B>(&mut tx).await?;
    let jobs = result_jobs::<B>(&mut tx, completions).await?;
    // A success of a job without children needs no follow-up (nothing to retry, tell or
    // fire): it is done here, which spares the follow-up monitor two writes per run.
    let done = |completion: &Completion| {
        completion.code == kadence_schemas::result_code::SUCCESS
            && !jobs
                .with_children
                .contains(&completion.trigger_id.job_id().get())
    };
    // The first result of a trigger in the batch is the one tried: a later one is a repeat, as
    // is a result for a run that has one already.
    let mut seen = HashSet::new();
    let first: Vec<bool> = (completions.iter())
        .map(|completion| seen.insert(completion.trigger_id.as_str()))
        .collect();
    let firsts: Vec<&Completion> = (completions.iter().zip(&first))
        .filter_map(|(completion, &first)| first.then_some(completion))
        .collect();
    let mut applied = write_held_runs::<B>(&mut tx, unwritten, &firsts, &jobs, &done).await?;
    let updating: Vec<&Completion> = (firsts.iter().copied())
        .filter(|completion| !applied.contains(completion.trigger_id.as_str()))
        .collect();
    for chunk in updating.chunks(UPDATE_CHUNK) {
        let completed = update_completions::<B>(&mut tx, chunk, &done).await?;
        advance_fix_delay::<B>(&mut tx, &completed).await?;
        applied.extend(completed.into_iter().map(|run| run.trigger_id));
    }
    let unapplied: Vec<&str> = (firsts.iter())
        .map(|completion| completion.trigger_id.as_str())
        .filter(|trigger_id| !applied.contains(*trigger_id))
        .collect();
    let mut known = known_triggers::<B>(&mut tx, &unapplied).await?;
    let unknown: Vec<&TriggerId> = (firsts.iter())
        .map(|completion| &completion.trigger_id)
        .filter(|id| !applied.contains(id.as_str()) && !known.contains_key(id.as_str()))
        .collect();
    known.extend(unkept_triggers::<B>(&mut tx, &unknown).await?);
    tx.commit().await.map_err(StoreError::query(OPERATION))?;
    Ok((completions.iter().zip(first))
        .map(|(completion, first)| {
            let trigger_id = completion.trigger_id.as_str();
            let run_app = known.get(trigger_id);
            if first && applied.contains(trigger_id) {
                CompletionOutcome::Applied
            } else if let Some(run_app) =
                run_app.filter(|run_app| completion.app.as_ref().is_some_and(|app| app != *run_app))
            {
                CompletionOutcome::OtherApp {
                    run_app: run_app.clone(),
                }
            } else if applied.contains(trigger_id) || run_app.is_some() {
                CompletionOutcome::Duplicate
            } else {
                CompletionOutcome::UnknownTrigger
            }
        })
        .collect())
}

/// Writes the rows of the held runs `unwritten` (see [`crate::engine::held_runs`]): those with
/// their result among `firsts` once, already finished (or not at all, as unkept runs), the
/// others DISPATCHED. Returns the trigger ids of the runs it completed.
async fn write_held_runs<B: SqlBackend>(
    tx: &mut B::Connection,
    unwritten: &[&DispatchAck],
    firsts: &[&Completion],
    jobs: &ResultJobs,
    done: &impl Fn(&Completion) -> bool,
) -> Result<HashSet<String>, StoreError> {
    let (finished, dispatched) = finished_fires(unwritten, firsts, done);
    insert_dispatched_runs::<B>(&mut *tx, &dispatched).await?;
    // A held run may have its row already: the fire was emitted again (a node claimed its
    // batch while the trigger's acknowledgement was still on its way) and that copy's row was
    // written. Its result completes that row by the update, as any result; written again it
    // would fail on the key, and with it the whole batch of results.
    let existing = existing_runs::<B>(&mut *tx, &finished).await?;
    let finished: Vec<FinishedFire> = (finished.into_iter())
        .filter(|run| !existing.contains(&run.fire.log_id))
        .collect();
    let (unkept, kept): (Vec<&FinishedFire>, Vec<&FinishedFire>) =
        (finished.iter()).partition(|run| jobs.leave_without_row(run));
    insert_finished_runs::<B>(&mut *tx, &kept).await?;
    write_unkept_runs::<B>(&mut *tx, unkept.iter().map(|run| run.unkept())).await?;
    let completed: Vec<CompletedRunRow> = finished.iter().map(FinishedFire::completed).collect();
    advance_fix_delay::<B>(&mut *tx, &completed).await?;
    Ok(completed.into_iter().map(|run| run.trigger_id).collect())
}

/// Splits the held-back rows of `unwritten` into those written FINISHED with their result
/// (the first of `firsts` for their trigger id, of their own app) and those written
/// DISPATCHED (no such result in this batch).
fn finished_fires<'a>(
    unwritten: &[&'a DispatchAck],
    firsts: &[&'a Completion],
    done: impl Fn(&Completion) -> bool,
) -> (
    Vec<FinishedFire<'a>>,
    Vec<(&'a DispatchAck, &'a PendingFire)>,
) {
    let by_trigger: HashMap<&str, &Completion> = (firsts.iter())
        .map(|completion| (completion.trigger_id.as_str(), *completion))
        .collect();
    let mut finished = Vec::new();
    let mut dispatched = Vec::new();
    for &ack in unwritten {
        let Some(fire) = ack.fire.as_deref() else {
            continue;
        };
        let result = (by_trigger.get(fire.trigger_id.as_str())).filter(|completion| {
            (completion.app.as_deref()).is_none_or(|app| app == fire.app.as_str())
        });
        match result {
            Some(&completion) => finished.push(FinishedFire {
                ack,
                fire,
                completion,
                done: done(completion),
            }),
            None => dispatched.push((ack, fire)),
        }
    }
    (finished, dispatched)
}

/// FIX_DELAY: once the run the schedule fired has ended for good, the next fire is due
/// `delay` after its end (only while the job still waits). A failure the follow-up monitor
/// will retry has not ended: the job waits for its last attempt, so a retry never overlaps the
/// next fire.
async fn advance_fix_delay<B: SqlBackend>(
    tx: &mut B::Connection,
    completed: &[CompletedRunRow],
) -> Result<(), StoreError> {
    let scheduled = (completed.iter())
        .filter(|run| matches!(run.run_trigger_type.as_str(), "FIX_DELAY" | "MISFIRE"));
    for run in scheduled {
        // The same rule as the follow-up monitor's: a failure is retried while its attempt
        // number is below the job's retry count.
        let succeeded = run.handle_code == i64::from(kadence_schemas::result_code::SUCCESS);
        (Statement::new(format!(
            "UPDATE jobs SET next_fire_ms = $1 + CAST(schedule_conf AS {}) * 1000 \
             WHERE id = $2 AND schedule_type = 'FIX_DELAY' AND status = 'RUNNING' \
             AND next_fire_ms IS NULL AND ($3 = 1 OR $4 >= retry_count)",
            B::DIALECT.bigint(),
        ))
        .bind(run.handle_at_ms)
        .bind(run.job_id)
        .bind(i64::from(succeeded))
        .bind(run.attempt)
        .execute::<B>(&mut *tx))
        .await
        .map_err(StoreError::query("record results"))?;
    }
    Ok(())
}

/// The log ids of `finished` that have a row.
async fn existing_runs<B: SqlBackend>(
    tx: &mut B::Connection,
    finished: &[FinishedFire<'_>],
) -> Result<HashSet<i64>, StoreError> {
    if finished.is_empty() {
        return Ok(HashSet::new());
    }
    let rows: Vec<(i64,)> = Statement::fetch_in_chunks::<B, _, _, _>(
        tx,
        "SELECT id FROM job_logs WHERE id",
        finished,
        |run| run.fire.log_id,
    )
    .await
    .map_err(StoreError::query("record results"))?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Which of `trigger_ids` have a run, and each one's app.
async fn known_triggers<B: SqlBackend>(
    tx: &mut B::Connection,
    trigger_ids: &[&str],
) -> Result<HashMap<String, String>, StoreError> {
    let rows: Vec<(String, String)> = Statement::fetch_in_chunks::<B, _, _, _>(
        tx,
        "SELECT trigger_id, app FROM job_logs WHERE trigger_id",
        trigger_ids,
        |trigger_id| *trigger_id,
    )
    .await
    .map_err(StoreError::query("record results"))?;
    Ok(rows.into_iter().collect())
}

/// What the results transaction needs to know of the jobs of its results.
struct ResultJobs {
    /// The jobs with child jobs (a deleted job has none).
    with_children: HashSet<i64>,
    /// The jobs whose history policy keeps no succeeded run (FAILURES, NONE).
    keeping_no_successes: HashSet<i64>,
}

impl ResultJobs {
    /// Whether a held run finished with its result is left without a row, as one of a set of
    /// unkept runs (see [`crate::store::unkept_run_set`]): a run needing no follow-up (a
    /// success of a job without children) of a job that keeps no succeeded run, whose
    /// trigger id names its scheduled time, by which a repeat of its result finds its set.
    fn leave_without_row(&self, run: &&FinishedFire<'_>) -> bool {
        run.done
            && self.keeping_no_successes.contains(&run.fire.job_id.get())
            && run.fire.trigger_id.scheduled_ms() == Some(run.fire.scheduled_at_ms)
    }
}

/// The jobs of `completions` that have child jobs or keep no succeeded run.
async fn result_jobs<B: SqlBackend>(
    tx: &mut B::Connection,
    completions: &[Completion],
) -> Result<ResultJobs, StoreError> {
    let job_ids: BTreeSet<i64> = (completions.iter())
        .map(|completion| completion.trigger_id.job_id().get())
        .collect();
    let job_ids: Vec<i64> = job_ids.into_iter().collect();
    let select = format!(
        "SELECT id, CAST(CASE WHEN child_job_ids <> '' THEN 1 ELSE 0 END AS {}), history \
         FROM jobs WHERE (child_job_ids <> '' OR history <> 'ALL') AND id",
        B::DIALECT.bigint()
    );
    let rows: Vec<(i64, i64, String)> =
        Statement::fetch_in_chunks::<B, _, _, _>(tx, &select, &job_ids, |id| *id)
            .await
            .map_err(StoreError::query("read the jobs of results"))?;
    let mut jobs = ResultJobs {
        with_children: HashSet::new(),
        keeping_no_successes: HashSet::new(),
    };
    for (id, with_children, history) in rows {
        if with_children == 1 {
            jobs.with_children.insert(id);
        }
        if history != HistoryPolicy::All.as_str() {
            jobs.keeping_no_successes.insert(id);
        }
    }
    Ok(jobs)
}
