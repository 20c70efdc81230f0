//! What the benchmarks share: command-line flags, the brokers they run on (`broker`), a fresh
//! database per run on either backend with jobs loaded straight into it, and `kadence serve`
//! (this crate's release build) as a process of its own, as in production; for the
//! throughput benchmark, the broker's raw produce rate (`baseline`) and a node killed under
//! load (`node_kill`); for the end-to-end benchmark, executor processes (`executors`) and
//! triggers produced without a scheduler (`emitter`); for both, the CPU the processes of a
//! run spent, per trigger (`usage`).
//!
//! Environment: the broker addresses (`KADENCE_BENCH_BROKERS_TANSU`,
//! `KADENCE_BENCH_BROKERS_KAFKA`, or `KADENCE_BENCH_BROKERS` for a run on one broker; see
//! `broker`; `infra/bench.sh` starts the brokers and sets them), `KADENCE_BENCH_POSTGRES_URL`
//! (default `postgres://postgres@127.0.0.1:5432/test`, the maintenance database one database
//! per run is created from and dropped through) and `KADENCE_BENCH_LOG` (the scheduler's log
//! filter, default `warn,sqlx=error`).

#![allow(dead_code)] // each benchmark uses its own subset

pub mod baseline;
pub mod broker;
pub mod emitter;
pub mod executors;
pub mod minutes;
pub mod node_kill;
pub mod usage;

use std::sync::Arc;
use std::time::Duration;

use broker::Broker;
use kadence_kafka::RecordSigner;
use kadence_tests::serve::spawn_serve;
use sqlx::{Connection, Executor, Row};
use tokio::process::{Child, Command};

pub use kadence_tests::percentile;

/// Partitions of the benchmark app's trigger topic.
pub const PARTITIONS: i32 = 6;

/// The benchmark app's name.
pub const APP: &str = "bench";

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// `sqlite,postgres` → both.
    pub fn parse_list(value: &str) -> Vec<Backend> {
        parse_choices(
            "--backends",
            value,
            &[("sqlite", Backend::Sqlite), ("postgres", Backend::Postgres)],
        )
    }

    /// Its name in a table.
    pub fn label(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        }
    }
}

/// `a,b,…` → the values `choices` gives those names; panics naming `flag` and the names it
/// takes otherwise.
pub fn parse_choices<T: Copy>(flag: &str, list: &str, choices: &[(&str, T)]) -> Vec<T> {
    list.split(',')
        .map(|item| {
            let item = item.trim();
            choices
                .iter()
                .find(|(name, _)| *name == item)
                .map(|&(_, value)| value)
                .unwrap_or_else(|| {
                    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
                    panic!("{flag} takes {}, not {item}", names.join(", "))
                })
        })
        .collect()
}

/// The name `choices` gives `value` (what [`parse_choices`] reads back into it).
pub fn choice_name<T: PartialEq>(choices: &[(&'static str, T)], value: T) -> &'static str {
    choices
        .iter()
        .find(|(_, candidate)| *candidate == value)
        .map(|(name, _)| *name)
        .expect("every value has a name among its choices")
}

/// `N,N,…` → the numbers; panics naming `flag` otherwise.
pub fn parse_numbers<T: std::str::FromStr>(flag: &str, value: &str) -> Vec<T> {
    value
        .split(',')
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("{flag} takes numbers: {flag} N,N"))
        })
        .collect()
}

/// The command line as `(flag, value)` pairs. `cargo bench` adds a lone `--bench`, which is
/// skipped.
pub fn flags() -> Vec<(String, String)> {
    let mut args = std::env::args().skip(1).filter(|arg| arg != "--bench");
    let mut pairs = Vec::new();
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| panic!("{flag} needs a value"));
        pairs.push((flag, value));
    }
    pairs
}

