//! What accumulates: run log lines, daily reports (with the counts of the runs a history
//! policy dropped), retention of old runs, and the dropping of runs their policy does not
//! keep. Written once for every backend ([`SqlBackend`]), each statement once per dialect
//! where the dialects differ.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::backend::{SqlBackend, SqlStore};
use super::batches::last_log_id_in;
use super::dialect::Dialect;
use super::run_counts;
use super::statement::{IntoSqlValue as _, Statement};
use super::{INSERT_CHUNK, UPDATE_CHUNK};
use crate::domain::model::DailyReport;
use crate::store::{
    AppScope, CountedSets, History, LogChunk, LogLines, PageRequest, RunLogLines, StoreError,
};

/// The app of each run of `log_ids` that has a row (see [`crate::store::Runs::run_apps`]).
pub(crate) async fn run_apps<B: SqlBackend>(
    store: &SqlStore<B>,
    log_ids: &[i64],
) -> Result<HashMap<i64, String>, StoreError> {
    const OPERATION: &str = "read the apps of runs";
    let rows: Vec<(i64, String)> = Statement::fetch_in_chunks::<B, _, _, _>(
        &mut *store.connection(OPERATION).await?,
        "SELECT id, app FROM job_logs WHERE id",
        log_ids,
        |id| *id,
    )
    .await
    .map_err(StoreError::query(OPERATION))?;
    Ok(rows.into_iter().collect())
}

/// Stores log lines, a chunk per record (see [`crate::store::Runs::append_log_lines`] and
/// [`LogChunk`]).
pub(crate) async fn append_log_lines<B: SqlBackend>(
    store: &SqlStore<B>,
    batches: &[LogLines],
    max_lines_per_run: i64,
) -> Result<u64, StoreError> {
    const OPERATION: &str = "store log lines";
    let chunks: Vec<(&LogLines, LogChunk)> = (batches.iter())
        .filter_map(|batch| Some((batch, batch.chunk(max_lines_per_run)?)))
        .collect();
    let mut stored = 0;
    let mut tx = store.begin_write(OPERATION).await?;
    // A run's row is written once its trigger is acknowledged, and its first lines may come
    // sooner: lines are kept for every log id given out (a fire's is reserved when it is
    // planned), and dropped for ids never given out.
    let last_log_id = last_log_id_in::<B>(&mut tx).await?;
    let chunks: Vec<(&LogLines, LogChunk)> = (chunks.into_iter())
        .filter(|(batch, _)| (1..=last_log_id).contains(&batch.log_id))
        .collect();
    for part in chunks.chunks(INSERT_CHUNK) {
        let rows = part.iter().map(|(batch, chunk)| {
            [
                batch.log_id.into_sql_value(),
                batch.run_started_at_ms.into_sql_value(),
                chunk.first_line.into_sql_value(),
                chunk.last_line.into_sql_value(),
                chunk.texts.as_str().into_sql_value(),
            ]
        });
        let mut insert = Statement::new("");
        match B::DIALECT {
            Dialect::Ansi => {
                insert.push("WITH v(log_id, run_started_at_ms, first_line, last_line, texts) AS (");
                insert.push_rows::<B>(rows);
                // A record delivered again is dropped by the key: each run of a trigger keeps
                // its own lines. (SQLite needs a WHERE before ON CONFLICT to parse INSERT …
                // SELECT.)
                insert.push(
                    ") INSERT INTO run_log_chunks \
                     (log_id, run_started_at_ms, first_line, last_line, texts) \
                     SELECT v.log_id, v.run_started_at_ms, v.first_line, v.last_line, v.texts \
                     FROM v WHERE true \
                     ON CONFLICT (log_id, run_started_at_ms, first_line) DO NOTHING",
                );
            }
            // Repeats are dropped by the key and not counted (an ON DUPLICATE KEY no-op would
            // count them); the lines are plain text of bounded length, so IGNORE turns
            // nothing else into a warning.
            Dialect::MySql => {
                insert.push(
                    "INSERT IGNORE INTO run_log_chunks \
                     (log_id, run_started_at_ms, first_line, last_line, texts) ",
                );
                insert.push_values(rows);
            }
        }
        stored += (insert.execute::<B>(&mut tx).await).map_err(StoreError::query(OPERATION))?;
    }
    tx.commit().await.map_err(StoreError::query(OPERATION))?;
    Ok(stored)
}

