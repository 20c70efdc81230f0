//! An executor's life as the protocol defines it: a graceful stop (SIGTERM) in the middle of a
//! run drains it, commits and says STOPPING; a kill -9 in the middle of a run leaves its
//! trigger uncommitted, so another member of the group runs it; and a mixed group — a Rust, a
//! Python and a Java executor in one app — runs every trigger exactly once, with the classic
//! group protocol and (on Apache Kafka) with the consumer protocol of KIP-848. An executor
//! that takes a partition resumes at the group's committed offset even inside a record batch
//! (PROTOCOL.md section 7, "Resuming on tansu").

use std::time::Duration;

use kadence_schemas::{ExecutorBeat, ExecutorState, TriggerRecord, codec};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::json;

use super::{ExecutorProcess, Implementation, results, stage};
use crate::helpers::spawn_app;
use crate::signing::count_trigger;
use kadence_tests::fixtures::{Backend, unique, wait_for};

/// How long a SIGTERMed executor may take to drain a 3 s run, commit, leave its group and send
/// its last beat.
const EXIT_LIMIT: Duration = Duration::from_secs(45);

/// SIGTERM in the middle of a run: the process finishes the run, publishes its result,
/// announces STOPPING, commits past the trigger and exits 0; the next owner of the partition
/// does not run the trigger again.
async fn a_graceful_stop_finishes_the_run_and_commits(executor: Implementation) {
    let (app, mut first) = stage(executor, "term", 1).await;
    let job = app
        .create_job(
            json!({"app": "term", "handler": "sleep", "schedule_type": "NONE", "params": "3000"}),
        )
        .await;
    let trigger_id = app.trigger(job.id, None).await;
    first
        .wait_for_line(&format!("started {trigger_id}"), Duration::from_secs(60))
        .await;

    first.terminate();
    let status = first.exit(EXIT_LIMIT).await;
    assert!(
        status.success(),
        "the executor drains and exits on its own after SIGTERM, not killed by it: {status}"
    );

    // The run was allowed to finish: its result is success, reported by the stopped executor.
    let run = app.wait_for_run(job.id, 200, Duration::from_secs(30)).await;
    assert_eq!(run.trigger_id.as_str(), trigger_id);
    assert_eq!(run.executor_id.as_deref(), Some("term-1"));
    let partition = run.partition.expect("the run was dispatched");

    // The scheduler heard STOPPING as the drain began (the run still going), and last a beat
    // owning nothing.
    let beats: Vec<ExecutorBeat> = read_until_quiet(&app.brokers, &format!("{}.beats", app.prefix))
        .await
        .iter()
        .filter_map(|message| codec::decode::<ExecutorBeat>(message.payload()?).ok())
        .filter(|beat| beat.executor_id == "term-1")
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
    let mut second = ExecutorProcess::start(executor, &app, "term", "term-2").await;
    let owners = app.wait_for_executors("term", 1, 1).await;
    assert_eq!(owners[0].entry.executor_id, "term-2");
    second.terminate();
    let second_status = second.exit(EXIT_LIMIT).await;
    assert!(second_status.success(), "{second_status}");
    assert_eq!(
        (first.runs_of(&trigger_id), second.runs_of(&trigger_id)),
        (1, 0),
        "the trigger ran once, on the first executor; outputs: {:?} and {:?}",
        first.seen,
        second.seen
    );
    let runs = app.runs(job.id).await;
    assert_eq!(runs.len(), 1, "one run: {runs:?}");
    app.shutdown().await;
}

