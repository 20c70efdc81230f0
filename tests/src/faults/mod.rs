//! The fault harness behind `infra/faults.sh` (binary `faults`): each scenario starts real
//! parts of its own, injects one fault while jobs fire every second, and counts from the
//! trigger topic and the API, never from log lines: fires due, emitted, completed, emitted
//! twice (same trigger id), lost (must be 0), time to recover. (Lines serve only to check
//! that a scenario struck what it says: the executors' `owns` lines for a handover, Kafka's
//! log for the group protocol its executors joined by.) The book's fault runs page (`docs/src/measurements/faults.md`) lists
//! the scenarios with their latest figures.
//!
//! Brokers: most scenarios run on tansu (the development broker) behind a [`proxy`]; those
//! whose subject is Kafka's own behaviour (group handovers, broker failures) run on Apache
//! Kafka 4 ([`kafka`]), one node or a cluster of three, and are named `kafka-…`.
//!
//! - [`proxy`]: a TCP proxy the harness cuts, in front of the broker or the database;
//!   [`net`]: a free port, one value of a process's metrics;
//! - [`stack`]: `kadence serve` and executors as processes (of either group protocol), and
//!   [`api`]: the scheduler's API as a scenario calls it;
//! - [`kafka`]: Apache Kafka started, hurt and stopped through `infra/broker.sh`, and its
//!   partitions' leaders and in-sync replicas;
//! - [`broker_cut`]: the broker unreachable for a while (every connection cut);
//! - [`database_cut`]: the database unreachable for a while, with the misfire policies and the
//!   outage's report (log, `/health/ready`, metric) checked;
//!   `disk-full` is the same with the SQLite file's [`disk`] filled;
//! - [`steady`]: the load the executor and cluster faults strike (two executors, runs of
//!   300 ms) and what it counts beyond [`load`]: results repeated, the longest to finish;
//! - [`executor_faults`]: the executor faults on tansu and on Kafka (both group protocols):
//!   [`executor_hang`], an executor frozen past its session (on Kafka its partitions must be
//!   handed over), and [`rebalance_storm`], executors joining and leaving (on Kafka by
//!   kill -9 too); [`ownership`] reads which partitions each executor owns;
//! - [`cluster_faults`]: faults of a three-node Kafka cluster (the partition leader or the
//!   controller killed, a rolling restart, a node frozen), which [`node_faults`] injects;
//! - [`node_pause`]: one of two scheduler nodes frozen past its leases, then thawed;
//! - [`bridge_kill`]: one of two XXL-JOB bridges killed with `kill -9` while their XXL-JOB
//!   executors run fires, then started again, on Kafka; [`xxl_bridge`] starts the bridges and
//!   the executors as processes, [`bridge_load`] fires the bridges' app and counts it;
//! - [`hostile`]: malformed and hostile records on every topic, and [`abuse`]: abusive
//!   requests to the API;
//! - [`load`]: the end every scenario shares: stop, read the topic, wait for the runs, count;
//! - [`soak`]: a steady load for an hour, sampled every minute (not in the test command);
//! - [`postgres`]: a PostgreSQL database of a scenario's own.

pub mod abuse;
pub mod api;
pub mod bridge_kill;
pub mod bridge_load;
pub mod broker_cut;
pub mod cluster_faults;
pub mod database_cut;
pub mod disk;
pub mod executor_faults;
pub mod executor_hang;
pub mod hostile;
pub mod kafka;
pub mod load;
pub mod net;
pub mod node_faults;
pub mod node_pause;
pub mod ownership;
pub mod postgres;
pub mod proxy;
pub mod rebalance_storm;
pub mod soak;
pub mod stack;
pub mod steady;
pub mod xxl_bridge;

use std::time::Duration;

use stack::GroupProtocol;

/// Set (to anything) in the environment, every scenario keeps its processes' logs, passed
/// or not, and names them: for looking into how a fault played out.
pub const KEEP_LOGS: &str = "KADENCE_FAULTS_KEEP_LOGS";

/// The timeline and load of a scenario, `--name value` on the command line.
#[derive(Debug, Clone)]
pub struct Options {
    /// Jobs firing every second.
    pub jobs: usize,
    /// Steady load before the fault.
    pub before: Duration,
    /// How long the fault lasts.
    pub outage: Duration,
    /// Steady load after it.
    pub after: Duration,
    /// The executors' group protocol (`--group-protocol classic|consumer`), for the Kafka
    /// scenarios; `None`: each scenario's own choice (the executor faults run both).
    pub group_protocol: Option<GroupProtocol>,
}

