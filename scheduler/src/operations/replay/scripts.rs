//! Scripts in a replay. A script trigger (GLUE_*) is replayed with its job's *current*
//! script, never the version the original carried: script source reaches an app's executors
//! only as a job's current script, written by someone who holds SCRIPTS there, so a replay
//! must not bring back a version since replaced, nor carry one app's script into another. A
//! replay whose selection holds a script trigger of a job that is gone, or is no longer a
//! script job of that type, is refused naming the jobs (to be left out with `job_ids`); and
//! one that would emit any script trigger needs SCRIPTS on the target app
//! ([`ReplayRequest::may_write_scripts`], decided by the API from the caller's grants). A dry
//! run emits nothing, so it needs no SCRIPTS, but is refused for a gone job the same way.

use std::collections::{BTreeMap, BTreeSet};

use kadence_schemas::{AppName, GlueType, JobId};

use super::topic_range::StoredTrigger;
use super::{ReplayError, ReplayRequest, Replayer};

impl Replayer {
    /// Gives every script trigger of `selected` its job's current script (module docs):
    /// refused when a job is gone or no longer a script job of the trigger's type, or, unless
    /// a dry run, when the caller may not write scripts on `target_app`.
    pub(super) async fn with_current_scripts(
        &self,
        selected: &mut [StoredTrigger],
        request: &ReplayRequest,
        target_app: &AppName,
    ) -> Result<(), ReplayError> {
        let script_jobs: BTreeSet<JobId> = (selected.iter())
            .filter(|trigger| trigger.record.glue_type != GlueType::Bean)
            .map(|trigger| trigger.record.job_id)
            .collect();
        if script_jobs.is_empty() {
            return Ok(());
        }
        if !request.dry_run && !request.may_write_scripts {
            return Err(ReplayError::Forbidden(format!(
                "the selection holds script triggers (jobs {}), and replaying them runs their \
                 scripts on app {target_app}'s executors, which needs a SCRIPTS grant on \
                 {target_app}: ask an admin for one, or leave those jobs out with job_ids",
                list(&script_jobs)
            )));
        }
        let mut current = BTreeMap::new();
        let mut gone = BTreeSet::new();
        for job_id in &script_jobs {
            match self.store.get_job(*job_id).await? {
                Some(job) => {
                    current.insert(*job_id, (job.spec.glue, job.glue_updated_at_ms));
                }
                None => {
                    gone.insert(*job_id);
                }
            }
        }
        for trigger in selected.iter_mut() {
            let record = &mut trigger.record;
            if record.glue_type == GlueType::Bean {
                continue;
            }
            match current.get(&record.job_id) {
                Some((glue, updated_at_ms)) if glue.glue_type == record.glue_type => {
                    record.glue_source = glue.source.clone();
                    record.glue_updated_at_ms = *updated_at_ms;
                }
                _ => {
                    gone.insert(record.job_id);
                }
            }
        }
        if gone.is_empty() {
            return Ok(());
        }
        Err(ReplayError::Conflict(format!(
            "jobs {} are gone or no longer script jobs of the type their triggers carry: a \
             replayed script trigger runs its job's current script, and these have none to \
             run; leave them out with job_ids",
            list(&gone)
        )))
    }
}

/// `1, 4, 9`: job ids for a message.
fn list(jobs: &BTreeSet<JobId>) -> String {
    let ids: Vec<String> = jobs.iter().map(ToString::to_string).collect();
    ids.join(", ")
}
