//! Scheduler throughput benchmark: N jobs due every second, sustained, on SQLite and
//! PostgreSQL, against the same broker's raw produce rate measured in the same run.
//!
//! ```text
//! infra/bench.sh                                    # starts a broker, runs the defaults
//! KADENCE_BENCH_BROKERS=127.0.0.1:9092 cargo bench -p kadence-scheduler --bench throughput -- \
//!     --jobs 1000,10000 --seconds 20 --backends sqlite,postgres --defined 1000000
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
//!   as a fraction of what the broker takes.
//!
//! `--defined M` adds M idle jobs (next fire in 2099) so the memory figure holds with that
//! many jobs defined.
//!
//! The scheduler's log goes to stderr at `warn`; `KADENCE_BENCH_LOG` replaces that filter, e.g.
//! `KADENCE_BENCH_LOG=warn,kadence_scheduler::preread=debug` prints each pre-read scan with
//! the time it spent in the store and handing fires to the wheel.

use std::process::Stdio;
use std::str::FromStr;
use std::time::{Duration, Instant};

use kadence_schemas::{
    AppName, BlockStrategy, GlueType, JobId, TriggerId, TriggerRecord, TriggerType, codec,
};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use sqlx::{Connection, Executor, Row};

const PARTITIONS: i32 = 6;
const WARM_UP: Duration = Duration::from_secs(8);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Backend {
    Sqlite,
    Postgres,
}

struct Options {
    jobs: Vec<usize>,
    emit_leads_ms: Vec<u64>,
    seconds: u64,
    backends: Vec<Backend>,
    defined: usize,
    brokers: String,
    postgres: String,
}

fn options() -> Options {
    let mut options = Options {
        jobs: vec![1_000, 10_000],
        emit_leads_ms: vec![0, 1_000],
        seconds: 20,
        backends: vec![Backend::Sqlite, Backend::Postgres],
        defined: 0,
        brokers: std::env::var("KADENCE_BENCH_BROKERS")
            .expect("set KADENCE_BENCH_BROKERS to a broker address (infra/bench.sh does)"),
        postgres: std::env::var("KADENCE_BENCH_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned()),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut index = 0;
    while index < args.len() {
        let value = args.get(index + 1).cloned().unwrap_or_default();
        match args[index].as_str() {
            "--jobs" => {
                options.jobs = value
                    .split(',')
                    .map(|n| n.parse().expect("--jobs N,N"))
                    .collect()
            }
            "--seconds" => options.seconds = value.parse().expect("--seconds N"),
            "--emit-leads-ms" => {
                options.emit_leads_ms = value
                    .split(',')
                    .map(|n| n.parse().expect("--emit-leads-ms N,N"))
                    .collect()
            }
            "--defined" => options.defined = value.parse().expect("--defined N"),
            "--backends" => {
                options.backends = value
                    .split(',')
                    .map(|name| match name {
                        "sqlite" => Backend::Sqlite,
                        "postgres" => Backend::Postgres,
                        other => panic!("unknown backend {other}: sqlite or postgres"),
                    })
                    .collect()
            }
            "--bench" => {
                index += 1;
                continue;
            }
            other => panic!("unknown option {other}"),
        }
        index += 2;
    }
    options
}

/// A database for one run, dropped afterwards.
enum Database {
    Sqlite {
        url: String,
        _dir: tempfile::TempDir,
    },
    Postgres {
        url: String,
        name: String,
        admin: String,
    },
}

impl Database {
    async fn create(backend: Backend, admin: &str) -> Database {
        let suffix: u64 = rand::random();
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}", dir.path().join("bench.db").display());
                Database::Sqlite { url, _dir: dir }
            }
            Backend::Postgres => {
                let name = format!("kadence_bench_{suffix:x}");
                let mut connection = sqlx::PgConnection::connect(admin).await.unwrap();
                connection
                    .execute(format!("CREATE DATABASE {name}").as_str())
                    .await
                    .unwrap();
                let base = admin.rsplit_once('/').unwrap().0;
                Database::Postgres {
                    url: format!("{base}/{name}"),
                    name,
                    admin: admin.to_owned(),
                }
            }
        }
    }

    fn url(&self) -> &str {
        match self {
            Database::Sqlite { url, .. } | Database::Postgres { url, .. } => url,
        }
    }

    async fn execute(&self, sql: &str) {
        match self {
            Database::Sqlite { url, .. } => {
                let mut connection = sqlx::SqliteConnection::connect(url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut connection).await.unwrap();
            }
            Database::Postgres { url, .. } => {
                let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut connection).await.unwrap();
            }
        }
    }

    /// `(scheduled_at_ms, dispatched_at_ms)` of runs acknowledged within `[from, to)`.
    async fn acknowledged(&self, from: i64, to: i64) -> Vec<(i64, i64)> {
        let sql = "SELECT scheduled_at_ms, dispatched_at_ms FROM job_logs \
                   WHERE dispatched_at_ms >= $1 AND dispatched_at_ms < $2";
        match self {
            Database::Sqlite { url, .. } => {
                let mut connection = sqlx::SqliteConnection::connect(url).await.unwrap();
                sqlx::query(sql)
                    .bind(from)
                    .bind(to)
                    .fetch_all(&mut connection)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|row| (row.get(0), row.get(1)))
                    .collect()
            }
            Database::Postgres { url, .. } => {
                let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query(sql)
                    .bind(from)
                    .bind(to)
                    .fetch_all(&mut connection)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|row| (row.get(0), row.get(1)))
                    .collect()
            }
        }
    }

    async fn drop(self) {
        if let Database::Postgres { name, admin, .. } = self {
            let mut connection = sqlx::PgConnection::connect(&admin).await.unwrap();
            let _ = connection
                .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                .await;
        }
    }
}