/// SIGTERM with a run longer than the drain timeout: the executor stops waiting at the
/// deadline, cancels the run and publishes no result for it (its offset stays uncommitted), so
/// the next owner of the partition runs it to the one result.
async fn a_run_cut_at_the_drain_deadline_gets_no_result_and_runs_again(executor: Implementation) {
    let app = spawn_app(Backend::Sqlite).await;
    app.create_app("drained", 1).await;
    let short_drain = [("KADENCE_DRAIN_TIMEOUT_MS", "1500")];
    let mut first =
        ExecutorProcess::start_with(executor, &app, "drained", "drained-1", &short_drain).await;
    app.wait_for_executors("drained", 1, 1).await;
    let job = app
        .create_job(
            json!({"app": "drained", "handler": "sleep", "schedule_type": "NONE", "params": "8000"}),
        )
        .await;
    let trigger_id = app.trigger(job.id, None).await;
    first
        .wait_for_line(&format!("started {trigger_id}"), Duration::from_secs(60))
        .await;
    first.terminate();
    let status = first.exit(EXIT_LIMIT).await;
    assert!(status.success(), "{status}: {:?}", first.seen);
    let results = read_until_quiet(&app.brokers, &format!("{}.results", app.prefix)).await;
    assert!(
        results.is_empty(),
        "no result for a run cut at the drain deadline: {:?}",
        results
            .iter()
            .map(|record| codec::decode::<kadence_schemas::ResultRecord>(record.payload().unwrap()))
            .collect::<Vec<_>>()
    );
    let mut second = ExecutorProcess::start(executor, &app, "drained", "drained-2").await;
    let run = app.wait_for_run(job.id, 200, Duration::from_secs(60)).await;
    assert_eq!(run.trigger_id.as_str(), trigger_id);
    assert_eq!(run.executor_id.as_deref(), Some("drained-2"), "{run:?}");
    assert_eq!(second.runs_of(&trigger_id), 1, "{:?}", second.seen);
    app.shutdown().await;
}

/// SIGTERM while one trigger runs, one waits queued behind it (SERIAL_EXECUTION) and one is
/// held for a millisecond past the drain deadline: the stopping executor finishes what it
/// took and can finish in time — the running one, then the queued one — and leaves the held
/// one unstarted, unanswered and uncommitted, so the partition's next owner runs it at its
/// time (PROTOCOL.md section 7).
async fn a_graceful_stop_runs_what_it_took_until_the_drain_deadline(executor: Implementation) {
    let app = spawn_app(Backend::Sqlite).await;
    app.create_app("leaving", 1).await;
    let short_drain = [("KADENCE_DRAIN_TIMEOUT_MS", "5000")];
    let mut first =
        ExecutorProcess::start_with(executor, &app, "leaving", "leaving-1", &short_drain).await;
    app.wait_for_executors("leaving", 1, 1).await;
    let job = app
        .create_job(
            json!({"app": "leaving", "handler": "sleep", "schedule_type": "NONE",
            "block_strategy": "SERIAL_EXECUTION"}),
        )
        .await;
    let running = app.trigger(job.id, Some("1500")).await;
    first
        .wait_for_line(&format!("started {running}"), Duration::from_secs(60))
        .await;
    let queued = app.trigger(job.id, Some("100")).await;
    // On the partition before the held one below: the executor's commit stops at the held
    // one, so a queued trigger behind it would be run again by the next owner. The wheel
    // releases in rounds, so the trigger may leave a few milliseconds after the answer.
    wait_for(
        Duration::from_secs(30),
        "the queued trigger on the broker",
        || async {
            app.runs(job.id)
                .await
                .iter()
                .any(|run| run.trigger_id.as_str() == queued && run.dispatched_at_ms.is_some())
                .then_some(())
        },
    )
    .await;
    // A trigger due in twelve seconds, made as the scheduler would emit it early (the test
    // executors verify nothing): held past the drain deadline.
    let mut held = count_trigger("leaving", job.id, 1);
    held.handler = "ok".into();
    held.scheduled_at_ms = kadence_tests::now_ms() + 12_000;
    let held_id = held.trigger_id.to_string();
    let topic = format!("{}.triggers.leaving", app.prefix);
    app.produce_raw(
        &topic,
        0,
        &job.id.to_string(),
        &codec::encode(&held).unwrap(),
    )
    .await;
    // Both are received and waiting when the stop comes.
    tokio::time::sleep(Duration::from_secs(1)).await;
    first.terminate();
    assert!(first.exit(EXIT_LIMIT).await.success(), "{:?}", first.seen);
    assert_eq!(
        (first.runs_of(&queued), first.runs_of(&held_id)),
        (1, 0),
        "the queued one ran in the drain, the held one was left: {:?}",
        first.seen
    );
    let mut answered_by_first: Vec<String> =
        read_until_quiet(&app.brokers, &format!("{}.results", app.prefix))
            .await
            .iter()
            .map(|record| {
                codec::decode::<kadence_schemas::ResultRecord>(record.payload().unwrap())
                    .unwrap()
                    .trigger_id
                    .to_string()
            })
            .collect();
    answered_by_first.sort();
    let mut expected = vec![running.clone(), queued.clone()];
    expected.sort();
    assert_eq!(answered_by_first, expected, "the held one is not answered");

    let mut second = ExecutorProcess::start(executor, &app, "leaving", "leaving-2").await;
    second
        .wait_for_line(&format!("started {held_id}"), Duration::from_secs(60))
        .await;
    assert_eq!(
        (second.runs_of(&running), second.runs_of(&queued)),
        (0, 0),
        "answered and committed already: {:?}",
        second.seen
    );
    app.shutdown().await;
}

