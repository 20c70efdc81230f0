//! End-to-end benchmark: jobs due every second, from the scheduler's plan to the handler's
//! start on real executor processes and back to the scheduler's store.
//!
//! ```text
//! infra/bench.sh --bench end_to_end                 # starts a broker, runs the defaults
//! infra/bench.sh --bench end_to_end --brokers tansu,kafka  # each configuration on both
//! KADENCE_BENCH_BROKERS=127.0.0.1:9092 cargo bench -p kadence-scheduler --bench end_to_end -- \
//!     --jobs 1000,5000,10000 --routes consistent_hash,first --backends sqlite,postgres,none --seconds 10
//! ```
//!
//! For each backend, route strategy, job count and broker (`--brokers tansu,kafka`, default
//! `tansu`: tansu and Apache Kafka 4, see `common/broker.rs` for their addresses; a
//! configuration runs on each broker right after the other) it loads the jobs straight into a
//! fresh database (cron `* * * * * ?`, SERIAL_EXECUTION, the handler `noop`, routed over 6
//! partitions), runs `kadence serve` (release build, its default emit lead of 1 s) and
//! `--executors` (2) processes of `tests/src/bin/test-executor.rs` (release build; `noop`
//! returns at once and prints nothing) that trust the scheduler's signing key, as a
//! deployment's do, so every trigger's signature is verified; waits until the group has given
//! every executor its partitions, then lets the jobs fire. After a warm-up (`--warm-up`, 5 s
//! by default: the first seconds' backlog is gone) it measures for `--seconds` the fires
//! scheduled in that window. A JVM executor needs a longer one: its JIT compiles for the first
//! minute or so under load, and until then the JIT's threads, not the executor's code, spend
//! most of its CPU (give the Java rows `--warm-up 60` to measure the executor a service runs
//! for days):
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
//!   `/proc`), as a share of one core; the scheduler's, the broker's (the processes listening on the run's broker address: tansu's
//!   process, or Kafka's JVM; not other brokers on the machine, such as the other kind of
//!   this run, idle meanwhile; `–` when none listens here) and PostgreSQL's (`postgres`
//!   processes, any database's) beside it; and how busy the whole machine was (all cores,
//!   anyone's work, whatever else runs too);
//! - **CPU per trigger**: the same CPU times divided by the runs started in the window, in µs
//!   (see `common/usage.rs`).
//!
//! CONSISTENT_HASH spreads the jobs over the 6 partitions, so over both executors; FIRST
//! puts every trigger on partition 0, so one executor runs them all.
//!
//! The backend `none` runs no scheduler and no database: the benchmark produces the
//! triggers itself, as the scheduler's wheel would (each second's, one emit lead ahead,
//! routed the same way, signed by the round as for executors of this version, or each alone
//! with `KADENCE_SIGNING__TRIGGER_SIGNATURES=record`), so only the executors and the broker run. What the executors add
//! to a start's lateness shows there, apart from what a loaded machine adds; the store's
//! columns are empty.
//!
//! `--history all,failures` (default `all`) runs each configuration under these run-history
//! policies (the jobs' `history`; for a policy that drops runs, they are dropped one second
//! after they end, at each report recount, every minute as by default: give such runs
//! `--seconds 60` or more, so that a recount and its drops fall in the measured run). **DB rows
//! per run** is PostgreSQL's own count of rows inserted, updated and deleted
//! (`pg_stat_user_tables`) from the first fire to the scheduler's stop, per run the
//! executors started (SQLite keeps no such statistics); a second table breaks it down by the
//! tables the fire path and the run history write to. The benchmark's own bookkeeping (the
//! table `bench_results`, one row per recorded result, filled by a trigger) is not counted.
//! A success its job's history policy does not keep may never have a row (see
//! `scheduler/src/store/unkept_run_set.rs`): its set is stamped instead, and its runs count as
//! recorded when the set was, from the end of the set's last run (so for the others the
//! delay is a little short: the runs of a set are those of one batch of results).
//!
//! `--sdks rust,java` (default `rust`) runs each configuration with each SDK's test executor,
//! one right after the other (innermost, after the broker): the Rust SDK's and the Java
//! SDK's (`executors/java`, built and started by `infra/java-executor.sh`), which share one
//! interface, so the rows compare the SDKs under the same load. `--executor-bin PATH` runs
//! another build of the Rust test executor (e.g. one built from an older commit, to compare
//! versions; a relative path is taken from the repository's root); without it the benchmark
//! builds this tree's (`cargo build --release -p kadence-tests --bin test-executor`) and runs
//! that.
//! `KADENCE_BENCH_LOG` sets the scheduler's log filter (default `warn,sqlx=error`).
//!
//! `--handler NAME[:PARAMS]` gives the jobs another handler of the test executor than `noop`,
//! e.g. `work:50:2`, which works 50 ms and writes two log lines, as an application's handler
//! does (scheduler runs only). A window longer than a minute is also shown minute by minute
//! (`common/minutes.rs`): each minute's fires not run, start lateness, results recorded within
//! a second and the delay of results and log lines into the store, so a sustained run shows
//! whether its last minute keeps up as its first did (log lines are stamped as results are,
//! by a row trigger, from the start of their run).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::broker::{Broker, BrokerKind};
use common::emitter::{create_topics, delete_topics, emit_every_second};
use common::executors::{
    ExecutorCommand, Executors, Sdk, build_test_executor, published_starts, wait_for_beats,
};
use common::minutes::{Minute, RunRecords, by_minute, ms_at, print_minutes};
use common::usage::{CpuSpent, Usage, broker_processes, per_trigger};
use common::{
    Backend, Database, JobLoad, PARTITIONS, Serve, flags, load_jobs_with, now_ms, parse_choices,
    parse_numbers, set_first_fire, sleep_until_ms,
};
use kadence_kafka::{ExecutorKey, RecordSigner};
use kadence_schemas::{JobId, Topics};

