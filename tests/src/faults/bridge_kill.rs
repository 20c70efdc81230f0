//! `kafka-bridge-kill`: one of two XXL-JOB bridges of an app killed with `kill -9` while its
//! unmodified XXL-JOB executors run fires every second, then started again.
//!
//! The parts, on one Apache Kafka node: `kadence serve` on SQLite (the [`Stack`]), the app
//! [`XXL_APP`] with [`XXL_PARTITIONS`] partitions and an executor key, two bridges
//! (`kadence bridge xxl-job`, each the other's `--peer`), and two XXL-JOB executors
//! (xxl-job-core 3.3.2) whose admin addresses list the killed bridge first, then the
//! survivor. An XXL-JOB executor registers and calls back at the first admin address that
//! answers, so the killed bridge is the one they speak to: once it is gone, their
//! registrations and their callbacks, those of the runs it had handed over included, go to
//! the survivor. That is the harder case of the two.
//!
//! The load: `--jobs` jobs every second, routed ROUND (each job's fires go round the four
//! partitions, so both bridges have fires), running the executors' `sleep` handler for
//! 300 ms. The kill strikes 150 ms into a second ([`until_mid_run`]), with runs half-way. The
//! bridge's session (the executor SDK's default, 10 s) runs out, the survivor is handed the
//! killed bridge's partitions, and the triggers the dead one had taken and not committed are
//! redelivered to it: it forwards each under the same XXL-JOB log id (the Kadence run's), so
//! the executor runs it again, or, were it still queued there, answers that it holds it and
//! the survivor follows that run. After `--outage-secs` the killed bridge starts again, a
//! new process with a new executor id on the same admin address, and the group shares the
//! partitions again.
//!
//! What must hold, counted from the trigger and results topics and the API: every fire due
//! is emitted and completed (a succeeded run per trigger id), none lost; a trigger run twice
//! shows only as a result repeated under its own trigger id, and no result names a trigger
//! id never emitted; both bridges ran fires before the kill; the survivor ran the killed
//! bridge's partitions during the outage, every fire due there (but the last
//! [`RESTART_MARGIN`] before the restart) done before the restart; the kill cut runs short,
//! which the survivor ran again; the restarted bridge ran fires again. The table adds how
//! long each step took.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use kadence_schemas::TriggerRecord;
use serde_json::json;

use super::bridge_load::{XXL_APP, XXL_PARTITIONS, collect, every_second_jobs};
use super::kafka::{KafkaCluster, KafkaKind};
use super::load::{due_in, scheduled_ms};
use super::stack::{BrokerKind, GroupProtocol, Stack, sqlite_url};
use super::steady::{Finished, until_mid_run};
use super::xxl_bridge::{Bridge, BridgeSetup, XxlExecutor, fronted, xxl_job_command};
use super::{Options, Report, millis_cell};
use crate::free_port;
use crate::now_ms;
use crate::triggers::{Placed, read_placed_records};

/// The bridges' executor ids: the one killed (the executors' first admin address), the one
/// that stays, and the killed one started again.
const KILLED: &str = "faults-bridge-a";
const SURVIVOR: &str = "faults-bridge-b";
const RESTARTED: &str = "faults-bridge-a2";

/// Fires due this close to the restart may still wait for the group's rebalance when it
/// comes: left out of the "done before the restart" count.
pub const RESTART_MARGIN: Duration = Duration::from_secs(2);

/// Before the kill, the fires due this long (ms) tell which partitions each bridge had.
const SHARE_WINDOW_MS: i64 = 3_000;

/// How long the executors may take to be fronted by both bridges.
const FRONTED_LIMIT: Duration = Duration::from_secs(90);

/// `kafka-bridge-kill`'s defaults: 20 jobs, 10 s before, 20 s down, 40 s after (past the
/// executors' 30 s registration period, so the restarted bridge has heard from them again
/// before the load stops). The outage must outlast the bridge's 10 s session by a few
/// seconds: the checks expect the survivor to take over, and a bridge back sooner takes its
/// partitions back itself (tried at 5 s: the scenario fails saying the survivor never did).
pub fn defaults() -> Options {
    Options {
        jobs: 20,
        before: Duration::from_secs(10),
        outage: Duration::from_secs(20),
        after: Duration::from_secs(40),
        group_protocol: None,
    }
}

/// When the bridge died and came back (ms), and the partitions it had.
struct Kill {
    at_ms: i64,
    restart_ms: i64,
    partitions: BTreeSet<i32>,
}