/// kill -9 of an executor in the middle of a run: the trigger was never committed, so the
/// other member of the group runs it again and completes it; the run has one final result.
async fn a_run_killed_mid_way_is_redelivered_and_completed(executor: Implementation) {
    let (app, mut doomed) = stage(executor, "crashy", 1).await;
    // The run must outlast the second executor's start, which for a JVM on a busy machine
    // took more than four seconds (the doomed one then finished the run before its kill).
    let job = app
        .create_job(
            json!({"app": "crashy", "handler": "sleep", "schedule_type": "NONE", "params": "20000"}),
        )
        .await;
    let trigger_id = app.trigger(job.id, None).await;
    doomed
        .wait_for_line(&format!("started {trigger_id}"), Duration::from_secs(60))
        .await;
    // A second executor joins; then the one running the trigger dies without a word.
    let mut survivor = ExecutorProcess::start(executor, &app, "crashy", "crashy-2").await;
    doomed.kill_hard().await;
    let run = app.wait_for_run(job.id, 200, Duration::from_secs(90)).await;
    assert_eq!(run.trigger_id.as_str(), trigger_id);
    assert_eq!(run.executor_id.as_deref(), Some("crashy-2"), "{run:?}");
    assert_eq!(survivor.runs_of(&trigger_id), 1, "{:?}", survivor.seen);
    let runs = app.runs(job.id).await;
    assert_eq!(runs.len(), 1, "one run, one final result: {runs:?}");
    app.shutdown().await;
}

/// A second executor joins while the first runs a trigger: the group rebalances, the first
/// finishes the run within its rebalance timeout and commits it before the partitions move,
/// so the run has one result and nobody starts it twice.
async fn a_rebalance_lets_the_running_run_finish_once(executor: Implementation) {
    let (app, mut first) = stage(executor, "moving", 2).await;
    let job = app
        .create_job(
            json!({"app": "moving", "handler": "sleep", "schedule_type": "NONE",
            "params": "3000", "route_strategy": "SHARDING_BROADCAST"}),
        )
        .await;
    app.trigger(job.id, None).await;
    let runs = wait_for(
        Duration::from_secs(30),
        "both shards dispatched",
        || async {
            let runs = app.runs(job.id).await;
            (runs.len() == 2).then_some(runs)
        },
    )
    .await;
    for run in &runs {
        let started = format!("started {}", run.trigger_id);
        first.wait_for_line(&started, Duration::from_secs(30)).await;
    }
    let mut second = ExecutorProcess::start(executor, &app, "moving", "moving-2").await;
    app.wait_for_executors("moving", 2, 2).await;
    let finished = results(&app, job.id, 2).await;
    for run in &runs {
        let id = run.trigger_id.as_str();
        let done = super::run_of(&finished, id);
        assert_eq!(done.handle_code, Some(200), "{done:?}");
        assert_eq!(done.executor_id.as_deref(), Some("moving-1"), "{done:?}");
        assert_eq!(
            (first.runs_of(id), second.runs_of(id)),
            (1, 0),
            "{id} ran once, where it started: {:?} / {:?}",
            first.seen,
            second.seen
        );
    }
    app.shutdown().await;
}