/// After the window, before the results are read: what is not recorded by then is missing.
const GRACE: Duration = Duration::from_secs(2);
/// Not due before 2099: the jobs wait until the executors own their partitions.
const LATER_MS: i64 = 4_070_908_800_000;
/// The scheduler's default emit lead, which the runs without a scheduler copy.
const EMIT_LEAD: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Route {
    ConsistentHash,
    First,
}

impl Route {
    fn parse_list(list: &str) -> Vec<Route> {
        parse_choices(
            "--routes",
            &list.to_ascii_lowercase(),
            &[
                ("consistent_hash", Route::ConsistentHash),
                ("first", Route::First),
            ],
        )
    }

    fn symbol(self) -> &'static str {
        match self {
            Route::ConsistentHash => "CONSISTENT_HASH",
            Route::First => "FIRST",
        }
    }

    /// The partition of `job`, as the scheduler routes it.
    fn partition(self) -> fn(JobId) -> i32 {
        match self {
            Route::ConsistentHash => {
                |job| kadence_scheduler::engine::routing::consistent_hash_partition(job, PARTITIONS)
            }
            Route::First => |_| 0,
        }
    }
}

/// Where the triggers come from: `kadence serve` on a database, or the benchmark itself.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Source {
    Scheduler(Backend),
    NoScheduler,
}

impl Source {
    fn parse_list(list: &str) -> Vec<Source> {
        parse_choices(
            "--backends",
            list,
            &[
                ("sqlite", Source::Scheduler(Backend::Sqlite)),
                ("postgres", Source::Scheduler(Backend::Postgres)),
                ("none", Source::NoScheduler),
            ],
        )
    }

    fn label(self) -> &'static str {
        match self {
            Source::Scheduler(backend) => backend.label(),
            Source::NoScheduler => "none (no scheduler)",
        }
    }
}

struct Options {
    jobs: Vec<usize>,
    /// Run-history policies, e.g. `ALL`, `FAILURES`.
    histories: Vec<String>,
    routes: Vec<Route>,
    sources: Vec<Source>,
    brokers: Vec<Broker>,
    seconds: u64,
    /// From the first fire to the window.
    warm_up: Duration,
    executors: usize,
    executor_bin: Option<PathBuf>,
    sdks: Vec<Sdk>,
    /// The jobs' handler and its params.
    handler: (String, String),
}

