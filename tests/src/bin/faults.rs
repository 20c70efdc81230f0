//! Kadence under injected faults: each scenario starts the real parts of its own (a broker,
//! `kadence serve`, an executor process), injects one fault while jobs fire every second,
//! and prints what it counted from the trigger topic and the API, never from log lines:
//! fires due, emitted, completed, emitted twice (same trigger id), lost (must be 0) and
//! the time to recover. It exits non-zero when a fire was lost. `infra/faults.sh` builds and
//! runs it; see the README's "Faults" section for the scenarios and their latest figures.
//!
//! ```text
//! faults broker-cut [--jobs 30] [--before-secs 10] [--outage-secs 10] [--after-secs 15]
//! ```
//!
//! Scenarios (issue 20 adds the rest over time):
//! - `broker-cut`: the broker becomes unreachable for `--outage-secs` during a steady load of
//!   fires: every connection to it is cut and new ones are refused, then it answers again
//!   with everything it had. The broker (tansu, memory storage) advertises a TCP proxy in
//!   front of it, so every client (scheduler and executor) goes through the proxy, which
//!   the harness cuts. To the clients this is a broker restart: the same connection errors,
//!   the same reconnects; the broker's own restart is not used because tansu 0.6 on SQLite
//!   storage fails every request after one (`Storage(UnableToSend)` in its log, seen here).
//!   The scheduler keeps planning; its producer holds the records of the outage
//!   (`message.timeout.ms` 30 s) and a fire it could not deliver stays pending and is
//!   emitted again when its lease ends, under its own trigger id.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use kadence_tests::now_ms;
use kadence_tests::serve::spawn_serve;
use kadence_tests::session::{TEST_ADMIN_PASSWORD, login};
use kadence_tests::triggers::{FireAudit, read_triggers};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

const APP: &str = "faults";
const PARTITIONS: i32 = 3;

/// Options of a scenario, `--name value` on the command line.
struct Options {
    jobs: usize,
    before: Duration,
    outage: Duration,
    after: Duration,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options {
            jobs: 30,
            before: Duration::from_secs(10),
            outage: Duration::from_secs(10),
            after: Duration::from_secs(15),
        };
        let mut args = args.iter();
        while let Some(name) = args.next() {
            let value = args.next().ok_or_else(|| format!("{name} needs a value"))?;
            let number: u64 = value
                .parse()
                .map_err(|_| format!("{name} takes a whole number, not {value:?}"))?;
            match name.as_str() {
                "--jobs" => options.jobs = number.clamp(1, 10_000) as usize,
                "--before-secs" => options.before = Duration::from_secs(number),
                "--outage-secs" => options.outage = Duration::from_secs(number),
                "--after-secs" => options.after = Duration::from_secs(number),
                other => return Err(format!("unknown option {other}")),
            }
        }
        Ok(options)
    }
}

/// Where this build's binaries are (the harness is built beside them).
struct Paths {
    binaries: PathBuf,
}

impl Paths {
    fn find() -> Paths {
        let binaries = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug"));
        Paths { binaries }
    }
}

