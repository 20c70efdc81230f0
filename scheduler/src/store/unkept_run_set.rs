//! The compact form of runs that never get a job-log row: successes of jobs whose history
//! policy does not keep them (FAILURES, NONE) whose rows were held back until their results
//! came (see [`crate::engine::held_runs`]).
//!
//! Such a run would have its row written, counted and deleted ten minutes later, three row
//! writes for a run nobody reads. Instead the results transaction writes one `unkept_run_sets`
//! row per second of scheduled time with every such run of its batch, and the set stands in
//! for the rows while a row would still have been there (`retention.unkept_runs_for`):
//! - a result delivered again is recognised as a repeat (the trigger id names its scheduled
//!   second, which finds the set);
//! - a node that claims a dead node's fire batches does not emit those fires again (the
//!   fires' scheduled seconds find the sets, and the log ids in them are acknowledged);
//! - the report refresh adds the runs to `run_counts` and marks the set counted; retention
//!   then forgets the set and the runs' log lines.
//!
//! Every run in a set succeeded: only a run that needs no follow-up (a success of a job
//! without children) is left without a row. Encoded with `postcard`; a run whose trigger id
//! is the scheduled form `{job}-{ms}` costs about 15 bytes.

use kadence_schemas::{AppName, JobId, TriggerId};
use serde::{Deserialize, Serialize};

/// Why a stored set could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("a set of unkept runs cannot be read ({0}); it was written by an incompatible version")]
pub struct UnkeptRunSetDecodeError(#[from] postcard::Error);

/// A succeeded run without a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnkeptRun {
    /// The log id its fire was given.
    pub log_id: i64,
    pub trigger_id: TriggerId,
    pub app: AppName,
    pub scheduled_at_ms: i64,
}

impl UnkeptRun {
    /// The second of scheduled time whose set holds this run.
    pub fn scheduled_second(&self) -> i64 {
        scheduled_second(self.scheduled_at_ms)
    }
}

/// The second of scheduled time of `scheduled_at_ms`: the key the sets are found by.
pub fn scheduled_second(scheduled_at_ms: i64) -> i64 {
    scheduled_at_ms.div_euclid(1_000)
}

#[derive(Debug, Serialize, Deserialize)]
struct EncodedRun {
    /// Index of its app in [`EncodedSet::apps`].
    app: u32,
    log_id: i64,
    job_id: JobId,
    scheduled_at_ms: i64,
    /// `None` when it is `TriggerId::scheduled(job_id, scheduled_at_ms)`.
    trigger_id: Option<TriggerId>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct EncodedSet {
    apps: Vec<AppName>,
    runs: Vec<EncodedRun>,
}

/// Encodes `runs` (in any order; decoding returns that order).
pub fn encode(runs: &[UnkeptRun]) -> Vec<u8> {
    let mut set = EncodedSet::default();
    for run in runs {
        let app = match set.apps.iter().position(|app| *app == run.app) {
            Some(index) => index,
            None => {
                set.apps.push(run.app.clone());
                set.apps.len() - 1
            }
        };
        let job_id = run.trigger_id.job_id();
        let scheduled_form = TriggerId::scheduled(job_id, run.scheduled_at_ms);
        set.runs.push(EncodedRun {
            app: app as u32,
            log_id: run.log_id,
            job_id,
            scheduled_at_ms: run.scheduled_at_ms,
            trigger_id: (run.trigger_id != scheduled_form).then(|| run.trigger_id.clone()),
        });
    }
    postcard::to_stdvec(&set).expect("encoding into memory cannot fail")
}

/// Decodes what [`encode`] wrote.
pub fn decode(bytes: &[u8]) -> Result<Vec<UnkeptRun>, UnkeptRunSetDecodeError> {
    let set: EncodedSet = postcard::from_bytes(bytes)?;
    (set.runs.into_iter())
        .map(|run| {
            let app =
                (set.apps.get(run.app as usize)).ok_or(postcard::Error::DeserializeBadEncoding)?;
            Ok(UnkeptRun {
                log_id: run.log_id,
                trigger_id: (run.trigger_id)
                    .unwrap_or_else(|| TriggerId::scheduled(run.job_id, run.scheduled_at_ms)),
                app: app.clone(),
                scheduled_at_ms: run.scheduled_at_ms,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-01-01T00:00:00Z
    const T0: i64 = 1_767_225_600_000;

    fn run(job: i64, log_id: i64, app: &str, scheduled_at_ms: i64) -> UnkeptRun {
        UnkeptRun {
            log_id,
            trigger_id: TriggerId::scheduled(JobId::new(job).unwrap(), scheduled_at_ms),
            app: AppName::parse(app).unwrap(),
            scheduled_at_ms,
        }
    }

    #[test]
    fn every_run_round_trips_in_order() {
        let mut shard = run(9, 14, "billing", T0 + 5);
        shard.trigger_id = TriggerId::shard(JobId::new(9).unwrap(), T0 + 5, 3);
        let runs = vec![
            run(7, 10, "billing", T0),
            run(8, 11, "reports", T0 + 999),
            shard,
            run(7, 15, "billing", T0 + 1),
        ];
        assert_eq!(decode(&encode(&runs)).unwrap(), runs);
        assert_eq!(decode(&encode(&[])).unwrap(), Vec::<UnkeptRun>::new());
    }

    #[test]
    fn a_scheduled_run_costs_a_few_bytes() {
        let runs: Vec<UnkeptRun> = (0..1_000)
            .map(|n| run(10_000 + n, 5_000_000 + n, "billing", T0 + n % 1_000))
            .collect();
        let per_run = encode(&runs).len() / runs.len();
        assert!(per_run <= 16, "{per_run} bytes a run");
    }

    #[test]
    fn seconds_are_whole_and_floor_before_the_epoch() {
        assert_eq!(scheduled_second(T0 + 999), T0 / 1_000);
        assert_eq!(scheduled_second(-1), -1);
        assert_eq!(
            run(7, 1, "billing", T0 + 1_000).scheduled_second(),
            T0 / 1_000 + 1
        );
    }

    #[test]
    fn garbage_and_a_bad_app_index_are_refused_with_a_clear_error() {
        let error = decode(&[0xff, 0xff, 0xff]).unwrap_err();
        assert!(
            error.to_string().contains("incompatible version"),
            "{error}"
        );
        let no_apps = postcard::to_stdvec(&EncodedSet {
            apps: Vec::new(),
            runs: vec![EncodedRun {
                app: 0,
                log_id: 1,
                job_id: JobId::new(7).unwrap(),
                scheduled_at_ms: T0,
                trigger_id: None,
            }],
        })
        .unwrap();
        assert!(decode(&no_apps).is_err());
    }
}