/// A second executor joins while the first runs a trigger longer than its hand-back wait: the
/// run is handed back once (cancelled without a result, its offset uncommitted) and runs again
/// on the partition's owner after the rebalance, to one result. With a hand-back wait as long
/// as the session timeout, the member handing back fell silent past its session, was dropped,
/// rejoined and started the next rebalance, and the run was handed back again and again
/// (PROTOCOL.md section 7, "Rebalance hand-back").
async fn a_run_longer_than_the_hand_back_wait_is_handed_back_once(executor: Implementation) {
    let (app, mut first) = stage(executor, "longrun", 1).await;
    let job = app
        .create_job(
            json!({"app": "longrun", "handler": "sleep", "schedule_type": "NONE",
            "params": "20000"}),
        )
        .await;
    let trigger_id = app.trigger(job.id, None).await;
    first
        .wait_for_line(&format!("started {trigger_id}"), Duration::from_secs(60))
        .await;
    let mut second = ExecutorProcess::start(executor, &app, "longrun", "longrun-2").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let run = loop {
        let runs = app.runs(job.id).await;
        if let Some(run) = runs.into_iter().find(|run| run.handle_code.is_some()) {
            break run;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no result for {trigger_id} within 120 s: {:?} / {:?}",
            {
                first.count("");
                &first.seen
            },
            {
                second.count("");
                &second.seen
            }
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(run.handle_code, Some(200), "{run:?}");
    assert_eq!(run.trigger_id.as_str(), trigger_id);
    let starts = first.runs_of(&trigger_id) + second.runs_of(&trigger_id);
    assert!(
        starts <= 2,
        "{trigger_id} started {starts} times: once, and once more after one hand-back at most: \
         {:?} / {:?}",
        first.seen,
        second.seen
    );
    assert_eq!(app.runs(job.id).await.len(), 1);
    app.shutdown().await;
}

/// A Rust, a Python and a Java executor in one app's group share its partitions; every
/// trigger of a job routed round the partitions runs exactly once, on one of them, and each ran
/// some.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_group_runs_every_trigger_exactly_once() {
    let _watchdog = kadence_tests::fixtures::Watchdog::arm("conformance::a_mixed_group");
    a_mixed_group_of("classic").await;
}

/// The same with every executor on Kafka's consumer group protocol (KIP-848), whose
/// rebalances are incremental and whose session the broker keeps (PROTOCOL.md section 1).
/// Apache Kafka only: tansu 0.6 never assigns a member of that protocol a partition, so
/// `infra/test.sh` leaves this test out of its tansu pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_group_of_the_consumer_protocol_runs_every_trigger_exactly_once() {
    let _watchdog =
        kadence_tests::fixtures::Watchdog::arm("conformance::a_mixed_consumer_protocol_group");
    assert_eq!(
        kadence_tests::fixtures::broker_kind(),
        kadence_tests::fixtures::BrokerKind::Kafka,
        "the consumer group protocol needs Apache Kafka 4 (KADENCE_TEST_BROKER_KIND=kafka)"
    );
    a_mixed_group_of("consumer").await;
}

/// The members of the mixed group: one executor of each implementation, by executor id.
const MIXED: [(Implementation, &str); 3] = [
    (Implementation::Rust, "mixed-rust"),
    (Implementation::Python, "mixed-python"),
    (Implementation::Java, "mixed-java"),
];

