//! The [`Replays`] implementation: tables `replays` and `shadow_results`, and the replay links
//! of `job_logs`. Written once for every backend ([`SqlBackend`]); a replay's fires are
//! written as [`writes`](super::writes) writes every fire outside a scan.

use std::collections::{BTreeSet, HashMap, HashSet};

use kadence_schemas::{AppName, JobId, TriggerId};

use super::INSERT_CHUNK;
use super::backend::{SqlBackend, SqlStore};
use super::dialect::Dialect;
use super::statement::{IntoSqlValue as _, Statement};
use super::writes::{FireLease, insert_fires};
use crate::domain::model::PendingFire;
use crate::store::rows::{OperationRow, PairRow, operation_values};
use crate::store::{
    AppScope, FireMaker, FireOwner, NewOperation, Operation, OperationKind, PageRequest, Replays,
    RunOutcome, ShadowPair, ShadowResult, StoreError,
};

/// Columns of `replays`, in [`OperationRow`] order.
const OPERATION_COLUMNS: &str = "id, kind, app, target_app, job_id, selection, from_ms, \
     to_ms, rate_per_second, forced, triggers, requested_by, requested_at_ms";

fn operation_from(row: OperationRow) -> Result<Operation, StoreError> {
    let (
        id,
        kind,
        app,
        target_app,
        job_id,
        selection,
        from_ms,
        to_ms,
        rate,
        forced,
        triggers,
        requested_by,
        requested_at_ms,
    ) = row;
    let corrupt = |reason: String| StoreError::CorruptRow {
        what: format!("replay {id}"),
        reason,
    };
    Ok(Operation {
        id,
        request: NewOperation {
            kind: (kind.parse::<OperationKind>()).map_err(|error| corrupt(error.to_string()))?,
            app: AppName::parse(&app).map_err(|error| corrupt(error.to_string()))?,
            target_app: AppName::parse(&target_app).map_err(|error| corrupt(error.to_string()))?,
            job_id: (job_id.map(JobId::new).transpose())
                .map_err(|error| corrupt(error.to_string()))?,
            selection: (serde_json::from_str(&selection))
                .map_err(|error| corrupt(error.to_string()))?,
            from_ms,
            to_ms,
            rate_per_second: u32::try_from(rate).map_err(|error| corrupt(error.to_string()))?,
            forced: forced != 0,
            requested_by,
            requested_at_ms,
        },
        triggers,
    })
}

/// The earlier replays of the triggers `fires` replay, or `None` when there are none.
struct ReplayedBefore {
    /// How many of the triggers were replayed before.
    count: usize,
    /// One of them, and the replay that replayed it.
    example: TriggerId,
    replay_id: i64,
    /// Every replay concerned, ascending.
    replay_ids: Vec<i64>,
}

/// The earlier replays of the triggers `fires` replay (see [`ReplayedBefore`]).
async fn replayed_before<B: SqlBackend>(
    tx: &mut B::Connection,
    fires: &[PendingFire],
) -> Result<Option<ReplayedBefore>, StoreError> {
    let originals: Vec<&str> = (fires.iter())
        .filter_map(|fire| fire.replay_of.as_ref().map(TriggerId::as_str))
        .collect();
    let rows: Vec<(String, i64)> = Statement::fetch_in_chunks::<B, _, _, _>(
        tx,
        "SELECT replay_of, operation_id FROM job_logs WHERE operation_id IS NOT NULL \
         AND replay_of",
        &originals,
        |original| *original,
    )
    .await
    .map_err(StoreError::query("look for earlier replays"))?;
    let seen: HashMap<String, i64> = rows.into_iter().collect();
    let Some((example, &replay_id)) = seen.iter().min_by_key(|(original, _)| original.as_str())
    else {
        return Ok(None);
    };
    let example = TriggerId::parse(example).map_err(|error| StoreError::CorruptRow {
        what: format!("replay link of run of replay {replay_id}"),
        reason: error.to_string(),
    })?;
    let replay_ids: BTreeSet<i64> = seen.values().copied().collect();
    Ok(Some(ReplayedBefore {
        count: seen.len(),
        example,
        replay_id,
        replay_ids: replay_ids.into_iter().collect(),
    }))
}

fn outcome_of(state: &str, code: Option<i64>) -> RunOutcome {
    match (state, code) {
        (_, Some(200)) => RunOutcome::Succeeded,
        (_, Some(_)) => RunOutcome::Failed,
        ("CANCELLED", None) => RunOutcome::Failed,
        _ => RunOutcome::Unfinished,
    }
}

