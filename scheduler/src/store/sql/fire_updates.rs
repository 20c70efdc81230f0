//! The keyed batch updates of `jobs` and `job_logs` on the fire path, and the claims of rows
//! by lease, in both dialects (see [`dialect`](super::dialect)): PostgreSQL and SQLite update
//! from a `VALUES` list and return what changed; MySQL locks the rows it reads, decides in
//! Rust which ones the compare-and-set applies to, and updates those by a join with a derived
//! table of the batch ([`Statement::push_mysql_rows`]).

use std::collections::HashMap;

use super::backend::{Reads, SqlBackend, SqlStore};
use super::dialect::Dialect;
use super::statement::{IntoSqlValue as _, SqlValue, Statement};
use crate::domain::model::{Completion, JobStatus};
use crate::store::rows::{
    CompletedRunRow, FIRE_COLUMNS, FinishedRunRow, FireRow, claim_expired_sql,
};
use crate::store::sql::planning::JobAdvance;
use crate::store::{DispatchAck, StoreError};

/// Advances the next-fire times of a scan's jobs; returns the ids of the jobs whose advance
/// applied.
///
/// Compare-and-set: a job stopped or edited while the scan ran (possible on PostgreSQL and
/// MySQL, where the scan does not lock job rows) keeps the change; the scan must never
/// restart a stopped job.
pub(crate) async fn advance_jobs<B: SqlBackend>(
    tx: &mut B::Connection,
    chunk: &[JobAdvance],
) -> Result<Vec<i64>, StoreError> {
    const OPERATION: &str = "pre-read due jobs";
    match B::DIALECT {
        Dialect::Ansi => {
            let mut update =
                Statement::new("WITH v(id, next_fire, last_fire, status, read_next_fire) AS (");
            update.push_rows::<B>(chunk.iter().map(|advance| {
                [
                    advance.job_id.into_sql_value(),
                    advance.next_fire_ms.into_sql_value(),
                    advance.last_fire_ms.into_sql_value(),
                    advance.status.as_str().into_sql_value(),
                    advance.read_next_fire_ms.into_sql_value(),
                ]
            }));
            update.push(
                ") UPDATE jobs SET next_fire_ms = v.next_fire, \
                 last_fire_ms = COALESCE(v.last_fire, jobs.last_fire_ms), status = v.status \
                 FROM v WHERE jobs.id = v.id AND jobs.status = 'RUNNING' \
                 AND jobs.next_fire_ms = v.read_next_fire RETURNING jobs.id",
            );
            let ids: Vec<(i64,)> =
                (update.fetch_all::<B, _>(tx).await).map_err(StoreError::query(OPERATION))?;
            Ok(ids.into_iter().map(|(id,)| id).collect())
        }
        Dialect::MySql => {
            let applying = lock_advancing_jobs::<B>(&mut *tx, chunk).await?;
            if applying.is_empty() {
                return Ok(Vec::new());
            }
            let mut update = Statement::new("UPDATE ");
            update.push_mysql_rows(
                &["id", "next_fire", "last_fire", "status"],
                applying.iter().map(|advance| {
                    [
                        advance.job_id.into_sql_value(),
                        advance.next_fire_ms.into_sql_value(),
                        advance.last_fire_ms.into_sql_value(),
                        advance.status.as_str().into_sql_value(),
                    ]
                }),
            );
            update.push(
                " STRAIGHT_JOIN jobs ON jobs.id = v.id SET jobs.next_fire_ms = v.next_fire, \
                 jobs.last_fire_ms = COALESCE(v.last_fire, jobs.last_fire_ms), jobs.status = v.status",
            );
            (update.execute::<B>(tx).await).map_err(StoreError::query(OPERATION))?;
            Ok(applying.into_iter().map(|advance| advance.job_id).collect())
        }
    }
}

