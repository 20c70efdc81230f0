//! Kadence under injected faults: runs one scenario of [`kadence_tests::faults`] and prints
//! what it counted; exits non-zero when a fire was lost or the scenario found something
//! wrong. `infra/faults.sh` builds and runs it; see the book's fault runs page, `docs/src/measurements/faults.md`.
//!
//! ```text
//! faults SCENARIO [--jobs N] [--before-secs S] [--outage-secs S] [--after-secs S]
//!                 [--group-protocol classic|consumer]
//! ```
//!
//! `--group-protocol` is for the `kafka-…` scenarios: the executor faults run both protocols
//! side by side unless it names one; the cluster faults run classic unless it says otherwise;
//! `kafka-bridge-kill` runs classic only (the bridge has no setting for the other).

use std::process::ExitCode;

use kadence_tests::faults::cluster_faults::{self, ClusterFault};
use kadence_tests::faults::stack::GroupProtocol;
use kadence_tests::faults::{
    Options, Report, bridge_kill, broker_cut, database_cut, executor_faults, hostile, node_pause,
    soak,
};

const SCENARIOS: &str = "broker-cut, broker-restart, database-cut, disk-full, node-pause, \
    executor-hang, rebalance-storm, hostile-input, soak; on Apache Kafka: kafka-executor-hang, \
    kafka-rebalance-storm, kafka-cluster (the four below in turn on one cluster), \
    kafka-leader-kill, kafka-controller-kill, kafka-broker-freeze, kafka-rolling-restart, \
    kafka-bridge-kill";

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((scenario, rest)) = args.split_first() else {
        eprintln!(
            "usage: faults SCENARIO [--jobs N] [--before-secs S] [--outage-secs S] \
             [--after-secs S] [--group-protocol classic|consumer]\nscenarios: {SCENARIOS}"
        );
        return ExitCode::from(2);
    };
    let scenario = scenario.as_str();
    let defaults = match scenario {
        "broker-cut" | "broker-restart" => broker_cut::defaults(),
        "database-cut" | "disk-full" => database_cut::defaults(),
        "node-pause" => node_pause::defaults(),
        "executor-hang" | "kafka-executor-hang" => executor_faults::hang_defaults(),
        "rebalance-storm" | "kafka-rebalance-storm" => executor_faults::storm_defaults(),
        "hostile-input" => hostile::defaults(),
        "soak" => soak::defaults(),
        "kafka-cluster" => cluster_faults::defaults(),
        "kafka-bridge-kill" => bridge_kill::defaults(),
        other if ClusterFault::of_scenario(other).is_some() => cluster_faults::defaults(),
        other => {
            eprintln!("error: unknown scenario {other} ({SCENARIOS})");
            return ExitCode::from(2);
        }
    };
    let options = match Options::parse(rest, defaults) {
        Ok(options) if options.group_protocol.is_some() && !scenario.starts_with("kafka-") => {
            eprintln!(
                "error: --group-protocol is for the kafka-… scenarios (tansu has classic groups only)"
            );
            return ExitCode::from(2);
        }
        Ok(options)
            if scenario == "kafka-bridge-kill"
                && options.group_protocol == Some(GroupProtocol::Consumer) =>
        {
            eprintln!(
                "error: kafka-bridge-kill runs the classic group protocol only (the bridge has \
                 no setting for the other)"
            );
            return ExitCode::from(2);
        }
        Ok(options) => options,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let reports = run(scenario, &options).await;
    Report::print_rows(&reports);
    let mut passed = true;
    for report in &reports {
        for line in &report.details {
            eprintln!("{line}");
        }
        if report.passed() {
            continue;
        }
        passed = false;
        if report.lost > 0 {
            eprintln!("LOST: {} fires", report.lost);
        }
        for failure in &report.failures {
            eprintln!("FAILED: {failure}");
        }
    }
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs `scenario` (a known one): a report per row of its table.
async fn run(scenario: &str, options: &Options) -> Vec<Report> {
    let report = match scenario {
        "broker-cut" => broker_cut::run(options).await,
        "broker-restart" => broker_cut::run_restart(options).await,
        "database-cut" => database_cut::run(options).await,
        "disk-full" => database_cut::run_disk_full(options).await,
        "node-pause" => node_pause::run(options).await,
        "executor-hang" => executor_faults::run_hang(options).await,
        "rebalance-storm" => executor_faults::run_storm(options).await,
        "hostile-input" => hostile::run(options).await,
        "soak" => soak::run(options).await,
        "kafka-bridge-kill" => bridge_kill::run(options).await,
        "kafka-executor-hang" => return executor_faults::run_kafka_hang(options).await,
        "kafka-rebalance-storm" => return executor_faults::run_kafka_storm(options).await,
        "kafka-cluster" => return cluster_faults::run_all(options).await,
        other => {
            let fault = ClusterFault::of_scenario(other).expect("a known scenario");
            return cluster_faults::run_one(fault, options).await;
        }
    };
    vec![report]
}
