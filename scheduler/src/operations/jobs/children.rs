//! Child jobs: a job's children must exist, and following child links must never lead back to
//! the job (a cycle would fire for ever). Only the jobs reachable from the children are read,
//! level by level.

use std::collections::{HashMap, HashSet};

use kadence_schemas::JobId;

use super::JobError;
use crate::store::Jobs;

/// Child jobs must exist, and following child links from `job` must never lead back to it.
pub(super) async fn check_children(
    store: &dyn Jobs,
    job: Option<JobId>,
    children: &[JobId],
) -> Result<(), JobError> {
    if children.is_empty() {
        return Ok(());
    }
    // Only the jobs reachable from the children are read, level by level.
    let mut links: HashMap<JobId, Vec<JobId>> = HashMap::new();
    let mut asked: HashSet<JobId> = children.iter().copied().collect();
    let mut frontier: Vec<JobId> = asked.iter().copied().collect();
    while !frontier.is_empty() {
        let found = store.child_links(&frontier).await?;
        frontier = found
            .iter()
            .flat_map(|(_, next)| next.iter().copied())
            .filter(|id| asked.insert(*id))
            .collect();
        links.extend(found);
    }
    for child in children {
        if !links.contains_key(child) {
            return Err(JobError::at("child_job_ids")(JobError::invalid(format!(
                "child job {child} does not exist"
            ))));
        }
    }
    let Some(job) = job else {
        return Ok(()); // a new job has no parents yet, so its children cannot reach it
    };
    // Depth-first from each child; the path is reported when it returns to `job`.
    let mut stack: Vec<Vec<JobId>> = children.iter().map(|child| vec![job, *child]).collect();
    let mut seen = HashSet::new();
    while let Some(path) = stack.pop() {
        let last = *path.last().expect("paths are never empty");
        if last == job {
            let shown: Vec<String> = path.iter().map(ToString::to_string).collect();
            return Err(JobError::at("child_job_ids")(JobError::invalid(format!(
                "child jobs would form a cycle: {}",
                shown.join(" → ")
            ))));
        }
        if !seen.insert(last) {
            continue;
        }
        for next in links.get(&last).map(Vec::as_slice).unwrap_or_default() {
            let mut longer = path.clone();
            longer.push(*next);
            stack.push(longer);
        }
    }
    Ok(())
}
