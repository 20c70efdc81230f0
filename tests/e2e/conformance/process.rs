//! An executor as a separate process ([`ExecutorProcess`]): the Rust `test-executor`, the
//! reference Python executor's demo or the Java SDK's test executor, which share one interface
//! (handlers, environment, standard output; see `tests/src/bin/test-executor.rs`).

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead};
use tokio::process::Child;
use tokio::sync::mpsc;

use crate::helpers::TestApp;

/// The environment variable naming the Python interpreter that has the reference executor
/// (`executors/python`) installed; `infra/python-executor.sh` makes one and prints its path.
const PYTHON_VARIABLE: &str = "KADENCE_TEST_PYTHON_EXECUTOR";

/// The environment variable holding the command that starts the Java SDK's test executor
/// (`executors/java`), words separated by whitespace; `infra/java-executor.sh` builds it and
/// prints the command.
const JAVA_VARIABLE: &str = "KADENCE_TEST_JAVA_EXECUTOR";

/// Which executor implementation a scenario runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implementation {
    /// The Rust SDK (`tests/src/bin/test-executor.rs`).
    Rust,
    /// The reference Python executor (`python -m kadence_executor.demo`).
    Python,
    /// The Java SDK (`io.kadence.executor.demo.TestExecutor`).
    Java,
}

impl Implementation {
    /// Whether this implementation runs script jobs when told to (`KADENCE_SCRIPTS`); one
    /// that does not answers every script trigger with the protocol's refusal.
    pub fn runs_scripts(self) -> bool {
        match self {
            Implementation::Rust => true,
            Implementation::Python => false,
            // `ScriptHandler`, when `KADENCE_SCRIPTS` switches scripts on.
            Implementation::Java => true,
        }
    }

    /// The command that starts this implementation's executor process.
    pub fn command(self) -> tokio::process::Command {
        match self {
            Implementation::Rust => {
                let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_test-executor"));
                command.env("RUST_LOG", "warn");
                command
            }
            Implementation::Python => {
                let python = std::env::var(PYTHON_VARIABLE).unwrap_or_else(|_| {
                    panic!(
                        "{PYTHON_VARIABLE} must name a Python with the reference executor \
                         installed: export {PYTHON_VARIABLE}=$(infra/python-executor.sh)"
                    )
                });
                let mut command = tokio::process::Command::new(python);
                command.args(["-m", "kadence_executor.demo"]);
                command
            }
            Implementation::Java => command_from_variable(
                JAVA_VARIABLE,
                "the Java test executor",
                "infra/java-executor.sh",
            ),
        }
    }
}

/// The command held in the environment variable `variable` (words separated by whitespace),
/// which `script` prints; panics saying how to set it when it is missing or empty.
pub fn command_from_variable(variable: &str, what: &str, script: &str) -> tokio::process::Command {
    let line = std::env::var(variable).unwrap_or_else(|_| {
        panic!("{variable} must hold the command that starts {what}: export {variable}=$({script})")
    });
    let mut words = line.split_whitespace();
    let program = words
        .next()
        .unwrap_or_else(|| panic!("{variable} is empty"));
    let mut command = tokio::process::Command::new(program);
    command.args(words);
    command
}

/// Spawns `command` with its standard output and error piped and the process killed when
/// the handle drops (a failing test leaves no executor behind).
pub fn spawn_piped(mut command: tokio::process::Command, what: &str) -> Child {
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|error| panic!("start {what}: {error}"))
}

/// An executor process whose output lines (standard error prefixed `! `) the test reads as
/// they come.
pub struct ExecutorProcess {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    /// Every line read so far.
    pub seen: Vec<String>,
}

impl ExecutorProcess {
    /// Starts an executor of `app_name` under `app`'s prefix and waits until it says `ready`.
    pub async fn start(
        implementation: Implementation,
        app: &TestApp,
        app_name: &str,
        executor_id: &str,
    ) -> ExecutorProcess {
        Self::start_with(implementation, app, app_name, executor_id, &[]).await
    }