/// The PostgreSQL maintenance database.
pub fn postgres_admin() -> String {
    std::env::var("KADENCE_BENCH_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A database for one run, dropped afterwards.
pub enum Database {
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

/// The tables the fire path and a run's history write to, whose rows the benchmarks show one
/// by one.
pub const FIRE_PATH_TABLES: [&str; 7] = [
    "jobs",
    "fire_batches",
    "job_logs",
    "run_log_chunks",
    "unkept_run_sets",
    "run_counts",
    "job_reports",
];

impl Database {
    /// A fresh database with the scheduler's schema.
    pub async fn create(backend: Backend) -> Database {
        let suffix: u64 = rand::random();
        let database = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}", dir.path().join("bench.db").display());
                Database::Sqlite { url, _dir: dir }
            }
            Backend::Postgres => {
                let admin = postgres_admin();
                let name = format!("kadence_bench_{suffix:x}");
                let mut connection = sqlx::PgConnection::connect(&admin).await.unwrap();
                connection
                    .execute(format!("CREATE DATABASE {name}").as_str())
                    .await
                    .unwrap();
                let base = admin.rsplit_once('/').unwrap().0;
                Database::Postgres {
                    url: format!("{base}/{name}"),
                    name,
                    admin,
                }
            }
        };
        // Migrations come from the scheduler itself.
        kadence_scheduler::app::pools::open_store(database.url(), 1)
            .await
            .expect("migrate");
        database
    }

    /// Rows inserted, updated and deleted in the database so far, by the database's own
    /// statistics (PostgreSQL's `pg_stat_user_tables`; a backend reports its counts when it
    /// goes idle or exits), the benchmark's own `bench…` tables left out. `None` on SQLite,
    /// which keeps no such statistics.
    pub async fn rows_written(&self) -> Option<i64> {
        self.rows_written_where("relname NOT LIKE 'bench%'").await
    }

    /// [`rows_written`](Database::rows_written) in each of [`FIRE_PATH_TABLES`], in order.
    pub async fn rows_written_by_table(&self) -> Option<Vec<i64>> {
        let mut counts = Vec::new();
        for table in FIRE_PATH_TABLES {
            counts.push(
                self.rows_written_where(&format!("relname = '{table}'"))
                    .await?,
            );
        }
        Some(counts)
    }

    /// Rows inserted, updated and deleted so far in the tables `condition` selects from
    /// `pg_stat_user_tables`; `None` on SQLite.
    async fn rows_written_where(&self, condition: &str) -> Option<i64> {
        match self {
            Database::Sqlite { .. } => None,
            Database::Postgres { .. } => {
                let rows = self
                    .integers(
                        &format!(
                            "SELECT CAST(COALESCE(SUM(n_tup_ins + n_tup_upd + n_tup_del), 0) AS BIGINT) \
                             FROM pg_stat_user_tables WHERE {condition}"
                        ),
                        &[],
                    )
                    .await;
                Some(rows[0][0])
            }
        }
    }

    pub fn url(&self) -> &str {
        match self {
            Database::Sqlite { url, .. } | Database::Postgres { url, .. } => url,
        }
    }

    pub async fn execute(&self, sql: &str) {
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

    /// The rows `sql` selects, every column a 64-bit integer, with `$1`, `$2`, … bound to
    /// `binds`.
    pub async fn integers(&self, sql: &str, binds: &[i64]) -> Vec<Vec<i64>> {
        fn columns<R: Row>(row: &R) -> Vec<i64>
        where
            usize: sqlx::ColumnIndex<R>,
            for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        {
            (0..row.len()).map(|index| row.get(index)).collect()
        }
        match self {
            Database::Sqlite { url, .. } => {
                let mut connection = sqlx::SqliteConnection::connect(url).await.unwrap();
                let mut query = sqlx::query(sql);
                for &bind in binds {
                    query = query.bind(bind);
                }
                let rows = query.fetch_all(&mut connection).await.unwrap();
                rows.iter().map(columns).collect()
            }
            Database::Postgres { url, .. } => {
                let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
                let mut query = sqlx::query(sql);
                for &bind in binds {
                    query = query.bind(bind);
                }
                let rows = query.fetch_all(&mut connection).await.unwrap();
                rows.iter().map(columns).collect()
            }
        }
    }

    /// The key the scheduler will sign with: made in the store now, as the first node would
    /// make it, so that executors can trust its public key before the scheduler starts.
    pub async fn signing_key(&self) -> Arc<RecordSigner> {
        let store = kadence_scheduler::app::pools::open_store(self.url(), 1)
            .await
            .expect("open the store");
        kadence_scheduler::engine::signer::Signer::load(store.as_ref(), now_ms())
            .await
            .expect("make the signing key")
            .current()
    }

    /// A new executor key of `app` in this database: the text its executors sign with.
    pub async fn executor_key(&self, app: &str) -> String {
        let store = kadence_scheduler::app::pools::open_store(self.url(), 1)
            .await
            .expect("open the store");
        let key = kadence_kafka::ExecutorKey::generate().expect("an executor key");
        let record = kadence_scheduler::store::NewExecutorKey {
            key_id: key.key_id().to_owned(),
            app: app.to_owned(),
            secret: secrecy::SecretString::from(key.secret_text()),
            created_by: "bench".to_owned(),
        };
        store
            .add_executor_key(&record, now_ms())
            .await
            .expect("store the executor key");
        key.text()
    }

    pub async fn drop(self) {
        if let Database::Postgres { name, admin, .. } = self {
            let mut connection = sqlx::PgConnection::connect(&admin).await.unwrap();
            let _ = connection
                .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                .await;
        }
    }
}

/// Creates the app [`APP`] with [`PARTITIONS`] partitions and loads `due` jobs firing every
/// second from `first_fire_ms` and `idle` jobs not due before 2099, in multi-row inserts.
/// Every job routes RANDOM and misfires DO_NOTHING (the defaults of XXL-JOB).
pub async fn load_jobs(
    database: &Database,
    due: usize,
    idle: usize,
    first_fire_ms: i64,
    now_ms: i64,
) {
    let jobs = JobLoad {
        due,
        idle,
        route: "RANDOM",
        handler: "tick",
    };
    load_jobs_with(database, &jobs, first_fire_ms, now_ms).await
}

/// What [`load_jobs_with`] loads: `due` jobs firing every second and `idle` ones, routed by
/// `route` to the handler `handler`.
pub struct JobLoad<'a> {
    pub due: usize,
    pub idle: usize,
    /// A route strategy's symbol, e.g. `CONSISTENT_HASH`.
    pub route: &'a str,
    pub handler: &'a str,
}

