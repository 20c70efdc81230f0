//! Faults of the brokers themselves, on a three-node Apache Kafka cluster (each node broker
//! and KRaft controller; replication factor 3, `min.insync.replicas=2`), each during a
//! [steady load](super::steady) (20 jobs every second routed round the three partitions,
//! runs of 300 ms, two executors, `kadence serve` on SQLite). [`ClusterFault`] lists them;
//! [`super::node_faults`] injects them, 150 ms into a second (runs half-way).
//!
//! `kafka-cluster` runs the four in turn on one cluster, a table row each; `kafka-leader-kill`,
//! `kafka-controller-kill`, `kafka-rolling-restart` and `kafka-broker-freeze` run one on a
//! cluster of their own. Why one scenario in the test command: a cluster costs ~35 s and
//! three JVMs to start, and the test command runs every scenario at once on two cores; four
//! clusters side by side would be twelve JVMs starting together beside the other scenarios,
//! and brokers starved of CPU miss their sessions, which is not the fault under test. In
//! turn, each fault's counts stay its own: each row has its own scheduler, SQLite file,
//! topics (a fresh prefix) and executors, started after the cluster is whole again (every
//! partition with all its replicas in sync) and stopped before the next fault.
//!
//! Each row also checks that its trigger and results topics have three replicas per
//! partition and `min.insync.replicas=2`, so that the fault strikes what the row says (a
//! failure otherwise). Time to recover: the longest a fire due during the fault (from the
//! injection until the node serves again, is thawed, or the roll ends) took from its
//! scheduled time until its run finished; the details (standard error) say which fires took
//! over 5 s, on which partitions, and whether they reached the topic late or waited in it.

use std::time::Duration;

use super::kafka::{KafkaCluster, KafkaKind};
use super::node_faults::{self, Injected};
use super::stack::{BrokerKind, GroupProtocol};
use super::steady::{Route, SteadyLoad, until_mid_run};
use super::{Options, Report};
use crate::now_ms;

/// A fault of the cluster's nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterFault {
    /// A node leading trigger partitions (not the active controller) killed with SIGKILL,
    /// started again after the outage.
    LeaderKill,
    /// The active KRaft controller killed with SIGKILL, started again after the outage.
    ControllerKill,
    /// Every node stopped (SIGTERM) and started again in turn, the next once every partition
    /// has all its replicas in sync (the outage option does not apply).
    RollingRestart,
    /// A node leading trigger partitions (not the active controller) frozen (SIGSTOP) for
    /// the outage, past its broker session (6 s), then thawed.
    BrokerFreeze,
}

impl ClusterFault {
    /// Every fault, in the order `kafka-cluster` runs them.
    pub const ALL: [ClusterFault; 4] = [
        ClusterFault::LeaderKill,
        ClusterFault::ControllerKill,
        ClusterFault::BrokerFreeze,
        ClusterFault::RollingRestart,
    ];

    /// The scenario that runs it alone.
    pub fn scenario(self) -> &'static str {
        match self {
            ClusterFault::LeaderKill => "kafka-leader-kill",
            ClusterFault::ControllerKill => "kafka-controller-kill",
            ClusterFault::RollingRestart => "kafka-rolling-restart",
            ClusterFault::BrokerFreeze => "kafka-broker-freeze",
        }
    }

    /// The fault whose scenario is `name`.
    pub fn of_scenario(name: &str) -> Option<ClusterFault> {
        ClusterFault::ALL
            .into_iter()
            .find(|fault| fault.scenario() == name)
    }

    /// Its name in a table's first column.
    fn label(self) -> &'static str {
        match self {
            ClusterFault::LeaderKill => "leader kill -9",
            ClusterFault::ControllerKill => "controller kill -9",
            ClusterFault::RollingRestart => "rolling restart",
            ClusterFault::BrokerFreeze => "broker frozen",
        }
    }
}

/// The defaults of each fault: 20 jobs, 10 s before, 15 s of fault (two and a half broker
/// sessions), 10 s after. Short, as `kafka-cluster` runs four faults in turn in the test
/// command; the restart after a kill and the roll take their own time on top.
pub fn defaults() -> Options {
    Options {
        jobs: 20,
        before: Duration::from_secs(10),
        outage: Duration::from_secs(15),
        after: Duration::from_secs(10),
        group_protocol: None,
    }
}