/// The advances of `chunk` that apply (their job still RUNNING and due when the scan read
/// it), their jobs locked (MySQL): by primary key alone, so InnoDB locks these rows only (see
/// [`dialect`](super::dialect)), and the compare-and-set's condition checked here instead.
async fn lock_advancing_jobs<'c, B: SqlBackend>(
    tx: &mut B::Connection,
    chunk: &'c [JobAdvance],
) -> Result<Vec<&'c JobAdvance>, StoreError> {
    let mut select =
        Statement::new("SELECT id, status, next_fire_ms FROM jobs FORCE INDEX (PRIMARY) WHERE id");
    select.push_in_list(chunk.iter().map(|advance| advance.job_id));
    select.push(" FOR UPDATE");
    let current: Vec<(i64, String, Option<i64>)> =
        (select.fetch_all::<B, _>(tx).await).map_err(StoreError::query("pre-read due jobs"))?;
    let current: HashMap<i64, (String, Option<i64>)> = (current.into_iter())
        .map(|(id, status, next_fire)| (id, (status, next_fire)))
        .collect();
    let applies = |advance: &&JobAdvance| {
        (current.get(&advance.job_id)).is_some_and(|(status, next_fire)| {
            status == JobStatus::Running.as_str()
                && next_fire.is_some()
                && *next_fire == advance.read_next_fire_ms
        })
    };
    Ok(chunk.iter().filter(applies).collect())
}

/// Marks runs that have rows DISPATCHED with where they went. A run whose result arrived
/// first keeps state FINISHED and the executor that ran it.
pub(crate) async fn mark_runs_dispatched<B: SqlBackend>(
    tx: &mut B::Connection,
    chunk: &[&DispatchAck],
) -> Result<(), StoreError> {
    const OPERATION: &str = "mark triggers dispatched";
    let columns = ["id", "partition_no", "dispatched_at", "executor_id"];
    let rows = chunk.iter().map(|ack| {
        [
            ack.log_id.into_sql_value(),
            ack.partition.into_sql_value(),
            ack.dispatched_at_ms.into_sql_value(),
            ack.executor_id.as_deref().into_sql_value(),
        ]
    });
    let mut update = Statement::new("");
    match B::DIALECT {
        Dialect::Ansi => {
            update.push(&format!("WITH v({}) AS (", columns.join(", ")));
            update.push_rows::<B>(rows);
            update.push(
                ") UPDATE job_logs SET \
                 state = CASE WHEN job_logs.state = 'SCHEDULED' THEN 'DISPATCHED' ELSE job_logs.state END, \
                 executor_id = COALESCE(job_logs.executor_id, v.executor_id), \
                 partition_no = v.partition_no, dispatched_at_ms = v.dispatched_at, \
                 owner_node = NULL, lease_until_ms = NULL FROM v WHERE job_logs.id = v.id",
            );
        }
        Dialect::MySql => {
            update.push("UPDATE ");
            update.push_mysql_rows(&columns, rows);
            update.push(
                " STRAIGHT_JOIN job_logs ON job_logs.id = v.id SET \
                 job_logs.state = CASE WHEN job_logs.state = 'SCHEDULED' THEN 'DISPATCHED' ELSE job_logs.state END, \
                 job_logs.executor_id = COALESCE(job_logs.executor_id, v.executor_id), \
                 job_logs.partition_no = v.partition_no, job_logs.dispatched_at_ms = v.dispatched_at, \
                 job_logs.owner_node = NULL, job_logs.lease_until_ms = NULL",
            );
        }
    }
    (update.execute::<B>(tx).await).map_err(StoreError::query(OPERATION))?;
    Ok(())
}

/// The run's trigger type is its first attempt's: a retry's own is RETRY.
const RUN_TRIGGER_TYPE: &str = "COALESCE((SELECT first_attempt.trigger_type FROM job_logs first_attempt \
     WHERE first_attempt.id = job_logs.first_log_id), job_logs.trigger_type)";

/// The columns of a batch of results, as [`completion_row`] gives each.
const COMPLETION_COLUMNS: [&str; 9] = [
    "trigger_id",
    "app",
    "executor_id",
    "code",
    "msg",
    "started",
    "finished",
    "retry_after",
    "done",
];

