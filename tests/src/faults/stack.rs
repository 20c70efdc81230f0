//! The parts a scenario runs: `kadence serve` as a process of its own on a database the
//! scenario names, and `test-executor` processes of the app, joining their group by the
//! [`GroupProtocol`] the scenario names; the scheduler's [`Api`] is in [`super::api`].

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

pub use kadence_executor::BrokerKind;
use serde_json::json;
use tokio::process::{Child, Command};

use super::api::{APP, Api, PARTITIONS};
use super::net::metric_at;
use crate::free_port;
use crate::serve::spawn_serve;

/// How the executors join their consumer group: librdkafka's `group.protocol`, passed to the
/// test executor as `KADENCE_GROUP_PROTOCOL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupProtocol {
    /// The classic protocol: the members join, one of them assigns, the coordinator syncs.
    Classic,
    /// KIP-848's: the coordinator assigns, incrementally, over heartbeats; the session and
    /// heartbeat are the broker's (`group.consumer.*`), not the client's. Apache Kafka 4.
    Consumer,
}

impl GroupProtocol {
    /// Both, classic first.
    pub const ALL: [GroupProtocol; 2] = [GroupProtocol::Classic, GroupProtocol::Consumer];

    /// `classic` or `consumer`, as librdkafka and the command line name it.
    pub fn parse(name: &str) -> Result<GroupProtocol, String> {
        match name {
            "classic" => Ok(GroupProtocol::Classic),
            "consumer" => Ok(GroupProtocol::Consumer),
            other => Err(format!(
                "--group-protocol is classic or consumer, not {other:?}"
            )),
        }
    }

    /// Its name, as [`parse`](Self::parse) takes it.
    pub fn name(self) -> &'static str {
        match self {
            GroupProtocol::Classic => "classic",
            GroupProtocol::Consumer => "consumer",
        }
    }
}

/// Where this build's binaries are (the harness is built beside them).
pub fn binaries() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug"))
}

/// Scheduler nodes on one database and executors of the app, as processes; all are killed
/// when dropped. The first scheduler's log goes to `log`, each added node's to one of its own
/// (their errors during a fault are many, and expected): kept and named when a fire was lost,
/// removed otherwise.
pub struct Stack {
    /// The first scheduler's API.
    pub api: Api,
    /// The first scheduler's log file.
    pub log: PathBuf,
    /// The executors' output (what they ran, which partitions they owned, their warnings).
    pub logs: Vec<PathBuf>,
    /// The log of each scheduler node [added](Self::add_node) after the first.
    node_logs: Vec<PathBuf>,
    database_url: String,
    brokers: String,
    prefix: String,
    trusted_keys: String,
    /// The app's executor key, which every executor signs with.
    executor_key: String,
    group_protocol: GroupProtocol,
    /// What the scheduler and executors are told the broker is.
    broker_kind: BrokerKind,
    schedulers: Vec<Child>,
    executors: Vec<Child>,
    /// Each executor's metrics address (`host:port`).
    executor_metrics: Vec<String>,
}

impl Stack {
    /// Starts `kadence serve` on `database_url` with topics under `prefix` on `brokers` (a
    /// tansu broker, as every scenario that starts its stack this way has), creates the app,
    /// and starts an executor of it.
    pub async fn start(database_url: &str, brokers: &str, prefix: &str) -> Stack {
        Stack::start_with(database_url, brokers, prefix, &[]).await
    }

    /// [`start`](Self::start) with more of the scheduler's settings, as `KADENCE_…`
    /// environment variables.
    pub async fn start_with(
        database_url: &str,
        brokers: &str,
        prefix: &str,
        settings: &[(&str, &str)],
    ) -> Stack {
        let broker = (brokers, BrokerKind::Tansu);
        Stack::launch(
            database_url,
            broker,
            prefix,
            settings,
            GroupProtocol::Classic,
        )
        .await
    }

    /// [`start`](Self::start) on a broker of `kind`, with executors that join their group by
    /// `group_protocol` (this one and every one [added](Self::add_executor) later).
    pub async fn start_grouped(
        database_url: &str,
        (brokers, kind): (&str, BrokerKind),
        prefix: &str,
        group_protocol: GroupProtocol,
    ) -> Stack {
        Stack::launch(database_url, (brokers, kind), prefix, &[], group_protocol).await
    }

