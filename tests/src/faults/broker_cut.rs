//! The broker goes away during a steady load of fires, then comes back with everything it
//! had:
//! - `broker-cut`: every connection to it is cut and new ones are refused (memory storage);
//!   to the clients this is what a restart looks like: the same connection errors, the
//!   same reconnects;
//! - `broker-restart`: the broker itself stopped (SIGTERM) and started again on the same
//!   port and its SQLite storage, which keeps topics, offsets and groups.
//!
//! The broker (tansu) advertises a [`CuttableProxy`] in front of it, so every client
//! (scheduler and executor) goes through the proxy, which also refuses connections while a
//! restarted broker is down. The scheduler keeps planning; its producer holds the records
//! of the outage (`message.timeout.ms` 30 s) and a fire it could not deliver stays pending
//! and is emitted again when its lease ends, under its own trigger id. Every fire due is
//! expected in the topic and completed.
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
        group_protocol: None,
    }
}

/// Runs `broker-cut`.
pub async fn run(options: &Options) -> Report {
    run_one(options, false).await
}

/// Runs `broker-restart`.
pub async fn run_restart(options: &Options) -> Report {
    run_one(options, true).await
}

async fn run_one(options: &Options, restart: bool) -> Report {
    let mut broker = if restart {
        ProxiedBroker::start_on_sqlite().await
    } else {
        ProxiedBroker::start().await
    };
    let prefix = crate::unique("kfaults");
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
    let cut_ms = now_ms();
    if restart {
        eprintln!("broker stopped for {:?}", options.outage);
        broker.restart(options.outage).await;
    } else {
        eprintln!("broker cut off for {:?}", options.outage);
        broker.proxy.cut();
        tokio::time::sleep(options.outage).await;
        broker.proxy.mend();
    }
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
        scenario: if restart {
            "broker-restart"
        } else {
            "broker-cut"
        },
        injected: if restart {
            format!(
                "the broker (SQLite storage) stopped with SIGTERM, started again {} s later, \
                 during {} jobs firing every second",
                options.outage.as_secs(),
                options.jobs
            )
        } else {
            format!(
                "every connection to the broker cut and new ones refused for {} s, during {} \
                 jobs firing every second",
                options.outage.as_secs(),
                options.jobs
            )
        },
        columns,
        lost: outcome.lost(),
        failures: Vec::new(),
        details: outcome.lost_details(),
    }
    .keeping_logs_on_failure(&stack.log_files())
}
