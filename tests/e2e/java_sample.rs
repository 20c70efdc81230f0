//! The Java SDK's sample Spring Boot service (`executors/java/kadence-sample`) as its users run
//! it: the executable jar as a process of its own, configured by the variables every Kadence
//! executor reads, verifying the scheduler's signatures and signing with its app's executor
//! key, against a scheduler in this process (SQLite) and the real broker. It shows what the
//! Spring Boot starter promises: the service's handlers, ported from XXL-JOB, run from the
//! scheduler — a cron job on `demoJobHandler` with its log, `reportJobHandler`'s note
//! and failure, a broadcast on `shardingJobHandler` — and the service is in the registry, stops
//! gracefully on SIGTERM with a run in flight, and refuses a setting it cannot run with by
//! saying what to set.
//!
//! `KADENCE_TEST_JAVA_SAMPLE` holds the command that starts the service, words separated by
//! whitespace (`infra/java-sample.sh` builds the jar and prints `java -jar …`;
//! `infra/test.sh` sets it). Without it the tests fail saying so.
//!
//! Decisions:
//! - The app is the sample's default, `sample` (`KADENCE_APP` is left out of the service's
//!   environment), with 2 partitions: a SHARDING_BROADCAST over one executor owning both is
//!   two runs, shard 0 of 2 and shard 1 of 2, each once.
//! - SIGTERM ends the JVM with 143 (128 + 15) once Spring Boot's shutdown hook has closed the
//!   context and the executor's graceful stop has finished; the starter keeps that code (see
//!   `KadenceExecutorLifecycle`), which is every Spring Boot service's, rather than halting
//!   the application's JVM with 0 as the SDK's own test executor does.
//! - The suite's subject is the service and the SDK under it, not the store: SQLite only.
//!   Apache Kafka and tansu both (the e2e pass on tansu runs it).

use std::collections::BTreeSet;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kadence_scheduler::domain::model::Run;
use kadence_scheduler::http::api::ExecutorView;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::conformance::process::{command_from_variable, spawn_piped};
use crate::helpers::{TestApp, spawn_app};
use crate::scripts::log_of;
use kadence_tests::fixtures::{Backend, wait_for};

/// The environment variable holding the command that starts the sample service.
const SAMPLE_VARIABLE: &str = "KADENCE_TEST_JAVA_SAMPLE";

/// The sample's app (its default), and its partitions here.
const APP: &str = "sample";
const PARTITIONS: i32 = 2;

/// The sample's handlers, as its beats list them.
const HANDLERS: [&str; 3] = ["demoJobHandler", "reportJobHandler", "shardingJobHandler"];

/// The drain timeout the SIGTERM test gives the service: the exit must come before it.
const DRAIN: Duration = Duration::from_secs(10);

/// The sample service as a process, every line it prints (standard output and error) kept.
struct Sample {
    child: Child,
    output: Arc<Mutex<Vec<String>>>,
}

impl Sample {
    /// Starts the service with `environment` on top of the test's own environment less every
    /// `KADENCE_*` variable, so that only what the test gives configures it.
    fn start(environment: &[(&str, &str)]) -> Sample {
        let mut command = command_from_variable(
            SAMPLE_VARIABLE,
            "the Java sample service",
            "infra/java-sample.sh",
        );
        for (name, _) in std::env::vars() {
            if name.starts_with("KADENCE_") {
                command.env_remove(name);
            }
        }
        command.envs(environment.iter().copied());
        let mut child = spawn_piped(command, "the Java sample service");
        let output = Arc::new(Mutex::new(Vec::new()));
        keep_lines(child.stdout.take().unwrap(), &output);
        keep_lines(child.stderr.take().unwrap(), &output);
        Sample { child, output }
    }