/// Everything the scenario started, up to the load; stopped when dropped.
struct Scene {
    /// Declared first so that it is dropped first: the processes go before the broker.
    killed: Bridge,
    _survivor: Bridge,
    _executors: Vec<XxlExecutor>,
    stack: Stack,
    kafka: KafkaCluster,
    setup: BridgeSetup,
    /// The bridges' ports and admin addresses, the killed one's first.
    ports: [u16; 2],
    admins: [String; 2],
    /// Every process's log, kept when the scenario fails.
    logs: Vec<PathBuf>,
    _database: tempfile::TempDir,
}

impl Scene {
    /// Starts Kafka, the stack, the app, the two bridges and the two XXL-JOB executors of
    /// `command`; returns once the registry shows both executors fronted by both bridges.
    async fn start(command: &[String]) -> Scene {
        let kafka = KafkaCluster::start(KafkaKind::Node).await;
        let prefix = crate::unique("kfaults");
        let database = tempfile::tempdir().expect("a database directory");
        let broker = (kafka.bootstrap.as_str(), BrokerKind::Kafka);
        let database_url = sqlite_url(database.path());
        let stack = Stack::start_grouped(&database_url, broker, &prefix, GroupProtocol::Classic);
        let stack = stack.await;
        let api = &stack.api;
        let app = json!({"name": XXL_APP, "partitions": XXL_PARTITIONS});
        api.call(reqwest::Method::POST, "/api/apps", app).await;
        let setup = BridgeSetup {
            app: XXL_APP.to_owned(),
            brokers: kafka.bootstrap.clone(),
            prefix: prefix.clone(),
            trusted_keys: api.trusted_keys().await,
            executor_key: api.executor_key(XXL_APP).await,
        };
        // Peers name each other, so both ports are chosen first; the killed bridge comes
        // back on its own, the address the executors know.
        let ports = [free_port(), free_port()];
        let admins = ports.map(BridgeSetup::admin);
        let killed = Bridge::start(&setup, KILLED, ports[0], &admins[1..]).await;
        let survivor = Bridge::start(&setup, SURVIVOR, ports[1], &admins[..1]).await;
        let mut executors = Vec::new();
        for number in 0..2 {
            let addresses = admins.join(",");
            let executor = XxlExecutor::start(command, (XXL_APP, &prefix), &addresses, number);
            executors.push(executor.await);
        }
        let mut logs = stack.log_files();
        logs.extend([killed.log.clone(), survivor.log.clone()]);
        logs.extend(executors.iter().map(|executor| executor.log.clone()));
        let bridges = ([KILLED, SURVIVOR].as_slice(), executors.len());
        if let Err(error) = fronted(api, XXL_APP, bridges, XXL_PARTITIONS, FRONTED_LIMIT).await {
            let names: Vec<String> = logs.iter().map(|log| log.display().to_string()).collect();
            panic!("{error}; logs: {}", names.join(" "));
        }
        Scene {
            killed,
            _survivor: survivor,
            _executors: executors,
            stack,
            kafka,
            setup,
            ports,
            admins,
            logs,
            _database: database,
        }
    }
}

/// Runs the scenario (see the module docs).
pub async fn run(options: &Options) -> Report {
    // The executor's command first: a missing one fails before anything starts.
    let command = xxl_job_command().await;
    let mut scene = Scene::start(&command).await;
    let jobs = every_second_jobs(&scene.stack.api, options.jobs).await;
    // The jobs' first fire: the next second after the pre-read planned them, a few seconds
    // at most; the audit starts there.
    let from_ms = now_ms() + 6_000;
    tokio::time::sleep(options.before).await;
    until_mid_run().await;
    scene.killed.kill_9().await;
    let kill_ms = now_ms();
    eprintln!(
        "bridge {KILLED} killed; started again in {:?}",
        options.outage
    );
    tokio::time::sleep(options.outage).await;
    let restart_ms = now_ms();
    let (port, peers) = (scene.ports[0], &scene.admins[1..]);
    let restarted = Bridge::start(&scene.setup, RESTARTED, port, peers).await;
    scene.logs.push(restarted.log.clone());
    tokio::time::sleep(options.after).await;

    let brokers = scene.kafka.bootstrap.clone();
    let prefix = &scene.setup.prefix;
    let finished = collect(&scene.stack, &brokers, prefix, &jobs, (from_ms, now_ms())).await;
    let topic = format!("{prefix}.triggers.{XXL_APP}");
    let placed: Vec<Placed<TriggerRecord>> =
        read_placed_records(&brokers, &topic, XXL_PARTITIONS).await;
    let partition_of: HashMap<&str, i32> = (placed.iter())
        .map(|placed| (placed.record.trigger_id.as_str(), placed.partition))
        .collect();
    let kill = Kill {
        at_ms: kill_ms,
        restart_ms,
        partitions: partitions_before(&finished, &partition_of, KILLED, kill_ms),
    };
    let measures = Measures::of(&finished, &partition_of, &kill);
    let mut report = Report {
        scenario: "kafka-bridge-kill",
        injected: format!(
            "one of two XXL-JOB bridges (the executors' first admin address, partitions {:?}) \
             killed with kill -9 150 ms into a second and started again {} s later, during {} \
             jobs firing every second, routed ROUND over {XXL_PARTITIONS} partitions, run by \
             two XXL-JOB 3.3.2 executors (sleep 300 ms)",
            kill.partitions,
            options.outage.as_secs(),
            options.jobs
        ),
        columns: measures.columns(&finished, &kill),
        lost: finished.outcome.lost(),
        failures: measures.failures(&kill),
        details: finished.outcome.lost_details(),
    }
    .keeping_logs_on_failure(&scene.logs);
    report.details.push(format!(
        "the killed bridge had partitions {:?}, the survivor {:?}",
        kill.partitions, measures.survivor_had
    ));
    report.details.push(repeats(&finished));
    scene.kafka.keep_logs_for(&mut report);
    report
}