fn options() -> Options {
    let mut options = Options {
        jobs: vec![1_000, 5_000, 10_000],
        histories: vec!["ALL".to_owned()],
        routes: vec![Route::ConsistentHash, Route::First],
        sources: vec![
            Source::Scheduler(Backend::Sqlite),
            Source::Scheduler(Backend::Postgres),
        ],
        brokers: Vec::new(),
        seconds: 10,
        warm_up: Duration::from_secs(5),
        executors: 2,
        executor_bin: None,
        sdks: vec![Sdk::Rust],
        handler: ("noop".to_owned(), String::new()),
    };
    let mut broker_kinds = vec![BrokerKind::Tansu];
    for (flag, value) in flags() {
        match flag.as_str() {
            "--jobs" => options.jobs = parse_numbers(&flag, &value),
            "--routes" => options.routes = Route::parse_list(&value),
            "--backends" => options.sources = Source::parse_list(&value),
            "--brokers" => broker_kinds = BrokerKind::parse_list(&value),
            "--seconds" => options.seconds = value.parse().expect("--seconds N"),
            "--warm-up" => {
                options.warm_up = Duration::from_secs(value.parse().expect("--warm-up SECONDS"))
            }
            "--executors" => options.executors = value.parse().expect("--executors N"),
            "--executor-bin" => options.executor_bin = Some(repository_path(&value)),
            "--sdks" => options.sdks = Sdk::parse_list(&value),
            "--history" => {
                options.histories = value
                    .split(',')
                    .map(|policy| policy.trim().to_ascii_uppercase())
                    .collect()
            }
            "--handler" => {
                let (name, params) = value.split_once(':').unwrap_or((&value, ""));
                options.handler = (name.to_owned(), params.to_owned());
            }
            other => panic!("unknown option {other}"),
        }
    }
    assert!(
        options.handler.0 == "noop" || !options.sources.contains(&Source::NoScheduler),
        "--handler applies to the scheduler's jobs: --backends none emits `noop` triggers"
    );
    options.brokers = Broker::chosen(&broker_kinds);
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

/// Notes in `bench_results`, by row triggers, the wall clock (ms) when each run's result is
/// written: the moment the result reached the store, whether it completed a row written
/// before (an update) or came with the row itself (an insert of a run held for its result).
async fn stamp_recorded_results(database: &Database, backend: Backend) {
    let sql = match backend {
        Backend::Postgres => {
            "CREATE TABLE bench_results (scheduled_at_ms BIGINT, dispatched_at_ms BIGINT, handle_at_ms BIGINT, recorded_at_ms BIGINT, runs BIGINT DEFAULT 1);
             CREATE FUNCTION bench_recorded() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO bench_results VALUES (NEW.scheduled_at_ms, NEW.dispatched_at_ms, NEW.handle_at_ms,
                     (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT, 1);
                 RETURN NEW;
             END $$;
             CREATE FUNCTION bench_recorded_unkept() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO bench_results VALUES (NEW.scheduled_second * 1000, NULL, NEW.ended_at_ms,
                     (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT, NEW.run_count);
                 RETURN NEW;
             END $$;
             CREATE TRIGGER bench_recorded_unkept AFTER INSERT ON unkept_run_sets FOR EACH ROW
             EXECUTE FUNCTION bench_recorded_unkept();
             CREATE TABLE bench_lines (run_started_at_ms BIGINT, recorded_at_ms BIGINT, lines BIGINT);
             CREATE FUNCTION bench_line_recorded() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO bench_lines VALUES (NEW.run_started_at_ms,
                     (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT,
                     NEW.last_line - NEW.first_line + 1);
                 RETURN NEW;
             END $$;
             CREATE TRIGGER bench_line_recorded AFTER INSERT ON run_log_chunks FOR EACH ROW
             EXECUTE FUNCTION bench_line_recorded();
             CREATE TRIGGER bench_recorded AFTER UPDATE ON job_logs FOR EACH ROW
             WHEN (OLD.handle_code IS NULL AND NEW.handle_code IS NOT NULL)
             EXECUTE FUNCTION bench_recorded();
             CREATE TRIGGER bench_recorded_at_once AFTER INSERT ON job_logs FOR EACH ROW
             WHEN (NEW.handle_code IS NOT NULL)
             EXECUTE FUNCTION bench_recorded();"
        }
        Backend::Sqlite => {
            "CREATE TABLE bench_results (scheduled_at_ms INTEGER, dispatched_at_ms INTEGER, handle_at_ms INTEGER, recorded_at_ms INTEGER, runs INTEGER DEFAULT 1);
             CREATE TRIGGER bench_recorded_unkept AFTER INSERT ON unkept_run_sets
             BEGIN
                 INSERT INTO bench_results VALUES (NEW.scheduled_second * 1000, NULL, NEW.ended_at_ms,
                     CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER), NEW.run_count);
             END;
             CREATE TABLE bench_lines (run_started_at_ms INTEGER, recorded_at_ms INTEGER, lines INTEGER);
             CREATE TRIGGER bench_line_recorded AFTER INSERT ON run_log_chunks
             BEGIN
                 INSERT INTO bench_lines VALUES (NEW.run_started_at_ms,
                     CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER),
                     NEW.last_line - NEW.first_line + 1);
             END;
             CREATE TRIGGER bench_recorded AFTER UPDATE OF handle_code ON job_logs
             WHEN OLD.handle_code IS NULL AND NEW.handle_code IS NOT NULL
             BEGIN
                 INSERT INTO bench_results VALUES (NEW.scheduled_at_ms, NEW.dispatched_at_ms, NEW.handle_at_ms,
                     CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER), 1);
             END;
             CREATE TRIGGER bench_recorded_at_once AFTER INSERT ON job_logs
             WHEN NEW.handle_code IS NOT NULL
             BEGIN
                 INSERT INTO bench_results VALUES (NEW.scheduled_at_ms, NEW.dispatched_at_ms, NEW.handle_at_ms,
                     CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER), 1);
             END;"
        }
    };
    database.execute(sql).await;
}

