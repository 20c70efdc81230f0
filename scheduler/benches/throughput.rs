//! Scheduler throughput benchmark: N jobs due every second, sustained, on SQLite and
//! PostgreSQL, on tansu and Apache Kafka, against the same broker's raw produce rate measured
//! in the same run.
//!
//! ```text
//! infra/bench.sh                                    # starts a broker, runs the defaults
//! infra/bench.sh --jobs 1000 --brokers tansu,kafka  # every configuration on both brokers
//! KADENCE_BENCH_BROKERS=127.0.0.1:9092 cargo bench -p kadence-scheduler --bench throughput -- \
//!     --jobs 1000,10000 --seconds 20 --backends sqlite,postgres --defined 1000000 --nodes 1,2
//! ```
//!
//! `--brokers tansu,kafka` (default `tansu`) runs every configuration on each of those
//! brokers, one right after the other, so that a configuration's rows share the machine's
//! conditions: tansu (`infra/broker.sh --kind tansu`, memory storage) and Apache Kafka 4 (one
//! KRaft node, `--kind kafka`). `infra/bench.sh` starts each broker named and passes its
//! address (`common/broker.rs` lists the variables; `KADENCE_BENCH_BROKERS` still serves a
//! run on one broker). Every broker named runs for the whole benchmark, so the other one
//! idles beside each measurement (an idle Kafka JVM, or an idle tansu, costs a little CPU).
//!
//! For each backend, job count and broker it loads the jobs straight into a fresh database (cron
//! `* * * * * ?`, RANDOM routing over 6 partitions), runs `kadence serve` (release build) as
//! its own process, and after a warm-up measures for `--seconds`:
//! - triggers acknowledged per second (job-log rows whose broker ack landed in the window);
//! - fire lateness = broker acknowledgement time − scheduled time (`dispatched_at_ms −
//!   scheduled_at_ms`, both written by the scheduler), p50 / p99 / max — negative when the
//!   trigger is at the broker before its time;
//! - each configuration twice by default (`--emit-leads-ms 0,1000`): producing at the fire
//!   time (the baseline) and with the scheduler's default emit lead, where executors hold
//!   each trigger until its scheduled millisecond;
//! - the scheduler process's CPU (share of one core) and peak resident memory (VmHWM);
//! - CPU per acknowledged trigger, in µs, of the scheduler, the broker (the processes that
//!   listen on its address), PostgreSQL (every `postgres` process; on SQLite the store runs
//!   inside the scheduler and counts there) and the whole machine (`common/usage.rs`);
//! - the raw produce rate of the same broker with the same client settings (idempotent,
//!   acks=all, linger 2 ms) for records of the same size, so the scheduler's rate is shown
//!   as a fraction of what that broker takes (`common/baseline.rs`);
//! - rows the database wrote per trigger, from its own statistics (PostgreSQL's
//!   `pg_stat_user_tables`, from the scheduler's start to its stop, per trigger the nodes
//!   counted as emitted; SQLite keeps no such statistics);
//! - with `--nodes 1,2`, each PostgreSQL configuration with one and with two scheduler nodes
//!   on the same database and topics (CPU summed over the nodes, peak memory the largest);
//! - with `--kill-node-at S` as well, every run with two or more nodes kills the last node
//!   with SIGKILL S seconds into the window, times how long until the survivor owns every
//!   schedule shard, waits until the dead node's pending fires were claimed and emitted, and
//!   audits the trigger topic: every job's every second of the window must have a record
//!   (none lost), and trigger ids sent more than once are counted (the same id each time, so
//!   executors drop the copy).
//!
//! The raw produce rate is measured on the configuration's broker just before it runs, median
//! of three; the broker's acknowledgement latency for single records, once per broker at the
//! end.
//!
//! `--fires aligned,spread` (default `aligned`) chooses when in its second each job fires:
//! `aligned`, every job on the second (cron `* * * * * ?`, each second's fires one burst, the
//! worst case for lateness without an emit lead: the last of the burst waits for the broker to
//! take all the others); `spread`, every job every second at its own millisecond (FIX_RATE 1 s,
//! first fires spread evenly over the second, as jobs created at different times fire), the
//! same rate without the bursts.
//!
//! Triggers are signed by the round (`signing.trigger_signatures = "round"`), as `auto` signs
//! them for an app whose executors are of this version: no executor runs here to say so.
//! `KADENCE_SIGNING__TRIGGER_SIGNATURES=record` measures one signature per trigger.
//!
//! `--defined M` adds M idle jobs (next fire in 2099) so the memory figure holds with that
//! many jobs defined.
//!
//! `--telemetry off,metrics,on` measures what observing the scheduler costs, in the same run:
//! `on` (the default) scrapes its `/metrics` every second and exports every span over OTLP
//! to a sink in this process that reads and drops them; `metrics` only scrapes; `off` records
//! no span (`OTEL_TRACES_SAMPLER=always_off`; records still carry a `traceparent`) and
//! nothing scrapes. The metric counters themselves are always counted (a few atomic increments per
//! trigger; there is no switch for them).
//!
//! The scheduler's log goes to stderr at `warn`; `KADENCE_BENCH_LOG` replaces that filter, e.g.
//! `KADENCE_BENCH_LOG=warn,kadence_scheduler::engine::preread=debug` prints each pre-read scan with
//! the time it spent in the store and handing fires to the wheel.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::baseline::{broker_ack_latency, median_raw_rate, trigger_payload};
use common::broker::{Broker, BrokerKind};
use common::node_kill::{FaultOutcome, kill_and_time_takeover, node_id, wait_until_emitted};
use common::usage::{
    CpuSpent, Usage, broker_processes, clock_ticks_per_second, per_trigger, process_usage,
};
use common::{
    Backend, Database, PARTITIONS, Serve, choice_name, flags, load_jobs, now_ms, parse_choices,
    parse_numbers, percentile, set_first_fire, sleep_until_ms,
};