/// What the topics say about the kill, beyond the steady load's counts.
struct Measures {
    /// The partitions the survivor had before the kill.
    survivor_had: BTreeSet<i32>,
    /// From the kill until the survivor started a fire of the dead bridge's partitions.
    taken_over_after: Option<i64>,
    /// Fires due on the dead bridge's partitions while it was down (but the margin), and
    /// how many of those the survivor finished before the restart.
    outage_due: usize,
    done_before_restart: usize,
    /// See [`redone_by_survivor`].
    redone: usize,
    /// From the restart until the restarted bridge finished a fire. (Not until it started
    /// one: a bridge's run starts when it takes the trigger, before it has an executor to
    /// hand it to.)
    restarted_first: Option<i64>,
    /// Trigger ids in results and never in the trigger topic.
    strangers: BTreeSet<String>,
}

impl Measures {
    /// Counts what `finished` says of `kill`, each trigger placed by `partition_of`.
    fn of(finished: &Finished, partition_of: &HashMap<&str, i32>, kill: &Kill) -> Measures {
        let on_killed = |id: &str| {
            (partition_of.get(id)).is_some_and(|partition| kill.partitions.contains(partition))
        };
        let taken_over_after = (finished.results.iter())
            .filter(|result| result.executor_id == SURVIVOR)
            .filter(|result| on_killed(result.trigger_id.as_str()))
            .filter(|result| result.started_at_ms >= kill.at_ms)
            .map(|result| result.started_at_ms - kill.at_ms)
            .min();
        let first = finished.first_successes();
        let margin = i64::try_from(RESTART_MARGIN.as_millis()).unwrap_or(0);
        let outage_due: Vec<&String> = (finished.outcome.emitted.keys())
            .filter(|id| on_killed(id) && due_in(id, kill.at_ms..kill.restart_ms - margin))
            .collect();
        let done_before_restart = (outage_due.iter())
            .filter(|id| {
                first.get(id.as_str()).is_some_and(|result| {
                    result.executor_id == SURVIVOR && result.finished_at_ms < kill.restart_ms
                })
            })
            .count();
        let restarted_first = (finished.results.iter())
            .filter(|result| result.executor_id == RESTARTED)
            .map(|result| result.finished_at_ms - kill.restart_ms)
            .min();
        let strangers = (finished.results.iter())
            .map(|result| result.trigger_id.as_str())
            .filter(|id| !partition_of.contains_key(id))
            .map(str::to_owned)
            .collect();
        Measures {
            survivor_had: partitions_before(finished, partition_of, SURVIVOR, kill.at_ms),
            taken_over_after,
            outage_due: outage_due.len(),
            done_before_restart,
            redone: redone_by_survivor(finished, &on_killed, kill.at_ms),
            restarted_first,
            strangers,
        }
    }