/// A Rust, a Python and a Java executor joining with `group_protocol`, then the shared checks.
async fn a_mixed_group_of(group_protocol: &str) {
    let app = spawn_app(Backend::Sqlite).await;
    // Six partitions: the range assignor gives each of the three members two.
    app.create_app("mixed", 6).await;
    let protocol = [("KADENCE_GROUP_PROTOCOL", group_protocol)];
    let mut members = Vec::new();
    for (implementation, executor_id) in MIXED {
        members.push(
            ExecutorProcess::start_with(implementation, &app, "mixed", executor_id, &protocol)
                .await,
        );
    }
    app.wait_for_executors("mixed", MIXED.len(), 6).await;
    // tansu 0.6 does not describe its groups.
    if group_protocol == "classic"
        && kadence_tests::fixtures::broker_kind() == kadence_tests::fixtures::BrokerKind::Kafka
    {
        assert_eq!(
            group_assignor(&app.brokers, &format!("{}.executor.mixed", app.prefix)),
            "range",
            "the members of a classic group share the assignor PROTOCOL.md section 1 names"
        );
    }
    let job = app
        .create_job(
            json!({"app": "mixed", "handler": "ok", "schedule_type": "NONE",
            "route_strategy": "ROUND", "block_strategy": "CONCURRENT"}),
        )
        .await;
    let mut fired = Vec::new();
    for _ in 0..36 {
        fired.push(app.trigger(job.id, None).await);
    }
    let runs = results(&app, job.id, fired.len()).await;
    assert_eq!(runs.len(), fired.len(), "{runs:?}");
    // A result can be recorded before its executor's output line reaches this test.
    let started = |members: &mut [ExecutorProcess], trigger_id: &str| {
        members
            .iter_mut()
            .map(|member| member.runs_of(trigger_id))
            .sum::<usize>()
    };
    let all_started = |members: &mut [ExecutorProcess]| {
        fired.iter().map(|id| started(members, id)).sum::<usize>() == fired.len()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !all_started(&mut members) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for trigger_id in &fired {
        assert_eq!(
            started(&mut members, trigger_id),
            1,
            "{trigger_id} ran exactly once: {:?}\n{:?}",
            super::run_of(&runs, trigger_id),
            members
                .iter()
                .map(|member| &member.seen)
                .collect::<Vec<_>>()
        );
    }
    for (_, executor_id) in MIXED {
        assert!(
            runs.iter()
                .any(|run| run.executor_id.as_deref() == Some(executor_id)
                    && run.handle_code == Some(200)),
            "{executor_id} ran some: {runs:?}"
        );
    }
    assert!(
        runs.iter().all(|run| run.handle_code == Some(200)),
        "{runs:?}"
    );
    app.shutdown().await;
}

/// The assignor a stable classic group chose among its members' (its protocol name, such as
/// `range`), as the group coordinator describes the group.
fn group_assignor(brokers: &str, group: &str) -> String {
    let client: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .expect("a client to describe the group");
    let groups = client
        .fetch_group_list(Some(group), Duration::from_secs(10))
        .expect("describe the group");
    let described = groups
        .groups()
        .iter()
        .find(|described| described.name() == group)
        .unwrap_or_else(|| panic!("the group {group} is described"));
    assert_eq!(described.state(), "Stable", "the group settled");
    described.protocol().to_owned()
}

/// Reads every partition of `topic` from the beginning until no record came for three seconds:
/// a read up to the high watermark can miss the last records, which the broker may still be
/// appending.
pub(super) async fn read_until_quiet(brokers: &str, topic: &str) -> Vec<OwnedMessage> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", unique("kt-conformance-reader."))
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

/// Triggers in one record batch, the group's offset committed in its middle (as an executor
/// commits the first of the runs it handed back): the executor that takes the partition runs
/// every trigger from that offset on, and none before it. tansu serves a fetch that starts
/// inside a batch from the next batch; there the executor's detour is what makes this hold.
async fn a_partition_resumes_at_the_committed_offset_inside_a_batch(executor: Implementation) {
    const TRIGGERS: i64 = 30;
    const COMMITTED: i64 = 10;
    let app = spawn_app(Backend::Sqlite).await;
    app.create_app("resuming", 1).await;
    let topic = format!("{}.triggers.resuming", app.prefix);
    let triggers: Vec<TriggerRecord> = (0..TRIGGERS)
        .map(|n| TriggerRecord {
            handler: "ok".into(),
            ..count_trigger("resuming", 1, n)
        })
        .collect();
    produce_in_one_batch(&app.brokers, &topic, &triggers).await;
    let group = format!("{}.executor.resuming", app.prefix);
    commit_offset(&app.brokers, &group, &topic, COMMITTED);
    let mut owner = ExecutorProcess::start(executor, &app, "resuming", "resuming-1").await;
    let (before, from) = triggers.split_at(COMMITTED as usize);
    for trigger in from {
        let line = format!("started {}", trigger.trigger_id.as_str());
        owner.wait_for_line(&line, Duration::from_secs(60)).await;
    }
    let ran_before: Vec<&str> = (before.iter())
        .map(|trigger| trigger.trigger_id.as_str())
        .filter(|id| owner.runs_of(id) > 0)
        .collect();
    assert!(
        ran_before.is_empty(),
        "triggers before the committed offset ran: {ran_before:?}"
    );
    app.shutdown().await;
}

/// What an executor of app `unkeyed` prints on standard error when it refuses to start with
/// `set` and without `removed` in its environment; fails unless it exits at once, failing,
/// and never says `ready`.
async fn refused_start(executor: Implementation, set: &[(&str, &str)], removed: &[&str]) -> String {
    let app = spawn_app(Backend::Sqlite).await;
    let mut command = executor.command();
    command
        .env("KADENCE_BROKERS", &app.brokers)
        .env("KADENCE_APP", "unkeyed")
        .env("KADENCE_TOPIC_PREFIX", &app.prefix)
        .env("KADENCE_EXECUTOR_ID", "unkeyed-1")
        .envs(set.iter().copied())
        .kill_on_drop(true);
    for name in removed {
        command.env_remove(name);
    }
    let output = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .expect("it exits at once")
        .expect("the executor process starts");
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{said}");
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("ready"),
        "never ready"
    );
    app.shutdown().await;
    said
}

