//! End-to-end benchmark: jobs due every second, from the scheduler's plan to the handler's
//! start on real executor processes and back to the scheduler's store.
//!
//! ```text
//! infra/bench.sh --bench end_to_end                 # starts a broker, runs the defaults
//! KADENCE_BENCH_BROKERS=127.0.0.1:9092 cargo bench -p kadence-scheduler --bench end_to_end -- \
//!     --jobs 1000,5000,10000 --routes consistent_hash,first --backends sqlite,postgres --seconds 10
//! ```
//!
//! For each backend, route strategy and job count it loads the jobs straight into a fresh
//! database (cron `* * * * * ?`, SERIAL_EXECUTION, the handler `noop`, routed over 6
//! partitions), runs `kadence serve` (release build, its default emit lead of 1 s) and
//! `--executors` (2) processes of `tests/src/bin/test-executor.rs` (release build; `noop`
//! returns at once and prints nothing), waits until the group has given every executor its
//! partitions, then lets the jobs fire. After a warm-up it measures for `--seconds` the fires
//! scheduled in that window:
//! - **handler start lateness** = the result's start time − scheduled time (the executor
//!   stamps the start just before it calls the handler), p50 / p99 / max, from the results
//!   the executors published (read back from the results topic at the end, first per trigger
//!   id: the executors' side, whatever the scheduler made of them); **not run**: fires of the
//!   window without a published result;
//! - **recorded ≤ 1 s**: the share of the window's fires whose result was in the store at
//!   most a second after the run ended (a column and a row trigger the benchmark adds to its
//!   own database stamp the moment the scheduler writes the result; it costs the database a
//!   few microseconds per result); **not recorded**: fires of the window without a result in
//!   the store two seconds after the window, while everything still runs;
//! - **at broker p99**: the broker's acknowledgement of the trigger − scheduled time
//!   (`dispatched_at_ms − scheduled_at_ms`, written by the scheduler), negative when the
//!   trigger is at the broker ahead of its time: a start late by more than this lateness is
//!   the executor's;
//! - **executor CPU**: user + system time of the executor processes over the window (from
//!   `/proc`), as a share of one core and per 1 000 runs started in the window; the
//!   scheduler's, the broker's (`tansu` processes) and PostgreSQL's (`postgres` processes,
//!   any database's) beside it; and how busy the whole machine was (all cores, anyone's
//!   work, whatever else runs too).
//!
//! CONSISTENT_HASH spreads the jobs over the 6 partitions, so over both executors; FIRST
//! puts every trigger on partition 0, so one executor runs them all.
//!
//! `--executor-bin PATH` runs another build of the test executor (e.g. one built from an
//! older commit, to compare SDKs; a relative path is taken from the repository's root);
//! without it the benchmark builds this tree's
//! (`cargo build --release -p kadence-tests --bin test-executor`) and runs that.
//! `KADENCE_BENCH_LOG` sets the scheduler's log filter (default `warn,sqlx=error`).

mod common;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use common::{
    APP, Backend, Database, JobLoad, PARTITIONS, Serve, clock_ticks_per_second, flags,
    load_jobs_with, now_ms, parse_numbers, percentile, process_usage, set_first_fire,
    sleep_until_ms,
};
use kadence_schemas::{ResultRecord, Topics};
use kadence_tests::triggers::read_records;
use tokio::process::{Child, Command};

/// From the first fire to the window: the first seconds' backlog is gone.
const WARM_UP: Duration = Duration::from_secs(5);
/// After the window, before the results are read: what is not recorded by then is missing.
const GRACE: Duration = Duration::from_secs(2);
/// Not due before 2099: the jobs wait until the executors own their partitions.
const LATER_MS: i64 = 4_070_908_800_000;
/// Partitions of the results topic (the scheduler's default `kafka.results_partitions`).
const RESULTS_PARTITIONS: i32 = 6;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Route {
    ConsistentHash,
    First,
}

impl Route {
    fn parse_list(list: &str) -> Vec<Route> {
        list.split(',')
            .map(|item| match item.trim().to_ascii_lowercase().as_str() {
                "consistent_hash" => Route::ConsistentHash,
                "first" => Route::First,
                other => panic!("--routes takes consistent_hash and first, not {other}"),
            })
            .collect()
    }

    fn symbol(self) -> &'static str {
        match self {
            Route::ConsistentHash => "CONSISTENT_HASH",
            Route::First => "FIRST",
        }
    }
}

struct Options {
    jobs: Vec<usize>,
    routes: Vec<Route>,
    backends: Vec<Backend>,
    seconds: u64,
    executors: usize,
    executor_bin: Option<PathBuf>,
}

