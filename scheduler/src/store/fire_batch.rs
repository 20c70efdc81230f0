//! The compact form of a fire batch: the fires one pre-read scan planned for one schedule
//! shard, stored as one `fire_batches` row instead of a job-log row per fire.
//!
//! A batch must hold everything needed to emit its fires again after its node died, without
//! the jobs as they are by then (a job edited since keeps the fires planned before the edit,
//! exactly as a pending row did). Most of a fire is its job's: app, handler, parameters,
//! strategies, timeout, script. Those are stored once per job of the batch ([`JobPart`]);
//! each fire keeps what is its own ([`FirePart`]): its log id, when it is due, why, and its
//! trigger id only when that is not the scheduled form `{job}-{scheduled_ms}`. Encoded with
//! `postcard` (variable-length integers), a scheduled fire of a job already in the batch
//! costs about 20 bytes.

use kadence_schemas::{AppName, BlockStrategy, GlueType, JobId, TriggerId, TriggerType};
use serde::{Deserialize, Serialize};

use crate::domain::model::{PendingFire, RouteStrategy};

/// Why a stored batch could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("a fire batch cannot be read ({0}); it was written by an incompatible version")]
pub struct BatchDecodeError(#[from] postcard::Error);

/// The settings the fires of a batch share with their job.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct JobPart {
    job_id: JobId,
    app: AppName,
    handler: String,
    params: String,
    route_strategy: RouteStrategy,
    block_strategy: BlockStrategy,
    timeout_ms: i64,
    glue_type: GlueType,
    glue_source: Option<String>,
    glue_updated_at_ms: Option<i64>,
}

/// A [`JobPart`]'s fields as a fire holds them, in its order.
type JobPartKey<'a> = (
    JobId,
    &'a AppName,
    &'a str,
    &'a str,
    RouteStrategy,
    BlockStrategy,
    i64,
    GlueType,
    Option<&'a str>,
    Option<i64>,
);

impl JobPart {
    fn key_of(fire: &PendingFire) -> JobPartKey<'_> {
        (
            fire.job_id,
            &fire.app,
            &fire.handler,
            &fire.params,
            fire.route_strategy,
            fire.block_strategy,
            fire.timeout_ms,
            fire.glue_type,
            fire.glue_source.as_deref(),
            fire.glue_updated_at_ms,
        )
    }

    fn of(fire: &PendingFire) -> JobPart {
        JobPart {
            job_id: fire.job_id,
            app: fire.app.clone(),
            handler: fire.handler.clone(),
            params: fire.params.clone(),
            route_strategy: fire.route_strategy,
            block_strategy: fire.block_strategy,
            timeout_ms: fire.timeout_ms,
            glue_type: fire.glue_type,
            glue_source: fire.glue_source.clone(),
            glue_updated_at_ms: fire.glue_updated_at_ms,
        }
    }
}

