//! The parts a scenario runs: `kadence serve` as a process of its own on a database the
//! scenario names, and a `test-executor` process of the app; and the scheduler's API as the
//! scenario calls it (logged in as its admin).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::{Child, Command};

use super::net::{free_port, metric_at};
use crate::serve::spawn_serve;
use crate::session::{TEST_ADMIN_PASSWORD, login};

/// The app every scenario's jobs belong to.
pub const APP: &str = "faults";
/// Partitions of its trigger topic.
pub const PARTITIONS: i32 = 3;

/// Where this build's binaries are (the harness is built beside them).
pub fn binaries() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug"))
}

/// A scheduler's API, logged in as its admin.
pub struct Api {
    url: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    /// `method path` with a JSON `body` (none when null); panics unless it succeeds.
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
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

    /// `GET /health/ready`: whether it answered 200, and its body.
    pub async fn readiness(&self) -> Option<(bool, Value)> {
        let response = self
            .http
            .get(format!("{}/health/ready", self.url))
            .timeout(std::time::Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        let ready = response.status().is_success();
        Some((ready, response.json().await.unwrap_or(Value::Null)))
    }

    /// `GET /metrics`, as text (empty when it does not answer).
    pub async fn metrics_text(&self) -> String {
        match self.http.get(format!("{}/metrics", self.url)).send().await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// The value of metric `name` in `GET /metrics`, of the first series whose labels include
    /// each of `labels` (`key="value"`).
    pub async fn metric(&self, name: &str, labels: &[&str]) -> Option<f64> {
        metric_at(&self.http, &self.url, name, labels).await
    }

    /// The public keys of the cluster's signing keys, for an executor to trust.
    pub async fn trusted_keys(&self) -> String {
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

    /// `count` jobs due every second with misfire strategy `misfire`, started, running the
    /// test executor's `noop` handler.
    pub async fn every_second_jobs(&self, count: usize, misfire: &str) -> Vec<i64> {
        self.every_second_jobs_running(count, misfire, ("noop", ""))
            .await
    }

    /// [`every_second_jobs`](Self::every_second_jobs) running `handler` with `params`.
    pub async fn every_second_jobs_running(
        &self,
        count: usize,
        misfire: &str,
        (handler, params): (&str, &str),
    ) -> Vec<i64> {
        let mut jobs = Vec::with_capacity(count);
        for _ in 0..count {
            let job = self
                .call(
                    reqwest::Method::POST,
                    "/api/jobs",
                    json!({"app": APP, "handler": handler, "params": params,
                           "schedule_conf": "* * * * * ?", "misfire_strategy": misfire,
                           "start": true}),
                )
                .await;
            jobs.push(job["id"].as_i64().expect("a job id"));
        }
        jobs
    }

    /// A job that fires only when triggered, running `handler` with `params`.
    pub async fn manual_job(&self, (handler, params): (&str, &str)) -> i64 {
        let job = self
            .call(
                reqwest::Method::POST,
                "/api/jobs",
                json!({"app": APP, "handler": handler, "params": params, "schedule_type": "NONE"}),
            )
            .await;
        job["id"].as_i64().expect("a job id")
    }

    /// Fires `job` once now; its trigger id.
    pub async fn trigger(&self, job: i64) -> String {
        let fired = self
            .call(
                reqwest::Method::POST,
                &format!("/api/jobs/{job}/trigger"),
                json!({}),
            )
            .await;
        fired["trigger_id"]
            .as_str()
            .expect("a trigger id")
            .to_owned()
    }

    /// `POST path` with `body` as JSON, whatever it holds: the status and the answer.
    pub async fn post_raw(&self, path: &str, body: Vec<u8>) -> (u16, String) {
        let sent = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await;
        match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.text().await.unwrap_or_default())
            }
            Err(error) => (0, error.to_string()),
        }
    }

