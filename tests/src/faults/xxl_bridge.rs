//! The XXL-JOB side of the bridge scenarios: `kadence bridge xxl-job` as processes of the
//! harness's `kadence` binary ([`Bridge`]), unmodified XXL-JOB executors (the tests' sample
//! of `tests/xxl-job-executor` on xxl-job-core 3.3.2, [`XxlExecutor`]), and the wait until
//! the scheduler's registry shows the executors fronted by every bridge ([`fronted`]).
//!
//! Every process writes its output to a log file of its own, which the scenario keeps when
//! it fails, as the [`Stack`](super::stack::Stack)'s processes do.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::process::{Child, Command};

use super::api::Api;
use super::stack::{binaries, log_file};

/// The variable holding the command that starts the sample executor on xxl-job-core 3.3.2
/// (whitespace-separated words), as the end-to-end suite reads it.
pub const XXL_JOB_VARIABLE: &str = "KADENCE_TEST_XXL_JOB_3_3";

/// The access token the bridges and the executors share (`xxl.job.accessToken`): set, as in
/// production, so every call either way carries it.
pub const ACCESS_TOKEN: &str = "kadence-faults-xxl-token";

/// How long a process may take to say it listens: a JVM on a busy machine is slow to start.
const START_LIMIT: Duration = Duration::from_secs(90);

