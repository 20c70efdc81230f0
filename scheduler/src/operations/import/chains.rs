//! Child links among the jobs to create: a job whose child is refused is refused, and so is
//! every job on a cycle of children (Kadence refuses cycles; XXL-JOB does not check).

use std::collections::{BTreeSet, HashMap, HashSet};

use kadence_schemas::JobId;

use super::planned::Candidate;

/// Refuses every candidate with a refused child (a job whose children would not fire is not
/// the same job) and every candidate on a cycle of children (Kadence refuses cycles), until
/// nothing changes.
pub(super) fn refuse_broken_chains(
    candidates: &mut Vec<Candidate<'_>>,
    refusals: &mut HashMap<i64, String>,
    in_snapshot: &HashSet<i64>,
    existing: &HashMap<i64, JobId>,
) {
    loop {
        let mut changed = false;
        candidates.retain(|found| {
            let broken = found.children.iter().find(|child| {
                in_snapshot.contains(child)
                    && !existing.contains_key(child)
                    && refusals.contains_key(child)
            });
            match broken {
                Some(child) => {
                    let reason = format!("its child job {child} is refused: {}", refusals[child]);
                    refusals.insert(found.job.id, reason);
                    changed = true;
                    false
                }
                None => true,
            }
        });
        if let Some(cycle) = find_cycle(candidates) {
            let shown: Vec<String> = cycle.iter().map(ToString::to_string).collect();
            for id in &cycle {
                let reason = format!(
                    "child jobs form a cycle ({}), which Kadence refuses",
                    shown.join(" → ")
                );
                refusals.insert(*id, reason);
            }
            candidates.retain(|found| !cycle.contains(&found.job.id));
            changed = true;
        }
        if !changed {
            return;
        }
    }
}

/// A cycle of child links among the candidates, as XXL-JOB ids (the first repeated last).
fn find_cycle(candidates: &[Candidate<'_>]) -> Option<Vec<i64>> {
    let links: HashMap<i64, &[i64]> = candidates
        .iter()
        .map(|found| (found.job.id, found.children.as_slice()))
        .collect();
    let mut done: HashSet<i64> = HashSet::new();
    for start in links.keys().copied().collect::<BTreeSet<_>>() {
        let mut path: Vec<i64> = Vec::new();
        let mut stack: Vec<(i64, usize)> = vec![(start, 0)];
        while let Some((node, next)) = stack.pop() {
            if next == 0 {
                if let Some(at) = path.iter().position(|&seen| seen == node) {
                    let mut cycle = path[at..].to_vec();
                    cycle.push(node);
                    return Some(cycle);
                }
                if done.contains(&node) {
                    continue;
                }
                path.push(node);
            }
            let children = links.get(&node).copied().unwrap_or_default();
            match children.get(next) {
                Some(&child) if links.contains_key(&child) => {
                    stack.push((node, next + 1));
                    stack.push((child, 0));
                }
                Some(_) => stack.push((node, next + 1)),
                None => {
                    path.pop();
                    done.insert(node);
                }
            }
        }
    }
    None
}
