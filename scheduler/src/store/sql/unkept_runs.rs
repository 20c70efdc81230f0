//! Table `unkept_run_sets`: the succeeded runs that never get a row because their job's
//! history policy does not keep them (see [`crate::store::unkept_run_set`] for why and what a
//! set holds). Written by the results transaction, read where a row would have been read (a
//! repeated result, a claim of a dead node's batches), counted by the report refresh and
//! forgotten by retention. Written once for every backend.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use kadence_schemas::TriggerId;

use super::backend::SqlBackend;
use super::dialect::Dialect;
use super::statement::{IntoSqlValue as _, Statement};
use super::{INSERT_CHUNK, UPDATE_CHUNK};
use crate::domain::model::PendingFire;
use crate::store::StoreError;
use crate::store::unkept_run_set::{self, UnkeptRun, scheduled_second};

/// Writes `runs` ((run, when it ended)) as one set per second of scheduled time.
pub(crate) async fn write_unkept_runs<B: SqlBackend>(
    tx: &mut B::Connection,
    runs: impl IntoIterator<Item = (UnkeptRun, i64)>,
) -> Result<(), StoreError> {
    // second -> (its runs, when the last of them ended)
    let mut by_second: BTreeMap<i64, (Vec<UnkeptRun>, i64)> = BTreeMap::new();
    for (run, ended_at_ms) in runs {
        let (set, last_end) = by_second
            .entry(run.scheduled_second())
            .or_insert((Vec::new(), i64::MIN));
        *last_end = (*last_end).max(ended_at_ms);
        set.push(run);
    }
    let sets: Vec<(i64, i64, i64, Vec<u8>)> = (by_second.into_iter())
        .map(|(second, (runs, last_end))| {
            let count = runs.len() as i64;
            (second, count, last_end, unkept_run_set::encode(&runs))
        })
        .collect();
    for chunk in sets.chunks(INSERT_CHUNK) {
        let rows = chunk.iter().map(|(second, count, last_end, runs)| {
            [
                ("scheduled_second", second.into_sql_value()),
                ("run_count", count.into_sql_value()),
                ("ended_at_ms", last_end.into_sql_value()),
                ("runs", runs.as_slice().into_sql_value()),
            ]
        });
        (Statement::insert_rows("unkept_run_sets", rows)
            .execute::<B>(&mut *tx)
            .await)
            .map_err(StoreError::query("write unkept runs"))?;
    }
    Ok(())
}

/// Every unkept run of the sets of `seconds` (a set that cannot be read is logged and passed
/// over: its runs are then as if never recorded).
async fn unkept_runs_of<B: SqlBackend>(
    tx: &mut B::Connection,
    seconds: BTreeSet<i64>,
    operation: &'static str,
) -> Result<Vec<UnkeptRun>, StoreError> {
    let seconds: Vec<i64> = seconds.into_iter().collect();
    let sets: Vec<(i64, Vec<u8>)> = Statement::fetch_in_chunks::<B, _, _, _>(
        tx,
        "SELECT id, runs FROM unkept_run_sets WHERE scheduled_second",
        &seconds,
        |second| *second,
    )
    .await
    .map_err(StoreError::query(operation))?;
    Ok(decode_sets(sets))
}

/// The runs of `sets` ((id, encoded runs)), passing over a set that cannot be read.
fn decode_sets(sets: Vec<(i64, Vec<u8>)>) -> Vec<UnkeptRun> {
    let mut runs = Vec::new();
    for (id, bytes) in sets {
        match unkept_run_set::decode(&bytes) {
            Ok(set) => runs.extend(set),
            Err(error) => tracing::error!(set = id, %error, "a set of unkept runs is passed over"),
        }
    }
    runs
}

/// Which of `trigger_ids` are unkept runs, and each one's app: a result for one is a repeat.
pub(crate) async fn unkept_triggers<B: SqlBackend>(
    tx: &mut B::Connection,
    trigger_ids: &[&TriggerId],
) -> Result<HashMap<String, String>, StoreError> {
    let seconds: BTreeSet<i64> = (trigger_ids.iter())
        .filter_map(|id| id.scheduled_ms())
        .map(scheduled_second)
        .collect();
    if seconds.is_empty() {
        return Ok(HashMap::new());
    }
    let wanted: HashSet<&str> = trigger_ids.iter().map(|id| id.as_str()).collect();
    Ok((unkept_runs_of::<B>(tx, seconds, "record results").await?)
        .into_iter()
        .filter(|run| wanted.contains(run.trigger_id.as_str()))
        .map(|run| (run.trigger_id.as_str().to_owned(), run.app.to_string()))
        .collect())
}

