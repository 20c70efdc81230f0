//! Fixtures shared by the suites: a fresh database per test (a SQLite file in a temporary
//! directory, or a new PostgreSQL or MySQL database dropped afterwards), random topic
//! prefixes, the broker address, a polling wait with a deadline ([`wait_for`]), and the macros
//! that make tests of an `async fn test(backend: Backend)`: on every store
//! (`on_every_backend!`) or once, on SQLite (`on_sqlite_only!`); the rule for which is which
//! stands above them.
//!
//! Tests need a running Kafka-compatible broker named by `KADENCE_TEST_BROKERS`
//! (`infra/test.sh` starts one), PostgreSQL at `KADENCE_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`, the server's maintenance database used to create
//! and drop one database per test) and MySQL or MariaDB at `KADENCE_TEST_MYSQL_URL` (default
//! `mysql://root@127.0.0.1:3306`, a user that may create and drop databases).

use std::future::Future;
use std::time::Duration;

// What runs on every store and what runs once.
//
// A test runs on every backend when what it proves passes through the store: scheduling
// (pre-read, pending fires, next-fire times), results and logs recorded, stops and edits,
// retries and alarms, the executor rows the registry lists, the API's answers that come
// from the database. Such a test can fail on one backend only, and PostgreSQL and MySQL are
// where clusters of schedulers run.
//
// A test runs once, on SQLite, when its subject is the executor or the broker: block
// strategies, kills, redelivery, rebalance hand-back, script handlers, the executor's
// dead-letter queue, routing that only needs the partition count, topic checks at start.
// The store only records the outcome there, and the store suite checks those writes on
// every backend; running the test on the servers as well would repeat the same broker
// traffic for nothing. SQLite because it is the cheaper fixture: a file, where the servers
// need a database created and dropped.
//
// Each suite file says in its `//!` doc which of its tests run where, and why.

/// Expands each named `async fn name(backend: Backend)` into three tests, `sqlite::name`,
/// `postgres::name` and `mysql::name`, each under a [`Watchdog`]: for tests whose subject
/// passes through the store (see the rule above).
#[macro_export]
macro_rules! on_every_backend {
    ($($test:ident),* $(,)?) => {
        $crate::backend_tests!(sqlite, Sqlite, $($test),*);
        $crate::backend_tests!(postgres, Postgres, $($test),*);
        $crate::backend_tests!(mysql, MySql, $($test),*);
    };
}

/// Expands each named `async fn name(backend: Backend)` into one test, `sqlite_only::name`,
/// under a [`Watchdog`]: for tests whose subject is the executor or the broker, not the store
/// (see the rule above). The module's name keeps them in a `sqlite` filter and says that no
/// PostgreSQL or MySQL twin exists.
#[macro_export]
macro_rules! on_sqlite_only {
    ($($test:ident),* $(,)?) => {
        $crate::backend_tests!(sqlite_only, Sqlite, $($test),*);
    };
}

/// The module `$module` of tests, one per named `async fn`, each run on `Backend::$backend`
/// under a [`Watchdog`] named after the test.
#[doc(hidden)] // used through the two macros above
#[macro_export]
macro_rules! backend_tests {
    ($module:ident, $backend:ident, $($test:ident),*) => {
        mod $module {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                let _watchdog = $crate::fixtures::Watchdog::arm(concat!(module_path!(), "::", stringify!($test)));
                super::$test($crate::fixtures::Backend::$backend).await
            })*
        }
    };
}

/// How long one test may take before its [`Watchdog`] ends the test process.
/// `KADENCE_TEST_WATCHDOG_SECS` overrides it.
const DEFAULT_WATCHDOG_LIMIT: Duration = Duration::from_secs(10 * 60);

/// How long the watchdog lets gdb print the stacks before it aborts regardless.
const GDB_LIMIT: Duration = Duration::from_secs(120);

/// Ends the whole test process when one test runs far past any of its own deadlines.
///
/// Every wait in a test has a deadline, but a deadline measured by the tokio runtime cannot
/// fire when something blocks every worker thread (a native call that never returns): the
/// test would then hang the suite until CI's own limit, with nothing in the log to say which
/// test or where. The watchdog runs on a plain thread, so it fires regardless: it prints the
/// test's name and every thread's stack (through `gdb`, when installed), then aborts.
pub struct Watchdog {
    /// Dropping it (the test ended, passed or panicked) disconnects the watchdog's channel.
    _test_ended: std::sync::mpsc::Sender<()>,
}