    async fn launch(
        database_url: &str,
        (brokers, broker_kind): (&str, BrokerKind),
        prefix: &str,
        settings: &[(&str, &str)],
        group_protocol: GroupProtocol,
    ) -> Stack {
        let log = std::env::temp_dir().join(format!("{prefix}-scheduler.log"));
        let mut serve = serve_command(
            database_url,
            (brokers, broker_kind),
            prefix,
            Stdio::from(std::fs::File::create(&log).expect("the scheduler's log file")),
        );
        serve.envs(settings.iter().copied());
        let (scheduler, url) = spawn_serve(serve).await;
        let api = Api::logged_in(url).await;
        api.call(
            reqwest::Method::POST,
            "/api/apps",
            json!({"name": APP, "partitions": PARTITIONS}),
        )
        .await;
        let trusted_keys = api.trusted_keys().await;
        let executor_key = api.executor_key(APP).await;
        let mut stack = Stack {
            api,
            log,
            database_url: database_url.to_owned(),
            brokers: brokers.to_owned(),
            prefix: prefix.to_owned(),
            trusted_keys,
            executor_key,
            group_protocol,
            broker_kind,
            schedulers: vec![scheduler],
            executors: Vec::new(),
            executor_metrics: Vec::new(),
            logs: Vec::new(),
            node_logs: Vec::new(),
        };
        stack.add_executor();
        stack
    }

    /// Starts one more scheduler node on the same database and broker; returns its number
    /// (the first is 0).
    pub async fn add_node(&mut self) -> usize {
        let number = self.schedulers.len();
        let log = (std::env::temp_dir()).join(format!("{}-scheduler-{number}.log", self.prefix));
        let (scheduler, _) = spawn_serve(serve_command(
            &self.database_url,
            (&self.brokers, self.broker_kind),
            &self.prefix,
            log_file(&log),
        ))
        .await;
        self.schedulers.push(scheduler);
        self.node_logs.push(log);
        number
    }

    /// Starts one more executor of the app; returns its number (the first is 0).
    pub fn add_executor(&mut self) -> usize {
        let number = self.executors.len();
        let (executor, log, metrics) = spawn_executor(
            (&self.brokers, self.broker_kind),
            &self.prefix,
            (&self.trusted_keys, &self.executor_key),
            self.group_protocol,
            number,
        );
        self.executors.push(executor);
        self.logs.push(log);
        self.executor_metrics.push(metrics);
        number
    }

    /// The value of metric `name` on executor `executor`'s metrics address, of the first
    /// series whose labels include each of `labels` (`key="value"`).
    pub async fn executor_metric(
        &self,
        executor: usize,
        name: &str,
        labels: &[&str],
    ) -> Option<f64> {
        let base_url = format!("http://{}", self.executor_metrics[executor]);
        metric_at(&self.api.http, &base_url, name, labels).await
    }

    /// The process id of scheduler node `node`.
    pub fn node_pid(&self, node: usize) -> u32 {
        self.schedulers[node].id().expect("a running node")
    }

    /// The process id of executor `executor`.
    pub fn executor_pid(&self, executor: usize) -> u32 {
        self.executors[executor].id().expect("a running executor")
    }

    /// Kills executor `executor` at once (SIGKILL) and waits for it.
    pub async fn kill_executor(&mut self, executor: usize) {
        let _ = self.executors[executor].kill().await;
    }

    /// Stops executor `executor` gracefully (SIGTERM: it finishes its runs and leaves the
    /// group) and waits for it, at most `patience`, then kills it.
    pub async fn stop_executor(&mut self, executor: usize, patience: Duration) {
        terminate(&mut self.executors[executor], patience).await;
    }

