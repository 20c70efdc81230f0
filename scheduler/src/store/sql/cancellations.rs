//! The cancellations of planned fires that a stop or a schedule edit leaves (see
//! [`crate::engine::cancellations`]): written with the change that makes them, read by every
//! node while its fires may still be in flight. Written once for every backend
//! ([`SqlBackend`]).

use kadence_schemas::JobId;

use super::backend::{SqlBackend, SqlStore};
use super::statement::{IntoSqlValue as _, Statement};
use crate::store::{CANCELLATION_MEMORY_MS, FireCancellation, StoreError};

/// Cancels the fires of `job` that its schedule planned, due after `from_ms`, that no node has
/// emitted yet, and returns the cancellation. Those fires are in batches (see
/// [`crate::store::fire_batch`]), which are not rewritten: the cancellation covers every log
/// id given out so far, and the dispatch of every node and every claim drop the fires it
/// covers. Pending rows of such fires (written by versions before batches) become CANCELLED
/// with `reason`. Manual, API, retry and child fires are kept: someone asked for those.
pub(crate) async fn cancel_planned_fires<B: SqlBackend>(
    tx: &mut B::Connection,
    job: JobId,
    reason: &str,
    from_ms: i64,
    now_ms: i64,
) -> Result<Option<FireCancellation>, StoreError> {
    const OPERATION: &str = "cancel planned fires";
    (Statement::new(
        "UPDATE job_logs SET state = 'CANCELLED', handle_msg = $1, handle_at_ms = $2, \
         owner_node = NULL WHERE job_id = $3 AND state = 'SCHEDULED' \
         AND trigger_type IN ('CRON', 'FIX_RATE', 'FIX_DELAY', 'MISFIRE') \
         AND fire_at_ms > $4",
    )
    .bind(format!("cancelled: {reason} before this fire was emitted"))
    .bind(now_ms)
    .bind(job.get())
    .bind(from_ms)
    .execute::<B>(&mut *tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    let cancellation = FireCancellation {
        job_id: job,
        up_to_log_id: super::batches::last_log_id_in::<B>(&mut *tx).await?,
        from_ms,
        until_ms: now_ms + CANCELLATION_MEMORY_MS,
    };
    // Cancellations an hour past their leases are of no use to any node: cleared here rather
    // than by a loop of their own.
    (Statement::new("DELETE FROM fire_cancellations WHERE until_ms < $1")
        .bind(now_ms - 3_600_000)
        .execute::<B>(&mut *tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    (Statement::insert_into(
        "fire_cancellations",
        [
            ("job_id", job.get().into_sql_value()),
            ("up_to_log_id", cancellation.up_to_log_id.into_sql_value()),
            ("from_ms", cancellation.from_ms.into_sql_value()),
            ("until_ms", cancellation.until_ms.into_sql_value()),
            ("created_at_ms", now_ms.into_sql_value()),
        ],
    )
    .execute::<B>(tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    Ok(Some(cancellation))
}

/// Cancellations whose fires some node may still hold (see
/// [`crate::store::Fires::recent_cancellations`]).
pub(crate) async fn recent_cancellations<B: SqlBackend>(
    store: &SqlStore<B>,
    now_ms: i64,
) -> Result<Vec<FireCancellation>, StoreError> {
    const OPERATION: &str = "read recent cancellations";
    let rows: Vec<(i64, i64, i64, i64)> = (Statement::new(
        "SELECT job_id, up_to_log_id, from_ms, until_ms FROM fire_cancellations \
         WHERE until_ms > $1",
    )
    .bind(now_ms)
    .fetch_all::<B, _>(&mut *store.connection(OPERATION).await?))
    .await
    .map_err(StoreError::query(OPERATION))?;
    rows.into_iter()
        .map(|(job_id, up_to_log_id, from_ms, until_ms)| {
            Ok(FireCancellation {
                job_id: JobId::new(job_id).map_err(|error| StoreError::CorruptRow {
                    what: format!("cancellation of job {job_id}"),
                    reason: error.to_string(),
                })?,
                up_to_log_id,
                from_ms,
                until_ms,
            })
        })
        .collect()
}