/// A result as a row of [`COMPLETION_COLUMNS`].
///
/// `app`: the run is completed only if it is of the result's app (NULL: the scheduler's own
/// completion, which checked the run). `done`: the run needs no follow-up.
fn completion_row<'a>(completion: &'a Completion, done: bool) -> [SqlValue<'a>; 9] {
    [
        completion.trigger_id.as_str().into_sql_value(),
        completion.app.as_deref().into_sql_value(),
        completion.executor_id.as_str().into_sql_value(),
        completion.code.into_sql_value(),
        completion.message.as_deref().into_sql_value(),
        completion.started_at_ms.into_sql_value(),
        completion.finished_at_ms.into_sql_value(),
        completion.retry_after_ms.into_sql_value(),
        i64::from(done).into_sql_value(),
    ]
}

/// Completes the unfinished runs of `completions` (one result per trigger) in one statement;
/// returns the runs completed. `done`: whether a result leaves its run nothing to follow up.
pub(crate) async fn update_completions<B: SqlBackend>(
    tx: &mut B::Connection,
    completions: &[&Completion],
    done: impl Fn(&Completion) -> bool,
) -> Result<Vec<CompletedRunRow>, StoreError> {
    const OPERATION: &str = "record results";
    let rows = (completions.iter()).map(|completion| completion_row(completion, done(completion)));
    let columns = COMPLETION_COLUMNS;
    match B::DIALECT {
        Dialect::Ansi => {
            let mut update = Statement::new(format!("WITH v({}) AS (", columns.join(", ")));
            update.push_rows::<B>(rows);
            // (SQLite's RETURNING may not name `v`: the new values are read back.)
            update.push(&format!(
                ") UPDATE job_logs SET state = 'FINISHED', executor_id = v.executor_id, \
                 handle_code = v.code, handle_msg = v.msg, handle_started_at_ms = v.started, \
                 handle_at_ms = v.finished, retry_after_ms = v.retry_after, \
                 owner_node = NULL, lease_until_ms = NULL, \
                 follow_up = CASE WHEN v.done = 1 THEN 'DONE' ELSE job_logs.follow_up END, \
                 alarm_status = CASE WHEN v.done = 1 THEN 'NOT_NEEDED' ELSE job_logs.alarm_status END \
                 FROM v WHERE job_logs.trigger_id = v.trigger_id AND job_logs.handle_code IS NULL \
                 AND (v.app IS NULL OR job_logs.app = v.app) \
                 RETURNING job_logs.trigger_id, job_logs.job_id, {RUN_TRIGGER_TYPE} AS run_trigger_type, \
                 job_logs.attempt, job_logs.handle_code, job_logs.handle_at_ms",
            ));
            (update.fetch_all::<B, _>(tx).await).map_err(StoreError::query(OPERATION))
        }
        Dialect::MySql => {
            let unfinished = lock_unfinished_runs::<B>(&mut *tx, completions).await?;
            if unfinished.is_empty() {
                return Ok(Vec::new());
            }
            let mut update = Statement::new("UPDATE ");
            update.push_mysql_rows(&columns, rows);
            update.push(
                " STRAIGHT_JOIN job_logs ON job_logs.trigger_id = v.trigger_id SET job_logs.state = 'FINISHED', \
                 job_logs.executor_id = v.executor_id, job_logs.handle_code = v.code, \
                 job_logs.handle_msg = v.msg, job_logs.handle_started_at_ms = v.started, \
                 job_logs.handle_at_ms = v.finished, job_logs.retry_after_ms = v.retry_after, \
                 job_logs.owner_node = NULL, job_logs.lease_until_ms = NULL, \
                 job_logs.follow_up = CASE WHEN v.done = 1 THEN 'DONE' ELSE job_logs.follow_up END, \
                 job_logs.alarm_status = CASE WHEN v.done = 1 THEN 'NOT_NEEDED' ELSE job_logs.alarm_status END \
                 WHERE job_logs.handle_code IS NULL AND (v.app IS NULL OR job_logs.app = v.app)",
            );
            (update.execute::<B>(tx).await).map_err(StoreError::query(OPERATION))?;
            Ok(completed_rows(unfinished, completions))
        }
    }
}

