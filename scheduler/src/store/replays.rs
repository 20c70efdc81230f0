//! The half of the store that replays, backfills and shadow runs use: [`Replays`], which
//! every [`Store`](super::Store) also implements (tables `replays`, `shadow_results`, and the
//! `replay_of` / `operation_id` links of `job_logs`). What they are is told in
//! [`crate::operations::replay`].

use std::collections::{HashMap, HashSet};

use kadence_schemas::{AppName, JobId, TriggerId};
use serde::{Deserialize, Serialize};

use super::{AppScope, PageRequest, StoreError};
use crate::domain::enums::string_enum;
use crate::domain::model::PendingFire;

string_enum!(
    /// What an operation re-emitted: past triggers, or fires that never were.
    OperationKind, "operation kind", {
        /// Triggers read back from a trigger topic, emitted again under new ids.
        Replay => "REPLAY",
        /// Fires a job's schedule had in a past range and that never fired.
        Backfill => "BACKFILL",
    }
);

string_enum!(
    /// How a trigger's run went, as the store knows it: the replay filter "only the runs that
    /// failed".
    RunOutcome, "run outcome", {
        /// Its result was 200.
        Succeeded => "SUCCEEDED",
        /// Its result was anything else (failure, timeout, refusal, lost).
        Failed => "FAILED",
        /// Emitted, no result yet.
        Unfinished => "UNFINISHED",
        /// No run row has its trigger id: history retention dropped it, or it never had one.
        Unknown => "UNKNOWN",
    }
);

/// A replay or backfill to record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NewOperation {
    /// Replay or backfill.
    pub kind: OperationKind,
    /// The app whose trigger topic was read (a backfill: its job's app).
    pub app: AppName,
    /// The app whose executors run what it emits (a replay may go to a staging app).
    pub target_app: AppName,
    /// A backfill's job.
    pub job_id: Option<JobId>,
    /// What was asked for: the range and filters, as the request gave them.
    #[schema(value_type = Object)]
    pub selection: serde_json::Value,
    /// Start of the time range, ms (inclusive), when chosen by time.
    pub from_ms: Option<i64>,
    /// End of the time range, ms (exclusive), when chosen by time.
    pub to_ms: Option<i64>,
    /// Triggers emitted per second at most.
    pub rate_per_second: u32,
    /// A replay of triggers replayed before, asked for with `force`.
    pub forced: bool,
    /// Who asked.
    pub requested_by: String,
    /// When, ms.
    pub requested_at_ms: i64,
}

/// A recorded replay or backfill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Operation {
    /// Its id: replayed trigger ids end in `-p{id}`, and its runs link to it.
    pub id: i64,
    /// What was asked.
    #[serde(flatten)]
    pub request: NewOperation,
    /// Triggers it emitted.
    pub triggers: i64,
}

/// Makes an operation's fires once its id is known (their trigger ids contain it).
pub type FireMaker = Box<dyn FnOnce(i64) -> Vec<PendingFire> + Send>;

/// Where an operation's fires are written: owned by `node_id`, leased `lease_ms` past their
/// fire time.
#[derive(Debug, Clone)]
pub struct FireOwner {
    /// The node that emits them.
    pub node_id: String,
    /// Lease past each fire's time, ms.
    pub lease_ms: i64,
}

/// One shadow run's result, as `{prefix}.shadow-results` brought it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowResult {
    /// The trigger it ran.
    pub trigger_id: TriggerId,
    /// The app.
    pub app: AppName,
    /// The job.
    pub job_id: JobId,
    /// The shadow executor.
    pub executor_id: String,
    /// Its code.
    pub code: i32,
    /// Its message.
    pub message: Option<String>,
    /// When its handler started, ms.
    pub started_at_ms: i64,
    /// When it finished, ms.
    pub finished_at_ms: i64,
}

/// A trigger's production run beside its shadow run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowPair {
    /// The shadow run.
    pub shadow: ShadowResult,
    /// The production run's code, message, start and finish, if it has a result.
    pub production: Option<(i32, Option<String>, Option<i64>, i64)>,
}

/// The replays' and backfills' records, and the shadow results.
#[async_trait::async_trait]
pub trait Replays: Send + Sync {
    /// How the runs of `trigger_ids` went (those without a row are left out: unknown).
    async fn run_outcomes(
        &self,
        trigger_ids: &[TriggerId],
    ) -> Result<HashMap<TriggerId, RunOutcome>, StoreError>;

    /// Records `operation` and writes the fires `make_fires` gives for its id, in one
    /// transaction; returns it and the fires written (a trigger id that has a run already is
    /// skipped). A replay not `forced` of a trigger some earlier replay replayed is refused
    /// with [`StoreError::ReplayedBefore`], in the same transaction, so two replays of one
    /// range cannot both pass.
    async fn record_operation(
        &self,
        operation: &NewOperation,
        make_fires: FireMaker,
        owner: &FireOwner,
        now_ms: i64,
    ) -> Result<(Operation, Vec<PendingFire>), StoreError>;

    /// One recorded operation.
    async fn get_operation(&self, id: i64) -> Result<Option<Operation>, StoreError>;

    /// A page of the operations on `apps` (read or run there), newest first; the key is the
    /// id (the next page is older).
    async fn list_operations(
        &self,
        apps: AppScope<'_>,
        page: &PageRequest<i64>,
    ) -> Result<Vec<Operation>, StoreError>;

    /// The trigger ids of `job`'s runs scheduled in `[from_ms, to_ms)`, whatever their state
    /// (a cancelled fire counts: it was not missed, it was called off).
    async fn trigger_ids_scheduled(
        &self,
        job: JobId,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<HashSet<String>, StoreError>;

    /// Stores shadow results, the first per trigger id winning; returns how many were new.
    async fn record_shadow_results(&self, results: &[ShadowResult]) -> Result<u64, StoreError>;

    /// Deletes up to `limit` shadow results received before `before_ms`; returns how many.
    async fn delete_old_shadow_results(
        &self,
        before_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// Up to `limit` shadow results of `app` whose run started in `[from_ms, to_ms)`, each
    /// with its production run; those that disagree first, then by start.
    async fn shadow_pairs(
        &self,
        app: &AppName,
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> Result<Vec<ShadowPair>, StoreError>;
}