    /// Starts the service as the executor `sample-1` of `app`'s scheduler, trusting its
    /// signing key and signing with the app's executor key, plus `environment`; returns once
    /// the registry shows it owning every partition.
    async fn serving(app: &TestApp, environment: &[(&str, &str)]) -> (Sample, ExecutorView) {
        let trusted = app.signing_public_key().await;
        let key = app
            .executor_key(APP)
            .expect("create_app made the app's key");
        let mut variables = vec![
            ("KADENCE_BROKERS", app.brokers.as_str()),
            (
                "KADENCE_BROKER_KIND",
                kadence_tests::fixtures::broker_kind().name(),
            ),
            ("KADENCE_TOPIC_PREFIX", app.prefix.as_str()),
            ("KADENCE_EXECUTOR_ID", "sample-1"),
            ("KADENCE_TRUSTED_KEYS", trusted.as_str()),
            ("KADENCE_EXECUTOR_KEY", key.as_str()),
            ("KADENCE_BEAT_INTERVAL_MS", "1000"),
        ];
        variables.extend_from_slice(environment);
        let mut sample = Sample::start(&variables);
        let deadline = Instant::now() + Duration::from_secs(120);
        let view = loop {
            sample.assert_running();
            let owner = app.executors(APP).await.into_iter().find(|view| {
                view.live
                    && view.entry.executor_id == "sample-1"
                    && view.entry.owned_partitions == (0..PARTITIONS).collect::<Vec<_>>()
            });
            if let Some(view) = owner {
                break view;
            }
            assert!(
                Instant::now() < deadline,
                "the sample never owned every partition in the registry:\n{}",
                sample.output()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        (sample, view)
    }

    /// Panics with the output if the process has ended.
    fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("the sample exited ({status}):\n{}", self.output());
        }
    }

    /// Everything printed so far, one line each.
    fn output(&self) -> String {
        self.output.lock().unwrap().join("\n")
    }

    fn terminate(&self) {
        let pid = self.child.id().expect("the sample is running");
        kill(Pid::from_raw(pid.try_into().unwrap()), Signal::SIGTERM).expect("send SIGTERM");
    }

    /// Waits for the process to end within `limit`; its status, and the time it took.
    async fn exit(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let began = Instant::now();
        let status = tokio::time::timeout(limit, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the sample did not exit within {limit:?}:\n{}",
                    self.output()
                )
            })
            .expect("wait for the sample");
        let took = began.elapsed();
        // The readers reach the end of the pipes soon after.
        tokio::time::sleep(Duration::from_millis(300)).await;
        (status, took)
    }
}

/// Appends each line of `stream` to `output` as it comes.
fn keep_lines(
    stream: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    output: &Arc<Mutex<Vec<String>>>,
) {
    let output = Arc::clone(output);
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            output.lock().unwrap().push(line);
        }
    });
}

/// Creates the job `body` describes under the app `sample`; returns its id.
async fn job(app: &TestApp, body: Value) -> i64 {
    let mut job = json!({"app": APP, "schedule_type": "NONE"});
    job.as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    app.create_job(job).await.id
}

/// Waits (a minute at most) until `pick` finds what it looks for among `job`'s runs, newest
/// first; returns that.
async fn runs_until<T>(
    app: &TestApp,
    job: i64,
    what: &str,
    pick: impl Fn(Vec<Run>) -> Option<T>,
) -> T {
    wait_for(Duration::from_secs(60), what, || async {
        pick(app.runs(job).await)
    })
    .await
}

/// The run of `trigger_id` of `job`, once it has its result.
async fn result_of(app: &TestApp, job: i64, trigger_id: &str) -> Run {
    let answered = |run: &Run| run.trigger_id.as_str() == trigger_id && run.handle_code.is_some();
    runs_until(app, job, &format!("the result of {trigger_id}"), |runs| {
        runs.into_iter().find(answered)
    })
    .await
}

/// At least `count` runs of `job` with their results and their dispatch marks; those. Either
/// may be written first: a quick handler's result often beats the mark, which waits for the
/// acknowledgement writer's linger, and the run's partition comes with the mark.
async fn answered(app: &TestApp, job: i64, count: usize) -> Vec<Run> {
    let what = format!("{count} answered runs of job {job}");
    runs_until(app, job, &what, |mut runs| {
        runs.retain(|run| run.handle_code.is_some() && run.partition.is_some());
        (runs.len() >= count).then_some(runs)
    })
    .await
}

/// The lines XXL-JOB's demo handler writes, as ported.
fn demo_log() -> Vec<String> {
    let mut lines = vec!["KADENCE-JOB, Hello World.".to_owned()];
    lines.extend((0..5).map(|i| format!("beat at: {i}")));
    lines
}

