//! Scheduler throughput benchmark: N jobs due every second, sustained, on SQLite and
//! PostgreSQL, against the same broker's raw produce rate measured in the same run.
//!
//! ```text
//! infra/bench.sh                                    # starts a broker, runs the defaults
//! KADENCE_BENCH_BROKERS=127.0.0.1:9092 cargo bench -p kadence-scheduler --bench throughput -- \
//!     --jobs 1000,10000 --seconds 20 --backends sqlite,postgres --defined 1000000 --nodes 1,2
//! ```
//!
//! For each backend and job count it loads the jobs straight into a fresh database (cron
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
//! - the raw produce rate of the same broker with the same client settings (idempotent,
//!   acks=all, linger 2 ms) for records of the same size, so the scheduler's rate is shown
//!   as a fraction of what the broker takes;
//!
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
//! The raw produce rate is measured just before each configuration, median of three.
//!
//! `--fires aligned,spread` (default `aligned`) chooses when in its second each job fires:
//! `aligned`, every job on the second (cron `* * * * * ?`, each second's fires one burst, the
//! worst case for lateness without an emit lead: the last of the burst waits for the broker to
//! take all the others); `spread`, every job every second at its own millisecond (FIX_RATE 1 s,
//! first fires spread evenly over the second, as jobs created at different times fire), the
//! same rate without the bursts.
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
//! `KADENCE_BENCH_LOG=warn,kadence_scheduler::preread=debug` prints each pre-read scan with
//! the time it spent in the store and handing fires to the wheel.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{
    APP, Backend, Database, PARTITIONS, Serve, choice_name, clock_ticks_per_second, flags,
    load_jobs, now_ms, parse_choices, parse_numbers, percentile, process_usage, set_first_fire,
    sleep_until_ms,
};
use kadence_schemas::{
    AppName, BlockStrategy, GlueType, JobId, TriggerId, TriggerRecord, TriggerType, codec,
};
use kadence_tests::triggers::{FireAudit, read_triggers};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;

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
    nodes: Vec<usize>,
    kill_node_at: Option<u64>,
    defined: usize,
    brokers: String,
}

