//! SIGTERM is a graceful stop: it is what Kubernetes sends to a pod and systemd to a service,
//! and its default action would end an executor mid-run. An executor process that stops on
//! [`kadence_executor::shutdown_signal`] drains instead: the run in progress finishes with its
//! result, the scheduler hears STOPPING, the offset is committed, and no other executor runs the
//! trigger again.
//!
//! Run once, on SQLite: what is under test is the executor process and the broker; the store
//! only records the result.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use kadence_schemas::{ExecutorBeat, ExecutorState, TriggerRecord, codec};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::process::Child;
use tokio::sync::mpsc;

use crate::common::{Backend, unique};
use crate::helpers::{TestApp, spawn_app};

/// How long a SIGTERMed executor may take to drain a 3 s run, commit, leave its group and send
/// its last beat.
const EXIT_LIMIT: Duration = Duration::from_secs(45);

/// A `test-executor` process whose stdout lines the test reads as they come.
struct ExecutorProcess {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    /// Every line read so far.
    seen: Vec<String>,
}

impl ExecutorProcess {
    fn spawn(app: &TestApp, app_name: &str, executor_id: &str) -> ExecutorProcess {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_test-executor"))
            .env("KADENCE_BROKERS", &app.brokers)
            .env("KADENCE_APP", app_name)
            .env("KADENCE_TOPIC_PREFIX", &app.prefix)
            .env("KADENCE_EXECUTOR_ID", executor_id)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the executor process");
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stdout.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        ExecutorProcess {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads lines until `wanted` appears; panics if the process ends first or `limit` passes.
    async fn wait_for_line(&mut self, wanted: &str, limit: Duration) {
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

    fn terminate(&self) {
        let pid = self.child.id().expect("the executor is running");
        kill(Pid::from_raw(pid.try_into().unwrap()), Signal::SIGTERM).expect("send SIGTERM");
    }

    /// Waits for the process to end on its own within `limit`, and reads the rest of its
    /// output.
    async fn exit(&mut self, limit: Duration) -> ExitStatus {
        let status = tokio::time::timeout(limit, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the executor did not exit within {limit:?} of SIGTERM"))
            .expect("wait for the executor");
        while let Ok(Some(line)) =
            tokio::time::timeout(Duration::from_secs(5), self.lines.recv()).await
        {
            self.seen.push(line);
        }
        status
    }

    /// How many lines read so far are exactly `line`.
    fn count(&self, line: &str) -> usize {
        self.seen.iter().filter(|seen| *seen == line).count()
    }
}

/// Reads every partition of `topic` from the beginning until no record came for three seconds:
/// a read up to the high watermark can miss the last records, which the broker may still be
/// appending.
async fn read_until_quiet(brokers: &str, topic: &str) -> Vec<OwnedMessage> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", unique("kt-sigterm-reader."))
        .set("enable.auto.commit", "false")
        .create()
        .expect("test consumer");
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("topic metadata");
    let mut assignment = TopicPartitionList::new();
    for partition in metadata.topics()[0].partitions() {
        assignment
            .add_partition_offset(topic, partition.id(), Offset::Beginning)
            .unwrap();
    }
    assert!(assignment.count() > 0, "{topic} has no partitions");
    consumer.assign(&assignment).expect("assign the topic");
    let mut messages = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while let Ok(received) = tokio::time::timeout(Duration::from_secs(3), consumer.recv()).await {
        messages.push(received.expect("read the topic").detach());
        assert!(
            tokio::time::Instant::now() < deadline,
            "{topic} never went quiet"
        );
    }
    messages
}

/// The offset committed by `group` for `partition` of `topic`, if any.
async fn committed_offset(brokers: &str, group: &str, topic: &str, partition: i32) -> Offset {
    let (brokers, group, topic) = (brokers.to_owned(), group.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        // Asking for the group's offsets does not join the group: no subscribe, no assign.
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &brokers)
            .set("group.id", &group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("offsets consumer");
        let mut wanted = TopicPartitionList::new();
        wanted.add_partition(&topic, partition);
        let committed = consumer
            .committed_offsets(wanted, Timeout::After(Duration::from_secs(10)))
            .expect("read the committed offsets");
        committed
            .find_partition(&topic, partition)
            .expect("the partition asked for")
            .offset()
    })
    .await
    .unwrap()
}

/// SIGTERM to an executor process in the middle of a run: the process finishes the run,
/// publishes its result, announces STOPPING, commits past the trigger and exits 0; the next
/// owner of the partition does not run the trigger again.
async fn sigterm_lets_the_running_run_finish_and_commits(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app("term", 1).await;
    let mut first = ExecutorProcess::spawn(&app, "term", "term-first");
    let job = app
        .create_job(
            json!({"app": "term", "handler": "sleep", "schedule_type": "NONE", "params": "3000"}),
        )
        .await;
    let trigger_id = app.trigger(job.id, None).await;
    let started = format!("started {trigger_id}");
    first.wait_for_line(&started, Duration::from_secs(60)).await;

    first.terminate();
    let status = first.exit(EXIT_LIMIT).await;
    assert!(
        status.success(),
        "the executor drains and exits on its own after SIGTERM, not killed by it: {status}"
    );

    // The run was allowed to finish: its result is success, reported by the stopped executor.
    let run = app.wait_for_run(job.id, 200, Duration::from_secs(30)).await;
    assert_eq!(run.trigger_id.as_str(), trigger_id);
    assert_eq!(run.executor_id.as_deref(), Some("term-first"));
    let partition = run.partition.expect("the run was dispatched");

    // The scheduler heard STOPPING as the drain began (the run still going), and last a beat
    // owning nothing.
    let beats: Vec<ExecutorBeat> = read_until_quiet(&app.brokers, &format!("{}.beats", app.prefix))
        .await
        .iter()
        .filter_map(|message| codec::decode::<ExecutorBeat>(message.payload()?).ok())
        .filter(|beat| beat.executor_id == "term-first")
        .collect();
    let stopping: Vec<&ExecutorBeat> = beats
        .iter()
        .filter(|beat| beat.state == ExecutorState::Stopping)
        .collect();
    assert!(
        stopping
            .iter()
            .any(|beat| beat.running_jobs == vec![job.id]),
        "a STOPPING beat while the run drained: {beats:?}"
    );
    assert!(
        stopping
            .iter()
            .any(|beat| beat.owned_partitions.is_empty() && beat.running_jobs.is_empty()),
        "a last STOPPING beat owning nothing: {beats:?}"
    );

    // The group's committed offset is past the trigger's record.
    let triggers = format!("{}.triggers.term", app.prefix);
    let trigger_offset = read_until_quiet(&app.brokers, &triggers)
        .await
        .iter()
        .find(|message| {
            message.partition() == partition
                && message
                    .payload()
                    .and_then(|payload| codec::decode::<TriggerRecord>(payload).ok())
                    .is_some_and(|record| record.trigger_id.as_str() == trigger_id)
        })
        .expect("the trigger's record")
        .offset();
    let group = format!("{}.executor.term", app.prefix);
    let committed = committed_offset(&app.brokers, &group, &triggers, partition).await;
    assert!(
        matches!(committed, Offset::Offset(next) if next > trigger_offset),
        "group {group} committed past offset {trigger_offset} of partition {partition}: \
         {committed:?}"
    );

    // No redelivery: the next owner of the partition, once it has held it for a while, has
    // not run the trigger.
    let mut second = ExecutorProcess::spawn(&app, "term", "term-second");
    let owners = app.wait_for_executors("term", 1, 1).await;
    assert_eq!(owners[0].entry.executor_id, "term-second");
    second.terminate();
    let second_status = second.exit(EXIT_LIMIT).await;
    assert!(second_status.success(), "{second_status}");
    assert_eq!(
        (first.count(&started), second.count(&started)),
        (1, 0),
        "the trigger ran once, on the first executor; outputs: {:?} and {:?}",
        first.seen,
        second.seen
    );
    let runs = app.runs(job.id).await;
    assert_eq!(runs.len(), 1, "one run: {runs:?}");
    app.shutdown().await;
}

on_sqlite_only!(sigterm_lets_the_running_run_finish_and_commits);