impl Watchdog {
    pub fn arm(test: &'static str) -> Watchdog {
        let limit = std::env::var("KADENCE_TEST_WATCHDOG_SECS")
            .ok()
            .and_then(|seconds| seconds.parse().ok())
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_WATCHDOG_LIMIT);
        let (test_ended, ended) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if ended.recv_timeout(limit) != Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                return;
            }
            // Straight to the process's stderr: the test harness captures `eprintln!` of the
            // test's threads, and that capture dies with the abort.
            let say = |line: String| {
                let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            };
            say(format!(
                "\nWATCHDOG: test {test} still running after {limit:?}; its threads:\n"
            ));
            // gdb writes to our stderr itself: piping its output back here would deadlock,
            // since gdb stops every thread of this process, the reader included.
            let gdb = std::process::Command::new("gdb")
                .args(["-p", &std::process::id().to_string(), "-batch", "-nx"])
                .args(["-ex", "set pagination off", "-ex", "thread apply all bt 40"])
                .stdin(std::process::Stdio::null())
                .stdout(std::io::stderr())
                .spawn();
            match gdb {
                Ok(mut gdb) => {
                    // The watchdog itself must not hang: gdb gets a bounded time.
                    let deadline = std::time::Instant::now() + GDB_LIMIT;
                    while matches!(gdb.try_wait(), Ok(None)) && std::time::Instant::now() < deadline
                    {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    if matches!(gdb.try_wait(), Ok(None)) {
                        say(format!(
                            "(gdb still running after {GDB_LIMIT:?}; stopped it)\n"
                        ));
                        let _ = gdb.kill();
                    }
                }
                Err(error) => say(format!("(no stacks: cannot run gdb: {error})\n")),
            }
            say(format!(
                "WATCHDOG: aborting the test process because {test} hung\n"
            ));
            std::process::abort();
        });
        Watchdog {
            _test_ended: test_ended,
        }
    }
}

/// Which store backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    MySql,
}

/// The broker the tests use.
pub fn brokers() -> String {
    std::env::var("KADENCE_TEST_BROKERS").unwrap_or_else(|_| {
        panic!(
            "KADENCE_TEST_BROKERS is not set: run the suite with infra/test.sh, or start a broker \
             with `infra/broker.sh start` and export KADENCE_TEST_BROKERS=<the address it prints>"
        )
    })
}

/// The kind of broker `KADENCE_TEST_BROKERS` names: `KADENCE_TEST_BROKER_KIND`, `tansu` (the
/// default, as `infra/broker.sh start` starts it) or `kafka` (`infra/test.sh` sets it for each
/// of its passes). Tests use only standard Kafka APIs; the kind matters where a test has to
/// do what the broker cannot be asked to do through them (see each use), and every scheduler
/// and executor a test starts is told it, as users tell theirs (`kafka.broker_kind`,
/// `ExecutorBuilder::broker_kind`).
pub use kadence_kafka::settings::BrokerKind;

/// The kind of the tests' broker (see [`BrokerKind`]).
pub fn broker_kind() -> BrokerKind {
    match std::env::var("KADENCE_TEST_BROKER_KIND").as_deref() {
        Err(_) => BrokerKind::Tansu,
        Ok("kafka-cluster") => BrokerKind::Kafka,
        Ok(other) => other
            .parse()
            .unwrap_or_else(|error| panic!("KADENCE_TEST_BROKER_KIND: {error}")),
    }
}

pub use crate::unique;