/// What a fire does not share with its job.
#[derive(Debug, Serialize, Deserialize)]
struct FirePart {
    /// Index of its [`JobPart`] in the batch.
    job: u32,
    log_id: i64,
    /// `None` when it is `TriggerId::scheduled(job, scheduled_at_ms)`.
    trigger_id: Option<TriggerId>,
    trigger_type: TriggerType,
    scheduled_at_ms: i64,
    /// `fire_at_ms - scheduled_at_ms` (0 except for misfires fired now).
    fire_delay_ms: i64,
    shard_index: i32,
    shard_total: i32,
    attempt: i32,
    route_partitions: Option<Vec<i32>>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Batch {
    jobs: Vec<JobPart>,
    fires: Vec<FirePart>,
}

/// Encodes `fires` (in any order; decoding returns that order).
pub fn encode(fires: &[PendingFire]) -> Vec<u8> {
    let mut batch = Batch::default();
    // Keyed by the fire's own fields, borrowed: a job's part is cloned once per batch, not
    // once per fire.
    let mut parts = std::collections::HashMap::<JobPartKey<'_>, u32>::new();
    for fire in fires {
        let job = *parts.entry(JobPart::key_of(fire)).or_insert_with(|| {
            batch.jobs.push(JobPart::of(fire));
            (batch.jobs.len() - 1) as u32
        });
        let scheduled_form = fire
            .trigger_id
            .is_scheduled(fire.job_id, fire.scheduled_at_ms);
        batch.fires.push(FirePart {
            job,
            log_id: fire.log_id,
            trigger_id: (!scheduled_form).then(|| fire.trigger_id.clone()),
            trigger_type: fire.trigger_type,
            scheduled_at_ms: fire.scheduled_at_ms,
            fire_delay_ms: fire.fire_at_ms - fire.scheduled_at_ms,
            shard_index: fire.shard_index,
            shard_total: fire.shard_total,
            attempt: fire.attempt,
            route_partitions: fire.route_partitions.clone(),
        });
    }
    postcard::to_stdvec(&batch).expect("encoding into memory cannot fail")
}

/// Decodes what [`encode`] wrote.
pub fn decode(bytes: &[u8]) -> Result<Vec<PendingFire>, BatchDecodeError> {
    let batch: Batch = postcard::from_bytes(bytes)?;
    batch
        .fires
        .into_iter()
        .map(|fire| {
            let job = batch
                .jobs
                .get(fire.job as usize)
                .ok_or(postcard::Error::DeserializeBadEncoding)?;
            Ok(PendingFire {
                log_id: fire.log_id,
                trigger_id: fire
                    .trigger_id
                    .unwrap_or_else(|| TriggerId::scheduled(job.job_id, fire.scheduled_at_ms)),
                job_id: job.job_id,
                app: job.app.clone(),
                handler: job.handler.clone(),
                params: job.params.clone(),
                trigger_type: fire.trigger_type,
                shard_index: fire.shard_index,
                shard_total: fire.shard_total,
                attempt: fire.attempt,
                scheduled_at_ms: fire.scheduled_at_ms,
                fire_at_ms: fire.scheduled_at_ms + fire.fire_delay_ms,
                route_strategy: job.route_strategy,
                block_strategy: job.block_strategy,
                timeout_ms: job.timeout_ms,
                glue_type: job.glue_type,
                glue_source: job.glue_source.clone(),
                glue_updated_at_ms: job.glue_updated_at_ms,
                route_partitions: fire.route_partitions,
                // Batches hold what the schedule planned: never a replay or a backfill.
                replay_of: None,
                operation_id: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-01-01T00:00:00Z
    const T0: i64 = 1_767_225_600_000;

    fn fire(job: i64, log_id: i64, scheduled_at_ms: i64) -> PendingFire {
        let job_id = JobId::new(job).unwrap();
        PendingFire {
            log_id,
            trigger_id: TriggerId::scheduled(job_id, scheduled_at_ms),
            job_id,
            app: AppName::parse("billing").unwrap(),
            handler: "invoice".into(),
            params: "region=eu".into(),
            trigger_type: TriggerType::Cron,
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            scheduled_at_ms,
            fire_at_ms: scheduled_at_ms,
            route_strategy: RouteStrategy::ConsistentHash,
            block_strategy: BlockStrategy::SerialExecution,
            timeout_ms: 30_000,
            glue_type: GlueType::Bean,
            glue_source: None,
            glue_updated_at_ms: None,
            route_partitions: None,
            replay_of: None,
            operation_id: None,
        }
    }

    #[test]
    fn every_field_of_every_fire_round_trips_in_order() {
        let mut misfire = fire(7, 12, T0 - 60_000);
        misfire.trigger_type = TriggerType::Misfire;
        misfire.fire_at_ms = T0;
        let mut manual = fire(7, 13, T0);
        manual.trigger_id = TriggerId::parse("7-u0192a3b4c5d6e7f80000000000000001").unwrap();
        manual.trigger_type = TriggerType::Manual;
        manual.params = "override".into();
        manual.route_partitions = Some(vec![2, 4]);
        let mut script = fire(9, 14, T0 + 1_000);
        script.glue_type = GlueType::GlueShell;
        script.glue_source = Some("echo hi".into());
        script.glue_updated_at_ms = Some(T0 - 5);
        script.shard_index = 3;
        script.shard_total = 6;
        script.attempt = 2;
        let fires = vec![
            fire(7, 10, T0),
            fire(7, 11, T0 + 1_000),
            misfire,
            manual,
            script,
        ];
        assert_eq!(decode(&encode(&fires)).unwrap(), fires);
        assert_eq!(decode(&encode(&[])).unwrap(), Vec::<PendingFire>::new());
    }

    #[test]
    fn a_scheduled_fire_costs_a_few_bytes_beyond_its_job() {
        let one_job: Vec<PendingFire> = (0..1_000)
            .map(|n| fire(7, 1_000 + n, T0 + n * 1_000))
            .collect();
        let per_fire = encode(&one_job).len() / one_job.len();
        assert!(per_fire <= 24, "{per_fire} bytes a fire");
    }

    #[test]
    fn garbage_is_refused_with_a_clear_error() {
        let error = decode(&[0xff, 0xff, 0xff]).unwrap_err();
        assert!(
            error.to_string().contains("incompatible version"),
            "{error}"
        );
    }
}