/// What the store says about the window's fires.
struct Stored {
    /// `[scheduled_at_ms, handle_at_ms, recorded_at_ms]` of each fire with a recorded result.
    results: Vec<[i64; 3]>,
    /// `[run_started_at_ms, recorded_at_ms]` of each log line stored of a run of the window.
    lines: Vec<[i64; 2]>,
    /// Broker acknowledgement − scheduled time of each fire with a recorded result, sorted.
    emitted: Vec<i64>,
}

impl Stored {
    async fn read(database: &Database, window: (i64, i64)) -> Stored {
        let bounds = [window.0, window.1];
        // A set of runs without rows stands for `runs` of them, stamped with the end of its
        // last run.
        let results = database
            .integers(
                "SELECT scheduled_at_ms, handle_at_ms, recorded_at_ms, runs FROM bench_results \
                 WHERE scheduled_at_ms >= $1 AND scheduled_at_ms < $2",
                &bounds,
            )
            .await
            .into_iter()
            .flat_map(|row| std::iter::repeat_n([row[0], row[1], row[2]], row[3] as usize))
            .collect();
        // A chunk stands for its lines (see `kadence_scheduler::store::LogChunk`).
        let lines = database
            .integers(
                "SELECT run_started_at_ms, recorded_at_ms, lines FROM bench_lines \
                 WHERE run_started_at_ms >= $1 AND run_started_at_ms < $2",
                &bounds,
            )
            .await
            .into_iter()
            .flat_map(|row| std::iter::repeat_n([row[0], row[1]], row[2] as usize))
            .collect();
        let mut emitted: Vec<i64> = database
            .integers(
                "SELECT dispatched_at_ms - scheduled_at_ms FROM bench_results \
                 WHERE scheduled_at_ms >= $1 AND scheduled_at_ms < $2 \
                 AND dispatched_at_ms IS NOT NULL",
                &bounds,
            )
            .await
            .into_iter()
            .map(|row| row[0])
            .collect();
        emitted.sort_unstable();
        Stored {
            results,
            lines,
            emitted,
        }
    }
}