    /// What fails the scenario beyond a lost fire (see the module docs).
    fn failures(&self, kill: &Kill) -> Vec<String> {
        let mut failures = Vec::new();
        if kill.partitions.is_empty() || self.survivor_had.is_empty() {
            failures.push(format!(
                "both bridges were to run fires before the kill: {KILLED} ran partitions {:?}, \
                 {SURVIVOR} {:?}, in the last {SHARE_WINDOW_MS} ms",
                kill.partitions, self.survivor_had
            ));
        }
        if self.taken_over_after.is_none() {
            failures.push(format!(
                "the survivor never ran a fire of the killed bridge's partitions {:?}",
                kill.partitions
            ));
        }
        if self.outage_due == 0 {
            failures
                .push("no fire was due on the killed bridge's partitions while it was down".into());
        } else if self.done_before_restart < self.outage_due {
            failures.push(format!(
                "{} of the {} fires due on the killed bridge's partitions while it was down \
                 were not finished by the survivor before the restart",
                self.outage_due - self.done_before_restart,
                self.outage_due
            ));
        }
        if self.redone == 0 {
            failures.push(
                "the kill cut no run short: nothing showed the dead bridge's triggers redelivered"
                    .to_owned(),
            );
        }
        if self.restarted_first.is_none() {
            failures.push("the restarted bridge ran no fire".to_owned());
        }
        if !self.strangers.is_empty() {
            let first: Vec<&String> = self.strangers.iter().take(10).collect();
            failures.push(format!(
                "{} results name a trigger id never emitted (a run under another id): {first:?}",
                self.strangers.len()
            ));
        }
        failures
    }

    /// The steady load's columns, then the kill's.
    fn columns(&self, finished: &Finished, kill: &Kill) -> Vec<(&'static str, String)> {
        let mut columns = finished.columns();
        columns.extend([
            (
                "survivor took over after",
                millis_cell(self.taken_over_after),
            ),
            (
                "killed one's fires done before the restart",
                format!("{} of {}", self.done_before_restart, self.outage_due),
            ),
            ("runs redone by the survivor", self.redone.to_string()),
            finished.recovery_column(kill.at_ms..kill.restart_ms),
            (
                "restarted one's first result after",
                millis_cell(self.restarted_first),
            ),
            (
                "longest fire due after the restart to finish",
                millis_cell(finished.longest_to_finish(kill.restart_ms..i64::MAX)),
            ),
        ]);
        columns
    }
}

/// The partitions of the fires due in the last [`SHARE_WINDOW_MS`] before `kill_ms` that
/// `bridge` finished before then: the partitions it had when the other was killed. (Fires
/// due then and finished later are the dead bridge's, redone.)
fn partitions_before(
    finished: &Finished,
    partition_of: &HashMap<&str, i32>,
    bridge: &str,
    kill_ms: i64,
) -> BTreeSet<i32> {
    (finished.results.iter())
        .filter(|result| result.executor_id == bridge && result.finished_at_ms < kill_ms)
        .filter(|result| {
            due_in(
                result.trigger_id.as_str(),
                kill_ms - SHARE_WINDOW_MS..kill_ms,
            )
        })
        .filter_map(|result| partition_of.get(result.trigger_id.as_str()).copied())
        .collect()
}

/// Where the results repeated under one trigger id came from, for the report's details: the
/// dead bridge's results the survivor repeated (published, not yet committed when it died),
/// and the survivor's the restarted bridge repeated (the same, at the hand-back).
fn repeats(finished: &Finished) -> String {
    let mut by_trigger: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for result in &finished.results {
        (by_trigger.entry(result.trigger_id.as_str()).or_default())
            .insert(result.executor_id.as_str());
    }
    let repeated = |of: &str, by: &str| {
        (by_trigger.values())
            .filter(|bridges| bridges.contains(of) && bridges.contains(by))
            .count()
    };
    format!(
        "results repeated: {} of {KILLED}'s by {SURVIVOR} after the kill, {} of {SURVIVOR}'s by \
         {RESTARTED} after the restart",
        repeated(KILLED, SURVIVOR),
        repeated(SURVIVOR, RESTARTED)
    )
}

/// The triggers of the killed bridge's partitions it had taken when it died (due before the
/// kill, or within the second after it, which it held already: triggers are emitted up to a
/// second early) and published no result for, that the survivor finished.
fn redone_by_survivor(
    finished: &Finished,
    on_killed: &dyn Fn(&str) -> bool,
    kill_ms: i64,
) -> usize {
    let mut by_killed: HashSet<&str> = HashSet::new();
    for result in finished
        .results
        .iter()
        .filter(|result| result.executor_id == KILLED)
    {
        by_killed.insert(result.trigger_id.as_str());
    }
    let first = finished.first_successes();
    (finished.outcome.emitted.keys())
        .filter(|id| on_killed(id) && !by_killed.contains(id.as_str()))
        .filter(|id| scheduled_ms(id).is_some_and(|due| due <= kill_ms + 1_000))
        .filter(|id| {
            first
                .get(id.as_str())
                .is_some_and(|result| result.executor_id == SURVIVOR)
        })
        .count()
}