/// The log ids among `fires` that are unkept runs: acknowledged, run and recorded.
pub(crate) async fn unkept_log_ids<B: SqlBackend>(
    tx: &mut B::Connection,
    fires: &[&PendingFire],
) -> Result<HashSet<i64>, StoreError> {
    let seconds: BTreeSet<i64> = (fires.iter())
        .map(|fire| scheduled_second(fire.scheduled_at_ms))
        .collect();
    if seconds.is_empty() {
        return Ok(HashSet::new());
    }
    let wanted: HashSet<i64> = fires.iter().map(|fire| fire.log_id).collect();
    Ok(
        (unkept_runs_of::<B>(tx, seconds, "claim expired fire batches").await?)
            .into_iter()
            .map(|run| run.log_id)
            .filter(|log_id| wanted.contains(log_id))
            .collect(),
    )
}

/// Marks up to `limit` sets not yet counted as counted, in `tx`, and returns how many and
/// their runs, for the caller to count in the same transaction. Each set is taken by one node:
/// the sets are taken as they are marked.
pub(crate) async fn take_uncounted_sets<B: SqlBackend>(
    tx: &mut B::Connection,
    limit: u32,
) -> Result<(u64, Vec<UnkeptRun>), StoreError> {
    const OPERATION: &str = "count unkept runs";
    let sets: Vec<(i64, Vec<u8>)> = match B::DIALECT {
        // Compare-and-set: a set two nodes picked at once is marked by one of them.
        Dialect::Ansi => (Statement::new(format!(
            "UPDATE unkept_run_sets SET counted = 1 WHERE id IN (SELECT id FROM unkept_run_sets \
             WHERE counted = 0 ORDER BY counted, ended_at_ms LIMIT $1{}) AND counted = 0 \
             RETURNING id, runs",
            B::SKIP_LOCKED
        ))
        .bind(i64::from(limit))
        .fetch_all::<B, _>(&mut *tx))
        .await
        .map_err(StoreError::query(OPERATION))?,
        Dialect::MySql => {
            let sets: Vec<(i64, Vec<u8>)> = (Statement::new(
                "SELECT id, runs FROM unkept_run_sets WHERE counted = 0 \
                 ORDER BY counted, ended_at_ms LIMIT $1 FOR UPDATE SKIP LOCKED",
            )
            .bind(i64::from(limit))
            .fetch_all::<B, _>(&mut *tx))
            .await
            .map_err(StoreError::query(OPERATION))?;
            for chunk in sets.chunks(UPDATE_CHUNK) {
                let mut mark = Statement::new("UPDATE unkept_run_sets SET counted = 1 WHERE id");
                mark.push_in_list(chunk.iter().map(|(id, _)| *id));
                (mark.execute::<B>(&mut *tx).await).map_err(StoreError::query(OPERATION))?;
            }
            sets
        }
    };
    Ok((sets.len() as u64, decode_sets(sets)))
}

/// Deletes up to `limit` counted sets whose runs all ended before `ended_before_ms`, with the
/// log lines of their runs; returns the sets deleted.
pub(crate) async fn forget_unkept_runs<B: SqlBackend>(
    tx: &mut B::Connection,
    ended_before_ms: i64,
    limit: u32,
) -> Result<u64, StoreError> {
    const OPERATION: &str = "forget unkept runs";
    let sets: Vec<(i64, Vec<u8>)> = (Statement::new(
        "SELECT id, runs FROM unkept_run_sets WHERE counted = 1 AND ended_at_ms < $1 \
         ORDER BY counted, ended_at_ms LIMIT $2",
    )
    .bind(ended_before_ms)
    .bind(i64::from(limit))
    .fetch_all::<B, _>(&mut *tx))
    .await
    .map_err(StoreError::query(OPERATION))?;
    let ids: Vec<i64> = sets.iter().map(|(id, _)| *id).collect();
    let log_ids: Vec<i64> = (decode_sets(sets).into_iter())
        .map(|run| run.log_id)
        .collect();
    for chunk in log_ids.chunks(UPDATE_CHUNK) {
        let mut lines = Statement::new("DELETE FROM run_log_chunks WHERE log_id");
        lines.push_in_list(chunk.iter().copied());
        (lines.execute::<B>(&mut *tx).await).map_err(StoreError::query(OPERATION))?;
    }
    let mut forgotten = 0;
    for chunk in ids.chunks(UPDATE_CHUNK) {
        let mut delete = Statement::new("DELETE FROM unkept_run_sets WHERE id");
        delete.push_in_list(chunk.iter().copied());
        forgotten += (delete.execute::<B>(&mut *tx).await).map_err(StoreError::query(OPERATION))?;
    }
    Ok(forgotten)
}