struct Measurement {
    source: Source,
    broker: BrokerKind,
    /// Whose test executor ran.
    sdk: Sdk,
    /// The jobs' run-history policy.
    history: String,
    /// Database rows written per run started, from the first fire to the scheduler's stop
    /// (PostgreSQL only).
    rows_per_run: Option<f64>,
    /// Of those, the rows per run in each of `common::FIRE_PATH_TABLES` (PostgreSQL only).
    rows_per_run_by_table: Vec<f64>,
    /// The window minute by minute, when it has more than one.
    minutes: Vec<Minute>,
    /// From the node's metrics at the end: seconds history writers waited for scheduling
    /// (`kadence_scheduler_history_yield_seconds_total`) and fires misfired.
    yielded: Option<(f64, f64)>,
    route: Route,
    jobs: usize,
    /// Fires of the window: jobs × seconds.
    expected: usize,
    /// `started_at_ms − scheduled_at_ms` of every fire of the window the executors answered
    /// (first result per trigger id, from the results topic), sorted.
    lateness: Vec<i64>,
    /// Runs the executors started during the window (any fire).
    started_in_window: usize,
    /// The store's view; none without a scheduler.
    stored: Option<Stored>,
    /// The CPU the run's processes spent over the window.
    cpu: CpuSpent,
}

impl Measurement {
    /// The figures of the window `[start, end)` from its usage readings and what the
    /// executors published (`(scheduled, started)` pairs).
    fn of(
        (source, broker, sdk, route, jobs): (Source, BrokerKind, Sdk, Route, usize),
        (start, end): (i64, i64),
        (before, after): (Usage, Usage),
        starts: &[(i64, i64)],
        stored: Option<Stored>,
    ) -> Measurement {
        let in_window = |ms: i64| (start..end).contains(&ms);
        let mut lateness: Vec<i64> = starts
            .iter()
            .filter(|(scheduled, _)| in_window(*scheduled))
            .map(|(scheduled, started)| started - scheduled)
            .collect();
        lateness.sort_unstable();
        Measurement {
            source,
            broker,
            sdk,
            history: "ALL".to_owned(),
            rows_per_run: None,
            rows_per_run_by_table: Vec::new(),
            minutes: Vec::new(),
            yielded: None,
            route,
            jobs,
            expected: jobs * ((end - start) / 1000) as usize,
            lateness,
            started_in_window: starts.iter().filter(|(_, at)| in_window(*at)).count(),
            stored,
            cpu: CpuSpent::between(&before, &after),
        }
    }
}