/// [`load_jobs`] with the route strategy and handler of `jobs`.
pub async fn load_jobs_with(
    database: &Database,
    jobs: &JobLoad<'_>,
    first_fire_ms: i64,
    now_ms: i64,
) {
    let JobLoad {
        due,
        idle,
        route,
        handler,
    } = *jobs;
    database
        .execute(&format!(
            "INSERT INTO apps (name, title, partitions, created_at_ms) VALUES ('{APP}', '{APP}', {PARTITIONS}, {now_ms})"
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
                    "('{APP}', 'bench', 'CRON', '{cron}', 'UTC', 'DO_NOTHING', '{route}', '{handler}', '', \
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

/// Moves the first fire of the jobs due every second to the second after `lead` from now
/// (loading a million jobs takes a while); returns it.
pub async fn set_first_fire(database: &Database, lead: Duration) -> i64 {
    let first_fire = (now_ms() + lead.as_millis() as i64) / 1000 * 1000 + 1000;
    database
        .execute(&format!(
            "UPDATE jobs SET next_fire_ms = {first_fire} WHERE schedule_conf = '* * * * * ?'"
        ))
        .await;
    first_fire
}

pub use kadence_schemas::now_ms;

/// Sleeps until the wall clock reads `ms` (at once if it has passed).
pub async fn sleep_until_ms(ms: i64) {
    tokio::time::sleep(Duration::from_millis((ms - now_ms()).max(0) as u64)).await;
}

/// A `kadence serve` process on a fresh topic prefix; killed if dropped.
pub struct Serve {
    child: Child,
    /// The topic prefix it runs with.
    pub prefix: String,
    /// Its API, e.g. `http://127.0.0.1:41234`.
    pub api: String,
}

impl Serve {
    /// Starts `kadence serve` on `database` and `broker` with the defaults plus `settings`
    /// (`KADENCE_…` variables); returns once its API listens.
    pub async fn start(database: &Database, broker: &Broker, settings: &[(&str, String)]) -> Serve {
        let prefix = format!("kbench{:x}", rand::random::<u32>());
        Serve::start_node(database, broker, &prefix, settings).await
    }

    /// Starts one more scheduler node on `database` and `broker` with topic prefix `prefix`
    /// (that of the first node, so that they share the topics).
    pub async fn start_node(
        database: &Database,
        broker: &Broker,
        prefix: &str,
        settings: &[(&str, String)],
    ) -> Serve {
        let prefix = prefix.to_owned();
        let mut command = Command::new(env!("CARGO_BIN_EXE_kadence"));
        command
            .arg("serve")
            .env("KADENCE_DATABASE__URL", database.url())
            .env("KADENCE_KAFKA__BROKERS", &broker.bootstrap)
            .env("KADENCE_KAFKA__BROKER_KIND", broker.kind.setting())
            .env("KADENCE_KAFKA__TOPIC_PREFIX", &prefix)
            .env("KADENCE_API__LISTEN", "127.0.0.1:0")
            .envs(settings.iter().map(|(name, value)| (name, value)))
            .env(
                "RUST_LOG",
                std::env::var("KADENCE_BENCH_LOG").unwrap_or_else(|_| "warn,sqlx=error".into()),
            );
        let (child, api) = spawn_serve(command).await;
        Serve { child, prefix, api }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("kadence serve runs")
    }

    /// The CPU ticks it has spent so far (see [`usage::process_usage`]).
    pub fn ticks(&self) -> u64 {
        usage::process_usage(self.pid()).map_or(0, |(ticks, _)| ticks)
    }

    /// The sum of the counter `name` over its label sets, from the node's `/metrics`: 0 when
    /// it has none yet (a counter with labels shows once it counted).
    pub async fn counter(&self, name: &str) -> f64 {
        let text = reqwest::get(format!("{}/metrics", self.api))
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("the metrics text");
        text.lines()
            .filter(|line| {
                line.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
            // Not `sum`: an empty sum of floats is -0, which the tables printed as "-0".
            .fold(0.0, |total, value| total + value)
    }

    /// SIGTERM, then waits for the graceful stop (at most 20 s).
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
        let _ = tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await;
    }
}