impl Options {
    /// Parses `args` over `defaults`.
    pub fn parse(args: &[String], defaults: Options) -> Result<Options, String> {
        let mut options = defaults;
        let mut args = args.iter();
        while let Some(name) = args.next() {
            let value = args.next().ok_or_else(|| format!("{name} needs a value"))?;
            if name == "--group-protocol" {
                options.group_protocol = Some(GroupProtocol::parse(value)?);
                continue;
            }
            let number: u64 = value
                .parse()
                .map_err(|_| format!("{name} takes a whole number, not {value:?}"))?;
            match name.as_str() {
                "--jobs" => options.jobs = number.clamp(1, 10_000) as usize,
                "--before-secs" => options.before = Duration::from_secs(number),
                "--outage-secs" => options.outage = Duration::from_secs(number),
                "--after-secs" => options.after = Duration::from_secs(number),
                other => return Err(format!("unknown option {other}")),
            }
        }
        Ok(options)
    }
}

/// What a scenario found: its table, and how many fires it lost (the exit code's ground).
pub struct Report {
    /// The scenario's name.
    pub scenario: &'static str,
    /// What was injected, in words.
    pub injected: String,
    /// The table's columns: heading and value.
    pub columns: Vec<(&'static str, String)>,
    /// Fires lost: due and neither emitted nor skipped by their misfire strategy, or
    /// emitted and never completed. Must be 0.
    pub lost: usize,
    /// Other findings that fail the scenario (a policy applied wrongly, an outage not
    /// reported), empty when it passed.
    pub failures: Vec<String>,
    /// Lines that explain a failure (which fires, where the log is).
    pub details: Vec<String>,
}

impl Report {
    /// Prints the reports of one scenario: its name, what was injected and a Markdown table
    /// (as the book's fault runs page keeps it) with a row per report. A scenario of several faults or
    /// variants has a report each, led by a column naming it, and each injected line names
    /// its row (a table each should their columns differ).
    pub fn print_rows(reports: &[Report]) {
        let Some(first) = reports.first() else {
            return;
        };
        println!("scenario: {}", first.scenario);
        let mut heading_printed: Option<Vec<&str>> = None;
        for report in reports {
            let label = match reports.len() {
                1 => String::new(),
                _ => format!(
                    " ({})",
                    report.columns.first().map_or("", |(_, v)| v.as_str())
                ),
            };
            println!("injected{label}: {}", report.injected);
        }
        for report in reports {
            let headings: Vec<&str> = report.columns.iter().map(|(heading, _)| *heading).collect();
            if heading_printed.as_ref() != Some(&headings) {
                if heading_printed.is_some() {
                    println!();
                }
                println!("| {} |", headings.join(" | "));
                println!("|{}", "---|".repeat(headings.len()));
                heading_printed = Some(headings);
            }
            let values: Vec<&str> = (report.columns.iter())
                .map(|(_, value)| value.as_str())
                .collect();
            println!("| {} |", values.join(" | "));
        }
    }

    /// Removes `logs` (a stack's [`log_files`](stack::Stack::log_files)) when the scenario
    /// passed, unless [`KEEP_LOGS`] is set; names them in the details otherwise.
    pub fn keeping_logs_on_failure(mut self, logs: &[std::path::PathBuf]) -> Report {
        if self.passed() && std::env::var_os(KEEP_LOGS).is_none() {
            for log in logs {
                let _ = std::fs::remove_file(log);
            }
        } else {
            let names: Vec<String> = logs.iter().map(|log| log.display().to_string()).collect();
            self.details.push(format!("logs: {}", names.join(" ")));
        }
        self
    }

    /// Whether nothing was lost and nothing went wrong.
    pub fn passed(&self) -> bool {
        self.lost == 0 && self.failures.is_empty()
    }
}

/// `ms` as the tables show a time ("9870 ms"), or "—" when it never happened.
pub fn millis_cell(ms: Option<i64>) -> String {
    ms.map_or_else(|| "—".to_owned(), |ms| format!("{ms} ms"))
}