/// A free port on the loopback interface.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// A tansu broker that clients reach through a proxy the harness can cut: it advertises the
/// proxy's address, so every connection, bootstrap or not, goes through it.
struct ProxiedBroker {
    address: String,
    _broker: Child,
    /// Bumped by every cut: connections of an older generation are closed.
    generation: tokio::sync::watch::Sender<u64>,
    refusing: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl ProxiedBroker {
    async fn start() -> ProxiedBroker {
        let (broker_port, proxy_port) = (free_port(), free_port());
        let broker = Command::new("tansu")
            .arg("broker")
            .arg("--listener-url")
            .arg(format!("tcp://127.0.0.1:{broker_port}"))
            .arg("--advertised-listener-url")
            .arg(format!("tcp://127.0.0.1:{proxy_port}"))
            .arg("--storage-engine")
            .arg("memory://tansu/")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("tansu runs (infra/broker.sh install)");
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", proxy_port))
            .await
            .expect("the proxy's port");
        let (generation, _) = tokio::sync::watch::channel(0_u64);
        let refusing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        tokio::spawn(proxy(
            listener,
            broker_port,
            generation.clone(),
            refusing.clone(),
        ));
        for _ in 0..300 {
            if tokio::net::TcpStream::connect(("127.0.0.1", broker_port))
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        ProxiedBroker {
            address: format!("127.0.0.1:{proxy_port}"),
            _broker: broker,
            generation,
            refusing,
        }
    }

    /// Closes every connection and refuses new ones until [`mend`](Self::mend).
    fn cut(&self) {
        self.refusing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.generation.send_modify(|generation| *generation += 1);
    }

    fn mend(&self) {
        self.refusing
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Forwards each accepted connection to the broker until the generation changes.
async fn proxy(
    listener: tokio::net::TcpListener,
    broker_port: u16,
    generation: tokio::sync::watch::Sender<u64>,
    refusing: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    while let Ok((mut client, _)) = listener.accept().await {
        if refusing.load(std::sync::atomic::Ordering::SeqCst) {
            drop(client);
            continue;
        }
        let mut cut = generation.subscribe();
        tokio::spawn(async move {
            let Ok(mut broker) = tokio::net::TcpStream::connect(("127.0.0.1", broker_port)).await
            else {
                return;
            };
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut broker) => {}
                _ = cut.changed() => {}
            }
        });
    }
}

/// A scheduler's API, logged in as its admin.
struct Api {
    url: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token);
        if !body.is_null() {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the API answers");
        let status = response.status();
        let text = response.text().await.expect("an answer");
        assert!(status.is_success(), "{path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// The public keys of the cluster's signing keys, for an executor to trust.
    async fn trusted_keys(&self) -> String {
        let keys = self
            .call(reqwest::Method::GET, "/api/signing-keys", Value::Null)
            .await;
        let keys: Vec<&str> = keys
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|key| key["public_key"].as_str())
            .collect();
        keys.join(",")
    }

    /// Jobs due every second, started.
    async fn every_second_jobs(&self, count: usize) -> Vec<i64> {
        let mut jobs = Vec::with_capacity(count);
        for _ in 0..count {
            let job = self
                .call(
                    reqwest::Method::POST,
                    "/api/jobs",
                    json!({"app": APP, "handler": "noop", "schedule_conf": "* * * * * ?", "start": true}),
                )
                .await;
            jobs.push(job["id"].as_i64().expect("a job id"));
        }
        jobs
    }

    async fn stop_jobs(&self, jobs: &[i64]) {
        for job in jobs {
            self.call(
                reqwest::Method::POST,
                &format!("/api/jobs/{job}/stop"),
                json!({}),
            )
            .await;
        }
    }

    /// The app's runs that succeeded: trigger id → when the run finished (ms).
    async fn succeeded(&self) -> HashMap<String, i64> {
        let mut succeeded = HashMap::new();
        let mut after: Option<String> = None;
        loop {
            let mut path = format!("/api/runs?app={APP}&outcome=SUCCEEDED&limit=1000");
            if let Some(after) = &after {
                path.push_str(&format!("&after={after}"));
            }
            let page = self.call(reqwest::Method::GET, &path, Value::Null).await;
            for run in page["items"].as_array().into_iter().flatten() {
                if let (Some(id), Some(finished)) =
                    (run["trigger_id"].as_str(), run["handle_at_ms"].as_i64())
                {
                    succeeded.insert(id.to_owned(), finished);
                }
            }
            match &page["next"] {
                Value::Null => return succeeded,
                next => after = Some(next.to_string().trim_matches('"').to_owned()),
            }
        }
    }
}

/// A scheduler node on a SQLite file of its own, and an executor of the app; both are
/// killed when dropped. The scheduler's log goes to `log` (its errors during a fault are
/// many, and expected): kept and named when a fire was lost, removed otherwise.
struct Stack {
    api: Api,
    log: PathBuf,
    _scheduler: Child,
    _executor: Child,
    _database: tempfile::TempDir,
}

impl Stack {
    async fn start(paths: &Paths, brokers: &str, prefix: &str) -> Stack {
        let database = tempfile::tempdir().expect("a database directory");
        let log = std::env::temp_dir().join(format!("{prefix}-scheduler.log"));
        let mut serve = Command::new(paths.binaries.join("kadence-cli"));
        serve
            .arg("serve")
            .env(
                "KADENCE_DATABASE__URL",
                format!("sqlite://{}", database.path().join("kadence.db").display()),
            )
            .env("KADENCE_KAFKA__BROKERS", brokers)
            .env("KADENCE_KAFKA__TOPIC_PREFIX", prefix)
            .env("KADENCE_KAFKA__RESULTS_PARTITIONS", "1")
            .env("KADENCE_KAFKA__SESSION_TIMEOUT", "6s")
            .env("KADENCE_API__LISTEN", "127.0.0.1:0")
            .env("RUST_LOG", "warn")
            .stderr(Stdio::from(
                std::fs::File::create(&log).expect("the scheduler's log file"),
            ));
        let (scheduler, url) = spawn_serve(serve).await;
        let token = login(&url, "admin", TEST_ADMIN_PASSWORD).await;
        let api = Api {
            url,
            token,
            http: reqwest::Client::new(),
        };
        api.call(
            reqwest::Method::POST,
            "/api/apps",
            json!({"name": APP, "partitions": PARTITIONS}),
        )
        .await;
        let executor = Command::new(paths.binaries.join("test-executor"))
            .env("KADENCE_BROKERS", brokers)
            .env("KADENCE_APP", APP)
            .env("KADENCE_TOPIC_PREFIX", prefix)
            .env("KADENCE_EXECUTOR_ID", "faults-executor")
            .env("KADENCE_TRUSTED_KEYS", api.trusted_keys().await)
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start test-executor");
        Stack {
            api,
            log,
            _scheduler: scheduler,
            _executor: executor,
            _database: database,
        }
    }
}

/// What a scenario counted.
struct Counts {
    audit: FireAudit,
    /// The scheduler's log.
    log: PathBuf,
    completed: usize,
    /// From the broker's return until every fire due while it was away had completed.
    recovered_after_ms: Option<i64>,
}

impl Counts {
    fn print(&self, scenario: &str, injected: &str) {
        let emitted = self.audit.expected - self.audit.missing.len();
        println!("scenario: {scenario}");
        println!("injected: {injected}");
        println!(
            "| fires due | emitted | completed | emitted twice (same id) | lost | misfires | \
             time to recover |"
        );
        println!("|---|---|---|---|---|---|---|");
        println!(
            "| {} | {emitted} | {} | {} | {} | {} | {} |",
            self.audit.expected,
            self.completed,
            self.audit.doubled.len(),
            self.audit.missing.len(),
            self.audit.misfires,
            self.recovered_after_ms
                .map_or_else(|| "—".to_owned(), |ms| format!("{ms} ms")),
        );
    }
}

async fn broker_cut(paths: &Paths, options: &Options) -> Counts {
    let broker = ProxiedBroker::start().await;
    let prefix = format!("kfaults{}", now_ms());
    let stack = Stack::start(paths, &broker.address, &prefix).await;
    let jobs = stack.api.every_second_jobs(options.jobs).await;
    // A started job's first fire comes 5 s after its start, as in XXL-JOB.
    let from_ms = now_ms() + 6_000;
    tokio::time::sleep(options.before).await;
    broker.cut();
    let cut_ms = now_ms();
    eprintln!("broker cut off for {:?}", options.outage);
    tokio::time::sleep(options.outage).await;
    broker.mend();
    let back_ms = now_ms();
    eprintln!("broker reachable again after {} ms", back_ms - cut_ms);
    tokio::time::sleep(options.after).await;
    let to_ms = now_ms();
    stack.api.stop_jobs(&jobs).await;
    // The last fires' runs end within a few seconds of the stop; the topic is read to where
    // its records stop.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let records = read_triggers(
        &broker.address,
        &format!("{prefix}.triggers.{APP}"),
        PARTITIONS,
    )
    .await;
    let audit = FireAudit::of(&records, &jobs, from_ms, to_ms);
    let due: HashSet<String> = jobs
        .iter()
        .flat_map(|job| {
            (audit.from_ms..to_ms)
                .step_by(1000)
                .map(move |second| format!("{job}-{second}"))
        })
        .collect();
    let succeeded = stack.api.succeeded().await;
    let completed = due.iter().filter(|id| succeeded.contains_key(*id)).count();
    let due_while_away = |id: &str| {
        id.rsplit_once('-')
            .and_then(|(_, scheduled)| scheduled.parse::<i64>().ok())
            .is_some_and(|scheduled| (cut_ms..back_ms).contains(&scheduled))
    };
    let recovered_after_ms = succeeded
        .iter()
        .filter(|(id, _)| due.contains(*id) && due_while_away(id))
        .map(|(_, finished)| finished - back_ms)
        .max();
    Counts {
        audit,
        log: stack.log.clone(),
        completed,
        recovered_after_ms,
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((scenario, rest)) = args.split_first() else {
        eprintln!(
            "usage: faults broker-cut [--jobs N] [--before-secs S] [--outage-secs S] [--after-secs S]"
        );
        return ExitCode::from(2);
    };
    let options = match Options::parse(rest) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let paths = Paths::find();
    let counts = match scenario.as_str() {
        "broker-cut" => {
            let counts = broker_cut(&paths, &options).await;
            counts.print(
                "broker-cut",
                &format!(
                    "every connection to the broker cut and new ones refused for {} s, \
                     during {} jobs firing every second",
                    options.outage.as_secs(),
                    options.jobs
                ),
            );
            counts
        }
        other => {
            eprintln!("error: unknown scenario {other} (broker-cut)");
            return ExitCode::from(2);
        }
    };
    if counts.audit.missing.is_empty() {
        let _ = std::fs::remove_file(&counts.log);
        ExitCode::SUCCESS
    } else {
        eprintln!("LOST: {}", counts.audit.summary());
        eprintln!("the scheduler's log: {}", counts.log.display());
        ExitCode::FAILURE
    }
}
