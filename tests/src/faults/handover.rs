//! `executor-handover`: `executor-hang`'s frozen executor, on a broker whose group
//! coordinator evicts a silent member — librdkafka's mock cluster, run in the harness's own
//! process — to show the handover the development broker cannot.
//!
//! Why a second broker: tansu 0.6's coordinator (`coordinator/group/administrator.rs` in
//! tansu-broker) notices the missed heartbeats and asks the live members to rejoin, but a
//! formed group stays formed at the same generation: the rejoin of a member whose metadata
//! did not change is answered at that generation, and its SyncGroup from the stored
//! assignment (the leader's new one is ignored). The silent member keeps its partitions, so
//! on tansu `executor-hang` shows triggers waiting for the frozen executor, not a handover.
//! The project's brief allows the mock cluster for a case the real broker cannot produce;
//! it has no CreateTopics and no scheduler runs on it, so the harness creates the topics
//! and produces the triggers itself, as the scheduler would: one per job and second,
//! unsigned (these executors trust no key), runs of 300 ms, on partition `job % 3`.
//!
//! What must hold: within the session timeout (6 s) and a rebalance of the freeze, the live
//! executor owns every partition; every trigger produced completes (a success result under
//! its id, from either executor); the triggers the frozen executor had received and not
//! committed run again on the live one, so their results repeat under the same id (the
//! scheduler keeps the first).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use kadence_schemas::{
    AppName, BlockStrategy, GlueType, JobId, ResultRecord, Topics, TriggerId, TriggerRecord,
    TriggerType, codec,
};
use rdkafka::ClientConfig;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;

use super::stack::{APP, PARTITIONS, signal, spawn_executor};
use super::{Options, Report, millis_cell};
use crate::now_ms;
use crate::triggers::read_records;

/// The defaults: `executor-hang`'s (20 jobs, 10 s before, 20 s frozen, 20 s after).
pub fn defaults() -> Options {
    super::executor_faults::hang_defaults()
}

/// How long the results may take to complete after the load ends.
const DRAIN_LIMIT: Duration = Duration::from_secs(120);

/// Runs the scenario.
pub async fn run(options: &Options) -> Report {
    let cluster = MockCluster::new(1).expect("librdkafka's mock cluster");
    let brokers = cluster.bootstrap_servers();
    let prefix = crate::unique("kfaults");
    let topics = Topics::new(&prefix).expect("a valid prefix");
    let app = AppName::parse(APP).expect("a valid app name");
    cluster
        .create_topic(&topics.triggers(&app), PARTITIONS, 1)
        .expect("the trigger topic");
    for topic in [
        topics.results(),
        topics.control(),
        topics.beats(),
        topics.logs(),
        topics.dlq(),
    ] {
        cluster.create_topic(&topic, 1, 1).expect("a topic");
    }
    let (frozen, frozen_log, _) = spawn_executor(&brokers, &prefix, "", 0);
    let (_survivor, survivor_log, _) = spawn_executor(&brokers, &prefix, "", 1);
    let mut failures = Vec::new();
    if !group_formed(&[&frozen_log, &survivor_log], Duration::from_secs(60)).await {
        failures.push("the two executors never shared every partition".to_owned());
    }
    let load_length = options.before + options.outage + options.after;
    let load = tokio::spawn(produce_every_second(
        brokers.clone(),
        topics.triggers(&app),
        options.jobs,
        load_length,
    ));
    tokio::time::sleep(options.before).await;
    let frozen_pid = frozen.id().expect("a running executor");
    let seen_before_freeze = std::fs::metadata(&survivor_log).map_or(0, |meta| meta.len());
    signal(frozen_pid, "STOP");
    let freeze_ms = now_ms();
    let thaw_at = tokio::time::Instant::now() + options.outage;
    let handover = owns_after(&survivor_log, seen_before_freeze, options.outage).await;
    let handover_ms = handover.map(|at_ms| at_ms - freeze_ms);
    tokio::time::sleep_until(thaw_at).await;
    signal(frozen_pid, "CONT");
    let produced = load.await.expect("the load ran");
    let results = results_once_complete(&brokers, &topics.results(), &produced).await;
    if handover.is_none() {
        failures.push(format!(
            "the live executor never owned every partition during the {} s freeze",
            options.outage.as_secs()
        ));
    }
    let report = report(
        options,
        &produced,
        &results,
        freeze_ms,
        handover_ms,
        failures,
    );
    report.keeping_logs_on_failure(&[frozen_log, survivor_log])
}

/// Produces, every second for `length`, a trigger of each of `jobs` jobs due on that second;
/// returns the trigger ids with their scheduled times.
async fn produce_every_second(
    brokers: String,
    topic: String,
    jobs: usize,
    length: Duration,
) -> Vec<(TriggerId, i64)> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("linger.ms", "2")
        .create()
        .expect("a producer");
    let mut produced = Vec::new();
    let until = now_ms() + i64::try_from(length.as_millis()).unwrap_or(i64::MAX);
    let mut second = (now_ms() / 1000 + 1) * 1000;
    while second < until {
        let wait = u64::try_from(second - now_ms()).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        for job in 1..=i64::try_from(jobs).unwrap_or(1) {
            let trigger = trigger_of(job, second);
            let payload = codec::encode(&trigger).expect("a trigger encodes");
            let key = job.to_string();
            let record = FutureRecord::to(&topic)
                .partition(i32::try_from(job).unwrap_or(0) % PARTITIONS)
                .key(&key)
                .payload(&payload);
            if producer
                .send(record, Timeout::After(Duration::from_secs(10)))
                .await
                .is_ok()
            {
                produced.push((trigger.trigger_id, second));
            }
        }
        second += 1000;
    }
    produced
}