    /// `POST path` declaring a body of `declared` bytes and sending only `sent`, then reading
    /// the answer: how a client sends a body too large to buffer, which the server must refuse
    /// without waiting for the rest. The status and the answer's body (status 0: no answer).
    pub async fn post_declaring(&self, path: &str, declared: usize, sent: &[u8]) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let address = self.url.trim_start_matches("http://");
        let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else {
            return (0, "cannot connect".to_owned());
        };
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {declared}\r\n\
             Connection: close\r\n\r\n",
            self.token
        );
        // The server may answer and close before it has read all that was sent.
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(sent).await;
        let mut answer = Vec::new();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            stream.read_to_end(&mut answer),
        )
        .await;
        if read.is_err() && answer.is_empty() {
            return (0, "no answer within 10 s".to_owned());
        }
        let answer = String::from_utf8_lossy(&answer);
        let status = (answer.split_whitespace().nth(1))
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        (status, body.to_owned())
    }

    /// Stops each of `jobs`.
    pub async fn stop_jobs(&self, jobs: &[i64]) {
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
    pub async fn succeeded(&self) -> HashMap<String, i64> {
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

/// Scheduler nodes on one database and executors of the app, as processes; all are killed
/// when dropped. The first scheduler's log goes to `log` (its errors during a fault are many,
/// and expected): kept and named when a fire was lost, removed otherwise; other nodes' logs
/// are discarded.
pub struct Stack {
    /// The first scheduler's API.
    pub api: Api,
    /// The first scheduler's log file.
    pub log: PathBuf,
    /// The executors' output (what they ran, which partitions they owned, their warnings).
    pub logs: Vec<PathBuf>,
    database_url: String,
    brokers: String,
    prefix: String,
    trusted_keys: String,
    schedulers: Vec<Child>,
    executors: Vec<Child>,
    /// Each executor's metrics address (`host:port`).
    executor_metrics: Vec<String>,
}

impl Stack {
    /// Starts `kadence serve` on `database_url` with topics under `prefix` on `brokers`,
    /// creates the app, and starts an executor of it.
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
        let log = std::env::temp_dir().join(format!("{prefix}-scheduler.log"));
        let mut serve = serve_command(
            database_url,
            brokers,
            prefix,
            Stdio::from(std::fs::File::create(&log).expect("the scheduler's log file")),
        );
        serve.envs(settings.iter().copied());
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
        let trusted_keys = api.trusted_keys().await;
        let mut stack = Stack {
            api,
            log,
            database_url: database_url.to_owned(),
            brokers: brokers.to_owned(),
            prefix: prefix.to_owned(),
            trusted_keys,
            schedulers: vec![scheduler],
            executors: Vec::new(),
            executor_metrics: Vec::new(),
            logs: Vec::new(),
        };
        stack.add_executor();
        stack
    }

    /// Starts one more scheduler node on the same database and broker; returns its number
    /// (the first is 0).
    pub async fn add_node(&mut self) -> usize {
        let (scheduler, _) = spawn_serve(serve_command(
            &self.database_url,
            &self.brokers,
            &self.prefix,
            Stdio::null(),
        ))
        .await;
        self.schedulers.push(scheduler);
        self.schedulers.len() - 1
    }

    /// Starts one more executor of the app; returns its number (the first is 0).
    pub fn add_executor(&mut self) -> usize {
        let number = self.executors.len();
        let (executor, log, metrics) =
            spawn_executor(&self.brokers, &self.prefix, &self.trusted_keys, number);
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

    /// The scheduler's log and the executors'.
    pub fn log_files(&self) -> Vec<PathBuf> {
        std::iter::once(&self.log)
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
/// topics under `prefix`, verifying with `trusted_keys` (empty: it verifies nothing); its
/// standard output and log go to the file returned with it (output and errors share it),
/// and it serves its metrics on the address returned last.
pub fn spawn_executor(
    brokers: &str,
    prefix: &str,
    trusted_keys: &str,
    number: usize,
) -> (Child, PathBuf, String) {
    let log = std::env::temp_dir().join(format!("{prefix}-executor-{number}.log"));
    let metrics = format!("127.0.0.1:{}", free_port());
    let executor = Command::new(binaries().join("test-executor"))
        .env("KADENCE_BROKERS", brokers)
        .env("KADENCE_APP", APP)
        .env("KADENCE_TOPIC_PREFIX", prefix)
        .env("KADENCE_EXECUTOR_ID", format!("faults-executor-{number}"))
        .env("KADENCE_TRUSTED_KEYS", trusted_keys)
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

/// `kadence serve` on `database_url` with topics under `prefix` on `brokers`, its log to
/// `log`.
fn serve_command(database_url: &str, brokers: &str, prefix: &str, log: Stdio) -> Command {
    let mut serve = Command::new(binaries().join("kadence-cli"));
    serve
        .arg("serve")
        .env("KADENCE_DATABASE__URL", database_url)
        .env("KADENCE_KAFKA__BROKERS", brokers)
        .env("KADENCE_KAFKA__TOPIC_PREFIX", prefix)
        .env("KADENCE_KAFKA__RESULTS_PARTITIONS", "1")
        .env("KADENCE_KAFKA__SESSION_TIMEOUT", "6s")
        .env("KADENCE_API__LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "warn,kadence_scheduler::database_watch=info")
        .stderr(log);
    serve
}