fn options() -> Options {
    let mut options = Options {
        jobs: vec![1_000, 10_000],
        emit_leads_ms: vec![0, 1_000],
        telemetry: vec![Telemetry::On],
        fires: vec![Fires::Aligned],
        seconds: 20,
        backends: vec![Backend::Sqlite, Backend::Postgres],
        nodes: vec![1],
        kill_node_at: None,
        defined: 0,
        brokers: common::brokers(),
    };
    for (flag, value) in flags() {
        match flag.as_str() {
            "--jobs" => options.jobs = parse_numbers(&flag, &value),
            "--seconds" => options.seconds = value.parse().expect("--seconds N"),
            "--emit-leads-ms" => options.emit_leads_ms = parse_numbers(&flag, &value),
            "--telemetry" => options.telemetry = Telemetry::parse_list(&value),
            "--fires" => options.fires = Fires::parse_list(&value),
            "--defined" => options.defined = value.parse().expect("--defined N"),
            "--backends" => options.backends = Backend::parse_list(&value),
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
    options
}

/// A representative trigger record's encoded size.
fn trigger_payload() -> Vec<u8> {
    let job = JobId::new(123_456).unwrap();
    codec::encode(&TriggerRecord {
        trigger_id: TriggerId::scheduled(job, 1_767_225_600_000),
        log_id: 9_876_543,
        job_id: job,
        app: AppName::parse("bench").unwrap(),
        handler: "tick".into(),
        params: String::new(),
        shard_index: 0,
        shard_total: 1,
        block_strategy: BlockStrategy::SerialExecution,
        timeout_ms: 0,
        trigger_type: TriggerType::Cron,
        scheduled_at_ms: 1_767_225_600_000,
        emitted_at_ms: 1_767_225_600_001,
        attempt: 0,
        glue_type: GlueType::Bean,
        glue_source: None,
        glue_updated_at_ms: None,
        replay_of: None,
    })
    .unwrap()
}

/// A new topic with the trigger topics' partition count, and a producer configured like the
/// scheduler's (idempotent, acks=all, linger 2 ms).
async fn fresh_topic_and_producer(brokers: &str, purpose: &str) -> (String, FutureProducer) {
    let topic = format!("kbench{:x}.{purpose}", rand::random::<u32>());
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .unwrap();
    let new_topic = NewTopic::new(&topic, PARTITIONS, TopicReplication::Fixed(-1));
    admin
        .create_topics([&new_topic], &AdminOptions::new())
        .await
        .unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "2")
        .create()
        .unwrap();
    (topic, producer)
}

/// The broker's own acknowledgement latency for single records sent at a steady 1 000/s
/// (p50, p99 in ms): the floor under any scheduler's fire lateness on this broker.
async fn broker_ack_latency(brokers: &str) -> (f64, f64) {
    let (topic, producer) = fresh_topic_and_producer(brokers, "probe").await;
    let payload = trigger_payload();
    // Warm the connection and the idempotent producer id first.
    producer
        .send(
            FutureRecord::<str, [u8]>::to(&topic).payload(&payload),
            Timeout::Never,
        )
        .await
        .unwrap();
    let mut ticker = tokio::time::interval(Duration::from_millis(1));
    let pending = futures::stream::FuturesUnordered::new();
    for n in 0..3_000 {
        ticker.tick().await;
        let sent = Instant::now();
        let delivery = producer
            .send_result(
                FutureRecord::<str, [u8]>::to(&topic)
                    .payload(&payload)
                    .partition(n % PARTITIONS),
            )
            .unwrap();
        // A task per delivery, so each is timed when the broker answers, not when collected.
        pending.push(tokio::spawn(async move {
            delivery.await.unwrap().map_err(|(error, _)| error).unwrap();
            sent.elapsed().as_secs_f64() * 1000.0
        }));
    }
    use futures::StreamExt;
    let mut latencies: Vec<f64> = pending.map(|joined| joined.unwrap()).collect().await;
    latencies.sort_by(f64::total_cmp);
    let at = |fraction: f64| latencies[((latencies.len() - 1) as f64 * fraction) as usize];
    (at(0.5), at(0.99))
}

/// Records per second the broker takes from one idempotent producer, as fast as it can send.
async fn raw_produce_rate(brokers: &str, records: usize) -> f64 {
    let (topic, producer) = fresh_topic_and_producer(brokers, "raw").await;
    let payload = trigger_payload();
    let started = Instant::now();
    let mut in_flight = futures::stream::FuturesUnordered::new();
    for n in 0..records {
        let key = (n % 100_000).to_string();
        let partition = (n % PARTITIONS as usize) as i32;
        loop {
            match producer.send_result(
                FutureRecord::to(&topic)
                    .key(&key)
                    .payload(&payload)
                    .partition(partition),
            ) {
                Ok(delivery) => {
                    in_flight.push(delivery);
                    break;
                }
                Err(_) => {
                    use futures::StreamExt;
                    in_flight.next().await;
                }
            }
        }
    }
    use futures::StreamExt;
    while let Some(delivery) = in_flight.next().await {
        delivery.unwrap().map_err(|(error, _)| error).unwrap();
    }
    producer
        .flush(Timeout::After(Duration::from_secs(30)))
        .unwrap();
    records as f64 / started.elapsed().as_secs_f64()
}

struct Measurement {
    backend: Backend,
    nodes: usize,
    emit_lead_ms: u64,
    telemetry: Telemetry,
    fires: Fires,
    jobs: usize,
    defined: usize,
    acked_per_second: f64,
    p50: i64,
    p99: i64,
    max: i64,
    cpu: f64,
    peak_mib: f64,
    rows_per_trigger: Option<f64>,
    raw_rate: f64,
    fault: Option<FaultOutcome>,
}

/// What a kill -9 of a scheduler node in the middle of the window did.
struct FaultOutcome {
    /// Seconds into the window the node was killed at.
    killed_at_s: u64,
    /// From the kill to the survivor owning every schedule shard, ms.
    takeover_ms: i64,
    /// The audit of every job's fires over the window, from the trigger topic.
    audit: FireAudit,
}

/// The node id of scheduler node `index` in a benchmark.
fn node_id(index: usize) -> String {
    format!("bench-node-{index}")
}

/// Kills the last of `serves` with SIGKILL at `at_ms` and waits until node 0 owns every
/// schedule shard; returns how long that took, ms.
async fn kill_and_time_takeover(database: &Database, serves: &[Serve], at_ms: i64) -> i64 {
    sleep_until_ms(at_ms).await;
    let victim = serves.last().expect("nodes").pid();
    let killed = std::process::Command::new("kill")
        .args(["-9", &victim.to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success(), "kill -9 {victim}");
    let killed_ms = now_ms();
    let survivor = node_id(0);
    loop {
        let owned = database
            .integers(
                &format!(
                    "SELECT COUNT(*), SUM(CASE WHEN owner_node = '{survivor}' THEN 1 ELSE 0 END) \
                     FROM schedule_shards"
                ),
                &[],
            )
            .await;
        if owned[0][0] == owned[0][1] {
            return now_ms() - killed_ms;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (at most a minute) until no fire due before `until_ms` is still pending (no fire
/// batch waits for one): the dead node's batches are claimed once their lease ends.
async fn wait_until_emitted(database: &Database, until_ms: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let pending = database
            .integers(
                "SELECT COUNT(*) FROM fire_batches WHERE pending_from_ms < $1",
                &[until_ms],
            )
            .await;
        if pending[0][0] == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
/// The median of three raw produce rates measured one after the other.
async fn median_raw_rate(brokers: &str, records: usize) -> f64 {
    let mut rates = Vec::with_capacity(3);
    for _ in 0..3 {
        rates.push(raw_produce_rate(brokers, records).await);
    }
    rates.sort_by(f64::total_cmp);
    rates[1]
}

/// One configuration: what runs, how many scheduler nodes, with which emit lead and telemetry.
struct Run<'a> {
    backend: Backend,
    nodes: usize,
    jobs: usize,
    emit_lead_ms: u64,
    telemetry: Telemetry,
    fires: Fires,
    sink: &'a SpanSink,
}

async fn run_one(options: &Options, run: Run<'_>) -> Measurement {
    let Run {
        backend,
        nodes,
        jobs,
        emit_lead_ms,
        telemetry,
        fires,
        sink,
    } = run;
    let database = Database::create(backend).await;
    let loading = Instant::now();
    load_jobs(&database, jobs, options.defined, 0, now_ms()).await;
    let load_seconds = loading.elapsed().as_secs_f64();
    // The broker's raw rate just before the scheduler runs on it, median of three.
    let raw_rate = median_raw_rate(&options.brokers, (jobs * 5).clamp(50_000, 300_000)).await;
    // The first fire is set after loading, which can take a while for a million jobs.
    let now = now_ms();
    let first_fire = set_first_fire(&database, Duration::from_secs(3)).await;
    if fires == Fires::Spread {
        database
            .execute(&format!(
                "UPDATE jobs SET schedule_type = 'FIX_RATE', schedule_conf = '1', \
                 next_fire_ms = {first_fire} + id % 1000 WHERE schedule_conf = '* * * * * ?'"
            ))
            .await;
    }
    let mut settings = vec![
        ("KADENCE_SCHEDULE__BATCH_SIZE", "5000".to_owned()),
        ("KADENCE_SCHEDULE__EMIT_LEAD", format!("{emit_lead_ms}ms")),
    ];
    settings.push(match telemetry {
        Telemetry::Off | Telemetry::Metrics => ("OTEL_TRACES_SAMPLER", "always_off".to_owned()),
        Telemetry::On => ("KADENCE_TELEMETRY__OTLP_ENDPOINT", sink.endpoint.clone()),
    });
    let rows_before = database.rows_written().await;
    let with_id = |index| {
        let mut settings = settings.clone();
        settings.push(("KADENCE_SCHEDULE__NODE_ID", node_id(index)));
        settings
    };
    let mut serves = vec![Serve::start(&database, &with_id(0)).await];
    for index in 1..nodes {
        let prefix = serves[0].prefix.clone();
        serves.push(Serve::start_node(&database, &prefix, &with_id(index)).await);
    }
    let kill_at = options.kill_node_at.filter(|_| nodes > 1);
    let scrapers: Vec<_> = serves
        .iter()
        .filter(|_| telemetry != Telemetry::Off)
        .map(|serve| scrape_every_second(&serve.api))
        .collect();
    let usage = || {
        serves
            .iter()
            .filter_map(|serve| process_usage(serve.pid()))
            .fold((0, 0), |(ticks, peak), (t, p)| (ticks + t, peak.max(p)))
    };
    // Measure from the first fire + warm-up, for the requested seconds.
    let window_start = first_fire.max(now) + WARM_UP.as_millis() as i64;
    let window_end = window_start + options.seconds as i64 * 1000;
    sleep_until_ms(window_start).await;
    let (ticks_start, _) = usage();
    let takeover_ms = match kill_at {
        Some(seconds) => {
            let at_ms = window_start + seconds as i64 * 1000;
            Some(kill_and_time_takeover(&database, &serves, at_ms).await)
        }
        None => None,
    };
    sleep_until_ms(window_end).await;
    let (ticks_end, peak_kib) = usage();
    if kill_at.is_some() {
        wait_until_emitted(&database, window_end).await;
    }
    let prefix = serves[0].prefix.clone();
    // Let acknowledgements of the window's fires land, then stop the schedulers.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for scraper in scrapers {
        scraper.abort();
    }
    let mut emitted = 0.0;
    let killed = usize::from(kill_at.is_some());
    for (index, serve) in serves.into_iter().enumerate() {
        if index + killed < nodes {
            emitted += serve
                .counter("kadence_scheduler_triggers_emitted_total")
                .await;
        }
        serve.stop().await;
    }
    // Every row the schedulers wrote from their start to their stop (their connections
    // have closed, so the statistics are complete), per trigger they emitted meanwhile; not
    // for a run with a killed node, whose count of emitted triggers died with it.
    let rows_per_trigger = match (rows_before, database.rows_written().await) {
        (Some(before), Some(after)) if emitted > 0.0 && killed == 0 => {
            Some((after - before) as f64 / emitted)
        }
        _ => None,
    };
    let fault = match (kill_at, takeover_ms) {
        (Some(killed_at_s), Some(takeover_ms)) => {
            let topic = format!("{prefix}.triggers.{APP}");
            let records = read_triggers(&options.brokers, &topic, PARTITIONS).await;
            let due: Vec<i64> = (1..=jobs as i64).collect();
            let audit = FireAudit::of(&records, &due, window_start, window_end);
            Some(FaultOutcome {
                killed_at_s,
                takeover_ms,
                audit,
            })
        }
        _ => None,
    };
    let acked = database
        .integers(
            "SELECT scheduled_at_ms, dispatched_at_ms FROM job_logs \
             WHERE dispatched_at_ms >= $1 AND dispatched_at_ms < $2",
            &[window_start, window_end],
        )
        .await;
    let mut lateness: Vec<i64> = acked.iter().map(|row| row[1] - row[0]).collect();
    lateness.sort_unstable();
    database.drop().await;
    eprintln!(
        "  loaded {} jobs in {load_seconds:.1} s",
        jobs + options.defined
    );
    Measurement {
        backend,
        nodes,
        emit_lead_ms,
        telemetry,
        fires,
        jobs,
        defined: jobs + options.defined,
        acked_per_second: acked.len() as f64 / options.seconds as f64,
        p50: percentile(&lateness, 0.50),
        p99: percentile(&lateness, 0.99),
        max: lateness.last().copied().unwrap_or(0),
        cpu: (ticks_end - ticks_start) as f64 / clock_ticks_per_second() / options.seconds as f64,
        peak_mib: peak_kib as f64 / 1024.0,
        rows_per_trigger,
        raw_rate,
        fault,
    }
}

#[tokio::main]
async fn main() {
    let options = options();
    let sink = SpanSink::start().await;
    let mut rows = Vec::new();
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
                            runs.push(Run {
                                backend,
                                nodes,
                                jobs,
                                emit_lead_ms,
                                telemetry,
                                fires,
                                sink: &sink,
                            });
                        }
                    }
                }
            }
        }
    }
    for run in runs {
        eprintln!(
            "running {:?} on {} node(s) with {} jobs due every second ({}), emit lead {} ms, telemetry {}, for {} s...",
            run.backend,
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
    let payload = trigger_payload().len();
    let (ack_p50, ack_p99) = broker_ack_latency(&options.brokers).await;
    println!();
    println!(
        "broker acknowledgement latency at a steady 1000 records/s, same client: p50 {ack_p50:.1} ms, p99 {ack_p99:.1} ms"
    );
    println!(
        "record size {payload} bytes, {PARTITIONS} partitions, {} s measured after an {} s warm-up",
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
        "raw produce/s: the broker's rate just before each configuration, median of three; \
         DB rows per trigger: rows inserted, updated and deleted (PostgreSQL's statistics) \
         from the schedulers' start to their stop, per trigger emitted; scheduler CPU: all \
         nodes, share of one core; peak RSS: the largest node"
    );
    println!();
    println!(
        "| backend | nodes | emit lead | telemetry | fires | jobs due/s | jobs defined | acked triggers/s | lateness p50 | p99 | max | scheduler CPU | peak RSS | DB rows per trigger | raw produce/s | share of raw |"
    );
    println!("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");

    for row in &rows {
        println!(
            "| {} | {} | {} ms | {} | {} | {} | {} | {:.0} | {} ms | {} ms | {} ms | {:.0} % | {:.0} MiB | {} | {:.0} | {:.0} % |",
            row.backend.label(),
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
        );
    }
    let faults: Vec<&Measurement> = rows.iter().filter(|row| row.fault.is_some()).collect();
    if !faults.is_empty() {
        println!();
        println!(
            "kill -9 of one of the nodes during the window: fires expected (every job, every \
             second of the window), fires with no trigger record (lost), trigger ids emitted more \
             than once (each copy has the same id), and the time from the kill to the survivor \
             owning every schedule shard"
        );
        println!();
        println!(
            "| backend | nodes | jobs due/s | killed at | shard takeover | fires expected | lost | misfires | ids emitted twice |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for row in faults {
            let fault = row.fault.as_ref().expect("a fault row");
            println!(
                "| {} | {} | {} | +{} s | {} ms | {} | {} | {} | {} |",
                row.backend.label(),
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
}