/// An executor given no trusted key and no explicit opt-out refuses to start, saying why:
/// verifying is the default (PROTOCOL.md section 3).
async fn without_a_trusted_key_an_executor_refuses_to_start(executor: Implementation) {
    let removed = ["KADENCE_TRUSTED_KEYS", "KADENCE_ALLOW_UNVERIFIED"];
    let said = refused_start(executor, &[], &removed).await;
    assert!(said.contains("no trusted"), "says why: {said}");
}

/// An executor given no executor key and no explicit opt-out refuses to start, saying why:
/// signing what it writes is the default (PROTOCOL.md section 3). Every other scenario runs
/// against a scheduler that requires executor signatures, with the app's key: its results,
/// log lines and beats are taken only because they are signed.
async fn without_an_executor_key_an_executor_refuses_to_start(executor: Implementation) {
    let set = [("KADENCE_ALLOW_UNVERIFIED", "1")];
    let removed = ["KADENCE_EXECUTOR_KEY", "KADENCE_ALLOW_UNSIGNED"];
    let said = refused_start(executor, &set, &removed).await;
    assert!(
        said.contains("no executor") && said.contains("executor-key create"),
        "says why and what to do: {said}"
    );
}

/// Produces `triggers` (unsigned: the executor trusts no key) to partition 0 of `topic` in
/// one record batch: all enqueued within the producer's linger, delivered together.
async fn produce_in_one_batch(brokers: &str, topic: &str, triggers: &[TriggerRecord]) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "500")
        .create()
        .expect("test producer");
    let payloads: Vec<(&str, Vec<u8>)> = (triggers.iter())
        .map(|trigger| {
            let payload = codec::encode(trigger).expect("encode a trigger");
            (trigger.trigger_id.as_str(), payload)
        })
        .collect();
    let deliveries: Vec<_> = (payloads.iter())
        .map(|(key, payload)| {
            let record = FutureRecord::to(topic)
                .partition(0)
                .key(*key)
                .payload(payload.as_slice());
            producer
                .send_result(record)
                .map_err(|(error, _)| error)
                .expect("enqueue a trigger")
        })
        .collect();
    for delivery in deliveries {
        let delivered = tokio::time::timeout(Duration::from_secs(10), delivery)
            .await
            .expect("delivered in time")
            .expect("the producer stays up");
        delivered.map_err(|(error, _)| error).expect("produce");
    }
}

/// Commits `offset` of partition 0 of `topic` for `group`, which has no member yet.
fn commit_offset(brokers: &str, group: &str, topic: &str, offset: i64) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("test consumer");
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(topic, 0, Offset::Offset(offset))
        .unwrap();
    consumer
        .commit(&offsets, CommitMode::Sync)
        .expect("commit the group's offset");
}

on_every_executor!(
    a_graceful_stop_finishes_the_run_and_commits,
    a_run_cut_at_the_drain_deadline_gets_no_result_and_runs_again,
    a_graceful_stop_runs_what_it_took_until_the_drain_deadline,
    a_run_killed_mid_way_is_redelivered_and_completed,
    a_rebalance_lets_the_running_run_finish_once,
    a_run_longer_than_the_hand_back_wait_is_handed_back_once,
    a_partition_resumes_at_the_committed_offset_inside_a_batch,
    without_a_trusted_key_an_executor_refuses_to_start,
    without_an_executor_key_an_executor_refuses_to_start,
);