/// The sample in the registry, a cron job on `demoJobHandler` with its log,
/// `reportJobHandler`'s note and failure, and a broadcast on `shardingJobHandler`.
async fn the_sample_runs_its_handlers_from_the_scheduler(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app(APP, PARTITIONS).await;
    let (mut sample, view) = Sample::serving(&app, &[]).await;
    assert_eq!(view.entry.app.as_str(), APP, "{view:?}");
    assert_eq!(view.entry.handlers, HANDLERS, "{view:?}");

    let cron = job(
        &app,
        json!({"handler": "demoJobHandler", "schedule_type": "CRON",
        "schedule_conf": "* * * * * ?", "start": true}),
    )
    .await;
    let runs = answered(&app, cron, 2).await;
    app.stop_job(cron).await;
    for run in &runs {
        assert_eq!(
            (run.handle_code, run.executor_id.as_deref()),
            (Some(200), Some("sample-1")),
            "{run:?}"
        );
    }
    assert_eq!(log_of(&app, &runs[0], 6).await, demo_log());

    let report = job(&app, json!({"handler": "reportJobHandler"})).await;
    let weekly = app.trigger(report, Some("weekly")).await;
    let built = result_of(&app, report, &weekly).await;
    assert_eq!(
        (built.handle_code, built.handle_msg.as_deref()),
        (Some(200), Some("report weekly built")),
        "the handler's note is the run's message: {built:?}"
    );
    assert_eq!(log_of(&app, &built, 1).await, ["building report weekly"]);
    let unnamed = app.trigger(report, None).await;
    let refused = result_of(&app, report, &unnamed).await;
    assert_eq!(
        (refused.handle_code, refused.handle_msg.as_deref()),
        (Some(500), Some("params must name the report")),
        "{refused:?}"
    );

    let shards = job(
        &app,
        json!({"handler": "shardingJobHandler", "route_strategy": "SHARDING_BROADCAST"}),
    )
    .await;
    app.trigger(shards, None).await;
    let runs = answered(&app, shards, 2).await;
    assert_eq!(runs.len(), 2, "one run per partition: {runs:?}");
    let mut indexes = BTreeSet::new();
    for run in &runs {
        assert_eq!(run.handle_code, Some(200), "{run:?}");
        assert_eq!(
            (run.shard_total, run.partition),
            (PARTITIONS, Some(run.shard_index))
        );
        let mut expected = vec![format!("shard {} of {PARTITIONS}", run.shard_index)];
        expected.extend(
            (0..10)
                .filter(|item| item % PARTITIONS == run.shard_index)
                .map(|item| format!("item {item} is mine")),
        );
        assert_eq!(log_of(&app, run, expected.len()).await, expected);
        indexes.insert(run.shard_index);
    }
    assert_eq!(indexes, BTreeSet::from([0, 1]), "each shard once");

    sample.terminate();
    let (status, _) = sample.exit(DRAIN + Duration::from_secs(30)).await;
    assert_eq!(status.code(), Some(143), "{}", sample.output());
    app.shutdown().await;
}

/// SIGTERM while `demoJobHandler` runs with two more of its triggers queued behind it
/// (SERIAL_EXECUTION): the service drains them — every run gets its result, one of them was
/// running when the signal came — leaves, and exits 143 before the drain timeout.
async fn sigterm_drains_the_runs_in_flight_and_exits_143(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app(APP, PARTITIONS).await;
    let drain = DRAIN.as_millis().to_string();
    let (mut sample, _) = Sample::serving(&app, &[("KADENCE_DRAIN_TIMEOUT_MS", &drain)]).await;
    let demo = job(&app, json!({"handler": "demoJobHandler"})).await;
    let mut triggers = Vec::new();
    for _ in 0..3 {
        triggers.push(app.trigger(demo, None).await);
    }
    // A run's first line reaches its log while it runs (lines ship every 250 ms). The first
    // trigger's run starts first (one lane, FIFO): once its line is there, it or one of the
    // two behind it is going for about two more seconds.
    let watched = runs_until(&app, demo, "the first trigger's run", |runs| {
        runs.into_iter()
            .find(|run| run.trigger_id.as_str() == triggers[0])
    })
    .await;
    log_of(&app, &watched, 1).await;
    let terminated_at = kadence_tests::now_ms();
    sample.terminate();
    let (status, took) = sample.exit(DRAIN + Duration::from_secs(30)).await;
    let output = sample.output();
    assert_eq!(
        status.code(),
        Some(143),
        "the JVM's exit after a graceful stop on SIGTERM:\n{output}"
    );
    assert!(
        took < DRAIN,
        "exited {took:?} after SIGTERM, within the drain timeout {DRAIN:?}:\n{output}"
    );
    assert!(
        output.contains("executor sample-1 stopped"),
        "the executor's graceful stop ran to its end:\n{output}"
    );
    let runs = answered(&app, demo, 3).await;
    for trigger_id in &triggers {
        let run = runs
            .iter()
            .find(|run| run.trigger_id.as_str() == trigger_id.as_str())
            .unwrap_or_else(|| panic!("no result for {trigger_id}: {runs:?}"));
        assert_eq!(
            (run.handle_code, run.executor_id.as_deref()),
            (Some(200), Some("sample-1")),
            "{run:?}"
        );
    }
    assert!(
        runs.iter().any(|run| {
            run.started_at_ms.unwrap() <= terminated_at && terminated_at < run.handle_at_ms.unwrap()
        }),
        "a run was going at SIGTERM ({terminated_at}): {runs:?}"
    );
    assert_eq!(log_of(&app, &watched, 6).await, demo_log());
    app.shutdown().await;
}