const WARM_UP: Duration = Duration::from_secs(8);

/// Whether the scheduler is observed while it is measured (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Telemetry {
    Off,
    Metrics,
    On,
}

impl Telemetry {
    const NAMES: [(&str, Telemetry); 3] = [
        ("off", Telemetry::Off),
        ("metrics", Telemetry::Metrics),
        ("on", Telemetry::On),
    ];

    fn parse_list(list: &str) -> Vec<Telemetry> {
        parse_choices("--telemetry", list, &Telemetry::NAMES)
    }

    fn label(self) -> &'static str {
        choice_name(&Telemetry::NAMES, self)
    }
}

/// When in its second each job fires (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fires {
    Aligned,
    Spread,
}

impl Fires {
    const NAMES: [(&str, Fires); 2] = [("aligned", Fires::Aligned), ("spread", Fires::Spread)];

    fn parse_list(list: &str) -> Vec<Fires> {
        parse_choices("--fires", list, &Fires::NAMES)
    }

    fn label(self) -> &'static str {
        choice_name(&Fires::NAMES, self)
    }
}

/// An OTLP/HTTP receiver that reads every export and drops it, counting the bytes.
struct SpanSink {
    endpoint: String,
    received_bytes: Arc<AtomicU64>,
}

impl SpanSink {
    async fn start() -> SpanSink {
        let received_bytes = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&received_bytes);
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| async move {
                counter.fetch_add(body.len() as u64, Ordering::Relaxed);
                Vec::<u8>::new()
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        SpanSink {
            endpoint,
            received_bytes,
        }
    }
}