/// A trigger of `job` due at `second`, as the scheduler emits one (unsigned).
fn trigger_of(job: i64, second: i64) -> TriggerRecord {
    let job_id = JobId::new(job).expect("a job id");
    TriggerRecord {
        trigger_id: TriggerId::scheduled(job_id, second),
        log_id: job * 1_000_000 + second / 1000 % 1_000_000,
        job_id,
        app: AppName::parse(APP).expect("a valid app name"),
        handler: "sleep".into(),
        params: "300".into(),
        shard_index: 0,
        shard_total: 1,
        block_strategy: BlockStrategy::SerialExecution,
        timeout_ms: 0,
        trigger_type: TriggerType::Cron,
        scheduled_at_ms: second,
        emitted_at_ms: now_ms(),
        attempt: 0,
        glue_type: GlueType::Bean,
        glue_source: None,
        glue_updated_at_ms: None,
        replay_of: None,
    }
}

/// Whether, within `limit`, the executors logging to `logs` own every partition between
/// them (each one's latest `owns` line).
async fn group_formed(logs: &[&Path], limit: Duration) -> bool {
    let until = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < until {
        let mut owned = HashSet::new();
        for log in logs {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let latest = text
                .lines()
                .rev()
                .find_map(|line| line.strip_prefix("owns "));
            owned.extend(latest.unwrap_or_default().split(',').map(str::to_owned));
        }
        if (0..PARTITIONS).all(|partition| owned.contains(&partition.to_string())) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// When the executor logging to `log` announced owning every partition, looking only past
/// its first `skip` bytes, within `limit`; `None` if it did not.
async fn owns_after(log: &Path, skip: u64, limit: Duration) -> Option<i64> {
    let all = (0..PARTITIONS)
        .map(|partition| partition.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let wanted = format!("owns {all}");
    let until = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < until {
        let text = std::fs::read(log).unwrap_or_default();
        let fresh = text
            .get(usize::try_from(skip).unwrap_or(0)..)
            .unwrap_or_default();
        if String::from_utf8_lossy(fresh)
            .lines()
            .any(|line| line == wanted)
        {
            return Some(now_ms());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The results topic once every produced trigger has a success there, or after
/// [`DRAIN_LIMIT`].
async fn results_once_complete(
    brokers: &str,
    topic: &str,
    produced: &[(TriggerId, i64)],
) -> Vec<ResultRecord> {
    let until = tokio::time::Instant::now() + DRAIN_LIMIT;
    loop {
        let results: Vec<ResultRecord> = read_records(brokers, topic, 1).await;
        let succeeded: HashSet<&str> = (results.iter())
            .filter(|result| result.code == 200)
            .map(|result| result.trigger_id.as_str())
            .collect();
        let complete = (produced.iter()).all(|(id, _)| succeeded.contains(id.as_str()));
        if complete || tokio::time::Instant::now() >= until {
            return results;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

fn report(
    options: &Options,
    produced: &[(TriggerId, i64)],
    results: &[ResultRecord],
    freeze_ms: i64,
    handover_ms: Option<i64>,
    failures: Vec<String>,
) -> Report {
    let mut results_per_id: HashMap<&str, usize> = HashMap::new();
    let mut first_success: HashMap<&str, i64> = HashMap::new();
    for result in results {
        let id = result.trigger_id.as_str();
        *results_per_id.entry(id).or_default() += 1;
        if result.code == 200 {
            let finished = first_success.entry(id).or_insert(result.finished_at_ms);
            *finished = (*finished).min(result.finished_at_ms);
        }
    }
    let completed = (produced.iter())
        .filter(|(id, _)| first_success.contains_key(id.as_str()))
        .count();
    let repeated = (produced.iter())
        .filter(|(id, _)| results_per_id.get(id.as_str()).copied().unwrap_or(0) > 1)
        .count();
    // Of the fires due while the executor was frozen: the longest from due to done.
    let freeze_end_ms = freeze_ms + i64::try_from(options.outage.as_millis()).unwrap_or(0);
    let longest_ms = (produced.iter())
        .filter(|(_, due)| (freeze_ms..freeze_end_ms).contains(due))
        .filter_map(|(id, due)| Some(first_success.get(id.as_str())? - due))
        .max();
    let lost = produced.len() - completed;
    Report {
        scenario: "executor-handover",
        injected: format!(
            "on librdkafka's mock cluster: one of two executors frozen with SIGSTOP for {} s \
             (session timeout 6 s), then SIGCONT, during {} jobs firing every second (runs of \
             300 ms)",
            options.outage.as_secs(),
            options.jobs
        ),
        columns: vec![
            ("fires due", produced.len().to_string()),
            ("emitted", produced.len().to_string()),
            ("completed", completed.to_string()),
            ("lost", lost.to_string()),
            ("run twice (result repeated, same id)", repeated.to_string()),
            ("handed over after", millis_cell(handover_ms)),
            (
                "longest fire to finish (time to recover)",
                millis_cell(longest_ms),
            ),
        ],
        lost,
        failures,
        details: Vec::new(),
    }
}