fn pair_from(row: PairRow) -> Result<ShadowPair, StoreError> {
    let (
        trigger_id,
        app,
        job_id,
        executor_id,
        code,
        message,
        started,
        finished,
        p_code,
        p_msg,
        p_started,
        p_finished,
    ) = row;
    let corrupt = |reason: String| StoreError::CorruptRow {
        what: format!("shadow result {trigger_id}"),
        reason,
    };
    let narrow = |code: i64| i32::try_from(code).map_err(|error| corrupt(error.to_string()));
    let production = match (p_code, p_finished) {
        (Some(code), Some(finished)) => Some((narrow(code)?, p_msg, p_started, finished)),
        _ => None,
    };
    Ok(ShadowPair {
        shadow: ShadowResult {
            trigger_id: TriggerId::parse(&trigger_id)
                .map_err(|error| corrupt(error.to_string()))?,
            app: AppName::parse(&app).map_err(|error| corrupt(error.to_string()))?,
            job_id: JobId::new(job_id).map_err(|error| corrupt(error.to_string()))?,
            executor_id,
            code: narrow(code)?,
            message,
            started_at_ms: started,
            finished_at_ms: finished,
        },
        production,
    })
}

#[async_trait::async_trait]
impl<B: SqlBackend> Replays for SqlStore<B> {
    async fn run_outcomes(
        &self,
        trigger_ids: &[TriggerId],
    ) -> Result<HashMap<TriggerId, RunOutcome>, StoreError> {
        const OPERATION: &str = "read run outcomes";
        let rows: Vec<(String, String, Option<i64>)> = Statement::fetch_in_chunks::<B, _, _, _>(
            &mut *self.connection(OPERATION).await?,
            "SELECT trigger_id, state, handle_code FROM job_logs WHERE trigger_id",
            trigger_ids,
            TriggerId::as_str,
        )
        .await
        .map_err(StoreError::query(OPERATION))?;
        (rows.into_iter())
            .map(|(trigger_id, state, code)| {
                let parsed =
                    TriggerId::parse(&trigger_id).map_err(|error| StoreError::CorruptRow {
                        what: format!("run {trigger_id}"),
                        reason: error.to_string(),
                    })?;
                Ok((parsed, outcome_of(&state, code)))
            })
            .collect()
    }

