//! `broker-cut`: the broker becomes unreachable during a steady load of fires: every
//! connection to it is cut and new ones are refused, then it answers again with everything
//! it had. The broker (tansu, memory storage) advertises a [`CuttableProxy`] in front of it,
//! so every client (scheduler and executor) goes through the proxy. To the clients this is a
//! broker restart: the same connection errors, the same reconnects. The broker's own restart
//! is not used because tansu 0.6 on SQLite storage fails every request after one
//! (`Storage(UnableToSend)` in its log, seen here).
//!
//! The scheduler keeps planning; its producer holds the records of the outage
//! (`message.timeout.ms` 30 s) and a fire it could not deliver stays pending and is emitted
//! again when its lease ends, under its own trigger id. Every fire due is expected in the
//! topic and completed.
//!
//! [`CuttableProxy`]: super::proxy::CuttableProxy

use std::time::Duration;

use super::load::{Outcome, due_in};
use super::proxy::ProxiedBroker;
use super::stack::{Stack, sqlite_url};
use super::{Options, Report, millis_cell};
use crate::now_ms;

/// The defaults: 30 jobs, 10 s before, 10 s away, 15 s after.
pub fn defaults() -> Options {
    Options {
        jobs: 30,
        before: Duration::from_secs(10),
        outage: Duration::from_secs(10),
        after: Duration::from_secs(15),
    }
}

/// Runs the scenario.
pub async fn run(options: &Options) -> Report {
    let broker = ProxiedBroker::start().await;
    let prefix = format!("kfaults{}", now_ms());
    let database = tempfile::tempdir().expect("a database directory");
    let database_url = sqlite_url(database.path());
    let stack = Stack::start(&database_url, &broker.address, &prefix).await;
    let jobs = stack
        .api
        .every_second_jobs(options.jobs, "DO_NOTHING")
        .await;
    // A started job's first fire comes 5 s after its start, as in XXL-JOB.
    let from_ms = now_ms() + 6_000;
    tokio::time::sleep(options.before).await;
    broker.proxy.cut();
    let cut_ms = now_ms();
    eprintln!("broker cut off for {:?}", options.outage);
    tokio::time::sleep(options.outage).await;
    broker.proxy.mend();
    let back_ms = now_ms();
    tokio::time::sleep(options.after).await;
    let window = (from_ms, now_ms());
    let outcome = Outcome::collect(&stack, &broker.address, &prefix, &jobs, window).await;
    // From the broker's return until every fire due while it was away had completed.
    let recovered_after_ms = outcome
        .succeeded
        .iter()
        .filter(|(id, _)| outcome.emitted.contains_key(*id) && due_in(id, cut_ms..back_ms))
        .map(|(_, finished)| finished - back_ms)
        .max();
    let mut columns = outcome.columns();
    columns.push(("misfires", outcome.audit.misfires.to_string()));
    columns.push(("time to recover", millis_cell(recovered_after_ms)));
    Report {
        scenario: "broker-cut",
        injected: format!(
            "every connection to the broker cut and new ones refused for {} s, during {} jobs \
             firing every second",
            options.outage.as_secs(),
            options.jobs
        ),
        columns,
        lost: outcome.lost(),
        failures: Vec::new(),
        details: outcome.lost_details(),
    }
    .keeping_logs_on_failure(&stack.log_files())
}