/// An unfinished run as MySQL's locking read gives it: trigger id, job, run trigger type,
/// attempt and app.
type UnfinishedRunRow = (String, i64, String, i64, String);

/// Locks the unfinished runs of `completions` as they are read (MySQL): those are the ones the
/// update completes, with the values it writes.
async fn lock_unfinished_runs<B: SqlBackend>(
    tx: &mut B::Connection,
    completions: &[&Completion],
) -> Result<Vec<UnfinishedRunRow>, StoreError> {
    let mut select = Statement::new(format!(
        "SELECT job_logs.trigger_id, job_logs.job_id, {RUN_TRIGGER_TYPE} AS run_trigger_type, \
         job_logs.attempt, job_logs.app FROM job_logs FORCE INDEX (job_logs_trigger) \
         WHERE job_logs.handle_code IS NULL AND job_logs.trigger_id"
    ));
    select.push_in_list(
        completions
            .iter()
            .map(|completion| completion.trigger_id.as_str()),
    );
    select.push(" FOR UPDATE");
    (select.fetch_all::<B, _>(tx).await).map_err(StoreError::query("record results"))
}

/// The completed runs of [`lock_unfinished_runs`]' rows, with their results.
fn completed_rows(
    unfinished: Vec<UnfinishedRunRow>,
    completions: &[&Completion],
) -> Vec<CompletedRunRow> {
    let by_trigger: HashMap<&str, &Completion> = (completions.iter())
        .map(|completion| (completion.trigger_id.as_str(), *completion))
        .collect();
    (unfinished.into_iter())
        .filter_map(|(trigger_id, job_id, run_trigger_type, attempt, app)| {
            let completion = by_trigger.get(trigger_id.as_str())?;
            if completion.app.as_ref().is_some_and(|wanted| *wanted != app) {
                return None;
            }
            Some(CompletedRunRow {
                handle_code: i64::from(completion.code),
                handle_at_ms: completion.finished_at_ms,
                trigger_id,
                job_id,
                run_trigger_type,
                attempt,
            })
        })
        .collect()
}

/// Claims up to `limit` pending fires whose lease ended before `now_ms` for `node_id` until
/// `lease_until_ms`, oldest lease first.
pub(crate) async fn claim_expired_fires<B: SqlBackend>(
    store: &SqlStore<B>,
    node_id: &str,
    now_ms: i64,
    lease_until_ms: i64,
    limit: u32,
) -> Result<Vec<FireRow>, StoreError> {
    const OPERATION: &str = "claim expired pending fires";
    match B::DIALECT {
        Dialect::Ansi => (Statement::new(claim_expired_sql(B::SKIP_LOCKED))
            .bind(node_id)
            .bind(lease_until_ms)
            .bind(now_ms)
            .bind(now_ms)
            .bind(i64::from(limit))
            .fetch_all::<B, _>(&mut *store.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION)),
        Dialect::MySql => {
            let select = Statement::new(
                "SELECT id FROM job_logs WHERE state = 'SCHEDULED' AND lease_until_ms < $1 \
                 ORDER BY lease_until_ms LIMIT $2 FOR UPDATE SKIP LOCKED",
            )
            .bind(now_ms)
            .bind(i64::from(limit));
            let claim = Statement::new("UPDATE job_logs SET owner_node = $1, lease_until_ms = $2")
                .bind(node_id)
                .bind(lease_until_ms);
            claim_locked_rows(store, select, claim, FIRE_COLUMNS, OPERATION).await
        }
    }
}

