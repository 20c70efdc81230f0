//! Executor faults, each during a steady load of fires whose runs take 300 ms (so some are
//! always in the middle of running when the fault strikes):
//! - `executor-hang`: one of two executors frozen (SIGSTOP: no beats, no polls, runs stuck
//!   half-way) for longer than its group session, then thawed. A coordinator that evicts
//!   the silent member hands its partitions to the other executor after the session timeout
//!   (6 s here), which runs the triggers not yet committed again; the frozen one's late
//!   results are repeats. The development broker's does not (see [`super::handover`], which
//!   shows the handover on librdkafka's mock cluster): here its triggers wait for it, and
//!   what must hold is that none is lost or run twice.
//! - `rebalance-storm`: executors join and leave (SIGTERM: each finishes its runs and leaves
//!   the group) every few seconds: every change is a rebalance of the group. Leaving by
//!   kill -9 is the crash tests' (one executor); a storm of kill -9 leaves the development
//!   broker's group coordinator (tansu 0.6) assigning partitions to members that are gone,
//!   for minutes: its partitions' triggers then wait in the topic (seen here twice, with the
//!   only live member owning no partition after the last rebalance).
//!
//! What must hold: every fire due is emitted and completed exactly once by trigger id (a
//! run row per trigger id, first result wins); a trigger run twice shows as a repeated
//! result of the same id, never as a second run.

use std::collections::HashMap;
use std::time::Duration;

use kadence_schemas::{ResultRecord, TriggerRecord};

use super::load::{Outcome, due_in, scheduled_ms};
use super::proxy::ProxiedBroker;
use super::stack::{APP, PARTITIONS, Stack, signal, sqlite_url};
use super::{Options, Report, millis_cell};
use crate::now_ms;
use crate::triggers::{Placed, read_placed_records, read_records};

/// What the jobs run: the test executor's `sleep` handler, 300 ms.
const RUN: (&str, &str) = ("sleep", "300");

/// `executor-hang`'s defaults: 20 jobs, 10 s before, 20 s frozen, 20 s after.
pub fn hang_defaults() -> Options {
    Options {
        jobs: 20,
        before: Duration::from_secs(10),
        outage: Duration::from_secs(20),
        after: Duration::from_secs(20),
    }
}

/// `rebalance-storm`'s defaults: 20 jobs, 10 s before, 60 s of storm, 20 s after.
pub fn storm_defaults() -> Options {
    Options {
        jobs: 20,
        before: Duration::from_secs(10),
        outage: Duration::from_secs(60),
        after: Duration::from_secs(20),
    }
}

/// Seconds between two changes of the storm's group.
const STORM_STEP: Duration = Duration::from_secs(4);

/// Runs `executor-hang`.
pub async fn run_hang(options: &Options) -> Report {
    run(options, "executor-hang", |stack, outage| {
        Box::pin(async move {
            let frozen = 0;
            signal(stack.executor_pid(frozen), "STOP");
            eprintln!("executor {frozen} frozen for {outage:?}");
            tokio::time::sleep(outage).await;
            signal(stack.executor_pid(frozen), "CONT");
            format!(
                "one of two executors frozen with SIGSTOP for {} s (no beats, runs stuck \
                 half-way; session timeout 6 s), then SIGCONT",
                outage.as_secs()
            )
        })
    })
    .await
}

/// Runs `rebalance-storm`.
pub async fn run_storm(options: &Options) -> Report {
    run(options, "rebalance-storm", |stack, outage| {
        Box::pin(async move {
            let (mut live, mut changes) = (vec![0, 1], 0);
            let until = tokio::time::Instant::now() + outage;
            while tokio::time::Instant::now() < until {
                tokio::time::sleep(STORM_STEP).await;
                // Grow to three, then shrink to one, and again: every step a rebalance.
                let grow = live.len() == 1 || (live.len() < 3 && changes % 4 < 2);
                if grow {
                    live.push(stack.add_executor());
                } else {
                    stack.stop_executor(live.remove(0), STORM_STEP).await;
                }
                changes += 1;
            }
            format!(
                "executors joining and leaving (SIGTERM) every {} s for {} s ({changes} \
                 changes of the group, one to three executors)",
                STORM_STEP.as_secs(),
                outage.as_secs()
            )
        })
    })
    .await
}