/// Lines of a run's log (see [`crate::store::Runs::read_log_lines`]).
pub(crate) async fn read_log_lines<B: SqlBackend>(
    store: &SqlStore<B>,
    log_id: i64,
    from_line: i64,
    limit: u32,
) -> Result<RunLogLines, StoreError> {
    const OPERATION: &str = "read log lines";
    let mut connection = store.connection(OPERATION).await?;
    // The runs of the trigger that have lines, latest first: few (one, unless it was handed
    // back or its executor died), and found on the key's prefix.
    let runs: Vec<(i64,)> = (Statement::new(
        "SELECT DISTINCT run_started_at_ms FROM run_log_chunks WHERE log_id = $1 \
         ORDER BY run_started_at_ms DESC",
    )
    .bind(log_id)
    .fetch_all::<B, _>(&mut connection))
    .await
    .map_err(StoreError::query(OPERATION))?;
    let Some(&(latest,)) = runs.first() else {
        return Ok(RunLogLines::default());
    };
    // Every chunk holds a line at least: `limit` chunks hold `limit` lines or more.
    let chunks: Vec<(i64, String)> = (Statement::new(
        "SELECT first_line, texts FROM run_log_chunks \
         WHERE log_id = $1 AND run_started_at_ms = $2 AND last_line >= $3 \
         ORDER BY first_line LIMIT $4",
    )
    .bind(log_id)
    .bind(latest)
    .bind(from_line)
    .bind(i64::from(limit))
    .fetch_all::<B, _>(&mut connection))
    .await
    .map_err(StoreError::query(OPERATION))?;
    let lines = LogChunk::merge(chunks, from_line, limit as usize).map_err(|reason| {
        StoreError::CorruptRow {
            what: format!("log of run {log_id}"),
            reason,
        }
    })?;
    Ok(RunLogLines {
        run_started_at_ms: Some(latest),
        earlier_runs: u32::try_from(runs.len() - 1).unwrap_or(u32::MAX),
        lines,
    })
}

#[async_trait::async_trait]
impl<B: SqlBackend> History for SqlStore<B> {
    async fn refresh_reports(&self, from_ms: i64, to_ms: i64) -> Result<u64, StoreError> {
        const OPERATION: &str = "refresh daily reports";
        let upsert = match B::DIALECT {
            Dialect::Ansi => {
                "ON CONFLICT (day_ms, app, job_id) DO UPDATE SET running = excluded.running, \
                 succeeded = excluded.succeeded, failed = excluded.failed"
            }
            Dialect::MySql => {
                "ON DUPLICATE KEY UPDATE running = VALUES(running), \
                 succeeded = VALUES(succeeded), failed = VALUES(failed)"
            }
        };
        // One statement: the counts are recomputed from what counts them (the rows not folded
        // yet, the open runs, `run_counts`), never incremented, so a repeated or concurrent
        // refresh writes the same numbers; the progress's lock keeps a fold from moving runs
        // between the three meanwhile.
        let mut tx = self.begin_write(OPERATION).await?;
        let progress = run_counts::lock_progress::<B>(&mut tx).await?;
        let mut refresh = Statement::new(
            "INSERT INTO job_reports (day_ms, app, job_id, running, succeeded, failed) \
             SELECT day_ms, app, job_id, SUM(running), SUM(succeeded), SUM(failed) FROM (",
        );
        run_counts::push_counted_runs(&mut refresh, (from_ms, to_ms), progress.folded_below, None);
        refresh.push(&format!(
            ") counted WHERE true GROUP BY day_ms, app, job_id {upsert}"
        ));
        let written =
            (refresh.execute::<B>(&mut tx).await).map_err(StoreError::query(OPERATION))?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(written)
    }

    async fn fold_runs(&self, now_ms: i64, limit: u32) -> Result<bool, StoreError> {
        const OPERATION: &str = "count settled runs";
        let mut tx = self.begin_write(OPERATION).await?;
        // Both under the progress's lock, which the fold takes.
        let more = run_counts::fold_runs::<B>(&mut tx, now_ms, limit).await?;
        if !more {
            run_counts::settle_open_runs::<B>(&mut tx, now_ms).await?;
        }
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(more)
    }