/// The command that starts the sample executor at 3.3.2: [`XXL_JOB_VARIABLE`] when set,
/// else what `infra/xxl-job-executor.sh 3.3.2` prints last (it builds the sample when its
/// sources changed). Panics saying what to set when neither gives one.
pub async fn xxl_job_command() -> Vec<String> {
    let from_variable = std::env::var(XXL_JOB_VARIABLE).unwrap_or_default();
    if !from_variable.trim().is_empty() {
        return from_variable
            .split_whitespace()
            .map(str::to_owned)
            .collect();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/xxl-job-executor.sh");
    let how = format!(
        "set {XXL_JOB_VARIABLE} to the command that starts the XXL-JOB sample executor at \
         3.3.2: export {XXL_JOB_VARIABLE}=$(infra/xxl-job-executor.sh 3.3.2)"
    );
    // The script's build output goes to its standard error, passed through; the command is
    // its standard output's last line.
    let output = Command::new(&script)
        .arg("3.3.2")
        .stderr(std::process::Stdio::inherit())
        .output()
        .await
        .unwrap_or_else(|error| panic!("cannot run {}: {error}; {how}", script.display()));
    assert!(
        output.status.success(),
        "{} 3.3.2 failed ({}); {how}",
        script.display(),
        output.status
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    let line = printed.lines().rev().find(|line| !line.trim().is_empty());
    let words: Vec<String> = line
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert!(
        !words.is_empty(),
        "{} printed no command; {how}",
        script.display()
    );
    words
}

/// What every bridge of one app is started with: the app and where its topics are, the keys
/// it verifies and signs with.
#[derive(Debug, Clone)]
pub struct BridgeSetup {
    /// The app the bridges front: the executors' appname.
    pub app: String,
    /// The Kafka bootstrap list.
    pub brokers: String,
    /// The scheduler's topic prefix.
    pub prefix: String,
    /// The scheduler's public keys, comma separated.
    pub trusted_keys: String,
    /// The app's executor key, which signs what the bridges publish.
    pub executor_key: String,
}

impl BridgeSetup {
    /// The admin address of a bridge listening on `port`, as executors and peers name it.
    pub fn admin(port: u16) -> String {
        format!("http://127.0.0.1:{port}/xxl-job-admin")
    }
}

/// `kadence bridge xxl-job` as a process, killed when dropped.
pub struct Bridge {
    child: Child,
    /// Its executor id in Kadence (the results it publishes carry it).
    pub id: String,
    /// Its output and log, both streams.
    pub log: PathBuf,
}

impl Bridge {
    /// Starts a bridge of `setup.app` with executor id `id`, its admin API on `port` and the
    /// admin addresses of `peers` as its peers; returns once it listens (panics, naming its
    /// log, when it does not within [`START_LIMIT`]).
    pub async fn start(setup: &BridgeSetup, id: &str, port: u16, peers: &[String]) -> Bridge {
        let log = std::env::temp_dir().join(format!("{}-{id}.log", setup.prefix));
        let mut command = Command::new(binaries().join("kadence-cli"));
        // The harness's own environment must not reach the bridge's settings (a
        // KADENCE_BRIDGE_PEERS of the shell would add a peer).
        for (name, _) in std::env::vars() {
            if name.starts_with("KADENCE_") {
                command.env_remove(name);
            }
        }
        command
            .args(["bridge", "xxl-job", "--app", &setup.app])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--executor-id", id, "--access-token", ACCESS_TOKEN])
            .args(["--brokers", &setup.brokers, "--broker-kind", "kafka"])
            .args(["--topic-prefix", &setup.prefix])
            .args(["--trusted-key", &setup.trusted_keys]);
        for peer in peers {
            command.args(["--peer", peer]);
        }
        let child = command
            .env("KADENCE_EXECUTOR_KEY", &setup.executor_key)
            .env("RUST_LOG", "info")
            .stdout(log_file(&log))
            .stderr(log_file(&log))
            .kill_on_drop(true)
            .spawn()
            .expect("start kadence bridge xxl-job");
        let bridge = Bridge {
            child,
            id: id.to_owned(),
            log,
        };
        let listening = wait_for_line(&bridge.log, "listening on", START_LIMIT).await;
        assert!(
            listening,
            "the bridge {id} did not listen within {START_LIMIT:?}: see {}",
            bridge.log.display()
        );
        bridge
    }

    /// Kills it at once (SIGKILL: no drain, no commit, its admin API gone mid-call) and
    /// waits for it.
    pub async fn kill_9(&mut self) {
        let _ = self.child.kill().await;
    }
}

/// An XXL-JOB executor (the sample at 3.3.2), killed when dropped.
pub struct XxlExecutor {
    _child: Child,
    /// Its output, both streams.
    pub log: PathBuf,
    /// Its job log folder (`XXL_JOB_LOG_PATH`), removed with it.
    _job_logs: tempfile::TempDir,
}

impl XxlExecutor {
    /// Starts executor `number` of `app` with `command`, on a free port, calling the admins
    /// at `admin_addresses` (comma separated, in the order it tries them); returns once it
    /// listens.
    pub async fn start(
        command: &[String],
        (app, prefix): (&str, &str),
        admin_addresses: &str,
        number: usize,
    ) -> XxlExecutor {
        let log = std::env::temp_dir().join(format!("{prefix}-xxl-executor-{number}.log"));
        let job_logs = tempfile::Builder::new()
            .prefix("kfaults-xxl-logs-")
            .tempdir()
            .expect("a job log folder");
        let (program, arguments) = command.split_first().expect("a command");
        let child = Command::new(program)
            .args(arguments)
            .env("XXL_JOB_ADMIN_ADDRESSES", admin_addresses)
            .env("XXL_JOB_ACCESS_TOKEN", ACCESS_TOKEN)
            .env("XXL_JOB_APPNAME", app)
            .env("XXL_JOB_IP", "127.0.0.1")
            .env("XXL_JOB_PORT", crate::free_port().to_string())
            .env("XXL_JOB_LOG_PATH", job_logs.path())
            .stdout(log_file(&log))
            .stderr(log_file(&log))
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| panic!("start the XXL-JOB executor {command:?}: {error}"));
        let listening = wait_for_line(&log, "listening on", START_LIMIT).await;
        assert!(
            listening,
            "XXL-JOB executor {number} did not listen within {START_LIMIT:?}: see {}",
            log.display()
        );
        XxlExecutor {
            _child: child,
            log,
            _job_logs: job_logs,
        }
    }
}

/// Waits until the scheduler's registry shows, for each of `bridges`, `executors` live
/// legacy executors beating through it, and their partitions together exactly `0..partitions`,
/// each once (no bridge's view stale), at most `limit`. What the registry showed last when it
/// did not.
///
/// A bridge beats each legacy executor under `{bridge id}/xxl-job@{host:port}`
/// (`kadence_bridge::legacy_executor_id`), with the range of the bridge's partitions it
/// hands that executor.
pub async fn fronted(
    api: &Api,
    app: &str,
    (bridges, executors): (&[&str], usize),
    partitions: i32,
    limit: Duration,
) -> Result<(), String> {
    let until = tokio::time::Instant::now() + limit;
    loop {
        let page = api
            .call(
                reqwest::Method::GET,
                &format!("/api/executors?app={app}&limit=1000"),
                Value::Null,
            )
            .await;
        let live: Vec<&Value> = (page["items"].as_array().into_iter().flatten())
            .filter(|view| view["live"] == true)
            .collect();
        let fronting = |bridge: &str| {
            let prefix = format!("{bridge}/xxl-job@");
            (live.iter())
                .filter(move |view| {
                    (view["executor_id"].as_str()).is_some_and(|id| id.starts_with(&prefix))
                })
                .copied()
        };
        let mut owned: Vec<i64> = (bridges.iter())
            .flat_map(|bridge| fronting(bridge))
            .flat_map(|view| {
                view["owned_partitions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|partition| partition.as_i64())
            .collect();
        owned.sort_unstable();
        let every_one = (bridges.iter()).all(|bridge| fronting(bridge).count() == executors);
        if every_one && owned == (0..i64::from(partitions)).collect::<Vec<_>>() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= until {
            let ids: HashSet<&str> = (live.iter())
                .filter_map(|view| view["executor_id"].as_str())
                .collect();
            return Err(format!(
                "the registry never showed {executors} legacy executors live behind each of \
                 {bridges:?} owning partitions 0..{partitions} once each within {limit:?}; \
                 live: {ids:?}, their partitions {owned:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether `log` has a line containing `needle` within `limit`.
async fn wait_for_line(log: &Path, needle: &str, limit: Duration) -> bool {
    let until = tokio::time::Instant::now() + limit;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.lines().any(|line| line.contains(needle)) {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
