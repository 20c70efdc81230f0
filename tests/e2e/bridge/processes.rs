//! The processes a bridge test runs: the real `kadence bridge xxl-job` command
//! ([`BridgeProcess`]) and real XXL-JOB executors ([`LegacyExecutor`]), the frameless sample
//! of `tests/xxl-job-executor` on xxl-job-core 2.4.2 or 3.3.2, each command read from its
//! variable (`infra/xxl-job-executor.sh VERSION` builds it and prints it; `infra/test.sh`
//! sets both).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::conformance::process::{command_from_variable, spawn_piped};
use crate::helpers::TestApp;
use kadence_tests::free_port;

/// The xxl-job-core versions the sample executor is built at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XxlVersion {
    /// 2.4.2, the most deployed line.
    V2_4,
    /// 3.3.2, the newest Maven Central serves.
    V3_3,
}

impl XxlVersion {
    /// The variable holding the command that starts the sample at this version.
    fn variable(self) -> &'static str {
        match self {
            XxlVersion::V2_4 => "KADENCE_TEST_XXL_JOB_2_4",
            XxlVersion::V3_3 => "KADENCE_TEST_XXL_JOB_3_3",
        }
    }

    /// The version as Maven names it.
    pub fn name(self) -> &'static str {
        match self {
            XxlVersion::V2_4 => "2.4.2",
            XxlVersion::V3_3 => "3.3.2",
        }
    }
}

/// A process's output lines, both streams, kept as they come.
#[derive(Clone, Default)]
pub struct Output(Arc<Mutex<Vec<String>>>);

impl Output {
    fn follow(&self, child: &mut Child) {
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let lines = Arc::clone(&self.0);
            tokio::spawn(async move {
                let mut reader = BufReader::new(stream).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    lines.lock().unwrap().push(line);
                }
            });
        }
    }

    /// Everything printed so far.
    pub fn text(&self) -> String {
        self.0.lock().unwrap().join("\n")
    }

    /// Waits (`limit` at most) for a line containing `needle`; returns it.
    pub async fn line_with(&self, needle: &str, limit: Duration, what: &str) -> String {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(line) = self
                .0
                .lock()
                .unwrap()
                .iter()
                .find(|line| line.contains(needle))
            {
                return line.clone();
            }
            assert!(
                Instant::now() < deadline,
                "{what}: no line with {needle:?} within {limit:?}:\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn signal(child: &Child, signal: Signal) {
    let pid = child.id().expect("the process is running");
    kill(Pid::from_raw(pid.try_into().unwrap()), signal).expect("send a signal");
}

/// A real XXL-JOB executor (the sample), registered at the admin addresses it was given.
pub struct LegacyExecutor {
    child: Child,
    /// Its output.
    pub output: Output,
    /// Its address as it registers it: `http://127.0.0.1:{port}/`.
    pub address: String,
    /// Its log folder, removed with it.
    _logs: tempfile::TempDir,
}

impl LegacyExecutor {
    /// Starts the sample at `version` for `appname`, calling the admins at `admin_addresses`
    /// (comma separated) with `token`; returns once it listens.
    pub async fn start(
        version: XxlVersion,
        appname: &str,
        admin_addresses: &str,
        token: &str,
    ) -> LegacyExecutor {
        let port = free_port();
        let logs = tempfile::tempdir().expect("a log folder");
        let mut command = command_from_variable(
            version.variable(),
            "the XXL-JOB sample executor",
            &format!("infra/xxl-job-executor.sh {}", version.name()),
        );
        command
            .env("XXL_JOB_ADMIN_ADDRESSES", admin_addresses)
            .env("XXL_JOB_ACCESS_TOKEN", token)
            .env("XXL_JOB_APPNAME", appname)
            .env("XXL_JOB_IP", "127.0.0.1")
            .env("XXL_JOB_PORT", port.to_string())
            .env("XXL_JOB_LOG_PATH", logs.path());
        let mut child = spawn_piped(command, "the XXL-JOB sample executor");
        let output = Output::default();
        output.follow(&mut child);
        output
            .line_with(
                "listening on",
                Duration::from_secs(60),
                "the XXL-JOB executor",
            )
            .await;
        LegacyExecutor {
            child,
            output,
            address: format!("http://127.0.0.1:{port}/"),
            _logs: logs,
        }
    }

    /// Ends it at once, as a crash would: no registryRemove, no callback.
    pub async fn kill_9(&mut self) {
        signal(&self.child, Signal::SIGKILL);
        let _ = self.child.wait().await;
    }

    /// Calls its `idleBeat` for `job` with `token`: whether the job is idle there.
    pub async fn is_idle(&self, job: i64, token: &str) -> bool {
        let answer = post(
            &format!("{}idleBeat", self.address),
            token,
            json!({"jobId": job}),
        )
        .await;
        answer["code"] == 200
    }
}

/// POSTs `body` with the access token, as XXL-JOB's peers do; returns the JSON answer.
pub async fn post(url: &str, token: &str, body: Value) -> Value {
    let response = reqwest::Client::new()
        .post(url)
        .header("XXL-JOB-ACCESS-TOKEN", token)
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|error| panic!("POST {url}: {error}"));
    let text = response.text().await.expect("an answer");
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{url} answered {text:?}: {error}"))
}

/// `kadence bridge xxl-job` as a process of the test binary's `kadence` command.
pub struct BridgeProcess {
    /// Killed when the test ends.
    _child: Child,
    /// Its output.
    pub output: Output,
    /// Its admin address: `http://127.0.0.1:{port}/xxl-job-admin`.
    pub admin: String,
}

impl BridgeProcess {
    /// Starts a bridge of `appname` under `app`'s scheduler (its prefix, trusted key and the
    /// app's executor key) with `token` and `extra` arguments; returns once it listens.
    pub async fn start(
        app: &TestApp,
        appname: &str,
        executor_id: &str,
        token: &str,
        extra: &[&str],
    ) -> BridgeProcess {
        let port = free_port();
        Self::start_on(app, appname, executor_id, token, port, extra).await
    }

    /// [`start`](Self::start) on a port chosen beforehand (for peers that name each other).
    pub async fn start_on(
        app: &TestApp,
        appname: &str,
        executor_id: &str,
        token: &str,
        port: u16,
        extra: &[&str],
    ) -> BridgeProcess {
        let trusted = app.signing_public_key().await;
        let key = app
            .executor_key(appname)
            .expect("the app has an executor key");
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_kadence-cli"));
        for (name, _) in std::env::vars() {
            if name.starts_with("KADENCE_") {
                command.env_remove(name);
            }
        }
        command
            .args(["bridge", "xxl-job", "--app", appname])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--access-token", token, "--executor-id", executor_id])
            .args(["--brokers", &app.brokers])
            .args([
                "--broker-kind",
                kadence_tests::fixtures::broker_kind().name(),
            ])
            .args(["--topic-prefix", &app.prefix])
            .args(["--trusted-key", &trusted])
            .args(["--probe-interval", "1s"])
            .args(extra)
            .env("KADENCE_EXECUTOR_KEY", key)
            .env("RUST_LOG", "info,kadence_bridge=debug");
        let mut child = spawn_piped(command, "kadence bridge xxl-job");
        let output = Output::default();
        output.follow(&mut child);
        output
            .line_with("listening on", Duration::from_secs(30), "the bridge")
            .await;
        BridgeProcess {
            _child: child,
            output,
            admin: format!("http://127.0.0.1:{port}/xxl-job-admin"),
        }
    }

    /// A port for a bridge that peers must know before it starts.
    pub fn reserve_port() -> u16 {
        free_port()
    }
}