on_sqlite_only!(
    the_sample_runs_its_handlers_from_the_scheduler,
    sigterm_drains_the_runs_in_flight_and_exits_143,
);

/// Starts the service with `environment` and returns what it printed before it exited,
/// after checking that it failed.
async fn refusal(environment: &[(&str, &str)]) -> String {
    let mut sample = Sample::start(environment);
    let (status, _) = sample.exit(Duration::from_secs(120)).await;
    let output = sample.output();
    assert!(
        !status.success(),
        "a misconfigured sample fails: {status}\n{output}"
    );
    output
}

/// No app, no brokers, no trusted key: the service does not start, and says so in Spring
/// Boot's failure report — the SDK's message and the property to set with the variable the
/// sample reads it from — not in a stack trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misconfigured_sample_says_what_to_set() {
    let _watchdog = kadence_tests::fixtures::Watchdog::arm(
        "java_sample::a_misconfigured_sample_says_what_to_set",
    );
    let brokers = kadence_tests::fixtures::brokers();
    let no_app = [
        ("KADENCE_APP", ""),
        ("KADENCE_BROKERS", brokers.as_str()),
        ("KADENCE_ALLOW_UNVERIFIED", "1"),
        ("KADENCE_ALLOW_UNSIGNED", "1"),
    ];
    let no_brokers = [
        ("KADENCE_ALLOW_UNVERIFIED", "1"),
        ("KADENCE_ALLOW_UNSIGNED", "1"),
    ];
    let no_trusted_key = [
        ("KADENCE_BROKERS", brokers.as_str()),
        ("KADENCE_ALLOW_UNSIGNED", "1"),
    ];
    // Three JVMs at once: each mostly waits for Spring Boot to start.
    let (no_app, no_brokers, no_trusted_key) = tokio::join!(
        refusal(&no_app),
        refusal(&no_brokers),
        refusal(&no_trusted_key)
    );
    for (output, description, action) in [
        (
            &no_app,
            "no app: set app(\"name\")",
            "Set kadence.executor.app (which this application reads from KADENCE_APP).",
        ),
        (
            &no_brokers,
            "no brokers: set brokers(\"host:port,...\")",
            "Set kadence.executor.brokers (which this application reads from KADENCE_BROKERS).",
        ),
        (
            &no_trusted_key,
            "no trusted key: an executor runs only triggers the scheduler signed",
            "Set kadence.executor.trusted-keys (which this application reads from \
             KADENCE_TRUSTED_KEYS), or kadence.executor.allow-unverified=true (which this \
             application reads from KADENCE_ALLOW_UNVERIFIED).",
        ),
    ] {
        let lines: Vec<&str> = output.lines().collect();
        assert!(
            lines.contains(&"APPLICATION FAILED TO START"),
            "Spring Boot's failure report:\n{output}"
        );
        assert!(
            lines.iter().any(|line| line.starts_with(&format!(
                "The Kadence executor refuses its settings: {description}"
            ))),
            "the SDK's message, {description:?}:\n{output}"
        );
        assert!(lines.contains(&action), "{action:?}:\n{output}");
        assert!(
            !lines
                .iter()
                .any(|line| line.trim_start().starts_with("at ")),
            "no stack trace:\n{output}"
        );
    }
}
