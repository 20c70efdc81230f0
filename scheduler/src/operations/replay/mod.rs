//! Replays, backfills and shadow runs: what a trigger topic makes possible.
//!
//! - **Replay** ([`Replayer::replay`]): read a stretch of an app's trigger topic back (by
//!   offsets per partition, or by time: [`topic_range`]), keep the triggers that pass the
//!   filters (jobs, trigger types, and how their runs went, from the store), and emit each
//!   again as a new run: trigger type `REPLAY`, id `{original}-p{replay id}`, `replay_of`
//!   naming the original, the original's params, shard and `scheduled_at_ms` (so a handler
//!   sees which run it repeats), routed to the original's partition, optionally into another
//!   app (a staging group). Replayed runs are ordinary runs: retries, alarms and children
//!   apply as to any other.
//! - **Scripts in a replay** ([`scripts`]): a script trigger is replayed with its job's
//!   *current* script, and only for a caller who may write scripts on the target app.
//! - **Backfill** ([`backfill`]): the fires a job's schedule had in a past range that never
//!   fired (a scheduler down with misfire DO_NOTHING), each under the trigger id its schedule
//!   gives it and trigger type `BACKFILL`; fires whose trigger id is in the topic or the store
//!   are left out, and the id's uniqueness means no fire can be backfilled twice.
//! - **Shadow runs** ([`shadow`]): executors started as shadows run a candidate handler on a
//!   copy of the triggers in a group of their own and publish to `{prefix}.shadow-results`;
//!   the scheduler keeps those results apart from production's and compares the two by
//!   trigger id in a diff report.
//!
//! Replays and backfills are recorded (who, what, how many; `replays` table, listed by
//! `GET /api/replays`) together with their runs, in one transaction, and their fires enter
//! the wheel like every other ([`crate::engine::intake`]), spaced to the operation's rate: fire `i`
//! is due `i / rate` seconds after the request. A dry run reads and counts exactly the same,
//! writes nothing and emits nothing.
//!
//! A replay of triggers an earlier replay replayed is refused unless forced: rerunning a
//! stretch twice is rarely meant. The topic's records are verified against the cluster's
//! signing keys before they are replayed: a record someone else produced to the topic is
//! never signed again by a replay.

pub mod backfill;
mod scripts;
pub mod shadow;
pub mod topic_range;

use std::collections::BTreeMap;
use std::sync::Arc;

use kadence_kafka::{KafkaSettings, PublicKey, TrustedKeys};
use kadence_schemas::{AppName, JobId, Topics, TriggerId, TriggerType};
use serde::{Deserialize, Serialize};

use crate::clock::Clock;
use crate::config::ReplayConfig;
use crate::domain::model::{PendingFire, RouteStrategy};
use crate::engine::intake::{FireIntake, FireSource};
use crate::engine::partitions::{PartitionDirectory, PartitionsError};
use crate::store::{NewOperation, Operation, OperationKind, RunOutcome, Store, StoreError};
use topic_range::{PartitionOffsets, RangeError, RangeRead, StoredTrigger, TopicRange};

/// Which triggers of a range are replayed: all, unless a list is given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReplayFilter {
    /// Only these jobs' triggers.
    #[serde(default)]
    pub job_ids: Vec<JobId>,
    /// Only triggers of these types; when empty, every type but REPLAY (earlier replays keep
    /// their originals' scheduled times, so a time range holds them too).
    #[serde(default)]
    pub trigger_types: Vec<TriggerType>,
    /// Only triggers whose runs went so (from the store).
    #[serde(default)]
    pub outcomes: Vec<RunOutcome>,
}

/// A replay to make.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayRequest {
    /// The app whose trigger topic is read.
    pub app: AppName,
    /// The stretch read.
    pub range: TopicRange,
    /// What of it is replayed.
    pub filter: ReplayFilter,
    /// Where the replayed triggers go (default: `app`).
    pub target_app: Option<AppName>,
    /// Triggers per second (default: [`ReplayConfig::rate_per_second`]).
    pub rate_per_second: Option<u32>,
    /// Replay triggers replayed before.
    pub force: bool,
    /// Count only.
    pub dry_run: bool,
    /// Who asks.
    pub requested_by: String,
    /// Whether the caller holds SCRIPTS on the target app (see [`scripts`]).
    pub may_write_scripts: bool,
}

/// One job's share of a replay or backfill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct JobShare {
    /// The job.
    pub job_id: JobId,
    /// Its triggers.
    pub triggers: usize,
    /// Earliest scheduled time among them, ms.
    pub first_scheduled_at_ms: i64,
    /// Latest, ms.
    pub last_scheduled_at_ms: i64,
}

