//! The executor conformance suite: the contract of `schemas/PROTOCOL.md`, run against every
//! executor implementation as a separate process — the Rust SDK's `test-executor`, the
//! reference Python executor (`executors/python`, its `kadence_executor.demo`) and the Java
//! SDK's test executor (`executors/java`, `io.kadence.executor.demo.TestExecutor`) — with a
//! real scheduler (in this process, on SQLite), the real broker, and the same scenario code.
//!
//! Each scenario is an `async fn(Implementation)`; `on_every_executor!` makes it three tests,
//! `conformance::<file>::rust::<name>`, `conformance::<file>::python::<name>` and
//! `conformance::<file>::java::<name>`. The Python tests need `KADENCE_TEST_PYTHON_EXECUTOR`, a
//! Python with the package installed (`infra/python-executor.sh` makes one), the Java tests
//! `KADENCE_TEST_JAVA_EXECUTOR`, the command that starts the Java test executor
//! (`infra/java-executor.sh` builds it and prints the command); `infra/test.sh` sets both.
//!
//! - `process`: an executor process, its output read line by line (`started <trigger id>`
//!   as each run begins).
//! - `runs`: cron and manual runs, failures and their messages, timeouts, job logs, sharding
//!   broadcast, early triggers held to their millisecond, dead letters, a signed BACKFILL
//!   trigger (`TriggerRecord` v2, schema id 1002), and a trigger past its validity window
//!   (v3, 1003) dead-lettered as expired while one within it runs.
//! - `logs`: a run of 1 000 lines of 4 000 bytes shipped in records of at most 256 KiB of
//!   line text, a short run's lines shipped in one record, every line on `{p}.logs` when the
//!   result appears on `{p}.results`, and a
//!   trigger run twice (handed back in a rebalance) showing the log of the run that finished.
//! - `rounds`: triggers signed by the round, from the scheduler and by hand (two rounds
//!   interleaved and reversed) all run; one moved to another partition, one with a changed
//!   path, one with a changed round signature and a round signed by an untrusted (retired)
//!   key are refused with the protocol's reasons.
//! - `intake`: the order of the checks on a received trigger (signature, value, framing,
//!   decoding) told by the reasons of the records refused, and dead letters that keep the
//!   original's headers.
//! - `blocking`: the four block strategies, KILL of running and queued runs, and a KILL sent
//!   while no executor is up.
//! - `scripts`: a script job as the protocol specifies it (interpreter, arguments, log lines,
//!   exit code) on an executor that runs scripts, and the refusal on one that runs none.
//! - `traces`: one run is one trace: the result carries the `traceparent` of its trigger's
//!   trace (checked through the spans the scheduler and the Rust executor export).
//! - `lifecycle`: a graceful stop mid-run, kill -9 mid-run with redelivery, resuming at a
//!   committed offset inside a record batch, and a mixed group
//!   (a Rust, a Python and a Java executor in one app) where every trigger runs exactly once,
//!   under either group protocol (the consumer protocol on Apache Kafka only).
//! - `shadow`: a shadow executor beside a production one: its results on
//!   `{p}.shadow-results` only, production completing the runs, no beats, logs or dead
//!   letters from the shadow, nothing run from before its start.

/// Expands each named `async fn name(executor: Implementation)` into three tests,
/// `rust::name`, `python::name` and `java::name`, each under a
/// [`Watchdog`](kadence_tests::fixtures::Watchdog).
macro_rules! on_every_executor {
    ($($test:ident),* $(,)?) => {
        executor_tests!(rust, Rust, $($test),*);
        executor_tests!(python, Python, $($test),*);
        executor_tests!(java, Java, $($test),*);
    };
}

/// The module `$module` of tests, one per named scenario, each run against
/// `Implementation::$implementation`.
macro_rules! executor_tests {
    ($module:ident, $implementation:ident, $($test:ident),*) => {
        mod $module {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                let _watchdog = kadence_tests::fixtures::Watchdog::arm(concat!(module_path!(), "::", stringify!($test)));
                super::$test(crate::conformance::Implementation::$implementation).await
            })*
        }
    };
}

// After the macros: a module sees the macros defined before its declaration.
mod blocking;
mod intake;
mod lifecycle;
mod logs;
pub(crate) mod process;
mod rounds;
mod runs;
mod scripts;
mod shadow;
mod traces;

pub use process::{ExecutorProcess, Implementation};

use std::time::Duration;

use kadence_scheduler::domain::model::Run;

use crate::helpers::{TestApp, spawn_app};
use kadence_tests::fixtures::{Backend, wait_for};

/// A scheduler on SQLite with the app `app_name` of `partitions` partitions, and one executor
/// process of `implementation` (id `{app_name}-1`) that owns them all.
async fn stage(
    implementation: Implementation,
    app_name: &str,
    partitions: i32,
) -> (TestApp, ExecutorProcess) {
    let app = spawn_app(Backend::Sqlite).await;
    let executor = start_owner(implementation, &app, app_name, partitions).await;
    (app, executor)
}

/// Creates `app_name` with `partitions` partitions under `app` and starts one executor that
/// owns them all.
async fn start_owner(
    implementation: Implementation,
    app: &TestApp,
    app_name: &str,
    partitions: i32,
) -> ExecutorProcess {
    app.create_app(app_name, partitions).await;
    let executor_id = format!("{app_name}-1");
    let executor = ExecutorProcess::start(implementation, app, app_name, &executor_id).await;
    app.wait_for_executors(app_name, 1, partitions).await;
    executor
}

/// Waits until `job` has at least `count` runs and every one has a result; returns them.
async fn results(app: &TestApp, job: i64, count: usize) -> Vec<Run> {
    let what = format!("{count} results of job {job}");
    runs_all(app, job, count, &what, |run| run.handle_code.is_some()).await
}

/// [`results`], each run's dispatch mark written too (its partition): a quick handler's
/// result often comes before the mark, which waits for the acknowledgement writer's linger.
async fn dispatched_results(app: &TestApp, job: i64, count: usize) -> Vec<Run> {
    let what = format!("{count} results of job {job}, with their partitions");
    runs_all(app, job, count, &what, |run| {
        run.handle_code.is_some() && run.partition.is_some()
    })
    .await
}

/// Waits until `job` has at least `count` runs and every one is `done`; returns them.
async fn runs_all(
    app: &TestApp,
    job: i64,
    count: usize,
    what: &str,
    done: impl Fn(&Run) -> bool,
) -> Vec<Run> {
    wait_for(Duration::from_secs(60), what, || async {
        let runs = app.runs(job).await;
        (runs.len() >= count && runs.iter().all(&done)).then_some(runs)
    })
    .await
}

/// Waits until `job` (scheduled, so it may have runs under way) has at least `count` runs
/// with a result; returns those.
async fn finished_results(app: &TestApp, job: i64, count: usize) -> Vec<Run> {
    wait_for(
        Duration::from_secs(60),
        &format!("{count} results of job {job}"),
        || async {
            let finished: Vec<Run> = app
                .runs(job)
                .await
                .into_iter()
                .filter(|run| run.handle_code.is_some())
                .collect();
            (finished.len() >= count).then_some(finished)
        },
    )
    .await
}

/// The run of `trigger_id` among `runs`.
fn run_of<'a>(runs: &'a [Run], trigger_id: &str) -> &'a Run {
    runs.iter()
        .find(|run| run.trigger_id.as_str() == trigger_id)
        .unwrap_or_else(|| panic!("no run {trigger_id} among {runs:?}"))
}