    async fn list_reports(
        &self,
        from_ms: i64,
        to_ms: i64,
        apps: AppScope<'_>,
        page: &PageRequest<(i64, String, i64)>,
    ) -> Result<Vec<DailyReport>, StoreError> {
        const OPERATION: &str = "list daily reports";
        let mut query = Statement::new(
            "SELECT day_ms, app, job_id, running, succeeded, failed FROM job_reports \
             WHERE day_ms >= ",
        );
        query
            .push_bind(from_ms)
            .push(" AND day_ms < ")
            .push_bind(to_ms);
        query.push_app_scope("app", apps);
        if let Some((day, app, job)) = &page.after {
            // (day, app, job) > (after…), spelled out: every backend plans it on the key.
            query.push(" AND (day_ms > ").push_bind(*day);
            query.push(" OR (day_ms = ").push_bind(*day);
            query.push(" AND (app > ").push_bind(app);
            query.push(" OR (app = ").push_bind(app);
            query.push(" AND job_id > ").push_bind(*job).push("))))");
        }
        query
            .push(" ORDER BY day_ms, app, job_id LIMIT ")
            .push_bind(i64::from(page.limit));
        (query.fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
            .await
            .map_err(StoreError::query(OPERATION))
    }

    async fn delete_old_runs(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError> {
        const OPERATION: &str = "delete old runs";
        let mut tx = self.begin_write(OPERATION).await?;
        let ids: Vec<(i64,)> = (Statement::new(
            "SELECT id FROM job_logs WHERE scheduled_at_ms < $1 \
             AND state IN ('FINISHED', 'CANCELLED') ORDER BY scheduled_at_ms LIMIT $2",
        )
        .bind(before_ms)
        .bind(i64::from(limit))
        .fetch_all::<B, _>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        let mut deleted = 0;
        for chunk in ids.chunks(UPDATE_CHUNK) {
            for table in ["run_log_chunks WHERE log_id", "job_logs WHERE id"] {
                let mut delete = Statement::new(format!("DELETE FROM {table}"));
                delete.push_in_list(chunk.iter().map(|(id,)| *id));
                let done =
                    (delete.execute::<B>(&mut tx).await).map_err(StoreError::query(OPERATION))?;
                if table.starts_with("job_logs") {
                    deleted += done;
                }
            }
        }
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(deleted)
    }

    async fn delete_old_reports(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError> {
        const OPERATION: &str = "delete old reports";
        let mut tx = self.begin_write(OPERATION).await?;
        let mut deleted = 0;
        for table in ["job_reports", "run_counts"] {
            // The derived table lets MySQL delete from the table it reads, and take a LIMIT
            // inside IN.
            deleted += (Statement::new(format!(
                "DELETE FROM {table} WHERE (day_ms, app, job_id) IN \
                 (SELECT day_ms, app, job_id FROM \
                 (SELECT day_ms, app, job_id FROM {table} WHERE day_ms < $1 LIMIT $2) AS old)",
            ))
            .bind(before_ms)
            .bind(i64::from(limit))
            .execute::<B>(&mut tx))
            .await
            .map_err(StoreError::query(OPERATION))?;
        }
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(deleted)
    }

    async fn drop_unkept_runs(
        &self,
        finished_before_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        const OPERATION: &str = "drop runs their history policy does not keep";
        let mut tx = self.begin_write(OPERATION).await?;
        // A folded run is counted already, unless it was open (see `run_counts`).
        let progress = run_counts::lock_progress::<B>(&mut tx).await?;
        // Kept whatever the policy: a failed attempt while any of its retries is not done
        // (they read it: the FIX_DELAY rule, the retry chain), and the shards of an
        // ALL_SHARDS parent's fire (its join counts their successes). The jobs with a policy
        // other than ALL are few: the plan starts from them.
        let ids: Vec<(i64,)> = (Statement::new(
            "SELECT l.id FROM jobs j JOIN job_logs l ON l.job_id = j.id \
             WHERE j.history <> 'ALL' \
             AND (j.history = 'NONE' OR l.handle_code = 200) \
             AND l.state = 'FINISHED' AND l.follow_up = 'DONE' AND l.handle_at_ms < $1 \
             AND NOT (j.child_trigger_mode = 'ALL_SHARDS' AND j.child_job_ids <> '' \
                 AND l.shard_total > 1) \
             AND NOT EXISTS (SELECT 1 FROM job_logs r WHERE r.first_log_id = l.id \
                 AND (r.state <> 'FINISHED' OR r.follow_up <> 'DONE')) \
             ORDER BY l.id LIMIT $2",
        )
        .bind(finished_before_ms)
        .bind(i64::from(limit))
        .fetch_all::<B, _>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        // Of the rows this transaction deleted.
        let mut counts = run_counts::RunCounts::new();
        let mut dropped = 0;
        for chunk in ids.chunks(UPDATE_CHUNK) {
            let mut lines = Statement::new("DELETE FROM run_log_chunks WHERE log_id");
            lines.push_in_list(chunk.iter().map(|(id,)| *id));
            (lines.execute::<B>(&mut tx).await).map_err(StoreError::query(OPERATION))?;
            let gone = delete_finished_runs::<B>(&mut tx, chunk).await?;
            dropped += gone.len() as u64;
            let folded: Vec<i64> = (gone.iter())
                .map(|(id, ..)| *id)
                .filter(|id| *id < progress.folded_below)
                .collect();
            let open = run_counts::take_open_runs::<B>(&mut tx, &folded).await?;
            for (id, scheduled_at_ms, app, job_id, code) in gone {
                if id < progress.folded_below && !open.contains(&id) {
                    continue;
                }
                let succeeded = code == Some(i64::from(kadence_schemas::result_code::SUCCESS));
                run_counts::count_run(&mut counts, (scheduled_at_ms, app, job_id), succeeded);
            }
        }
        run_counts::add_run_counts::<B>(&mut tx, counts).await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(dropped)
    }

    async fn count_unkept_run_sets(&self, limit: u32) -> Result<CountedSets, StoreError> {
        const OPERATION: &str = "count unkept runs";
        let mut tx = self.begin_write(OPERATION).await?;
        let (sets, runs) = super::unkept_runs::take_uncounted_sets::<B>(&mut tx, limit).await?;
        // The runs of deleted jobs are not counted: their counts went with them.
        let job_ids: Vec<i64> = (runs.iter())
            .map(|run| run.trigger_id.job_id().get())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let existing: HashSet<i64> = Statement::fetch_in_chunks::<B, (i64,), _, _>(
            &mut tx,
            "SELECT id FROM jobs WHERE id",
            &job_ids,
            |id| *id,
        )
        .await
        .map_err(StoreError::query(OPERATION))?
        .into_iter()
        .map(|(id,)| id)
        .collect();
        let mut counts = run_counts::RunCounts::new();
        let mut counted = 0;
        for run in runs {
            let job_id = run.trigger_id.job_id().get();
            if existing.contains(&job_id) {
                // Every unkept run succeeded.
                let run = (run.scheduled_at_ms, run.app.to_string(), job_id);
                run_counts::count_run(&mut counts, run, true);
                counted += 1;
            }
        }
        run_counts::add_run_counts::<B>(&mut tx, counts).await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(CountedSets {
            sets,
            runs: counted,
        })
    }

    async fn forget_unkept_run_sets(
        &self,
        ended_before_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        const OPERATION: &str = "forget unkept runs";
        let mut tx = self.begin_write(OPERATION).await?;
        let forgotten =
            super::unkept_runs::forget_unkept_runs::<B>(&mut tx, ended_before_ms, limit).await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(forgotten)
    }
}

/// A deleted run: its id, scheduled time, app, job and code.
type DeletedRun = (i64, i64, String, i64, Option<i64>);

/// Deletes the finished runs among `ids`; returns each deleted (by this transaction: two
/// nodes never count one twice).
async fn delete_finished_runs<B: SqlBackend>(
    tx: &mut B::Connection,
    ids: &[(i64,)],
) -> Result<Vec<DeletedRun>, StoreError> {
    const OPERATION: &str = "drop runs their history policy does not keep";
    let ids = || ids.iter().map(|(id,)| *id);
    match B::DIALECT {
        Dialect::Ansi => {
            let mut runs = Statement::new("DELETE FROM job_logs WHERE state = 'FINISHED' AND id");
            runs.push_in_list(ids());
            runs.push(" RETURNING id, scheduled_at_ms, app, job_id, handle_code");
            (runs.fetch_all::<B, _>(tx).await).map_err(StoreError::query(OPERATION))
        }
        // The rows are locked as they are read: another node's delete of the same rows
        // waits, then finds them gone and counts nothing.
        Dialect::MySql => {
            let mut select = Statement::new(
                "SELECT id, scheduled_at_ms, app, job_id, handle_code \
                 FROM job_logs FORCE INDEX (PRIMARY) WHERE state = 'FINISHED' AND id",
            );
            select.push_in_list(ids());
            select.push(" FOR UPDATE");
            let rows: Vec<(i64, i64, String, i64, Option<i64>)> =
                (select.fetch_all::<B, _>(&mut *tx).await).map_err(StoreError::query(OPERATION))?;
            if !rows.is_empty() {
                let mut delete = Statement::new("DELETE FROM job_logs WHERE id");
                delete.push_in_list(rows.iter().map(|row| row.0));
                (delete.execute::<B>(tx).await).map_err(StoreError::query(OPERATION))?;
            }
            Ok(rows)
        }
    }
}
