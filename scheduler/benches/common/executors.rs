//! Executor processes for the end-to-end benchmark: an SDK's test executor (the Rust one,
//! `tests/src/bin/test-executor.rs` in a release build, or the Java one) started as a group of
//! processes, their CPU so far, and what they published.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use kadence_schemas::{ExecutorBeat, ResultRecord, Topics, codec};
use kadence_tests::triggers::read_records;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tokio::process::{Child, Command};

use super::APP;
use super::broker::Broker;
use super::usage::process_usage;

/// Partitions of the results topic (the scheduler's default `kafka.results_partitions`, and
/// what the benchmark creates without a scheduler).
pub const RESULTS_PARTITIONS: i32 = 6;

/// The executor SDK whose test executor a run starts: every SDK has one with the same
/// interface (handlers, environment), so the benchmark drives each the same way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sdk {
    /// `tests/src/bin/test-executor.rs`, release build.
    Rust,
    /// The Java SDK's test executor (`executors/java`), as `infra/java-executor.sh` builds
    /// and starts it.
    Java,
}

impl Sdk {
    /// The SDKs `--sdks` names (`rust,java`).
    pub fn parse_list(list: &str) -> Vec<Sdk> {
        super::parse_choices("--sdks", list, &[("rust", Sdk::Rust), ("java", Sdk::Java)])
    }

    pub fn label(self) -> &'static str {
        match self {
            Sdk::Rust => "Rust",
            Sdk::Java => "Java",
        }
    }
}

/// How to start one SDK's test executor: a program and its arguments.
pub struct ExecutorCommand {
    pub sdk: Sdk,
    program: PathBuf,
    args: Vec<String>,
}

impl ExecutorCommand {
    /// The Rust test executor at `binary`.
    pub fn rust(binary: PathBuf) -> ExecutorCommand {
        ExecutorCommand {
            sdk: Sdk::Rust,
            program: binary,
            args: Vec::new(),
        }
    }

    /// The Java test executor, built by `infra/java-executor.sh` if it is not up to date; the
    /// script prints the command (`java -cp … main class`), whose words are split here. The
    /// JVM is the process started, so its CPU is the executor's.
    pub fn java() -> ExecutorCommand {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../infra/java-executor.sh");
        let output = std::process::Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|error| panic!("run {}: {error}", script.display()));
        assert!(output.status.success(), "{} failed", script.display());
        let line = String::from_utf8(output.stdout).expect("the command is text");
        let mut words = line.split_whitespace().map(str::to_owned);
        let program = PathBuf::from(words.next().expect("a program to run"));
        ExecutorCommand {
            sdk: Sdk::Java,
            program,
            args: words.collect(),
        }
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        command
    }
}

/// This tree's test executor, built (release) if it is not up to date.
pub fn build_test_executor() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = std::process::Command::new(cargo)
        .args(["build", "--release", "--locked", "-p", "kadence-tests"])
        .args(["--bin", "test-executor"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build of the test executor failed");
    // Beside the scheduler's binary: both are release builds of this workspace.
    PathBuf::from(env!("CARGO_BIN_EXE_kadence")).with_file_name("test-executor")
}

/// The executor processes of one run.
pub struct Executors {
    children: Vec<Child>,
}

impl Executors {
    /// Starts `count` test executors of [`APP`] with `executor` on `broker` and the topic
    /// prefix `prefix`, trusting the public key `trusted_key` (base64) and signing with
    /// `executor_key` as a deployment does: every trigger's signature is verified, every
    /// result, log record and beat signed. Their ids are `bench-executor-{n}`.
    pub fn start(
        executor: &ExecutorCommand,
        count: usize,
        (broker, prefix): (&Broker, &str),
        (trusted_key, executor_key): (&str, &str),
    ) -> Executors {
        let children = (0..count)
            .map(|n| {
                executor
                    .command()
                    .env("KADENCE_BROKERS", &broker.bootstrap)
                    .env("KADENCE_BROKER_KIND", broker.kind.setting())
                    .env("KADENCE_TRUSTED_KEYS", trusted_key)
                    .env("KADENCE_EXECUTOR_KEY", executor_key)
                    .env("KADENCE_APP", APP)
                    .env("KADENCE_TOPIC_PREFIX", prefix)
                    .env("KADENCE_EXECUTOR_ID", format!("bench-executor-{n}"))
                    .stdout(Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .unwrap_or_else(|error| panic!("start {}: {error}", executor.program.display()))
            })
            .collect();
        Executors { children }
    }

    fn pids(&self) -> Vec<u32> {
        self.children.iter().filter_map(Child::id).collect()
    }

    /// CPU ticks of every executor so far.
    pub fn ticks(&self) -> u64 {
        self.pids()
            .into_iter()
            .filter_map(process_usage)
            .map(|(ticks, _)| ticks)
            .sum()
    }

    /// SIGTERM to each, then waits for their graceful stops (at most 30 s).
    pub async fn stop(mut self) {
        for pid in self.pids() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
        for child in &mut self.children {
            let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
        }
    }
}

/// Waits (at most a minute) until `count` executors of [`APP`] have beaten with partitions
/// on `topics`' beats topic at `brokers`: the group has settled.
pub async fn wait_for_beats(brokers: &str, topics: &Topics, count: usize) {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set(
            "group.id",
            format!("bench-beats-{:x}", rand::random::<u32>()),
        )
        .set("enable.auto.commit", "false")
        .create()
        .expect("beats reader");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(&topics.beats(), 0, Offset::Beginning)
        .expect("beats partition");
    consumer
        .assign(&assignment)
        .expect("assign the beats topic");
    let mut owning = HashSet::new();
    let read = async {
        while owning.len() < count {
            let message = consumer.recv().await.expect("read beats");
            let Some(Ok(beat)) = message.payload().map(codec::decode::<ExecutorBeat>) else {
                continue;
            };
            if beat.owned_partitions.is_empty() {
                owning.remove(&beat.executor_id);
            } else {
                owning.insert(beat.executor_id);
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .unwrap_or_else(|_| panic!("{count} executors did not all own partitions in a minute"));
}

/// The results published on `topics`' results topic at `brokers`, first per trigger id, of
/// scheduled fires (trigger id `{job}-{scheduled ms}`): `(scheduled ms, started ms)`.
pub async fn published_starts(brokers: &str, topics: &Topics) -> Vec<(i64, i64)> {
    let results: Vec<ResultRecord> =
        read_records(brokers, &topics.results(), RESULTS_PARTITIONS).await;
    let mut seen = HashSet::new();
    results
        .into_iter()
        .filter(|result| seen.insert(result.trigger_id.clone()))
        .filter_map(|result| {
            let scheduled = result.trigger_id.as_str().split_once('-')?.1.parse().ok()?;
            Some((scheduled, result.started_at_ms))
        })
        .collect()
}