    /// [`start`](Self::start) with more environment variables.
    pub async fn start_with(
        implementation: Implementation,
        app: &TestApp,
        app_name: &str,
        executor_id: &str,
        environment: &[(&str, &str)],
    ) -> ExecutorProcess {
        let mut command = implementation.command();
        match app.executor_key(app_name) {
            Some(key) => command.env("KADENCE_EXECUTOR_KEY", key),
            None => command.env("KADENCE_ALLOW_UNSIGNED", "1"),
        };
        command
            .env("KADENCE_BROKERS", &app.brokers)
            .env(
                "KADENCE_BROKER_KIND",
                kadence_tests::fixtures::broker_kind().name(),
            )
            .env("KADENCE_APP", app_name)
            .env("KADENCE_TOPIC_PREFIX", &app.prefix)
            .env("KADENCE_EXECUTOR_ID", executor_id)
            .env("KADENCE_BEAT_INTERVAL_MS", "1000")
            // Verifying only with the keys a scenario gives (KADENCE_TRUSTED_KEYS): many feed
            // hand-made records.
            .env("KADENCE_ALLOW_UNVERIFIED", "1")
            .envs(environment.iter().copied());
        let mut child = spawn_piped(command, &format!("the {implementation:?} executor"));
        let (tx, lines) = mpsc::unbounded_channel();
        forward_lines(child.stdout.take().unwrap(), "", tx.clone());
        forward_lines(child.stderr.take().unwrap(), "! ", tx);
        let mut process = ExecutorProcess {
            child,
            lines,
            seen: Vec::new(),
        };
        process
            .wait_for_line("ready", Duration::from_secs(30))
            .await;
        process
    }

    /// Reads lines until `wanted` appears; panics if the process ends first or `limit` passes.
    pub async fn wait_for_line(&mut self, wanted: &str, limit: Duration) {
        if self.seen.iter().any(|line| line == wanted) {
            return;
        }
        tokio::time::timeout(limit, async {
            while let Some(line) = self.lines.recv().await {
                let found = line == wanted;
                self.seen.push(line);
                if found {
                    return;
                }
            }
            panic!(
                "the executor exited before printing {wanted:?}: {:?}",
                self.seen
            );
        })
        .await
        .unwrap_or_else(|_| panic!("no {wanted:?} within {limit:?}: {:?}", self.seen));
    }

    fn pid(&self) -> Pid {
        let pid = self.child.id().expect("the executor is running");
        Pid::from_raw(pid.try_into().unwrap())
    }

    /// Sends SIGTERM: a graceful stop.
    pub fn terminate(&self) {
        kill(self.pid(), Signal::SIGTERM).expect("send SIGTERM");
    }

    /// Kills the process with SIGKILL (nothing runs after it) and waits for it to end.
    pub async fn kill_hard(&mut self) {
        kill(self.pid(), Signal::SIGKILL).expect("send SIGKILL");
        self.child
            .wait()
            .await
            .expect("wait for the killed executor");
        self.read_available();
    }

    /// Waits for the process to end on its own within `limit`, and reads the rest of its
    /// output.
    pub async fn exit(&mut self, limit: Duration) -> ExitStatus {
        let status = tokio::time::timeout(limit, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the executor did not exit within {limit:?}: {:?}",
                    self.seen
                )
            })
            .expect("wait for the executor");
        while let Ok(Some(line)) =
            tokio::time::timeout(Duration::from_secs(5), self.lines.recv()).await
        {
            self.seen.push(line);
        }
        status
    }

    /// Takes the lines printed so far without waiting.
    fn read_available(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
    }

    /// How many lines printed so far are exactly `line`.
    pub fn count(&mut self, line: &str) -> usize {
        self.read_available();
        self.seen.iter().filter(|seen| *seen == line).count()
    }

    /// How often the trigger `trigger_id` started here so far.
    pub fn runs_of(&mut self, trigger_id: &str) -> usize {
        self.count(&format!("started {trigger_id}"))
    }
}

/// Sends each line of `output` to `lines`, prefixed with `prefix`.
fn forward_lines(
    output: impl AsyncRead + Unpin + Send + 'static,
    prefix: &'static str,
    lines: mpsc::UnboundedSender<String>,
) {
    let mut reader = tokio::io::BufReader::new(output).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = reader.next_line().await {
            if lines.send(format!("{prefix}{line}")).is_err() {
                break;
            }
        }
    });
}