/// The fault: given the stack and how long the fault lasts, injects it and says what it did.
type Fault = for<'a> fn(
    &'a mut Stack,
    Duration,
)
    -> std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send + 'a>>;

async fn run(options: &Options, scenario: &'static str, fault: Fault) -> Report {
    let broker = ProxiedBroker::start().await;
    let prefix = crate::unique("kfaults");
    let database = tempfile::tempdir().expect("a database directory");
    let database_url = sqlite_url(database.path());
    let mut stack = Stack::start(&database_url, &broker.address, &prefix).await;
    stack.add_executor();
    let jobs = stack
        .api
        .every_second_jobs_running(options.jobs, "DO_NOTHING", RUN)
        .await;
    let from_ms = now_ms() + 6_000;
    tokio::time::sleep(options.before).await;
    let fault_ms = now_ms();
    let injected = fault(&mut stack, options.outage).await;
    let over_ms = now_ms();
    tokio::time::sleep(options.after).await;
    let window = (from_ms, now_ms());
    let outcome = Outcome::collect(&stack, &broker.address, &prefix, &jobs, window).await;
    let results: Vec<ResultRecord> =
        read_records(&broker.address, &format!("{prefix}.results"), 1).await;
    let mut results_per_id: HashMap<&str, usize> = HashMap::new();
    for result in &results {
        *results_per_id
            .entry(result.trigger_id.as_str())
            .or_default() += 1;
    }
    let run_twice = outcome
        .emitted
        .keys()
        .filter(|id| {
            results_per_id
                .get(id.as_str())
                .is_some_and(|count| *count > 1)
        })
        .count();
    // The longest a fire due during the fault waited for its run to finish.
    let longest_ms = outcome
        .succeeded
        .iter()
        .filter(|(id, _)| outcome.emitted.contains_key(*id) && due_in(id, fault_ms..over_ms))
        .filter_map(|(id, finished)| {
            let scheduled = scheduled_ms(id)?;
            Some(finished - scheduled)
        })
        .max();
    let mut details = outcome.lost_details();
    if !outcome.not_completed.is_empty() {
        details.push(
            where_the_open_fires_are(&outcome, &results_per_id, &broker.address, &prefix).await,
        );
    }
    let mut columns = outcome.columns();
    columns.push((
        "run twice (result repeated, same id)",
        run_twice.to_string(),
    ));
    columns.push((
        "longest fire to finish (time to recover)",
        millis_cell(longest_ms),
    ));
    Report {
        scenario,
        injected: format!(
            "{injected}, during {} jobs firing every second (runs of 300 ms)",
            options.jobs
        ),
        columns,
        lost: outcome.lost(),
        failures: Vec::new(),
        details,
    }
    .keeping_logs_on_failure(&stack.log_files())
}

/// Where the fires emitted and never completed are: how many have a result in the results
/// topic (run, but not recorded) and in which partitions they wait (not run).
async fn where_the_open_fires_are(
    outcome: &Outcome,
    results_per_id: &HashMap<&str, usize>,
    brokers: &str,
    prefix: &str,
) -> String {
    let placed: Vec<Placed<TriggerRecord>> =
        read_placed_records(brokers, &format!("{prefix}.triggers.{APP}"), PARTITIONS).await;
    let open: std::collections::HashSet<&str> =
        outcome.not_completed.iter().map(String::as_str).collect();
    let mut partitions: HashMap<i32, usize> = HashMap::new();
    for record in placed
        .iter()
        .filter(|placed| open.contains(placed.record.trigger_id.as_str()))
    {
        *partitions.entry(record.partition).or_default() += 1;
    }
    let with_result = open
        .iter()
        .filter(|id| results_per_id.contains_key(*id))
        .count();
    format!(
        "of those, {with_result} have a result in the results topic; by partition: \
         {partitions:?}"
    )
}