/// Scrapes `{api}/metrics` every second, as Prometheus would, until aborted.
fn scrape_every_second(api: &str) -> tokio::task::JoinHandle<()> {
    let url = format!("{api}/metrics");
    tokio::spawn(async move {
        let client = reqwest::Client::new();
        loop {
            if let Ok(answer) = client.get(&url).send().await {
                let _ = answer.bytes().await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

struct Options {
    jobs: Vec<usize>,
    emit_leads_ms: Vec<u64>,
    telemetry: Vec<Telemetry>,
    fires: Vec<Fires>,
    seconds: u64,
    backends: Vec<Backend>,
    brokers: Vec<Broker>,
    nodes: Vec<usize>,
    kill_node_at: Option<u64>,
    defined: usize,
}

fn options() -> Options {
    let mut options = Options {
        jobs: vec![1_000, 10_000],
        emit_leads_ms: vec![0, 1_000],
        telemetry: vec![Telemetry::On],
        fires: vec![Fires::Aligned],
        seconds: 20,
        backends: vec![Backend::Sqlite, Backend::Postgres],
        brokers: Vec::new(),
        nodes: vec![1],
        kill_node_at: None,
        defined: 0,
    };
    let mut broker_kinds = vec![BrokerKind::Tansu];
    for (flag, value) in flags() {
        match flag.as_str() {
            "--jobs" => options.jobs = parse_numbers(&flag, &value),
            "--seconds" => options.seconds = value.parse().expect("--seconds N"),
            "--emit-leads-ms" => options.emit_leads_ms = parse_numbers(&flag, &value),
            "--telemetry" => options.telemetry = Telemetry::parse_list(&value),
            "--fires" => options.fires = Fires::parse_list(&value),
            "--defined" => options.defined = value.parse().expect("--defined N"),
            "--backends" => options.backends = Backend::parse_list(&value),
            "--brokers" => broker_kinds = BrokerKind::parse_list(&value),
            "--nodes" => options.nodes = parse_numbers(&flag, &value),
            "--kill-node-at" => {
                options.kill_node_at = Some(value.parse().expect("--kill-node-at SECONDS"))
            }
            other => panic!("unknown option {other}"),
        }
    }
    // The kill audit expects every job's fire on every second of the window.
    assert!(
        options.kill_node_at.is_none() || options.fires == [Fires::Aligned],
        "--kill-node-at audits aligned fires only"
    );
    options.brokers = Broker::chosen(&broker_kinds);
    options
}

struct Measurement {
    backend: Backend,
    broker: BrokerKind,
    nodes: usize,
    emit_lead_ms: u64,
    telemetry: Telemetry,
    fires: Fires,
    jobs: usize,
    defined: usize,
    /// Triggers acknowledged in the window.
    acked: usize,
    acked_per_second: f64,
    p50: i64,
    p99: i64,
    max: i64,
    cpu: f64,
    /// The CPU the run's processes spent over the window.
    spent: CpuSpent,
    peak_mib: f64,
    rows_per_trigger: Option<f64>,
    raw_rate: f64,
    fault: Option<FaultOutcome>,
}

/// One configuration: what runs on which broker, how many scheduler nodes, with which emit
/// lead and telemetry.
struct Run<'a> {
    backend: Backend,
    broker: &'a Broker,
    nodes: usize,
    jobs: usize,
    emit_lead_ms: u64,
    telemetry: Telemetry,
    fires: Fires,
    sink: &'a SpanSink,
}

/// Every configuration the options name, in the order they run.
fn runs<'a>(options: &'a Options, sink: &'a SpanSink) -> Vec<Run<'a>> {
    let mut runs = Vec::new();
    for &backend in &options.backends {
        // Several nodes share a database on PostgreSQL only (SQLite is one process's file).
        let node_counts = options
            .nodes
            .iter()
            .filter(|&&nodes| nodes == 1 || backend == Backend::Postgres);
        for &nodes in node_counts {
            for &jobs in &options.jobs {
                for &emit_lead_ms in &options.emit_leads_ms {
                    for &telemetry in &options.telemetry {
                        for &fires in &options.fires {
                            // Brokers innermost: a configuration's rows on each broker are
                            // measured one after the other, under much the same load from
                            // the rest of the machine.
                            for broker in &options.brokers {
                                runs.push(Run {
                                    backend,
                                    broker,
                                    nodes,
                                    jobs,
                                    emit_lead_ms,
                                    telemetry,
                                    fires,
                                    sink,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    runs
}

/// The setting of how triggers are signed (`signing.trigger_signatures`).
const SIGNATURES_VARIABLE: &str = "KADENCE_SIGNING__TRIGGER_SIGNATURES";

/// Starts the `run.nodes` scheduler nodes of `run` on `database` and its broker, all on the
/// first node's topic prefix.
async fn start_nodes(database: &Database, run: &Run<'_>) -> Vec<Serve> {
    let mut settings = vec![
        ("KADENCE_SCHEDULE__BATCH_SIZE", "5000".to_owned()),
        (
            "KADENCE_SCHEDULE__EMIT_LEAD",
            format!("{}ms", run.emit_lead_ms),
        ),
    ];
    // No executor beats here, so `auto` would sign every trigger alone; the triggers of an app
    // whose executors are of this version are signed by the round, and that is what the rows
    // stand for. The variable set by hand (`record`, to compare) wins.
    if std::env::var_os(SIGNATURES_VARIABLE).is_none() {
        settings.push((SIGNATURES_VARIABLE, "round".to_owned()));
    }
    settings.push(match run.telemetry {
        Telemetry::Off | Telemetry::Metrics => ("OTEL_TRACES_SAMPLER", "always_off".to_owned()),
        Telemetry::On => (
            "KADENCE_TELEMETRY__OTLP_ENDPOINT",
            run.sink.endpoint.clone(),
        ),
    });
    let with_id = |index| {
        let mut settings = settings.clone();
        settings.push(("KADENCE_SCHEDULE__NODE_ID", node_id(index)));
        settings
    };
    let mut serves = vec![Serve::start(database, run.broker, &with_id(0)).await];
    for index in 1..run.nodes {
        let prefix = serves[0].prefix.clone();
        serves.push(Serve::start_node(database, run.broker, &prefix, &with_id(index)).await);
    }
    serves
}

/// CPU ticks of all `serves` so far, and the largest peak resident memory among them (KiB).
fn nodes_usage(serves: &[Serve]) -> (u64, u64) {
    serves
        .iter()
        .filter_map(|serve| process_usage(serve.pid()))
        .fold((0, 0), |(ticks, peak), (t, p)| (ticks + t, peak.max(p)))
}

/// Stops `serves`; returns the triggers they counted as emitted, the last node's left out
/// when it was `killed` (its count died with it).
async fn stop_nodes(serves: Vec<Serve>, killed: bool) -> f64 {
    let live = serves.len() - usize::from(killed);
    let mut emitted = 0.0;
    for (index, serve) in serves.into_iter().enumerate() {
        if index < live {
            emitted += serve
                .counter("kadence_scheduler_triggers_emitted_total")
                .await;
        }
        serve.stop().await;
    }
    emitted
}

/// Makes the jobs due every second fire each at its own millisecond of the second from
/// `first_fire` (FIX_RATE 1 s), instead of all on the second (`--fires spread`).
async fn spread_fires(database: &Database, first_fire: i64) {
    database
        .execute(&format!(
            "UPDATE jobs SET schedule_type = 'FIX_RATE', schedule_conf = '1', \
             next_fire_ms = {first_fire} + id % 1000 WHERE schedule_conf = '* * * * * ?'"
        ))
        .await;
}

/// Broker acknowledgement − scheduled time of the fires acknowledged in `[start, end)`,
/// sorted.
async fn acked_lateness(database: &Database, (start, end): (i64, i64)) -> Vec<i64> {
    let acked = database
        .integers(
            "SELECT scheduled_at_ms, dispatched_at_ms FROM job_logs \
             WHERE dispatched_at_ms >= $1 AND dispatched_at_ms < $2",
            &[start, end],
        )
        .await;
    let mut lateness: Vec<i64> = acked.iter().map(|row| row[1] - row[0]).collect();
    lateness.sort_unstable();
    lateness
}

/// What the scheduler nodes did over the window.
struct Observed {
    /// CPU ticks of all nodes.
    ticks: u64,
    /// The CPU every process of the run spent.
    spent: CpuSpent,
    /// The largest peak resident memory among them, KiB.
    peak_kib: u64,
    /// When a node was killed: seconds into the window, and ms until the survivor owned
    /// every schedule shard.
    takeover: Option<(u64, i64)>,
}

/// Watches `serves` over `window`, and the CPU of `broker_pids` and the database beside them;
/// with `kill_at`, kills the last node that many seconds into it, and after the window waits
/// until the dead node's fires were emitted.
async fn observe_window(
    database: &Database,
    serves: &[Serve],
    broker_pids: &[u32],
    window: (i64, i64),
    kill_at: Option<u64>,
) -> Observed {
    sleep_until_ms(window.0).await;
    let (ticks_start, _) = nodes_usage(serves);
    let before = Usage::now(0, ticks_start, broker_pids);
    let takeover = match kill_at {
        Some(seconds) => {
            let at_ms = window.0 + seconds as i64 * 1000;
            Some((
                seconds,
                kill_and_time_takeover(database, serves, at_ms).await,
            ))
        }
        None => None,
    };
    sleep_until_ms(window.1).await;
    let (ticks_end, peak_kib) = nodes_usage(serves);
    let after = Usage::now(0, ticks_end, broker_pids);
    if kill_at.is_some() {
        wait_until_emitted(database, window.1).await;
    }
    Observed {
        ticks: ticks_end - ticks_start,
        spent: CpuSpent::between(&before, &after),
        peak_kib,
        takeover,
    }
}

async fn run_one(options: &Options, run: Run<'_>) -> Measurement {
    let brokers = run.broker.bootstrap.as_str();
    let database = Database::create(run.backend).await;
    let loading = Instant::now();
    load_jobs(&database, run.jobs, options.defined, 0, now_ms()).await;
    let load_seconds = loading.elapsed().as_secs_f64();
    // The raw rate of this run's broker just before the scheduler runs on it.
    let raw_rate = median_raw_rate(brokers, (run.jobs * 5).clamp(50_000, 300_000)).await;
    // The first fire is set after loading, which can take a while for a million jobs.
    let now = now_ms();
    let first_fire = set_first_fire(&database, Duration::from_secs(3)).await;
    if run.fires == Fires::Spread {
        spread_fires(&database, first_fire).await;
    }
    let rows_before = database.rows_written().await;
    let serves = start_nodes(&database, &run).await;
    let kill_at = options.kill_node_at.filter(|_| run.nodes > 1);
    let scrapers: Vec<_> = serves
        .iter()
        .filter(|_| run.telemetry != Telemetry::Off)
        .map(|serve| scrape_every_second(&serve.api))
        .collect();
    // Measure from the first fire + warm-up, for the requested seconds.
    let window_start = first_fire.max(now) + WARM_UP.as_millis() as i64;
    let window = (window_start, window_start + options.seconds as i64 * 1000);
    let broker_pids = broker_processes(run.broker);
    let observed = observe_window(&database, &serves, &broker_pids, window, kill_at).await;
    let prefix = serves[0].prefix.clone();
    // Let acknowledgements of the window's fires land, then stop the schedulers.
    tokio::time::sleep(Duration::from_secs(2)).await;
    scrapers.iter().for_each(|scraper| scraper.abort());
    let emitted = stop_nodes(serves, kill_at.is_some()).await;
    // Every row the schedulers wrote from their start to their stop (their connections
    // have closed, so the statistics are complete), per trigger they emitted meanwhile; not
    // for a run with a killed node, whose count of emitted triggers died with it.
    let rows_per_trigger = match (rows_before, database.rows_written().await) {
        (Some(before), Some(after)) if emitted > 0.0 && kill_at.is_none() => {
            Some((after - before) as f64 / emitted)
        }
        _ => None,
    };
    let fault = match observed.takeover {
        Some(kill) => {
            let topic = (brokers, prefix.as_str());
            Some(FaultOutcome::audit(topic, run.jobs, window, kill).await)
        }
        None => None,
    };
    let lateness = acked_lateness(&database, window).await;
    database.drop().await;
    eprintln!(
        "  loaded {} jobs in {load_seconds:.1} s",
        run.jobs + options.defined
    );
    Measurement {
        backend: run.backend,
        broker: run.broker.kind,
        nodes: run.nodes,
        emit_lead_ms: run.emit_lead_ms,
        telemetry: run.telemetry,
        fires: run.fires,
        jobs: run.jobs,
        defined: run.jobs + options.defined,
        acked: lateness.len(),
        acked_per_second: lateness.len() as f64 / options.seconds as f64,
        p50: percentile(&lateness, 0.50),
        p99: percentile(&lateness, 0.99),
        max: lateness.last().copied().unwrap_or(0),
        cpu: observed.ticks as f64 / clock_ticks_per_second() / options.seconds as f64,
        spent: observed.spent,
        peak_mib: observed.peak_kib as f64 / 1024.0,
        rows_per_trigger,
        raw_rate,
        fault,
    }
}

/// The run's conditions above the table: each broker's acknowledgement latency (measured
/// now, `ack_latencies`), the record size, the window, what telemetry exported.
fn print_conditions(options: &Options, ack_latencies: &[(BrokerKind, (f64, f64))], exported: u64) {
    let latencies: Vec<String> = ack_latencies
        .iter()
        .map(|(kind, (p50, p99))| format!("{} p50 {p50:.1} ms, p99 {p99:.1} ms", kind.label()))
        .collect();
    println!();
    println!(
        "broker acknowledgement latency at a steady 1000 records/s, same client: {}",
        latencies.join("; ")
    );
    println!(
        "record size {} bytes, {PARTITIONS} partitions, {} s measured after an {} s warm-up",
        trigger_payload().len(),
        options.seconds,
        WARM_UP.as_secs()
    );
    println!();
    println!(
        "telemetry metrics: /metrics scraped every second; on: also every span exported over OTLP ({:.1} MiB received in all)",
        exported as f64 / 1024.0 / 1024.0
    );
    println!();
    println!(
        "raw produce/s: the row's broker's rate just before its configuration, median of \
         three; DB rows per trigger: rows inserted, updated and deleted (PostgreSQL's \
         statistics) from the schedulers' start to their stop, per trigger emitted; scheduler \
         CPU: all nodes, share of one core; peak RSS: the largest node; CPU per trigger: each \
         process's user + system time over the window per trigger acknowledged in it (broker: \
         the processes listening on its address; PostgreSQL: every postgres process; machine: \
         everyone's, all cores)"
    );
}

fn print_table(rows: &[Measurement]) {
    println!();
    println!(
        "| backend | broker | nodes | emit lead | telemetry | fires | jobs due/s | jobs defined | acked triggers/s | lateness p50 | p99 | max | scheduler CPU | peak RSS | DB rows per trigger | raw produce/s | share of raw | scheduler CPU per trigger | broker | PostgreSQL | machine |"
    );
    println!(
        "|---|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for row in rows {
        println!(
            "| {} | {} | {} | {} ms | {} | {} | {} | {} | {:.0} | {} ms | {} ms | {} ms | {:.0} % | {:.0} MiB | {} | {:.0} | {:.0} % | {} | {} | {} | {} |",
            row.backend.label(),
            row.broker.label(),
            row.nodes,
            row.emit_lead_ms,
            row.telemetry.label(),
            row.fires.label(),
            row.jobs,
            row.defined,
            row.acked_per_second,
            row.p50,
            row.p99,
            row.max,
            row.cpu * 100.0,
            row.peak_mib,
            row.rows_per_trigger
                .map_or("n/a".to_owned(), |rows| format!("{rows:.2}")),
            row.raw_rate,
            row.acked_per_second / row.raw_rate * 100.0,
            per_trigger(row.spent.scheduler, row.acked),
            (row.spent.broker).map_or_else(|| "–".to_owned(), |cpu| per_trigger(cpu, row.acked)),
            match row.backend {
                Backend::Postgres => per_trigger(row.spent.database, row.acked),
                Backend::Sqlite => "in scheduler".to_owned(),
            },
            per_trigger(row.spent.machine, row.acked),
        );
    }
}

/// The kill -9 table, when a run killed a node.
fn print_faults(rows: &[Measurement]) {
    let faults: Vec<&Measurement> = rows.iter().filter(|row| row.fault.is_some()).collect();
    if faults.is_empty() {
        return;
    }
    println!();
    println!(
        "kill -9 of one of the nodes during the window: fires expected (every job, every \
         second of the window), fires with no trigger record (lost), trigger ids emitted more \
         than once (each copy has the same id), and the time from the kill to the survivor \
         owning every schedule shard"
    );
    println!();
    println!(
        "| backend | broker | nodes | jobs due/s | killed at | shard takeover | fires expected | lost | misfires | ids emitted twice |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in faults {
        let fault = row.fault.as_ref().expect("a fault row");
        println!(
            "| {} | {} | {} | {} | +{} s | {} ms | {} | {} | {} | {} |",
            row.backend.label(),
            row.broker.label(),
            row.nodes,
            row.jobs,
            fault.killed_at_s,
            fault.takeover_ms,
            fault.audit.expected,
            fault.audit.missing.len(),
            fault.audit.misfires,
            fault.audit.doubled.len(),
        );
    }
}

#[tokio::main]
async fn main() {
    let options = options();
    let sink = SpanSink::start().await;
    let mut rows = Vec::new();
    for run in runs(&options, &sink) {
        eprintln!(
            "running {:?} on {}, {} node(s), {} jobs due every second ({}), emit lead {} ms, telemetry {}, for {} s...",
            run.backend,
            run.broker.kind.label(),
            run.nodes,
            run.jobs,
            run.fires.label(),
            run.emit_lead_ms,
            run.telemetry.label(),
            options.seconds
        );
        rows.push(run_one(&options, run).await);
    }
    let exported = sink.received_bytes.load(Ordering::Relaxed);
    let mut ack_latencies = Vec::new();
    for broker in &options.brokers {
        ack_latencies.push((broker.kind, broker_ack_latency(&broker.bootstrap).await));
    }
    print_conditions(&options, &ack_latencies, exported);
    print_table(&rows);
    print_faults(&rows);
}