/// How long the cluster may take to be whole again (every partition with all its replicas
/// in sync) before a fault strikes it.
const WHOLE_LIMIT: Duration = Duration::from_secs(120);

/// Runs `kafka-cluster`: every fault in turn on one cluster, a row each.
pub async fn run_all(options: &Options) -> Vec<Report> {
    run_on_one_cluster("kafka-cluster", &ClusterFault::ALL, options).await
}

/// Runs `fault`'s own scenario: it alone, on a cluster of its own.
pub async fn run_one(fault: ClusterFault, options: &Options) -> Vec<Report> {
    run_on_one_cluster(fault.scenario(), &[fault], options).await
}

async fn run_on_one_cluster(
    scenario: &'static str,
    faults: &[ClusterFault],
    options: &Options,
) -> Vec<Report> {
    let mut cluster = KafkaCluster::start(KafkaKind::Cluster).await;
    let mut reports = Vec::new();
    for fault in faults {
        eprintln!("{scenario}: {}", fault.label());
        let mut report = run_fault(&cluster, scenario, *fault, options).await;
        cluster.keep_logs_for(&mut report);
        reports.push(report);
    }
    reports
}

/// One fault during a steady load of its own on `cluster`, once the cluster is whole.
async fn run_fault(
    cluster: &KafkaCluster,
    scenario: &'static str,
    fault: ClusterFault,
    options: &Options,
) -> Report {
    let mut failures = Vec::new();
    if let Err(short) = cluster.wait_in_sync(WHOLE_LIMIT).await {
        failures.push(format!(
            "the cluster was not whole before the fault: {short}"
        ));
    }
    let protocol = options.group_protocol.unwrap_or(GroupProtocol::Classic);
    let load = SteadyLoad::start(
        (&cluster.bootstrap, BrokerKind::Kafka),
        options,
        protocol,
        Route::Round,
    )
    .await;
    failures.extend(replication_failures(cluster, &load).await);
    tokio::time::sleep(options.before).await;
    until_mid_run().await;
    let from_ms = now_ms();
    let topic = load.trigger_topic();
    let injected: Injected = match fault {
        ClusterFault::LeaderKill => node_faults::kill_leader(cluster, &topic, options.outage).await,
        ClusterFault::ControllerKill => {
            node_faults::kill_controller(cluster, &topic, options.outage).await
        }
        ClusterFault::RollingRestart => node_faults::roll(cluster).await,
        ClusterFault::BrokerFreeze => {
            node_faults::freeze_leader(cluster, &topic, options.outage).await
        }
    };
    let over_ms = now_ms();
    failures.extend(injected.failures);
    tokio::time::sleep(options.after).await;
    let finished = load.finish().await;
    let mut details = finished.details(&load).await;
    details.push(format!(
        "{}: {}",
        fault.label(),
        finished.slow_fires(&load, from_ms..over_ms).await
    ));
    let mut columns = vec![("fault", fault.label().to_owned())];
    columns.extend(finished.columns());
    columns.push(finished.recovery_column(from_ms..over_ms));
    Report {
        scenario,
        injected: format!(
            "{}, during {} jobs firing every second (runs of 300 ms, two executors)",
            injected.words, options.jobs
        ),
        columns,
        lost: finished.outcome.lost(),
        failures,
        details,
    }
    .keeping_logs_on_failure(&load.stack.log_files())
}

/// What is not as the scenario says about the load's trigger and results topics: three
/// replicas per partition, `min.insync.replicas=2`.
async fn replication_failures(cluster: &KafkaCluster, load: &SteadyLoad) -> Vec<String> {
    let mut failures = Vec::new();
    for topic in [load.trigger_topic(), load.results_topic()] {
        let partitions = cluster.partitions(Some(&topic)).await.unwrap_or_default();
        let replicas: Vec<usize> = (partitions.iter())
            .map(|state| state.replicas.len())
            .collect();
        if partitions.is_empty() || replicas.iter().any(|count| *count != 3) {
            failures.push(format!(
                "{topic} has {replicas:?} replicas per partition, not 3 each"
            ));
        }
        let min_insync = cluster.min_insync_replicas(&topic).await;
        if min_insync.as_deref() != Some("2") {
            failures.push(format!(
                "{topic} has min.insync.replicas {min_insync:?}, not 2"
            ));
        }
    }
    failures
}