/// One configuration with `kadence serve` on a fresh `backend` database and `broker`.
async fn run_with_scheduler(
    options: &Options,
    executor: &ExecutorCommand,
    broker: &Broker,
    (backend, route, jobs): (Backend, Route, usize),
    history: &str,
) -> Measurement {
    let database = Database::create(backend).await;
    stamp_recorded_results(&database, backend).await;
    let load = JobLoad {
        due: jobs,
        idle: 0,
        route: route.symbol(),
        handler: &options.handler.0,
    };
    load_jobs_with(&database, &load, LATER_MS, now_ms()).await;
    database
        .execute(&format!(
            "UPDATE jobs SET history = '{history}', params = '{}'",
            options.handler.1
        ))
        .await;
    let mut settings = vec![("KADENCE_SCHEDULE__BATCH_SIZE", "5000".to_owned())];
    if history != "ALL" {
        settings.push(("KADENCE_RETENTION__UNKEPT_RUNS_FOR", "1s".to_owned()));
    }
    let trusted_key = database.signing_key().await.public_key().to_base64();
    let executor_key = database.executor_key(common::APP).await;
    let brokers = broker.bootstrap.as_str();
    let serve = Serve::start(&database, broker, &settings).await;
    let topics = Topics::new(&serve.prefix).expect("the prefix is valid");
    let connect = (broker, serve.prefix.as_str());
    let keys = (trusted_key.as_str(), executor_key.as_str());
    let executors = Executors::start(executor, options.executors, connect, keys);
    wait_for_beats(brokers, &topics, options.executors).await;
    let broker_pids = broker_processes(broker);
    let first_fire = set_first_fire(&database, Duration::from_secs(3)).await;
    let rows_before = database.rows_written().await;
    let table_rows_before = database.rows_written_by_table().await;
    let window = window_after(first_fire, options);
    sleep_until_ms(window.0).await;
    let before = Usage::now(executors.ticks(), serve.ticks(), &broker_pids);
    sleep_until_ms(window.1).await;
    let after = Usage::now(executors.ticks(), serve.ticks(), &broker_pids);
    tokio::time::sleep(GRACE).await;
    let stored = Stored::read(&database, window).await;
    let yielded = (
        serve
            .counter("kadence_scheduler_history_yield_seconds_total")
            .await,
        serve.counter("kadence_scheduler_misfires_total").await,
    );
    executors.stop().await;
    serve.stop().await;
    let rows_written = match (rows_before, database.rows_written().await) {
        (Some(before), Some(after)) => Some(after - before),
        _ => None,
    };
    let table_rows = match (table_rows_before, database.rows_written_by_table().await) {
        (Some(before), Some(after)) => (after.iter().zip(before))
            .map(|(after, before)| after - before)
            .collect(),
        _ => Vec::new(),
    };
    database.drop().await;
    let starts = published_starts(brokers, &topics).await;
    delete_topics(brokers, &topics).await;
    // Minute by minute when the window has more than one.
    let records = RunRecords {
        starts: &starts,
        results: &stored.results,
        lines: &stored.lines,
    };
    let minutes = match window.1 - window.0 > 60_000 {
        true => by_minute(window, jobs, &records),
        false => Vec::new(),
    };
    let configuration = (
        Source::Scheduler(backend),
        broker.kind,
        executor.sdk,
        route,
        jobs,
    );
    Measurement {
        history: history.to_owned(),
        minutes,
        yielded: Some(yielded),
        rows_per_run: rows_written.map(|rows| rows as f64 / starts.len().max(1) as f64),
        rows_per_run_by_table: (table_rows.iter())
            .map(|rows| *rows as f64 / starts.len().max(1) as f64)
            .collect(),
        ..Measurement::of(
            configuration,
            window,
            (before, after),
            &starts,
            Some(stored),
        )
    }
}

/// One configuration without a scheduler on `broker`: the benchmark emits the triggers.
async fn run_without_scheduler(
    options: &Options,
    executor: &ExecutorCommand,
    broker: &Broker,
    (route, jobs): (Route, usize),
) -> Measurement {
    let brokers = broker.bootstrap.as_str();
    let prefix = format!("kbench{:x}", rand::random::<u32>());
    let topics = Topics::new(&prefix).expect("the prefix is valid");
    create_topics(brokers, &topics).await;
    let signer = RecordSigner::generate().expect("a signing key");
    let trusted_key = signer.public_key().to_base64();
    // No scheduler reads what they write, but they sign it as in a deployment.
    let executor_key = ExecutorKey::generate().expect("an executor key").text();
    let connect = (broker, prefix.as_str());
    let keys = (trusted_key.as_str(), executor_key.as_str());
    let executors = Executors::start(executor, options.executors, connect, keys);
    wait_for_beats(brokers, &topics, options.executors).await;
    let broker_pids = broker_processes(broker);
    let first_second = (now_ms() + 3_000) / 1000 * 1000;
    let window = window_after(first_second, options);
    let seconds = ((window.1 - first_second) / 1000) as usize + 1;
    let emitting = tokio::spawn({
        let (brokers, topics) = (brokers.to_owned(), topics.clone());
        let partition = route.partition();
        async move {
            let fires = (first_second, seconds);
            let to = (brokers.as_str(), &topics);
            emit_every_second(to, jobs, partition, fires, EMIT_LEAD, &signer).await
        }
    });
    sleep_until_ms(window.0).await;
    let before = Usage::now(executors.ticks(), 0, &broker_pids);
    sleep_until_ms(window.1).await;
    let after = Usage::now(executors.ticks(), 0, &broker_pids);
    emitting.await.expect("emitting triggers");
    tokio::time::sleep(GRACE).await;
    executors.stop().await;
    let starts = published_starts(brokers, &topics).await;
    delete_topics(brokers, &topics).await;
    let configuration = (Source::NoScheduler, broker.kind, executor.sdk, route, jobs);
    Measurement::of(configuration, window, (before, after), &starts, None)
}