fn options() -> Options {
    let mut options = Options {
        jobs: vec![1_000, 5_000, 10_000],
        routes: vec![Route::ConsistentHash, Route::First],
        backends: vec![Backend::Sqlite, Backend::Postgres],
        seconds: 10,
        executors: 2,
        executor_bin: None,
    };
    for (flag, value) in flags() {
        match flag.as_str() {
            "--jobs" => options.jobs = parse_numbers(&flag, &value),
            "--routes" => options.routes = Route::parse_list(&value),
            "--backends" => options.backends = Backend::parse_list(&value),
            "--seconds" => options.seconds = value.parse().expect("--seconds N"),
            "--executors" => options.executors = value.parse().expect("--executors N"),
            "--executor-bin" => options.executor_bin = Some(repository_path(&value)),
            other => panic!("unknown option {other}"),
        }
    }
    options
}

/// `path` as given, or relative to the repository's root (where `infra/bench.sh` runs):
/// `cargo bench` runs a benchmark in its package's directory.
fn repository_path(path: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = root.join(path);
    assert!(path.exists(), "{} does not exist", path.display());
    path
}

/// This tree's test executor, built (release) if it is not up to date.
fn build_test_executor() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = std::process::Command::new(cargo)
        .args(["build", "--release", "--locked", "-p", "kadence-tests"])
        .args(["--bin", "test-executor"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build of the test executor failed");
    // Beside the scheduler's binary: both are release builds of this workspace.
    PathBuf::from(env!("CARGO_BIN_EXE_kadence")).with_file_name("test-executor")
}

/// Adds `bench_recorded_at_ms` to `job_logs`, set by a row trigger to the wall clock (ms)
/// when a run's result is written: the moment the result reached the store.
async fn stamp_recorded_results(database: &Database, backend: Backend) {
    let sql = match backend {
        Backend::Postgres => {
            "ALTER TABLE job_logs ADD COLUMN bench_recorded_at_ms BIGINT;
             CREATE FUNCTION bench_recorded() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 NEW.bench_recorded_at_ms := (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER bench_recorded BEFORE UPDATE ON job_logs FOR EACH ROW
             WHEN (OLD.handle_code IS NULL AND NEW.handle_code IS NOT NULL)
             EXECUTE FUNCTION bench_recorded();"
        }
        Backend::Sqlite => {
            "ALTER TABLE job_logs ADD COLUMN bench_recorded_at_ms INTEGER;
             CREATE TRIGGER bench_recorded AFTER UPDATE OF handle_code ON job_logs
             WHEN OLD.handle_code IS NULL AND NEW.handle_code IS NOT NULL
             BEGIN
                 UPDATE job_logs
                 SET bench_recorded_at_ms = CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
                 WHERE id = NEW.id;
             END;"
        }
    };
    database.execute(sql).await;
}

/// The executor processes of one run.
struct Executors {
    children: Vec<Child>,
}

impl Executors {
    /// Starts `count` test executors of [`APP`] on the scheduler's topic prefix.
    fn start(binary: &PathBuf, count: usize, prefix: &str) -> Executors {
        let children = (0..count)
            .map(|n| {
                Command::new(binary)
                    .env("KADENCE_BROKERS", common::brokers())
                    .env("KADENCE_APP", APP)
                    .env("KADENCE_TOPIC_PREFIX", prefix)
                    .env("KADENCE_EXECUTOR_ID", format!("bench-executor-{n}"))
                    .stdout(Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .unwrap_or_else(|error| panic!("start {}: {error}", binary.display()))
            })
            .collect();
        Executors { children }
    }

    fn pids(&self) -> Vec<u32> {
        self.children.iter().filter_map(Child::id).collect()
    }

    /// CPU ticks of every executor so far.
    fn ticks(&self) -> u64 {
        self.pids()
            .into_iter()
            .filter_map(process_usage)
            .map(|(ticks, _)| ticks)
            .sum()
    }

    /// SIGTERM to each, then waits for their graceful stops (at most 30 s).
    async fn stop(mut self) {
        for pid in self.pids() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
        for child in &mut self.children {
            let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
        }
    }
}

/// Waits (at most a minute) until `count` executors of [`APP`] beat with partitions, as the
/// scheduler's registry records them.
async fn wait_for_partitions(database: &Database, count: usize) {
    let deadline = now_ms() + 60_000;
    loop {
        let owning = database
            .integers(
                &format!(
                    "SELECT COUNT(*) FROM executors WHERE app = '{APP}' AND state = 'RUNNING' \
                     AND owned_partitions <> ''"
                ),
                &[],
            )
            .await[0][0];
        if owning >= count as i64 {
            return;
        }
        assert!(
            now_ms() < deadline,
            "only {owning} of {count} executors own partitions after a minute"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

struct Measurement {
    backend: Backend,
    route: Route,
    jobs: usize,
    /// Fires of the window: jobs × seconds.
    expected: usize,
    /// `started_at_ms − scheduled_at_ms` of every fire of the window the executors answered
    /// (first result per trigger id, from the results topic), sorted.
    lateness: Vec<i64>,
    /// Fires of the window whose result the store holds two seconds after the window.
    recorded: usize,
    /// Of those, recorded at most a second after the run ended.
    within_second: usize,
    /// Runs the executors started during the window (any fire).
    started_in_window: usize,
    /// Broker acknowledgement − scheduled time of the window's fires (negative: at the
    /// broker ahead of time), sorted.
    emitted: Vec<i64>,
    /// Share of the machine's CPU time (all cores) busy over the window, anyone's.
    machine_busy: f64,
    /// CPU seconds over the window of the broker's and PostgreSQL's processes.
    broker_cpu_seconds: f64,
    database_cpu_seconds: f64,
    executor_cpu_seconds: f64,
    scheduler_cpu_seconds: f64,
}

/// `(trigger id, scheduled ms)` of a scheduled fire's trigger id `{job}-{scheduled ms}`.
fn scheduled_ms(trigger_id: &str) -> Option<i64> {
    trigger_id.split_once('-')?.1.parse().ok()
}

/// The results the executors published, first per trigger id: `(scheduled ms, started ms)`.
async fn published_starts(prefix: &str) -> Vec<(i64, i64)> {
    let topic = Topics::new(prefix).expect("the prefix is valid").results();
    let results: Vec<ResultRecord> =
        read_records(&common::brokers(), &topic, RESULTS_PARTITIONS).await;
    let mut seen = HashSet::new();
    results
        .into_iter()
        .filter(|result| seen.insert(result.trigger_id.clone()))
        .filter_map(|result| {
            Some((
                scheduled_ms(result.trigger_id.as_str())?,
                result.started_at_ms,
            ))
        })
        .collect()
}

async fn run_one(
    options: &Options,
    executor_bin: &PathBuf,
    (backend, route, jobs): (Backend, Route, usize),
) -> Measurement {
    let database = Database::create(backend).await;
    stamp_recorded_results(&database, backend).await;
    let load = JobLoad {
        due: jobs,
        idle: 0,
        route: route.symbol(),
        handler: "noop",
    };
    load_jobs_with(&database, &load, LATER_MS, now_ms()).await;
    let serve = Serve::start(
        &database,
        &[("KADENCE_SCHEDULE__BATCH_SIZE", "5000".to_owned())],
    )
    .await;
    let executors = Executors::start(executor_bin, options.executors, &serve.prefix);
    wait_for_partitions(&database, options.executors).await;
    let first_fire = set_first_fire(&database, Duration::from_secs(3)).await;
    let window_start = first_fire + WARM_UP.as_millis() as i64;
    let window_end = window_start + options.seconds as i64 * 1000;
    sleep_until_ms(window_start).await;
    let scheduler_pid = serve.pid();
    let ticks_start = (
        executors.ticks(),
        process_usage(scheduler_pid).unwrap_or_default().0,
    );
    let machine_start = machine_ticks();
    let others_start = (ticks_of_named("tansu"), ticks_of_named("postgres"));
    sleep_until_ms(window_end).await;
    let ticks_end = (
        executors.ticks(),
        process_usage(scheduler_pid).unwrap_or_default().0,
    );
    let machine_end = machine_ticks();
    let others_end = (ticks_of_named("tansu"), ticks_of_named("postgres"));
    tokio::time::sleep(GRACE).await;
    let stored = database
        .integers(
            "SELECT handle_at_ms, bench_recorded_at_ms FROM job_logs \
             WHERE scheduled_at_ms >= $1 AND scheduled_at_ms < $2 AND handle_code IS NOT NULL",
            &[window_start, window_end],
        )
        .await;
    let mut emitted: Vec<i64> = database
        .integers(
            "SELECT dispatched_at_ms - scheduled_at_ms FROM job_logs \
             WHERE scheduled_at_ms >= $1 AND scheduled_at_ms < $2 AND dispatched_at_ms IS NOT NULL",
            &[window_start, window_end],
        )
        .await
        .into_iter()
        .map(|row| row[0])
        .collect();
    emitted.sort_unstable();
    let prefix = serve.prefix.clone();
    executors.stop().await;
    serve.stop().await;
    database.drop().await;
    let starts = published_starts(&prefix).await;
    let in_window = |ms: i64| (window_start..window_end).contains(&ms);
    let mut lateness: Vec<i64> = starts
        .iter()
        .filter(|(scheduled, _)| in_window(*scheduled))
        .map(|(scheduled, started)| started - scheduled)
        .collect();
    lateness.sort_unstable();
    let seconds_of = |ticks: u64| ticks as f64 / clock_ticks_per_second();
    Measurement {
        backend,
        route,
        jobs,
        expected: jobs * options.seconds as usize,
        lateness,
        recorded: stored.len(),
        within_second: stored.iter().filter(|row| row[1] - row[0] <= 1_000).count(),
        started_in_window: starts
            .iter()
            .filter(|(_, started)| in_window(*started))
            .count(),
        executor_cpu_seconds: seconds_of(ticks_end.0 - ticks_start.0),
        scheduler_cpu_seconds: seconds_of(ticks_end.1 - ticks_start.1),
        emitted,
        machine_busy: (machine_end.0 - machine_start.0) as f64
            / (machine_end.1 - machine_start.1).max(1) as f64,
        broker_cpu_seconds: seconds_of(ticks_between(&others_start.0, &others_end.0)),
        database_cpu_seconds: seconds_of(ticks_between(&others_start.1, &others_end.1)),
    }
}

/// CPU ticks so far of every process whose command is `name` (the broker, `tansu`; the
/// database's, `postgres`), by process id, from `/proc`.
fn ticks_of_named(name: &str) -> HashMap<u32, u64> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == name)
        })
        .filter_map(|pid| Some((pid, process_usage(pid)?.0)))
        .collect()
}

/// Ticks spent between two readings of [`ticks_of_named`]: processes that started meanwhile
/// count whole, those that ended meanwhile not at all (a database connection closed during
/// the window; the scheduler keeps its own open).
fn ticks_between(start: &HashMap<u32, u64>, end: &HashMap<u32, u64>) -> u64 {
    end.iter()
        .map(|(pid, ticks)| ticks.saturating_sub(start.get(pid).copied().unwrap_or(0)))
        .sum()
}

/// The machine's CPU ticks so far, all cores: `(busy, total)`, from the first line of
/// `/proc/stat` (idle and I/O wait are not busy).
fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|field| field.parse().ok())
        .collect();
    let total: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

fn print_table(options: &Options, rows: &[Measurement]) {
    println!();
    println!(
        "{} executor processes, emit lead 1 s (the default), {PARTITIONS} partitions, {} s measured after a {} s warm-up",
        options.executors,
        options.seconds,
        WARM_UP.as_secs()
    );
    println!();
    println!(
        "| backend | route | jobs due/s | at broker p99 | start late p50 | p99 | max | not run | recorded ≤ 1 s | not recorded | executor CPU | CPU ms / 1 000 triggers | scheduler CPU | broker CPU | PostgreSQL CPU | machine busy |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        let share = |count: usize| count as f64 / row.expected.max(1) as f64 * 100.0;
        let late = |fraction: f64| match row.lateness.is_empty() {
            true => "–".to_owned(),
            false => format!("{} ms", percentile(&row.lateness, fraction)),
        };
        let emitted_p99 = match row.emitted.is_empty() {
            true => "–".to_owned(),
            false => format!("{} ms", percentile(&row.emitted, 0.99)),
        };
        let not_run = row.expected.saturating_sub(row.lateness.len());
        let not_recorded = row.expected.saturating_sub(row.recorded);
        let seconds = options.seconds as f64;
        let per_thousand = match row.started_in_window {
            0 => "–".to_owned(),
            started => format!(
                "{:.0}",
                row.executor_cpu_seconds * 1000.0 / (started as f64 / 1000.0)
            ),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} ({:.1} %) | {:.1} % | {} ({:.1} %) | {:.0} % | {} | {:.0} % | {:.0} % | {:.0} % | {:.0} % |",
            row.backend.label(),
            row.route.symbol(),
            row.jobs,
            emitted_p99,
            late(0.50),
            late(0.99),
            late(1.0),
            not_run,
            share(not_run),
            share(row.within_second),
            not_recorded,
            share(not_recorded),
            row.executor_cpu_seconds / seconds * 100.0,
            per_thousand,
            row.scheduler_cpu_seconds / seconds * 100.0,
            row.broker_cpu_seconds / seconds * 100.0,
            row.database_cpu_seconds / seconds * 100.0,
            row.machine_busy * 100.0,
        );
    }
}

#[tokio::main]
async fn main() {
    let options = options();
    let executor_bin = options
        .executor_bin
        .clone()
        .unwrap_or_else(build_test_executor);
    let mut rows = Vec::new();
    for &backend in &options.backends {
        for &route in &options.routes {
            for &jobs in &options.jobs {
                eprintln!(
                    "running {backend:?}, {} routing, {jobs} jobs due every second, for {} s...",
                    route.symbol(),
                    options.seconds
                );
                rows.push(run_one(&options, &executor_bin, (backend, route, jobs)).await);
            }
        }
    }
    print_table(&options, &rows);
}
