//! Kadence under injected faults: runs one scenario of [`kadence_tests::faults`] and prints
//! what it counted; exits non-zero when a fire was lost or the scenario found something
//! wrong. `infra/faults.sh` builds and runs it; see the README's "Faults" section.
//!
//! ```text
//! faults SCENARIO [--jobs N] [--before-secs S] [--outage-secs S] [--after-secs S]
//! ```

use std::process::ExitCode;

use kadence_tests::faults::{
    Options, Report, broker_cut, database_cut, executor_faults, handover, hostile, node_pause, soak,
};

const SCENARIOS: &str = "broker-cut, broker-restart, database-cut, disk-full, node-pause, executor-hang, executor-handover, rebalance-storm, hostile-input, soak";

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((scenario, rest)) = args.split_first() else {
        eprintln!(
            "usage: faults SCENARIO [--jobs N] [--before-secs S] [--outage-secs S] \
             [--after-secs S]\nscenarios: {SCENARIOS}"
        );
        return ExitCode::from(2);
    };
    let defaults = match scenario.as_str() {
        "broker-cut" | "broker-restart" => broker_cut::defaults(),
        "database-cut" | "disk-full" => database_cut::defaults(),
        "node-pause" => node_pause::defaults(),
        "executor-hang" => executor_faults::hang_defaults(),
        "executor-handover" => handover::defaults(),
        "rebalance-storm" => executor_faults::storm_defaults(),
        "hostile-input" => hostile::defaults(),
        "soak" => soak::defaults(),
        other => {
            eprintln!("error: unknown scenario {other} ({SCENARIOS})");
            return ExitCode::from(2);
        }
    };
    let options = match Options::parse(rest, defaults) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let report: Report = match scenario.as_str() {
        "broker-cut" => broker_cut::run(&options).await,
        "broker-restart" => broker_cut::run_restart(&options).await,
        "database-cut" => database_cut::run(&options).await,
        "disk-full" => database_cut::run_disk_full(&options).await,
        "node-pause" => node_pause::run(&options).await,
        "executor-hang" => executor_faults::run_hang(&options).await,
        "executor-handover" => handover::run(&options).await,
        "rebalance-storm" => executor_faults::run_storm(&options).await,
        "hostile-input" => hostile::run(&options).await,
        _ => soak::run(&options).await,
    };
    report.print();
    for line in &report.details {
        eprintln!("{line}");
    }
    if report.passed() {
        return ExitCode::SUCCESS;
    }
    eprintln!("LOST: {} fires", report.lost);
    for failure in &report.failures {
        eprintln!("FAILED: {failure}");
    }
    ExitCode::FAILURE
}
