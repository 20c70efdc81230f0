//! Runs counted for the daily reports and the overview, each once, as it settles.
//!
//! A run counts as succeeded (its code is 200), failed (finished with another code) or running
//! (SCHEDULED or DISPATCHED); a cancelled one counts as none. Its row gets its code once and
//! keeps it (a result completes only a row without one, and nothing clears it), so a row with
//! a code is **settled**: what it counts never changes again, even when the row is deleted
//! later by retention or its history policy.
//!
//! Recounting every row of yesterday and today each minute (XXL-JOB's way) reads the whole day
//! again and again: 864 million rows by midnight at 10 000 runs a second, and in the
//! ten-minute benchmark it was a quarter of the database's busy samples by minute nine. So the
//! rows are **folded** instead, once each:
//! - Below `report_progress.folded_below` every row is folded. A row that had its code when it
//!   was folded was added to `run_counts` (which also counts the runs a history policy
//!   dropped and the runs that never had a row: every count kept outside a row). A row
//!   without one was listed in `report_open_runs`.
//! - Each report step folds the rows from `folded_below` up to the horizon
//!   ([`fold_runs`], in transactions of at most a given count of ids), then re-reads the open
//!   runs ([`settle_open_runs`]): one settled since is added to `run_counts` and unlisted, one
//!   deleted is unlisted, and so is one of a day before yesterday, whose report row is no
//!   longer rewritten.
//! - The counts of a day are then `run_counts`, plus the rows not folded yet, plus the open
//!   runs as they are now ([`push_counted_runs`]): the step reads the rows of about two
//!   minutes and the few open runs, not the day.
//!
//! **The horizon.** A row may be written well after its id was given out: a scan reserves its
//! fires' ids when it writes their batch, and a fire's row is written once the broker
//! acknowledged its trigger, seconds later, or minutes later after a database outage. A fold
//! past an id whose row is still to come would never count that run. So the fold stops at the
//! lowest id a readable fire batch still holds (`fire_batches.first_log_id`; a batch of the
//! version before has 0 and stops folding until it is gone, seconds after an upgrade), and at
//! the ids given out at least [`FOLD_GRACE_MS`] ago (`fold_next`, the highest id given out
//! when it was recorded, and `fold_next_at_ms`): the rows written with ids taken as they are
//! inserted (manual fires, retries, children) are committed long before.
//!
//! **Locks.** Every transaction that folds, counts with `folded_below`, drops unkept runs or
//! deletes a job first locks the `report_progress` row ([`lock_progress`]). Folding lists a
//! range's open rows and counts its settled ones as of one moment ([`fold_range`]), so a row
//! that settles meanwhile is counted once, later, as an open one.
//! A history policy's drop of a row counts it in `run_counts` only if no fold did
//! ([`take_open_runs`]); a job's deletion takes its rows and their counts together.

use std::collections::{BTreeMap, HashSet};

use super::backend::SqlBackend;
use super::batches::last_log_id_in;
use super::dialect::Dialect;
use super::statement::{IntoSqlValue as _, Statement};
use super::{INSERT_CHUNK, UPDATE_CHUNK};
use crate::clock::{DAY_MS, day_of};
use crate::store::{AppScope, FOLD_GRACE_MS, StoreError};

/// The day of `scheduled_at_ms`, the counts of a row (running, succeeded, failed), as SQL on
/// `job_logs` (`l`): one text for folding, reports and the overview.
const DAY_AND_COUNTS: &str = "l.scheduled_at_ms - l.scheduled_at_ms % 86400000 AS day_ms, \
     l.app, l.job_id, \
     CASE WHEN l.state IN ('SCHEDULED', 'DISPATCHED') THEN 1 ELSE 0 END AS running, \
     CASE WHEN l.handle_code = 200 THEN 1 ELSE 0 END AS succeeded, \
     CASE WHEN l.state = 'FINISHED' AND l.handle_code <> 200 THEN 1 ELSE 0 END AS failed";

/// The folding's progress (the `report_progress` row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FoldProgress {
    /// Every row below this id is folded.
    pub(crate) folded_below: i64,
    /// The highest id given out when it was recorded, plus one.
    fold_next: i64,
    /// When it was recorded.
    fold_next_at_ms: i64,
}