fn postgres_admin_url() -> String {
    std::env::var("KADENCE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn mysql_admin_url() -> String {
    std::env::var("KADENCE_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_owned())
}

/// A database that exists for one test.
pub struct TestDatabase {
    pub url: String,
    backend: Backend,
    /// The server's database, dropped with this (PostgreSQL and MySQL).
    server_name: Option<String>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDatabase {
    /// A fresh, empty database on `backend`.
    pub async fn create(backend: Backend) -> TestDatabase {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temporary directory");
                let url = format!("sqlite://{}", dir.path().join("kadence.db").display());
                TestDatabase {
                    url,
                    backend,
                    server_name: None,
                    _dir: Some(dir),
                }
            }
            Backend::Postgres | Backend::MySql => {
                let name = unique("kadence_test_");
                let admin = admin_url(backend);
                run_on_server(backend, &admin, &format!("CREATE DATABASE {name}"))
                    .await
                    .unwrap_or_else(|error| {
                        panic!("cannot create a test database at {admin}: {error}")
                    });
                // The admin URL names a maintenance database (PostgreSQL) or none (MySQL).
                let base = match backend {
                    Backend::Postgres => admin
                        .rsplit_once('/')
                        .map_or(admin.as_str(), |(base, _)| base),
                    _ => admin.trim_end_matches('/'),
                };
                TestDatabase {
                    url: format!("{base}/{name}"),
                    backend,
                    server_name: Some(name),
                    _dir: None,
                }
            }
        }
    }

    /// Which backend the database is on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Runs SQL on the database outside any store (to stage a fault), panicking on error.
    #[allow(dead_code)] // not every suite stages faults
    pub async fn execute(&self, sql: &str) {
        run_on_server(self.backend, &self.url, sql)
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"));
    }
}

/// Rows `sql` selects on `db`'s database, with `$1` bound to `bind` if given (written `$1`
/// for every backend; MySQL's `?` is made of it).
pub async fn fetch_rows<T>(db: &TestDatabase, sql: &str, bind: Option<&str>) -> Vec<T>
where
    T: Send
        + Unpin
        + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
        + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
        + for<'r> sqlx::FromRow<'r, sqlx::mysql::MySqlRow>,
{
    use sqlx::Connection;
    macro_rules! fetch_with {
        ($connection:ty, $sql:expr) => {{
            let mut connection = <$connection>::connect(&db.url)
                .await
                .unwrap_or_else(|error| panic!("connect to {}: {error}", db.url));
            let mut query = sqlx::query_as::<_, T>($sql);
            if let Some(value) = bind {
                query = query.bind(value.to_owned());
            }
            query
                .fetch_all(&mut connection)
                .await
                .unwrap_or_else(|error| panic!("{sql}: {error}"))
        }};
    }
    let mysql_sql = sql.replace("$1", "?");
    match db.backend {
        Backend::Sqlite => fetch_with!(sqlx::SqliteConnection, sql),
        Backend::Postgres => fetch_with!(sqlx::PgConnection, sql),
        Backend::MySql => fetch_with!(sqlx::MySqlConnection, &mysql_sql),
    }
}

fn admin_url(backend: Backend) -> String {
    match backend {
        Backend::MySql => mysql_admin_url(),
        _ => postgres_admin_url(),
    }
}

/// Runs `sql` (one or more statements) on a connection of its own to `url`.
async fn run_on_server(backend: Backend, url: &str, sql: &str) -> Result<(), sqlx::Error> {
    use sqlx::{Connection, Executor};
    match backend {
        Backend::Postgres => {
            let mut connection = sqlx::PgConnection::connect(url).await?;
            connection.execute(sql).await.map(|_| ())
        }
        Backend::MySql => {
            let mut connection = sqlx::MySqlConnection::connect(url).await?;
            connection.execute(sql).await.map(|_| ())
        }
        Backend::Sqlite => {
            let mut connection = sqlx::SqliteConnection::connect(url).await?;
            connection.execute(sql).await.map(|_| ())
        }
    }
}

impl Drop for TestDatabase {
    /// Drops the server's database even when the test panicked. Runs on its own thread and
    /// runtime because `Drop` cannot await.
    fn drop(&mut self) {
        let Some(name) = self.server_name.take() else {
            return;
        };
        let backend = self.backend;
        let drop_statement = match backend {
            Backend::Postgres => format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            _ => format!("DROP DATABASE IF EXISTS {name}"),
        };
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let admin = admin_url(backend);
                if backend == Backend::MySql {
                    // As PostgreSQL's FORCE: sessions still on the database (a store the test
                    // leaked) would make the drop wait for their locks.
                    use sqlx::Connection;
                    let mut connection = sqlx::MySqlConnection::connect(&admin).await?;
                    let sessions: Vec<(i64,)> = sqlx::query_as(
                        "SELECT id FROM information_schema.processlist WHERE db = ?",
                    )
                    .bind(&name)
                    .fetch_all(&mut connection)
                    .await?;
                    for (id,) in sessions {
                        // A session may end by itself meanwhile.
                        let _ = sqlx::query(&format!("KILL {id}"))
                            .execute(&mut connection)
                            .await;
                    }
                }
                run_on_server(backend, &admin, &drop_statement).await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("warning: could not drop a test database: {dropped:?}");
        }
    }
}

/// Polls `check` every 200 ms until it returns `Some`, failing the test after `limit`.
pub async fn wait_for<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