/// Claims up to `limit` finished runs whose follow-up is pending or whose claim expired
/// before `now_ms`, until `locked_until_ms`; returns them in row order.
pub(crate) async fn claim_finished_runs<B: SqlBackend>(
    store: &SqlStore<B>,
    now_ms: i64,
    locked_until_ms: i64,
    limit: u32,
) -> Result<Vec<FinishedRunRow>, StoreError> {
    const OPERATION: &str = "claim finished runs";
    const CLAIMABLE: &str = "state = 'FINISHED' AND follow_up <> 'DONE' \
         AND (follow_up = 'PENDING' OR follow_up_locked_until < $1)";
    const CLAIM: &str = "follow_up = 'LOCKED', follow_up_locked_until = $1, \
         alarm_status = CASE WHEN handle_code = 200 THEN 'NOT_NEEDED' ELSE 'LOCKED' END";
    let columns = format!(
        "{FIRE_COLUMNS}, handle_code, handle_msg, executor_id, handle_at_ms, first_log_id, \
         retry_after_ms"
    );
    match B::DIALECT {
        // Compare-and-set: the condition is repeated outside the subquery, so a row two nodes
        // picked at once is claimed by one of them only.
        Dialect::Ansi => (Statement::new(format!(
            "UPDATE job_logs SET {CLAIM} WHERE id IN (SELECT id FROM job_logs WHERE {} \
             ORDER BY id LIMIT $3) AND {} RETURNING {columns}",
            CLAIMABLE.replace("$1", "$2"),
            CLAIMABLE.replace("$1", "$4"),
        ))
        .bind(locked_until_ms)
        .bind(now_ms)
        .bind(i64::from(limit))
        .bind(now_ms)
        .fetch_all::<B, _>(&mut *store.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION)),
        Dialect::MySql => {
            let select = Statement::new(format!(
                "SELECT id FROM job_logs WHERE {CLAIMABLE} ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED"
            ))
            .bind(now_ms)
            .bind(i64::from(limit));
            let claim =
                Statement::new(format!("UPDATE job_logs SET {CLAIM}")).bind(locked_until_ms);
            claim_locked_rows(store, select, claim, &columns, OPERATION).await
        }
    }
}

/// A claim on MySQL, which has no RETURNING, in one transaction: locks the rows of
/// `job_logs` whose ids `select` reads (`FOR UPDATE SKIP LOCKED`: rows another node holds are
/// passed over, so each row is claimed by one node), applies `claim` (an `UPDATE job_logs
/// SET …`, to which the ids are added as its condition) to them, and reads them back as
/// `columns`.
async fn claim_locked_rows<B: SqlBackend + Reads<R>, R>(
    store: &SqlStore<B>,
    select: Statement<'_>,
    mut claim: Statement<'_>,
    columns: &str,
    operation: &'static str,
) -> Result<Vec<R>, StoreError> {
    let mut tx = store.begin_write(operation).await?;
    let ids: Vec<(i64,)> =
        (select.fetch_all::<B, _>(&mut tx).await).map_err(StoreError::query(operation))?;
    let ids: Vec<i64> = ids.into_iter().map(|(id,)| id).collect();
    if !ids.is_empty() {
        claim.push(" WHERE id").push_in_list(ids.iter().copied());
        (claim.execute::<B>(&mut tx).await).map_err(StoreError::query(operation))?;
    }
    let rows = rows_by_id::<B, R>(&mut tx, columns, &ids, operation).await?;
    tx.commit().await.map_err(StoreError::query(operation))?;
    Ok(rows)
}

/// The rows of `job_logs` with `ids`, as `columns` (MySQL reads back what it updated: it has
/// no RETURNING).
async fn rows_by_id<B: SqlBackend + Reads<R>, R>(
    tx: &mut B::Connection,
    columns: &str,
    ids: &[i64],
    operation: &'static str,
) -> Result<Vec<R>, StoreError> {
    let select = format!("SELECT {columns} FROM job_logs WHERE id");
    (Statement::fetch_in_chunks::<B, R, _, _>(tx, &select, ids, |id| *id).await)
        .map_err(StoreError::query(operation))
}