/// Loads `due` jobs firing every second from `first_fire_ms` and `idle` jobs not due before
/// 2099, in multi-row inserts.
async fn load_jobs(database: &Database, due: usize, idle: usize, first_fire_ms: i64, now_ms: i64) {
    database
        .execute(&format!(
            "INSERT INTO apps (name, title, partitions, created_at_ms) VALUES ('bench', 'bench', {PARTITIONS}, {now_ms})"
        ))
        .await;
    let idle_fire = 4_070_908_800_000i64; // 2099-01-01
    let mut remaining: Vec<(&str, i64, usize)> = vec![
        ("* * * * * ?", first_fire_ms, due),
        ("0 0 0 1 1 ? 2099", idle_fire, idle),
    ];
    for (cron, next, count) in remaining.drain(..) {
        let mut written = 0;
        while written < count {
            let chunk = (count - written).min(2_000);
            let values: Vec<String> = (0..chunk)
                .map(|_| format!(
                    "('bench', 'bench', 'CRON', '{cron}', 'UTC', 'DO_NOTHING', 'RANDOM', 'tick', '', \
                     'SERIAL_EXECUTION', 0, 'RUNNING', {next}, {now_ms}, {now_ms})"
                ))
                .collect();
            database
                .execute(&format!(
                    "INSERT INTO jobs (app, name, schedule_type, schedule_conf, time_zone, misfire_strategy, \
                     route_strategy, handler, params, block_strategy, timeout_ms, status, next_fire_ms, \
                     created_at_ms, updated_at_ms) VALUES {}",
                    values.join(", ")
                ))
                .await;
            written += chunk;
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// CPU ticks (user + system) and peak resident memory (KiB) of a process.
fn process_usage(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let peak_kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())?;
    Some((ticks, peak_kib))
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| f64::from_str(text.trim()).ok())
        .unwrap_or(100.0)
}

fn percentile(sorted: &[i64], fraction: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[rank]
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
    emit_lead_ms: u64,
    jobs: usize,
    defined: usize,
    acked_per_second: f64,
    p50: i64,
    p99: i64,
    max: i64,
    cpu: f64,
    peak_mib: f64,
    raw_rate: f64,
}

async fn run_one(
    options: &Options,
    backend: Backend,
    jobs: usize,
    emit_lead_ms: u64,
) -> Measurement {
    let database = Database::create(backend, &options.postgres).await;
    // Migrations come from the scheduler itself.
    kadence_scheduler::app::open_store(database.url(), 1)
        .await
        .expect("migrate");
    let loading = Instant::now();
    load_jobs(&database, jobs, options.defined, 0, now_ms()).await;
    let load_seconds = loading.elapsed().as_secs_f64();
    // The first fire is set after loading, which can take a while for a million jobs.
    let now = now_ms();
    let first_fire = (now / 1000 + 4) * 1000;
    database
        .execute(&format!(
            "UPDATE jobs SET next_fire_ms = {first_fire} WHERE schedule_conf = '* * * * * ?'"
        ))
        .await;
    let prefix = format!("kbench{:x}", rand::random::<u32>());
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kadence"))
        .arg("serve")
        .env("KADENCE_DATABASE__URL", database.url())
        .env("KADENCE_KAFKA__BROKERS", &options.brokers)
        .env("KADENCE_KAFKA__TOPIC_PREFIX", &prefix)
        .env("KADENCE_API__LISTEN", "127.0.0.1:0")
        .env("KADENCE_SCHEDULE__BATCH_SIZE", "5000")
        .env("KADENCE_SCHEDULE__EMIT_LEAD", format!("{emit_lead_ms}ms"))
        .env(
            "RUST_LOG",
            std::env::var("KADENCE_BENCH_LOG").unwrap_or_else(|_| "warn,sqlx=error".into()),
        )
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start kadence serve");
    let pid = child.id().unwrap();
    // Measure from the first fire + warm-up, for the requested seconds.
    let window_start = first_fire.max(now) + WARM_UP.as_millis() as i64;
    let window_end = window_start + options.seconds as i64 * 1000;
    tokio::time::sleep(Duration::from_millis(
        (window_start - now_ms()).max(0) as u64
    ))
    .await;
    let (ticks_start, _) = process_usage(pid).unwrap_or_default();
    tokio::time::sleep(Duration::from_millis((window_end - now_ms()).max(0) as u64)).await;
    let (ticks_end, peak_kib) = process_usage(pid).unwrap_or_default();
    // Let acknowledgements of the window's fires land, then stop the scheduler.
    tokio::time::sleep(Duration::from_secs(2)).await;
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
    }
    let _ = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
    let acked = database.acknowledged(window_start, window_end).await;
    let mut lateness: Vec<i64> = acked
        .iter()
        .map(|(scheduled, dispatched)| dispatched - scheduled)
        .collect();
    lateness.sort_unstable();
    let raw_rate = raw_produce_rate(&options.brokers, (jobs * 5).clamp(50_000, 300_000)).await;
    database.drop().await;
    eprintln!(
        "  loaded {} jobs in {load_seconds:.1} s",
        jobs + options.defined
    );
    Measurement {
        backend,
        emit_lead_ms,
        jobs,
        defined: jobs + options.defined,
        acked_per_second: acked.len() as f64 / options.seconds as f64,
        p50: percentile(&lateness, 0.50),
        p99: percentile(&lateness, 0.99),
        max: lateness.last().copied().unwrap_or(0),
        cpu: (ticks_end - ticks_start) as f64 / clock_ticks_per_second() / options.seconds as f64,
        peak_mib: peak_kib as f64 / 1024.0,
        raw_rate,
    }
}

#[tokio::main]
async fn main() {
    let options = options();
    let mut rows = Vec::new();
    for &backend in &options.backends {
        for &jobs in &options.jobs {
            for &lead in &options.emit_leads_ms {
                eprintln!(
                    "running {backend:?} with {jobs} jobs due every second, emit lead {lead} ms, for {} s...",
                    options.seconds
                );
                rows.push(run_one(&options, backend, jobs, lead).await);
            }
        }
    }
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
        "| backend | emit lead | jobs due/s | jobs defined | acked triggers/s | lateness p50 | p99 | max | scheduler CPU | peak RSS | raw produce/s | share of raw |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");

    for row in &rows {
        println!(
            "| {} | {} ms | {} | {} | {:.0} | {} ms | {} ms | {} ms | {:.0} % | {:.0} MiB | {:.0} | {:.0} % |",
            if row.backend == Backend::Sqlite {
                "SQLite"
            } else {
                "PostgreSQL"
            },
            row.emit_lead_ms,
            row.jobs,
            row.defined,
            row.acked_per_second,
            row.p50,
            row.p99,
            row.max,
            row.cpu * 100.0,
            row.peak_mib,
            row.raw_rate,
            row.acked_per_second / row.raw_rate * 100.0,
        );
    }
}