/// A trigger at either end of a selection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SelectedTrigger {
    /// The trigger id (the original, for a replay; the fire's, for a backfill).
    pub trigger_id: TriggerId,
    /// Its scheduled time, ms.
    pub scheduled_at_ms: i64,
}

/// What a replay or backfill selected (a dry run) or did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OperationSummary {
    /// The recorded operation; `None` for a dry run.
    pub operation: Option<Operation>,
    /// Whether nothing was written or emitted.
    pub dry_run: bool,
    /// Triggers selected: emitted, unless a dry run.
    pub triggers: usize,
    /// Per job, by job id.
    pub jobs: Vec<JobShare>,
    /// The earliest selected trigger by scheduled time.
    pub first: Option<SelectedTrigger>,
    /// The latest.
    pub last: Option<SelectedTrigger>,
    /// What was read of the topic.
    pub read: RangeRead,
    /// When the first and last triggers are due to be emitted, ms (rate limit).
    pub emitted_from_ms: Option<i64>,
    /// See `emitted_from_ms`.
    pub emitted_until_ms: Option<i64>,
}

/// Why a replay or backfill was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A value of the request is not acceptable.
    #[error("{0}")]
    Invalid(String),
    /// A job or app that does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The caller may not do this (a replay of script triggers without SCRIPTS on the target).
    #[error("{0}")]
    Forbidden(String),
    /// The selection cannot be replayed as it stands (a script of a job that is gone).
    #[error("{0}")]
    Conflict(String),
    /// The topic could not be read as asked.
    #[error(transparent)]
    Range(#[from] RangeError),
    /// The store refused or failed (a replay of triggers replayed before is refused here).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Replays and backfills for the API: reads topics with its own clients, writes through the
/// API's intake.
pub struct Replayer {
    store: Arc<dyn Store>,
    intake: FireIntake,
    partitions: Arc<PartitionDirectory>,
    topics: Topics,
    kafka: KafkaSettings,
    clock: Arc<dyn Clock>,
    config: ReplayConfig,
    /// How long before now a backfill's range must end (see [`backfill`]).
    settle_ms: i64,
}

impl Replayer {
    /// A replayer over these parts.
    pub fn new(
        (store, intake): (Arc<dyn Store>, FireIntake),
        partitions: Arc<PartitionDirectory>,
        (topics, kafka): (Topics, KafkaSettings),
        clock: Arc<dyn Clock>,
        config: ReplayConfig,
    ) -> Replayer {
        Replayer {
            store,
            intake,
            partitions,
            topics,
            kafka,
            clock,
            config,
            settle_ms: 60_000,
        }
    }

    /// The same replayer refusing backfills of the last `settle` (default 60 s): fires due
    /// in that time may still be in a node's wheel or batch. It must exceed the pre-read
    /// window plus a fire's lease.
    pub fn settling_after(self, settle: std::time::Duration) -> Replayer {
        Replayer {
            settle_ms: crate::clock::millis(settle),
            ..self
        }
    }

    /// Replays (or counts, for a dry run) what `request` selects.
    pub async fn replay(&self, request: ReplayRequest) -> Result<OperationSummary, ReplayError> {
        let target_app = request.target_app.clone().unwrap_or(request.app.clone());
        let target_partitions = self.partition_count(&target_app).await?;
        let rate = self.rate(request.rate_per_second)?;
        let (mut selected, read) = self.read_selection(&request).await?;
        if !request.filter.outcomes.is_empty() {
            let ids: Vec<TriggerId> = selected
                .iter()
                .map(|t| t.record.trigger_id.clone())
                .collect();
            let outcomes = self.store.run_outcomes(&ids).await?;
            selected.retain(|trigger| {
                let outcome = outcomes
                    .get(&trigger.record.trigger_id)
                    .copied()
                    .unwrap_or(RunOutcome::Unknown);
                request.filter.outcomes.contains(&outcome)
            });
        }
        selected.sort_by_key(|t| (t.record.scheduled_at_ms, t.partition, t.offset));
        self.with_current_scripts(&mut selected, &request, &target_app)
            .await?;
        let shares: Vec<(TriggerId, JobId, i64)> = selected
            .iter()
            .map(|t| {
                (
                    t.record.trigger_id.clone(),
                    t.record.job_id,
                    t.record.scheduled_at_ms,
                )
            })
            .collect();
        let start_ms = self.clock.now_ms();
        if request.dry_run {
            return Ok(summarize(&shares, read, None, start_ms, rate));
        }
        let (range_from, range_to) = match request.range {
            TopicRange::Time { from_ms, to_ms } => (Some(from_ms), Some(to_ms)),
            TopicRange::Offsets(_) => (None, None),
        };
        let operation = NewOperation {
            kind: OperationKind::Replay,
            app: request.app.clone(),
            target_app: target_app.clone(),
            job_id: None,
            selection: selection_json(&request, &read.partitions),
            from_ms: range_from,
            to_ms: range_to,
            rate_per_second: rate,
            forced: request.force,
            requested_by: request.requested_by.clone(),
            requested_at_ms: start_ms,
        };
        let make_fires = Box::new(move |replay_id: i64| {
            selected
                .into_iter()
                .enumerate()
                .map(|(position, trigger)| {
                    replay_fire(
                        trigger,
                        (replay_id, position),
                        &target_app,
                        target_partitions,
                    )
                    .paced(start_ms, position, rate)
                })
                .collect()
        });
        let (recorded, _) = self
            .intake
            .record_operation(FireSource::Replay, &operation, make_fires, start_ms)
            .await?;
        tracing::info!(replay = recorded.id, app = %request.app, triggers = recorded.triggers,
            by = %request.requested_by, "replay recorded; its triggers are on their way");
        Ok(summarize(&shares, read, Some(recorded), start_ms, rate))
    }

    /// The triggers of the request's range that pass its job and type filters (and, for a
    /// time range, were scheduled within it), at most [`ReplayConfig::max_triggers`].
    async fn read_selection(
        &self,
        request: &ReplayRequest,
    ) -> Result<(Vec<StoredTrigger>, RangeRead), ReplayError> {
        let partitions = self.partition_count(&request.app).await?;
        let keys = self.trusted_keys().await?;
        let (settings, topic) = (self.kafka.clone(), self.topics.triggers(&request.app));
        let (range, filter, limit) = (
            request.range.clone(),
            request.filter.clone(),
            self.config.max_triggers,
        );
        let reading = tokio::task::spawn_blocking(move || {
            let mut selected = Vec::new();
            let mut over_limit = false;
            let read =
                topic_range::read_range(&settings, &topic, partitions, &range, &keys, |trigger| {
                    if !passes(&trigger, &range, &filter) {
                        return;
                    }
                    if selected.len() == limit {
                        over_limit = true;
                    } else {
                        selected.push(trigger);
                    }
                })?;
            Ok::<_, RangeError>((selected, read, over_limit))
        });
        let (selected, read, over_limit) = reading
            .await
            .map_err(|error| ReplayError::Invalid(format!("the topic reader failed: {error}")))??;
        if over_limit {
            return Err(ReplayError::Invalid(format!(
                "the selection holds more than {limit} triggers, the most one replay may emit \
                 (replay.max_triggers): narrow the range, or filter by job, type or outcome"
            )));
        }
        Ok((selected, read))
    }

    /// The rate asked for, or the default; within the configured ceiling.
    fn rate(&self, asked: Option<u32>) -> Result<u32, ReplayError> {
        let rate = asked.unwrap_or(self.config.rate_per_second);
        if rate == 0 || rate > self.config.max_rate_per_second {
            return Err(ReplayError::Invalid(format!(
                "rate_per_second {rate} is out of range: use 1 to {} (replay.max_rate_per_second)",
                self.config.max_rate_per_second
            )));
        }
        Ok(rate)
    }

    /// The partition count of an existing app.
    async fn partition_count(&self, app: &AppName) -> Result<i32, ReplayError> {
        self.partitions
            .partitions(app)
            .await
            .map_err(|error| match error {
                PartitionsError::UnknownApp(_) => ReplayError::NotFound(error.to_string()),
                PartitionsError::Store(store) => ReplayError::Store(store),
            })
    }

    /// The public halves of every signing key the cluster has had: what a record read back
    /// must be signed with to be replayed.
    async fn trusted_keys(&self) -> Result<TrustedKeys, ReplayError> {
        let keys = self.store.list_signing_keys().await?;
        Ok(TrustedKeys::new(
            keys.iter()
                .filter_map(|key| PublicKey::parse(&key.public_key).ok()),
        ))
    }
}

/// Whether a trigger read back is one the request asks for (outcomes aside).
fn passes(trigger: &StoredTrigger, range: &TopicRange, filter: &ReplayFilter) -> bool {
    let record = &trigger.record;
    let in_time = match range {
        TopicRange::Time { from_ms, to_ms } => (*from_ms..*to_ms).contains(&record.scheduled_at_ms),
        TopicRange::Offsets(_) => true,
    };
    let wanted_type = if filter.trigger_types.is_empty() {
        // Earlier replays keep their originals' times, so a time range holds them too: they
        // are replayed only when asked for by type.
        record.trigger_type != TriggerType::Replay
    } else {
        filter.trigger_types.contains(&record.trigger_type)
    };
    in_time && wanted_type && (filter.job_ids.is_empty() || filter.job_ids.contains(&record.job_id))
}

/// The fire that replays `trigger` as the `position`-th trigger of replay `replay_id`, into
/// `target_app` (on the original's partition, or its remainder when the app has fewer).
fn replay_fire(
    trigger: StoredTrigger,
    (replay_id, position): (i64, usize),
    target_app: &AppName,
    target_partitions: i32,
) -> PendingFire {
    let record = trigger.record;
    PendingFire {
        log_id: 0,
        trigger_id: record.trigger_id.replay(replay_id, position),
        job_id: record.job_id,
        app: target_app.clone(),
        handler: record.handler,
        params: record.params,
        trigger_type: TriggerType::Replay,
        shard_index: record.shard_index,
        shard_total: record.shard_total,
        attempt: 0,
        scheduled_at_ms: record.scheduled_at_ms,
        fire_at_ms: record.scheduled_at_ms,
        route_strategy: RouteStrategy::First,
        block_strategy: record.block_strategy,
        timeout_ms: record.timeout_ms,
        glue_type: record.glue_type,
        glue_source: record.glue_source,
        glue_updated_at_ms: record.glue_updated_at_ms,
        route_partitions: Some(vec![trigger.partition % target_partitions.max(1)]),
        replay_of: Some(record.trigger_id),
        operation_id: Some(replay_id),
    }
}

impl PendingFire {
    /// The same fire due at the `position`-th slot of `rate` per second from `start_ms`.
    fn paced(self, start_ms: i64, position: usize, rate: u32) -> PendingFire {
        PendingFire {
            fire_at_ms: paced_at(start_ms, position, rate),
            ..self
        }
    }
}

/// When the `position`-th trigger of an operation at `rate` per second from `start_ms` is due.
fn paced_at(start_ms: i64, position: usize, rate: u32) -> i64 {
    start_ms + (position as i64 * 1000) / i64::from(rate.max(1))
}

/// What the request asked for, as recorded with the operation.
fn selection_json(request: &ReplayRequest, resolved: &[PartitionOffsets]) -> serde_json::Value {
    let range = match &request.range {
        TopicRange::Offsets(offsets) => serde_json::json!({ "offsets": offsets }),
        TopicRange::Time { from_ms, to_ms } => {
            serde_json::json!({ "from_ms": from_ms, "to_ms": to_ms })
        }
    };
    serde_json::json!({ "range": range, "filter": request.filter, "resolved_offsets": resolved })
}

/// The summary of `selected` (trigger, job, scheduled time), in scheduled order.
fn summarize(
    selected: &[(TriggerId, JobId, i64)],
    read: RangeRead,
    operation: Option<Operation>,
    start_ms: i64,
    rate: u32,
) -> OperationSummary {
    let mut jobs: BTreeMap<JobId, JobShare> = BTreeMap::new();
    for (_, job_id, at) in selected {
        let share = jobs.entry(*job_id).or_insert(JobShare {
            job_id: *job_id,
            triggers: 0,
            first_scheduled_at_ms: *at,
            last_scheduled_at_ms: *at,
        });
        share.triggers += 1;
        share.first_scheduled_at_ms = share.first_scheduled_at_ms.min(*at);
        share.last_scheduled_at_ms = share.last_scheduled_at_ms.max(*at);
    }
    let end = |entry: Option<&(TriggerId, JobId, i64)>| {
        entry.map(|(trigger_id, _, at)| SelectedTrigger {
            trigger_id: trigger_id.clone(),
            scheduled_at_ms: *at,
        })
    };
    let emitting = !selected.is_empty() && operation.is_some();
    OperationSummary {
        dry_run: operation.is_none(),
        operation,
        triggers: selected.len(),
        jobs: jobs.into_values().collect(),
        first: end(selected.first()),
        last: end(selected.last()),
        read,
        emitted_from_ms: emitting.then_some(start_ms),
        emitted_until_ms: emitting.then(|| paced_at(start_ms, selected.len() - 1, rate)),
    }
}

/// `ms` as an RFC 3339 UTC time, for messages.
pub fn format_ms(ms: i64) -> String {
    crate::domain::schedule::format_in_zone(ms, chrono_tz::Tz::UTC)
}
