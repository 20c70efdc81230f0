//! API load benchmark: jobs firing every second while many clients list jobs, on SQLite and
//! PostgreSQL, each backend once without the clients (the baseline) and once with them.
//!
//! ```text
//! infra/bench.sh --bench api_load                   # starts a broker, runs the defaults
//! KADENCE_BENCH_BROKERS=127.0.0.1:9092 cargo bench -p kadence-scheduler --bench api_load -- \
//!     --jobs 50 --defined 2200 --clients 0,200 --seconds 25 --backends sqlite,postgres
//! ```
//!
//! `--brokers tansu,kafka` (default `tansu`) runs each backend and client count on each of
//! those brokers (tansu, Apache Kafka 4; `common/broker.rs` says where their addresses come
//! from), one after the other; the table names the broker of each row.
//!
//! The scenario of the issue "API readers starve the schedule": the API shared one database
//! pool with the pre-read loop, the acknowledgement writer and the monitors, and 200 clients
//! listing ~2 200 jobs made the scheduler skip whole seconds of fires, emit others twice and
//! answer 500 after a pool timeout.
//!
//! For each backend and client count it loads the jobs straight into a fresh database
//! (`--jobs` due every second, RANDOM routing over 6 partitions, the rest of `--defined` idle
//! until 2099), runs `kadence serve` (release build, its default configuration) as its own
//! process and, a few seconds after the first fire, lets `--clients` clients send
//! `GET /api/jobs` back to back for `--seconds` (0 clients: it only waits as long). The fires
//! checked are those scheduled from the start of the load to two seconds after its end. After
//! waiting past the lease and a claim pass, so that a fire emitted again is in the topic, it
//! stops the scheduler and reports:
//! - fires expected, fires missing (no record in the trigger topic: a DO_NOTHING misfire
//!   leaves no row either) and fires emitted twice (one trigger id, two records), all read
//!   from the trigger topic;
//! - fire lateness = broker acknowledgement time − scheduled time (`dispatched_at_ms −
//!   scheduled_at_ms` from `job_logs`), p50 / p99 / max — negative when the trigger is at the
//!   broker before its time (the default emit lead is 1 s);
//! - the API's answers: 2xx, 503 (shedding load) and everything else (other statuses and
//!   requests without an answer within 30 s), and their latency p50 / p99.
//!
//! Each run's details (which seconds were missed or doubled, statuses, the first client
//! error) go to stderr; the table to stdout. `KADENCE_BENCH_LOG` sets the scheduler's log
//! filter, e.g. `KADENCE_BENCH_LOG=warn,kadence_scheduler=info`.

mod common;

use std::time::Duration;

use common::broker::{Broker, BrokerKind};
use common::{
    APP, Backend, Database, PARTITIONS, Serve, flags, load_jobs, now_ms, parse_numbers, percentile,
    set_first_fire, sleep_until_ms,
};
use kadence_scheduler::config::Config;
use kadence_tests::api_load::{LoadReport, list_jobs_under_load};
use kadence_tests::session::{TEST_ADMIN_PASSWORD, login};
use kadence_tests::triggers::{FireAudit, read_triggers};

/// From the first fire to the start of the load: the scheduler has settled.
const WARM_UP: Duration = Duration::from_secs(3);
/// Seconds after the load whose fires are checked too: a starved loop hurts after the load.
const MARGIN: Duration = Duration::from_secs(2);

struct Options {
    jobs: usize,
    defined: usize,
    clients: Vec<usize>,
    seconds: u64,
    backends: Vec<Backend>,
    brokers: Vec<Broker>,
}

fn options() -> Options {
    let mut options = Options {
        jobs: 50,
        defined: 2_200,
        clients: vec![0, 200],
        seconds: 25,
        backends: vec![Backend::Sqlite, Backend::Postgres],
        brokers: Vec::new(),
    };
    let mut broker_kinds = vec![BrokerKind::Tansu];
    for (flag, value) in flags() {
        match flag.as_str() {
            "--jobs" => options.jobs = value.parse().expect("--jobs N"),
            "--defined" => options.defined = value.parse().expect("--defined N"),
            "--clients" => options.clients = parse_numbers(&flag, &value),
            "--seconds" => options.seconds = value.parse().expect("--seconds N"),
            "--backends" => options.backends = Backend::parse_list(&value),
            "--brokers" => broker_kinds = BrokerKind::parse_list(&value),
            other => panic!("unknown option {other}"),
        }
    }
    options.brokers = Broker::chosen(&broker_kinds);
    assert!(
        options.defined >= options.jobs,
        "--defined counts every job, the --jobs due every second included"
    );
    options
}

