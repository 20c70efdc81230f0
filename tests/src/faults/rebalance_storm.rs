//! `rebalance-storm` (tansu) and `kafka-rebalance-storm`: executors join and leave every
//! [`STEP`] for the outage, growing to three and shrinking to one and again, so every step is
//! a rebalance of the group.
//!
//! How they leave is the difference. On tansu by SIGTERM only: each finishes its runs,
//! commits and leaves the group (its coordinator keeps vanished members' partitions; see
//! [`Coordinator::Tansu`](super::executor_faults::Coordinator::Tansu)). On Apache Kafka by
//! kill -9 and SIGTERM in turn, the first leave a kill: a killed executor says nothing to the
//! group, which learns of it only when its session (6 s) runs out; the triggers it had taken
//! and not committed are then redelivered to the others. The table counts the runs a kill
//! cut short (a `started` line from the killed executor and no result of its own) and the
//! longest from a kill until another executor started one of them again ("redelivered
//! after", about the session timeout or less when a rebalance came sooner). Each change
//! strikes half-way through a second's runs ([`until_mid_run`]), so a kill finds runs in
//! progress; none cut short fails the scenario, as it would show nothing redelivered. Nothing
//! may be lost; runs repeated under the same id are counted.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::executor_faults::Coordinator;
use super::steady::{Finished, SteadyLoad, until_mid_run};
use super::{Options, Report, millis_cell};
use crate::now_ms;

/// Time between two changes of the group.
pub const STEP: Duration = Duration::from_secs(4);

/// An executor killed during the storm: which, and when (ms).
struct Killed {
    executor: usize,
    at_ms: i64,
}

/// Runs the scenario on `brokers` (whose group coordinator is `coordinator`'s).
pub async fn run(brokers: String, options: Options, coordinator: Coordinator) -> Report {
    let (scenario, kills) = match coordinator {
        Coordinator::Tansu => ("rebalance-storm", false),
        Coordinator::Kafka { .. } => ("kafka-rebalance-storm", true),
    };
    let protocol = coordinator.group_protocol();
    let mut load = SteadyLoad::start(
        (&brokers, coordinator.broker_kind()),
        &options,
        protocol,
        coordinator.route(),
    )
    .await;
    tokio::time::sleep(options.before).await;
    let from_ms = now_ms();
    let (changes, killed) = storm(&mut load, options.outage, kills).await;
    let over_ms = now_ms();
    tokio::time::sleep(options.after).await;
    let finished = load.finish().await;
    let mut columns = finished.columns();
    let mut failures: Vec<String> = coordinator
        .protocol_failure(&load.group())
        .into_iter()
        .collect();
    if kills {
        let (cut_short, longest) = redelivered(&load, &finished, &killed);
        columns.push(("runs cut short by kill -9", cut_short.to_string()));
        columns.push(("redelivered after (longest)", millis_cell(longest)));
        if killed.is_empty() {
            failures.push("the storm killed no executor: make it last longer".to_owned());
        } else if cut_short == 0 {
            failures.push(
                "no kill -9 struck a run in progress, so nothing showed a dead member's \
                 triggers redelivered"
                    .to_owned(),
            );
        }
    }
    columns.push(finished.recovery_column(from_ms..over_ms));
    let leaving = if kills {
        format!("kill -9 ({}) and SIGTERM in turn", killed.len())
    } else {
        "SIGTERM".to_owned()
    };
    Report {
        scenario,
        injected: format!(
            "executors joining and leaving ({leaving}) every {} s for {} s ({changes} changes \
             of the group, one to three executors), during {} jobs firing every second (runs \
             of 300 ms)",
            STEP.as_secs(),
            options.outage.as_secs(),
            options.jobs
        ),
        columns,
        lost: finished.outcome.lost(),
        failures,
        details: finished.details(&load).await,
    }
    .keeping_logs_on_failure(&load.stack.log_files())
}

/// Changes the group every [`STEP`] for `length`; a leave is by kill -9 every other time
/// when `kills`, by SIGTERM otherwise. The number of changes, and the executors killed.
async fn storm(load: &mut SteadyLoad, length: Duration, kills: bool) -> (usize, Vec<Killed>) {
    let stack = &mut load.stack;
    let (mut live, mut changes, mut leaves) = (vec![0, 1], 0, 0);
    let mut killed = Vec::new();
    let until = tokio::time::Instant::now() + length;
    while tokio::time::Instant::now() < until {
        // A whole number of seconds from the last change, each change half-way through
        // that second's runs.
        tokio::time::sleep(STEP.saturating_sub(Duration::from_secs(1))).await;
        until_mid_run().await;
        // Grow to three, then shrink to one, and again: every step a rebalance.
        let grow = live.len() == 1 || (live.len() < 3 && changes % 4 < 2);
        if grow {
            live.push(stack.add_executor());
        } else {
            let leaving = live.remove(0);
            if kills && leaves % 2 == 0 {
                killed.push(Killed {
                    executor: leaving,
                    at_ms: now_ms(),
                });
                stack.kill_executor(leaving).await;
            } else {
                stack.stop_executor(leaving, STEP).await;
            }
            leaves += 1;
        }
        changes += 1;
    }
    (changes, killed)
}

/// The runs the kills cut short (started by a killed executor, no result of its own), and
/// the longest from a kill until another executor started one of them again (`None` when
/// none was cut short, or none started again).
fn redelivered(load: &SteadyLoad, finished: &Finished, killed: &[Killed]) -> (usize, Option<i64>) {
    let mut finished_by: HashMap<&str, HashSet<&str>> = HashMap::new();
    for result in &finished.results {
        (finished_by.entry(result.executor_id.as_str()).or_default())
            .insert(result.trigger_id.as_str());
    }
    let first = finished.first_successes();
    let (mut cut_short, mut longest) = (0, None);
    for kill in killed {
        let executor_id = format!("faults-executor-{}", kill.executor);
        let log = std::fs::read_to_string(&load.stack.logs[kill.executor]).unwrap_or_default();
        let own = finished_by.get(executor_id.as_str());
        let started = log.lines().filter_map(|line| line.strip_prefix("started "));
        for id in started.filter(|id| !own.is_some_and(|own| own.contains(id))) {
            cut_short += 1;
            if let Some(again) = first
                .get(id)
                .filter(|result| result.executor_id != executor_id)
            {
                let after = again.started_at_ms - kill.at_ms;
                longest = longest.max(Some(after));
            }
        }
    }
    (cut_short, longest)
}