    /// The first scheduler's resident memory, MiB (0 where `/proc` does not tell).
    pub fn scheduler_rss_mib(&self) -> u64 {
        let pid = self.node_pid(0);
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|status| {
                let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .map_or(0, |kib| kib / 1024)
    }

    /// The schedulers' logs and the executors'.
    pub fn log_files(&self) -> Vec<PathBuf> {
        std::iter::once(&self.log)
            .chain(&self.node_logs)
            .chain(&self.logs)
            .cloned()
            .collect()
    }

    /// Whether the first scheduler's process still runs.
    pub fn scheduler_running(&mut self) -> bool {
        matches!(self.schedulers[0].try_wait(), Ok(None))
    }
}

/// The URL of the SQLite file `kadence.db` in `dir` (created at the scheduler's start).
pub fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("kadence.db").display())
}

/// Executor `number` of the app (the test executor, killed when dropped) on `brokers`, with
/// topics under `prefix`, verifying with `trusted_keys` (empty: it verifies nothing) and
/// signing with `executor_key`, in a group of `group_protocol`; its
/// standard output and log go to the file returned with it (output and errors share it),
/// and it serves its metrics on the address returned last.
pub fn spawn_executor(
    (brokers, broker_kind): (&str, BrokerKind),
    prefix: &str,
    (trusted_keys, executor_key): (&str, &str),
    group_protocol: GroupProtocol,
    number: usize,
) -> (Child, PathBuf, String) {
    let log = std::env::temp_dir().join(format!("{prefix}-executor-{number}.log"));
    let metrics = format!("127.0.0.1:{}", free_port());
    let executor = Command::new(binaries().join("test-executor"))
        .env("KADENCE_BROKERS", brokers)
        .env("KADENCE_BROKER_KIND", broker_kind.name())
        .env("KADENCE_APP", APP)
        .env("KADENCE_TOPIC_PREFIX", prefix)
        .env("KADENCE_EXECUTOR_ID", format!("faults-executor-{number}"))
        .env("KADENCE_TRUSTED_KEYS", trusted_keys)
        .env("KADENCE_EXECUTOR_KEY", executor_key)
        .env("KADENCE_GROUP_PROTOCOL", group_protocol.name())
        .env("KADENCE_METRICS_ADDRESS", &metrics)
        .env("RUST_LOG", "warn")
        .stdout(log_file(&log))
        .stderr(log_file(&log))
        .kill_on_drop(true)
        .spawn()
        .expect("start test-executor");
    (executor, log, metrics)
}

/// Stops `child` gracefully (SIGTERM) and waits for it, at most `patience`, then kills it.
pub async fn terminate(child: &mut Child, patience: Duration) {
    if let Some(pid) = child.id() {
        signal(pid, "TERM");
    }
    if tokio::time::timeout(patience, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

/// `log` opened for appending, as a child's output (nowhere when it cannot be opened).
pub(super) fn log_file(log: &Path) -> Stdio {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_or_else(|_| Stdio::null(), Stdio::from)
}

/// Sends `signal` (`STOP`, `CONT`, …) to process `pid`.
pub fn signal(pid: u32, signal: &str) {
    let sent = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .is_ok_and(|status| status.success());
    assert!(sent, "kill -{signal} {pid}");
}

/// `kadence serve` on `database_url` with topics under `prefix` on `brokers` (of that kind),
/// its log to `log`.
fn serve_command(
    database_url: &str,
    (brokers, broker_kind): (&str, BrokerKind),
    prefix: &str,
    log: Stdio,
) -> Command {
    let mut serve = Command::new(binaries().join("kadence-cli"));
    serve
        .arg("serve")
        .env("KADENCE_DATABASE__URL", database_url)
        .env("KADENCE_KAFKA__BROKERS", brokers)
        .env("KADENCE_KAFKA__BROKER_KIND", broker_kind.name())
        .env("KADENCE_KAFKA__TOPIC_PREFIX", prefix)
        .env("KADENCE_KAFKA__RESULTS_PARTITIONS", "1")
        .env("KADENCE_KAFKA__SESSION_TIMEOUT", "6s")
        .env("KADENCE_API__LISTEN", "127.0.0.1:0")
        .env(
            "RUST_LOG",
            "warn,kadence_scheduler::monitors::database_watch=info",
        )
        .stderr(log);
    serve
}