/// Locks the folding's progress until the transaction ends and reads it (see the module docs).
pub(crate) async fn lock_progress<B: SqlBackend>(
    tx: &mut B::Connection,
) -> Result<FoldProgress, StoreError> {
    const OPERATION: &str = "read the run counting's progress";
    let (folded_below, fold_next, fold_next_at_ms): (i64, i64, i64) = (Statement::new(format!(
        "SELECT folded_below, fold_next, fold_next_at_ms FROM report_progress WHERE id = 1{}",
        B::ROW_LOCK
    ))
    .fetch_one::<B, _>(tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    Ok(FoldProgress {
        folded_below,
        fold_next,
        fold_next_at_ms,
    })
}

/// Folds the rows from `folded_below` on, at most `limit` ids, up to the horizon (see the
/// module docs), in one transaction of `tx`'s; returns whether rows below the horizon are
/// still to fold.
pub(crate) async fn fold_runs<B: SqlBackend>(
    tx: &mut B::Connection,
    now_ms: i64,
    limit: u32,
) -> Result<bool, StoreError> {
    const OPERATION: &str = "count settled runs";
    let progress = lock_progress::<B>(&mut *tx).await?;
    let given_out_long_ago = if now_ms - progress.fold_next_at_ms >= FOLD_GRACE_MS {
        progress.fold_next
    } else {
        progress.folded_below
    };
    let (lowest_batch_id,): (i64,) = (Statement::new(
        "SELECT COALESCE(MIN(first_log_id), 9223372036854775807) FROM fire_batches \
         WHERE owner_node <> 'unreadable'",
    )
    .fetch_one::<B, _>(&mut *tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    let horizon = given_out_long_ago.min(lowest_batch_id);
    let from = progress.folded_below;
    let to = horizon.min(from.saturating_add(i64::from(limit)));
    if to > from {
        fold_range::<B>(&mut *tx, from, to).await?;
    }
    let folded_below = to.max(from);
    // Caught up with the ids recorded: record the ones given out by now, for a later step.
    let (fold_next, fold_next_at_ms) = if folded_below >= progress.fold_next {
        (last_log_id_in::<B>(&mut *tx).await? + 1, now_ms)
    } else {
        (progress.fold_next, progress.fold_next_at_ms)
    };
    (Statement::new(
        "UPDATE report_progress SET folded_below = $1, fold_next = $2, fold_next_at_ms = $3 \
         WHERE id = 1",
    )
    .bind(folded_below)
    .bind(fold_next)
    .bind(fold_next_at_ms)
    .execute::<B>(&mut *tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    Ok(folded_below < horizon)
}

/// Folds the rows of ids in `[from, to)`: lists the open ones in `report_open_runs` and adds
/// the settled ones to `run_counts`. Both must read the rows as they were at one moment, or
/// a run settling in between would be counted twice or never. On PostgreSQL they are one
/// statement (the listing a `WITH` of the count), which reads one snapshot; elsewhere the
/// open ones are listed first, and the count leaves out the runs listed, so a run settling
/// after the listing is counted once, later, as an open one.
async fn fold_range<B: SqlBackend>(
    tx: &mut B::Connection,
    from: i64,
    to: i64,
) -> Result<(), StoreError> {
    const OPERATION: &str = "count settled runs";
    const LIST_OPEN: &str = "INSERT INTO report_open_runs (log_id) SELECT id FROM job_logs \
         WHERE id >= $1 AND id < $2 AND handle_code IS NULL";
    // `[from, to)` as the placeholders `ids` name them, and a condition on the row `l`.
    let count_settled = |(from, to): (&str, &str), not_listed: &str| {
        format!(
            "INSERT INTO run_counts (day_ms, app, job_id, succeeded, failed) \
             SELECT day_ms, app, job_id, SUM(succeeded), SUM(failed) FROM ( \
                 SELECT {DAY_AND_COUNTS} FROM job_logs l \
                 WHERE l.id >= {from} AND l.id < {to} AND l.handle_code IS NOT NULL{not_listed} \
             ) settled WHERE true GROUP BY day_ms, app, job_id {}",
            add_to_run_counts(B::DIALECT),
        )
    };
    if B::INSERTS_IN_WITH {
        let count = count_settled(("$3", "$4"), "");
        let statement = format!("WITH listed AS ({LIST_OPEN}) {count}");
        (Statement::new(statement)
            .bind(from)
            .bind(to)
            .bind(from)
            .bind(to))
        .execute::<B>(&mut *tx)
        .await
        .map_err(StoreError::query(OPERATION))?;
        return Ok(());
    }
    (Statement::new(LIST_OPEN).bind(from).bind(to))
        .execute::<B>(&mut *tx)
        .await
        .map_err(StoreError::query(OPERATION))?;
    let not_listed = " AND NOT EXISTS (SELECT 1 FROM report_open_runs o WHERE o.log_id = l.id)";
    (Statement::new(count_settled(("$1", "$2"), not_listed))
        .bind(from)
        .bind(to))
    .execute::<B>(&mut *tx)
    .await
    .map_err(StoreError::query(OPERATION))?;
    Ok(())
}

/// The upsert that adds a row of counts to `run_counts`'s (`excluded` or `VALUES`).
pub(crate) fn add_to_run_counts(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Ansi => {
            "ON CONFLICT (day_ms, app, job_id) DO UPDATE SET \
             succeeded = run_counts.succeeded + excluded.succeeded, \
             failed = run_counts.failed + excluded.failed"
        }
        Dialect::MySql => {
            "ON DUPLICATE KEY UPDATE succeeded = run_counts.succeeded + VALUES(succeeded), \
             failed = run_counts.failed + VALUES(failed)"
        }
    }
}

/// Re-reads the open runs, in `tx`, which locked the progress (see the module docs): adds
/// those settled since to `run_counts` and unlists them, and unlists the deleted ones and
/// those scheduled before yesterday (at `now_ms`); returns how many it unlisted.
pub(crate) async fn settle_open_runs<B: SqlBackend>(
    tx: &mut B::Connection,
    now_ms: i64,
) -> Result<u64, StoreError> {
    const OPERATION: &str = "count settled open runs";
    let gone = (Statement::new(
        "DELETE FROM report_open_runs WHERE NOT EXISTS \
         (SELECT 1 FROM job_logs l WHERE l.id = report_open_runs.log_id)",
    )
    .execute::<B>(&mut *tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    let open: Vec<(i64, i64, String, i64, String, Option<i64>)> = (Statement::new(
        "SELECT o.log_id, l.scheduled_at_ms, l.app, l.job_id, l.state, l.handle_code \
         FROM report_open_runs o JOIN job_logs l ON l.id = o.log_id",
    )
    .fetch_all::<B, _>(&mut *tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    let yesterday = day_of(now_ms) - DAY_MS;
    let mut counts = RunCounts::new();
    let mut unlisted = Vec::new();
    for (log_id, scheduled_at_ms, app, job_id, state, code) in open {
        if let Some(code) = code {
            let succeeded = code == i64::from(kadence_schemas::result_code::SUCCESS);
            if succeeded || state == "FINISHED" {
                count_run(&mut counts, (scheduled_at_ms, app, job_id), succeeded);
            }
            unlisted.push(log_id);
        } else if day_of(scheduled_at_ms) < yesterday {
            unlisted.push(log_id);
        }
    }
    add_run_counts::<B>(&mut *tx, counts).await?;
    for chunk in unlisted.chunks(UPDATE_CHUNK) {
        let mut delete = Statement::new("DELETE FROM report_open_runs WHERE log_id");
        delete.push_in_list(chunk.iter().copied());
        (delete.execute::<B>(&mut *tx).await).map_err(StoreError::query(OPERATION))?;
    }
    Ok(gone + unlisted.len() as u64)
}

/// Unlists the runs of `log_ids` that are open, in `tx` (which locked the progress); returns
/// those that were. A history policy's drop counts a folded run only if it was open.
pub(crate) async fn take_open_runs<B: SqlBackend>(
    tx: &mut B::Connection,
    log_ids: &[i64],
) -> Result<HashSet<i64>, StoreError> {
    const OPERATION: &str = "unlist open runs";
    let mut taken = HashSet::new();
    for chunk in log_ids.chunks(UPDATE_CHUNK) {
        let mut select = Statement::new("SELECT log_id FROM report_open_runs WHERE log_id");
        select.push_in_list(chunk.iter().copied());
        let open: Vec<(i64,)> =
            (select.fetch_all::<B, _>(&mut *tx).await).map_err(StoreError::query(OPERATION))?;
        if open.is_empty() {
            continue;
        }
        let mut delete = Statement::new("DELETE FROM report_open_runs WHERE log_id");
        delete.push_in_list(open.iter().map(|(id,)| *id));
        (delete.execute::<B>(&mut *tx).await).map_err(StoreError::query(OPERATION))?;
        taken.extend(open.into_iter().map(|(id,)| id));
    }
    Ok(taken)
}

/// Pushes the runs of `apps` scheduled in `[from_ms, to_ms)`, a row of counts each (`day_ms,
/// app, job_id, running, succeeded, failed`), as a `UNION ALL` to select from: the rows from
/// `folded_below` on, the open runs as they are now, and `run_counts` (see the module docs).
/// The caller holds the progress's lock, so that no fold moves rows between the three.
pub(crate) fn push_counted_runs<'a>(
    query: &mut Statement<'a>,
    (from_ms, to_ms): (i64, i64),
    folded_below: i64,
    apps: AppScope<'a>,
) {
    query.push(&format!(
        "SELECT {DAY_AND_COUNTS} FROM job_logs l WHERE l.id >= "
    ));
    query.push_bind(folded_below);
    push_scheduled_in(query, "l.scheduled_at_ms", (from_ms, to_ms), apps, "l.app");
    query.push(&format!(
        " UNION ALL SELECT {DAY_AND_COUNTS} FROM report_open_runs o \
         JOIN job_logs l ON l.id = o.log_id WHERE true"
    ));
    push_scheduled_in(query, "l.scheduled_at_ms", (from_ms, to_ms), apps, "l.app");
    query.push(
        " UNION ALL SELECT day_ms, app, job_id, 0 AS running, succeeded, failed \
         FROM run_counts WHERE true",
    );
    push_scheduled_in(query, "day_ms", (from_ms, to_ms), apps, "app");
}

/// ` AND {time} >= from AND {time} < to` and the app scope on `{app}`.
fn push_scheduled_in<'a>(
    query: &mut Statement<'a>,
    time: &str,
    (from_ms, to_ms): (i64, i64),
    apps: AppScope<'a>,
    app: &str,
) {
    query.push(&format!(" AND {time} >= ")).push_bind(from_ms);
    query.push(&format!(" AND {time} < ")).push_bind(to_ms);
    query.push_app_scope(app, apps);
}

/// Runs counted for `run_counts`: (day, app, job) -> (succeeded, failed).
pub(crate) type RunCounts = BTreeMap<(i64, String, i64), (i64, i64)>;

/// Counts a run, `(scheduled at, app, job)`, in `counts` under its scheduled UTC day.
pub(crate) fn count_run(
    counts: &mut RunCounts,
    (scheduled_at_ms, app, job_id): (i64, String, i64),
    succeeded: bool,
) {
    let count = counts
        .entry((crate::clock::day_of(scheduled_at_ms), app, job_id))
        .or_default();
    if succeeded {
        count.0 += 1;
    } else {
        count.1 += 1;
    }
}

/// Adds `counts` to `run_counts`.
pub(crate) async fn add_run_counts<B: SqlBackend>(
    tx: &mut B::Connection,
    counts: RunCounts,
) -> Result<(), StoreError> {
    const OPERATION: &str = "add to the run counts";
    let counts: Vec<_> = counts.into_iter().collect();
    for chunk in counts.chunks(INSERT_CHUNK) {
        let mut upsert =
            Statement::new("INSERT INTO run_counts (day_ms, app, job_id, succeeded, failed) ");
        upsert.push_rows::<B>(
            chunk
                .iter()
                .map(|((day, app, job_id), (succeeded, failed))| {
                    [
                        day.into_sql_value(),
                        app.into_sql_value(),
                        job_id.into_sql_value(),
                        succeeded.into_sql_value(),
                        failed.into_sql_value(),
                    ]
                }),
        );
        upsert.push(" ").push(add_to_run_counts(B::DIALECT));
        (upsert.execute::<B>(&mut *tx).await).map_err(StoreError::query(OPERATION))?;
    }
    Ok(())
}