/// The measured window, `[start, end)` in ms, after the warm-up from `first_fire_ms`.
fn window_after(first_fire_ms: i64, options: &Options) -> (i64, i64) {
    let start = first_fire_ms + options.warm_up.as_millis() as i64;
    (start, start + options.seconds as i64 * 1000)
}

fn print_table(options: &Options, rows: &[Measurement]) {
    println!();
    println!(
        "{} executor processes, emit lead 1 s (the default), {PARTITIONS} partitions, {} s measured after a {} s warm-up",
        options.executors,
        options.seconds,
        options.warm_up.as_secs()
    );
    println!();
    println!(
        "| backend | broker | SDK | history | route | jobs due/s | DB rows per run | at broker p99 | start late p50 | p99 | max | not run | recorded ≤ 1 s | not recorded | executor CPU | scheduler CPU | broker CPU | PostgreSQL CPU | machine busy | executor CPU per trigger | scheduler | broker | PostgreSQL | machine |"
    );
    println!(
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for row in rows {
        let seconds = options.seconds as f64;
        let share = |count: usize| count as f64 / row.expected.max(1) as f64 * 100.0;
        let not_run = row.expected.saturating_sub(row.lateness.len());
        let (emitted, within, not_recorded) = match &row.stored {
            Some(stored) => {
                let within = (stored.results.iter())
                    .filter(|[_, ended, recorded]| recorded - ended <= 1_000)
                    .count();
                let missing = row.expected.saturating_sub(stored.results.len());
                (
                    ms_at(&stored.emitted, 0.99),
                    format!("{:.1} %", share(within)),
                    format!("{missing} ({:.1} %)", share(missing)),
                )
            }
            None => (
                format!("-{} ms", EMIT_LEAD.as_millis()),
                "–".into(),
                "–".into(),
            ),
        };
        // Per run started in the window: every process's CPU divided by the same count.
        let started = row.started_in_window;
        let cpu = &row.cpu;
        let rows = row
            .rows_per_run
            .map_or_else(|| "n/a".to_owned(), |rows| format!("{rows:.2}"));
        let core = |cpu_seconds: f64| format!("{:.0} %", cpu_seconds / seconds * 100.0);
        println!(
            "| {} | {} | {} | {} | {} | {} | {rows} | {emitted} | {} | {} | {} | {not_run} ({:.1} %) | {within} | {not_recorded} | {} | {} | {} | {} | {:.0} % | {} | {} | {} | {} | {} |",
            row.source.label(),
            row.broker.label(),
            row.sdk.label(),
            row.history,
            row.route.symbol(),
            row.jobs,
            ms_at(&row.lateness, 0.50),
            ms_at(&row.lateness, 0.99),
            ms_at(&row.lateness, 1.0),
            share(not_run),
            core(cpu.executors),
            core(cpu.scheduler),
            cpu.broker.map_or_else(|| "–".to_owned(), core),
            core(cpu.database),
            cpu.machine_busy * 100.0,
            per_trigger(cpu.executors, started),
            per_trigger(cpu.scheduler, started),
            cpu.broker
                .map_or_else(|| "–".to_owned(), |broker| per_trigger(broker, started)),
            per_trigger(cpu.database, started),
            per_trigger(cpu.machine, started),
        );
    }
    print_rows_by_table(rows);
    print_yields(rows);
    for row in rows.iter().filter(|row| !row.minutes.is_empty()) {
        let title = format!(
            "{} on {}, {} executor, history {}, {} routing, {} jobs due every second",
            row.source.label(),
            row.broker.label(),
            row.sdk.label(),
            row.history,
            row.route.symbol(),
            row.jobs
        );
        print_minutes(&title, &row.minutes);
    }
}

/// How long history waited for scheduling in each row with a scheduler, and the fires the
/// scheduler counted as misfired, from its metrics.
fn print_yields(rows: &[Measurement]) {
    let with_scheduler: Vec<(&Measurement, (f64, f64))> = (rows.iter())
        .filter_map(|row| Some((row, row.yielded?)))
        .collect();
    if with_scheduler.is_empty() {
        return;
    }
    println!();
    println!("History yielding to scheduling (the node's metrics, whole run):");
    println!();
    println!("| backend | history | route | jobs due/s | history waited | misfires |");
    println!("|---|---|---|---:|---:|---:|");
    for (row, (waited, misfires)) in with_scheduler {
        println!(
            "| {} | {} | {} | {} | {waited:.1} s | {misfires:.0} |",
            row.source.label(),
            row.history,
            row.route.symbol(),
            row.jobs,
        );
    }
}

/// Where each PostgreSQL row's DB rows per run went, by table.
fn print_rows_by_table(rows: &[Measurement]) {
    let broken_down: Vec<&Measurement> = (rows.iter())
        .filter(|row| !row.rows_per_run_by_table.is_empty())
        .collect();
    if broken_down.is_empty() {
        return;
    }
    println!();
    println!("DB rows per run by table (PostgreSQL):");
    println!();
    let tables = common::FIRE_PATH_TABLES.join(" | ");
    println!("| history | route | jobs due/s | {tables} |");
    println!(
        "|---|---|---:|{}",
        "---:|".repeat(common::FIRE_PATH_TABLES.len())
    );
    for row in broken_down {
        let counts: Vec<String> = (row.rows_per_run_by_table.iter())
            .map(|rows| format!("{rows:.3}"))
            .collect();
        println!(
            "| {} | {} | {} | {} |",
            row.history,
            row.route.symbol(),
            row.jobs,
            counts.join(" | ")
        );
    }
}

#[tokio::main]
async fn main() {
    let options = options();
    let commands: Vec<ExecutorCommand> = options
        .sdks
        .iter()
        .map(|sdk| match sdk {
            Sdk::Rust => ExecutorCommand::rust(
                options
                    .executor_bin
                    .clone()
                    .unwrap_or_else(build_test_executor),
            ),
            Sdk::Java => ExecutorCommand::java(),
        })
        .collect();
    let mut rows = Vec::new();
    let configurations = options.sources.iter().flat_map(|&source| {
        let histories = match source {
            Source::Scheduler(_) => options.histories.clone(),
            Source::NoScheduler => vec!["ALL".to_owned()],
        };
        histories.into_iter().map(move |history| (source, history))
    });
    for (source, history) in configurations {
        for &route in &options.routes {
            for &jobs in &options.jobs {
                // Brokers, then SDKs, innermost: a configuration's rows on each broker and
                // with each SDK are measured one after the other, under much the same load
                // from the rest of the machine.
                for (broker, executor) in options
                    .brokers
                    .iter()
                    .flat_map(|broker| commands.iter().map(move |command| (broker, command)))
                {
                    eprintln!(
                        "running {} on {} with the {} executor, history {history}, {} routing, {jobs} jobs due every second, for {} s...",
                        source.label(),
                        broker.kind.label(),
                        executor.sdk.label(),
                        route.symbol(),
                        options.seconds
                    );
                    let row = match source {
                        Source::Scheduler(backend) => {
                            let configuration = (backend, route, jobs);
                            run_with_scheduler(&options, executor, broker, configuration, &history)
                                .await
                        }
                        Source::NoScheduler => {
                            run_without_scheduler(&options, executor, broker, (route, jobs)).await
                        }
                    };
                    rows.push(row);
                }
            }
        }
    }
    print_table(&options, &rows);
}