struct Measurement {
    backend: Backend,
    broker: BrokerKind,
    clients: usize,
    audit: FireAudit,
    /// `dispatched_at_ms − scheduled_at_ms` of the checked fires, sorted.
    lateness_ms: Vec<i64>,
    load: Option<LoadReport>,
}

async fn run_one(
    options: &Options,
    (backend, broker): (Backend, &Broker),
    clients: usize,
) -> Measurement {
    let database = Database::create(backend).await;
    load_jobs(
        &database,
        options.jobs,
        options.defined - options.jobs,
        0,
        now_ms(),
    )
    .await;
    let due: Vec<i64> = database
        .integers(
            "SELECT id FROM jobs WHERE schedule_conf = '* * * * * ?'",
            &[],
        )
        .await
        .into_iter()
        .map(|row| row[0])
        .collect();
    let first_fire = set_first_fire(&database, Duration::from_secs(3)).await;
    let serve = Serve::start(&database, broker, &[]).await;
    let topic = format!("{}.triggers.{APP}", serve.prefix);

    sleep_until_ms(first_fire + WARM_UP.as_millis() as i64).await;
    let load_start = now_ms();
    let duration = Duration::from_secs(options.seconds);
    let load = if clients > 0 {
        let token = login(&serve.api, "admin", TEST_ADMIN_PASSWORD).await;
        Some(list_jobs_under_load(&serve.api, &token, clients, duration).await)
    } else {
        tokio::time::sleep(duration).await;
        None
    };
    let checked_until = now_ms() + MARGIN.as_millis() as i64;
    // A fire of the checked seconds emitted again by a claim is in the topic by then.
    let schedule = Config::default().schedule;
    tokio::time::sleep(MARGIN + schedule.lease + schedule.claim_interval + Duration::from_secs(3))
        .await;
    serve.stop().await;

    let records = read_triggers(&broker.bootstrap, &topic, PARTITIONS).await;
    let audit = FireAudit::of(&records, &due, load_start, checked_until);
    let mut lateness_ms: Vec<i64> = database
        .integers(
            "SELECT scheduled_at_ms, dispatched_at_ms FROM job_logs \
             WHERE scheduled_at_ms >= $1 AND scheduled_at_ms < $2 AND dispatched_at_ms IS NOT NULL",
            &[audit.from_ms, checked_until],
        )
        .await
        .iter()
        .map(|row| row[1] - row[0])
        .collect();
    lateness_ms.sort_unstable();
    database.drop().await;
    eprintln!("  {}", audit.summary());
    if let Some(load) = &load {
        eprintln!("  {}", load.summary());
    }
    Measurement {
        backend,
        broker: broker.kind,
        clients,
        audit,
        lateness_ms,
        load,
    }
}

#[tokio::main]
async fn main() {
    let options = options();
    let mut rows = Vec::new();
    for &backend in &options.backends {
        for &clients in &options.clients {
            for broker in &options.brokers {
                eprintln!(
                    "running {backend:?} on {}: {} jobs due every second, {} defined, {clients} clients for {} s...",
                    broker.kind.label(),
                    options.jobs,
                    options.defined,
                    options.seconds
                );
                rows.push(run_one(&options, (backend, broker), clients).await);
            }
        }
    }
    let defaults = Config::default();
    println!();
    println!(
        "{} jobs due every second, {} jobs defined, {} s of `GET /api/jobs` from each client back to back; \
         scheduler defaults: database connections {} scheduling / {} background / {} API, lease {:?}, emit lead {:?}",
        options.jobs,
        options.defined,
        options.seconds,
        defaults.database.scheduling_connections,
        defaults.database.background_connections,
        defaults.database.api_connections,
        defaults.schedule.lease,
        defaults.schedule.emit_lead,
    );
    println!();
    println!(
        "| backend | broker | load | fires expected | missing | emitted twice | lateness p50 | p99 | max | API 2xx | 503 | other | API p50 | p99 |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        let api = match &row.load {
            Some(load) => format!(
                "{} | {} | {} | {:.0} ms | {:.0} ms",
                load.succeeded(),
                load.unavailable(),
                load.other(),
                load.latency_ms(0.5),
                load.latency_ms(0.99)
            ),
            None => "- | - | - | - | -".to_owned(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} ms | {} ms | {} ms | {api} |",
            row.backend.label(),
            row.broker.label(),
            match row.clients {
                0 => "none".to_owned(),
                clients => format!("{clients} clients"),
            },
            row.audit.expected,
            row.audit.missing.len(),
            row.audit.doubled.len(),
            percentile(&row.lateness_ms, 0.5),
            percentile(&row.lateness_ms, 0.99),
            row.lateness_ms.last().copied().unwrap_or_default(),
        );
    }
}