    async fn record_operation(
        &self,
        operation: &NewOperation,
        make_fires: FireMaker,
        owner: &FireOwner,
        now_ms: i64,
    ) -> Result<(Operation, Vec<PendingFire>), StoreError> {
        const OPERATION: &str = "record a replay";
        let mut tx = self.begin_write(OPERATION).await?;
        if !B::OPERATIONS_LOCK.is_empty() {
            (Statement::new(B::OPERATIONS_LOCK).execute::<B>(&mut tx))
                .await
                .map_err(StoreError::query(OPERATION))?;
        }
        let selection = operation.selection.to_string();
        let id = (Statement::insert_into("replays", operation_values(operation, &selection))
            .insert_returning_id::<B>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        let fires = make_fires(id);
        if operation.kind == OperationKind::Replay
            && !operation.forced
            && let Some(before) = replayed_before::<B>(&mut tx, &fires).await?
        {
            return Err(StoreError::ReplayedBefore {
                count: before.count,
                example: before.example,
                replay_id: before.replay_id,
                replay_ids: before.replay_ids,
            });
        }
        let lease = FireLease {
            node_id: &owner.node_id,
            lease_ms: owner.lease_ms,
            now_ms,
        };
        let written = insert_fires(self, &mut tx, fires, lease).await?;
        (Statement::new("UPDATE replays SET triggers = $1 WHERE id = $2")
            .bind(written.len() as i64)
            .bind(id)
            .execute::<B>(&mut tx))
        .await
        .map_err(StoreError::query(OPERATION))?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        let recorded = Operation {
            id,
            request: operation.clone(),
            triggers: written.len() as i64,
        };
        Ok((recorded, written))
    }

    async fn get_operation(&self, id: i64) -> Result<Option<Operation>, StoreError> {
        const OPERATION: &str = "read a replay";
        let row: Option<OperationRow> = (Statement::new(format!(
            "SELECT {OPERATION_COLUMNS} FROM replays WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        row.map(operation_from).transpose()
    }

    async fn list_operations(
        &self,
        apps: AppScope<'_>,
        page: &PageRequest<i64>,
    ) -> Result<Vec<Operation>, StoreError> {
        const OPERATION: &str = "list replays";
        let mut query = Statement::new(format!(
            "SELECT {OPERATION_COLUMNS} FROM replays WHERE true"
        ));
        if let Some(apps) = apps {
            // Listed where it read or where it ran.
            query.push(" AND (true");
            query.push_app_scope("app", Some(apps));
            query.push(" OR true");
            query.push_app_scope("target_app", Some(apps));
            query.push(")");
        }
        if let Some(after) = page.after {
            query.push(" AND id < ").push_bind(after);
        }
        query
            .push(" ORDER BY id DESC LIMIT ")
            .push_bind(i64::from(page.limit));
        let rows: Vec<OperationRow> = (query
            .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        rows.into_iter().map(operation_from).collect()
    }

    async fn trigger_ids_scheduled(
        &self,
        job: JobId,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<HashSet<String>, StoreError> {
        const OPERATION: &str = "read a job's trigger ids";
        let rows: Vec<(String,)> = (Statement::new(
            "SELECT trigger_id FROM job_logs WHERE job_id = $1 \
             AND scheduled_at_ms >= $2 AND scheduled_at_ms < $3",
        )
        .bind(job.get())
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    async fn record_shadow_results(&self, results: &[ShadowResult]) -> Result<u64, StoreError> {
        const OPERATION: &str = "record shadow results";
        if results.is_empty() {
            return Ok(0);
        }
        let now_ms = kadence_schemas::now_ms();
        let mut tx = self.begin_write(OPERATION).await?;
        let mut stored = 0;
        for chunk in results.chunks(INSERT_CHUNK) {
            // The first result of a trigger is kept; repeats are dropped by the key and not
            // counted.
            let rows = chunk.iter().map(|result| {
                [
                    ("trigger_id", result.trigger_id.as_str().into_sql_value()),
                    ("app", result.app.as_str().into_sql_value()),
                    ("job_id", result.job_id.get().into_sql_value()),
                    ("executor_id", result.executor_id.as_str().into_sql_value()),
                    ("code", result.code.into_sql_value()),
                    ("message", result.message.as_deref().into_sql_value()),
                    ("started_at_ms", result.started_at_ms.into_sql_value()),
                    ("finished_at_ms", result.finished_at_ms.into_sql_value()),
                    ("received_at_ms", now_ms.into_sql_value()),
                ]
            });
            let mut insert = Statement::insert_rows("shadow_results", rows);
            let insert = match B::DIALECT {
                Dialect::Ansi => insert.push(" ON CONFLICT (trigger_id) DO NOTHING"),
                Dialect::MySql => insert.ignoring_duplicates(),
            };
            stored += (insert.execute::<B>(&mut tx).await).map_err(StoreError::query(OPERATION))?;
        }
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(stored)
    }

    async fn delete_old_shadow_results(
        &self,
        before_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        const OPERATION: &str = "delete old shadow results";
        // The derived table lets MySQL delete from the table it reads, and take a LIMIT
        // inside IN.
        (Statement::new(
            "DELETE FROM shadow_results WHERE trigger_id IN (SELECT trigger_id FROM \
             (SELECT trigger_id FROM shadow_results WHERE received_at_ms < $1 LIMIT $2) AS old)",
        )
        .bind(before_ms)
        .bind(i64::from(limit))
        .execute::<B>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))
    }

    async fn shadow_pairs(
        &self,
        app: &AppName,
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> Result<Vec<ShadowPair>, StoreError> {
        const OPERATION: &str = "compare shadow results";
        let rows: Vec<PairRow> = (Statement::new(
            "SELECT s.trigger_id, s.app, s.job_id, s.executor_id, s.code, s.message, \
             s.started_at_ms, s.finished_at_ms, \
             j.handle_code, j.handle_msg, j.handle_started_at_ms, j.handle_at_ms \
             FROM shadow_results s LEFT JOIN job_logs j ON j.trigger_id = s.trigger_id \
             WHERE s.app = $1 AND s.started_at_ms >= $2 AND s.started_at_ms < $3 \
             ORDER BY CASE WHEN j.handle_code IS NULL OR j.handle_code <> s.code \
             OR COALESCE(j.handle_msg, '') <> COALESCE(s.message, '') THEN 0 ELSE 1 END, \
             s.started_at_ms, s.trigger_id LIMIT $4",
        )
        .bind(app.as_str())
        .bind(from_ms)
        .bind(to_ms)
        .bind(i64::from(limit))
        .fetch_all::<B, _>(&mut *self.connection(OPERATION).await?))
        .await
        .map_err(StoreError::query(OPERATION))?;
        rows.into_iter().map(pair_from).collect()
    }
}
