//! `node-pause`: one of two scheduler nodes on one PostgreSQL database is frozen (SIGSTOP)
//! for longer than its shard lease and its fires' lease, during a steady load of fires, then
//! thawed (SIGCONT). A paused node is the worst kind of partition: it does not know it was
//! away, and wakes with its wheel full of fires it believes it owns.
//!
//! What must hold: the other node takes the paused node's shards and its pending fires and
//! emits them under their own trigger ids; when the paused node wakes, its late emissions are
//! only repeats of the same ids (executors recognise them) and its late writes undo nothing:
//! every fire due is emitted and completed once in the runs, none is missing.

use std::time::Duration;

use super::load::{Outcome, due_in, scheduled_ms};
use super::postgres::ScenarioDatabase;
use super::proxy::ProxiedBroker;
use super::stack::{Stack, signal};
use super::{Options, Report, millis_cell};
use crate::now_ms;

/// The defaults: 30 jobs, 15 s before (the two nodes share the shards by then), 20 s paused
/// (shard lease 5 s, fire lease 10 s), 15 s after.
pub fn defaults() -> Options {
    Options {
        jobs: 30,
        before: Duration::from_secs(15),
        outage: Duration::from_secs(20),
        after: Duration::from_secs(15),
        group_protocol: None,
    }
}

/// Runs the scenario.
pub async fn run(options: &Options) -> Report {
    let database = ScenarioDatabase::create().await;
    let broker = ProxiedBroker::start().await;
    let prefix = crate::unique("kfaults");
    let mut stack = Stack::start(&database.url(), &broker.address, &prefix).await;
    let paused = stack.add_node().await;
    let jobs = stack
        .api
        .every_second_jobs(options.jobs, "DO_NOTHING")
        .await;
    let from_ms = now_ms() + 6_000;
    tokio::time::sleep(options.before).await;
    signal(stack.node_pid(paused), "STOP");
    let stopped_ms = now_ms();
    eprintln!("node {paused} paused for {:?}", options.outage);
    tokio::time::sleep(options.outage).await;
    signal(stack.node_pid(paused), "CONT");
    let resumed_ms = now_ms();
    tokio::time::sleep(options.after).await;
    let window = (from_ms, now_ms());
    let outcome = Outcome::collect(&stack, &broker.address, &prefix, &jobs, window).await;
    // The longest a fire due during the pause waited for its first emission.
    let longest_delay_ms = outcome
        .emitted
        .iter()
        .filter(|(id, _)| due_in(id, stopped_ms..resumed_ms))
        .filter_map(|(id, emitted)| {
            let scheduled = scheduled_ms(id)?;
            Some(emitted - scheduled)
        })
        .max();
    let mut failures = Vec::new();
    if !outcome.audit.malformed.is_empty() {
        failures.push(format!(
            "trigger ids not of their fire: {:?}",
            outcome.audit.malformed
        ));
    }
    let mut columns = outcome.columns();
    columns.push(("misfires", outcome.audit.misfires.to_string()));
    columns.push((
        "longest fire delay (time to recover)",
        millis_cell(longest_delay_ms),
    ));
    let report = Report {
        scenario: "node-pause",
        injected: format!(
            "one of two scheduler nodes (PostgreSQL) frozen with SIGSTOP for {} s, then \
             SIGCONT, during {} jobs firing every second",
            options.outage.as_secs(),
            options.jobs
        ),
        columns,
        lost: outcome.lost(),
        failures,
        details: outcome.lost_details(),
    }
    .keeping_logs_on_failure(&stack.log_files());
    drop(stack);
    database.drop_it().await;
    report
}
