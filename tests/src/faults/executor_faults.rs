//! Executor faults, each during a [steady load](super::steady) of fires whose runs take
//! 300 ms, on either broker:
//! - [`executor_hang`]: one of two executors frozen (SIGSTOP) past its group session, then
//!   thawed: `executor-hang` on tansu, `kafka-executor-hang` on Apache Kafka, where the
//!   frozen executor's partitions must be handed over;
//! - [`rebalance_storm`]: executors joining and leaving every few seconds:
//!   `rebalance-storm` on tansu (leaving by SIGTERM), `kafka-rebalance-storm` on Apache Kafka
//!   (leaving by kill -9 and SIGTERM in turn).
//!
//! The tansu scenarios stay because tansu is the development stack's broker; their tables
//! show what its group coordinator (tansu 0.6) does, which is not what Kafka's does: it keeps
//! a silent or vanished member's partitions (see [`Coordinator::Tansu`]). They also keep
//! their load as it was, every fire on partition 0 ([`Route::First`]); on Kafka the fires go
//! round the partitions ([`Route::Round`]), so whichever partitions the struck executor owns
//! have fires.
//!
//! On Kafka each scenario runs twice, side by side on one node of its own: executors of the
//! classic group protocol and executors of KIP-848's consumer protocol
//! (`KADENCE_GROUP_PROTOCOL`), a table row each; `--group-protocol classic|consumer` runs
//! one. Side by side rather than two scenarios: the test command runs every scenario at once
//! on two cores, and one Kafka node (a JVM, ~10 s to start) serves both; each row has its
//! own scheduler, SQLite file, topics and consumer group, so one row's fault never touches
//! the other's counts. Each row checks in the node's log that its group's members joined by
//! the protocol the row names (a failure otherwise: an executor that ignored
//! `KADENCE_GROUP_PROTOCOL` would make the row a copy of the other).
//!
//! What must hold: every fire due is emitted and completed (a run row per trigger id, first
//! result wins); a trigger run twice shows as a repeated result of the same id, never as a
//! second run.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use super::kafka::{KafkaCluster, KafkaKind};
use super::proxy::ProxiedBroker;
use super::stack::{BrokerKind, GroupProtocol};
use super::steady::Route;
use super::{Options, Report, executor_hang, rebalance_storm};

/// Whose group coordinator the executors' group runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coordinator {
    /// tansu 0.6's (the development broker), classic protocol only. After the 6 s session
    /// it drops a silent member and tells the live one to rejoin, but the group stays formed
    /// at the same generation, so the rejoin is answered from the stored assignment
    /// (`coordinator/group/administrator.rs` in tansu-broker): the live executor gets back
    /// exactly the partitions it had, and the silent one's triggers wait for it. A storm of
    /// kill -9 leaves ended, in both runs tried, with the only live member owning no
    /// partition for minutes; so its storm leaves by SIGTERM.
    Tansu,
    /// Apache Kafka 4's, one node whose log is `broker_log`, with executors of `protocol`:
    /// a member silent past its session (6 s, the client's for classic groups, the broker's
    /// for consumer groups) is evicted and its partitions handed to the others.
    Kafka {
        /// The executors' group protocol.
        protocol: GroupProtocol,
        /// The node's log, where its group coordinator says how each member joined.
        broker_log: PathBuf,
    },
}

impl Coordinator {
    /// The protocol the executors join their group by.
    pub fn group_protocol(&self) -> GroupProtocol {
        match self {
            Coordinator::Tansu => GroupProtocol::Classic,
            Coordinator::Kafka { protocol, .. } => *protocol,
        }
    }

    /// What the scheduler and executors are told the broker is.
    pub fn broker_kind(&self) -> BrokerKind {
        match self {
            Coordinator::Tansu => BrokerKind::Tansu,
            Coordinator::Kafka { .. } => BrokerKind::Kafka,
        }
    }

    /// How the load routes its fires (see the module docs).
    pub fn route(&self) -> Route {
        match self {
            Coordinator::Tansu => Route::First,
            Coordinator::Kafka { .. } => Route::Round,
        }
    }

    /// On Kafka, what is wrong with how `group`'s members joined: none, or some by the other
    /// protocol than the one asked for, as the coordinator logged their joins
    /// (`joins the consumer group using the consumer protocol` for KIP-848's, `joins group
    /// {group}` for the classic one's). Nothing on tansu, whose groups are all classic.
    pub fn protocol_failure(&self, group: &str) -> Option<String> {
        let Coordinator::Kafka {
            protocol,
            broker_log,
        } = self
        else {
            return None;
        };
        let log = std::fs::read_to_string(broker_log).unwrap_or_default();
        let tag = format!("[GroupId {group}] ");
        let consumer_joins = (log.lines())
            .filter(|line| {
                line.contains(&tag)
                    && line.contains("joins the consumer group using the consumer protocol")
            })
            .count();
        let classic_joins = (log.lines())
            .filter(|line| line.contains(&format!("joins group {group} ")))
            .count();
        let (asked, other) = match protocol {
            GroupProtocol::Classic => (classic_joins, consumer_joins),
            GroupProtocol::Consumer => (consumer_joins, classic_joins),
        };
        (asked == 0 || other > 0).then(|| {
            format!(
                "the executors were to join by the {} protocol; Kafka's log has {consumer_joins} \
                 joins of {group} by the consumer protocol and {classic_joins} by the classic one",
                protocol.name()
            )
        })
    }
}

/// `executor-hang`'s defaults: 20 jobs, 10 s before, 20 s frozen, 20 s after.
pub fn hang_defaults() -> Options {
    Options {
        jobs: 20,
        before: Duration::from_secs(10),
        outage: Duration::from_secs(20),
        after: Duration::from_secs(20),
        group_protocol: None,
    }
}

/// `rebalance-storm`'s defaults: 20 jobs, 10 s before, 60 s of storm, 20 s after.
pub fn storm_defaults() -> Options {
    Options {
        outage: Duration::from_secs(60),
        ..hang_defaults()
    }
}

/// Runs `executor-hang` on tansu.
pub async fn run_hang(options: &Options) -> Report {
    let broker = ProxiedBroker::start().await;
    executor_hang::run(broker.address.clone(), options.clone(), Coordinator::Tansu).await
}

/// Runs `rebalance-storm` on tansu.
pub async fn run_storm(options: &Options) -> Report {
    let broker = ProxiedBroker::start().await;
    rebalance_storm::run(broker.address.clone(), options.clone(), Coordinator::Tansu).await
}

/// Runs `kafka-executor-hang`: a row per group protocol.
pub async fn run_kafka_hang(options: &Options) -> Vec<Report> {
    on_kafka(options, executor_hang::run).await
}

/// Runs `kafka-rebalance-storm`: a row per group protocol.
pub async fn run_kafka_storm(options: &Options) -> Vec<Report> {
    on_kafka(options, rebalance_storm::run).await
}

/// Starts one Kafka node and runs `scenario` on it once per group protocol of `options`
/// (both unless it names one), side by side; the reports in protocol order, each led by its
/// protocol's column.
async fn on_kafka<Scenario, Run>(options: &Options, scenario: Scenario) -> Vec<Report>
where
    Scenario: Fn(String, Options, Coordinator) -> Run,
    Run: Future<Output = Report> + Send + 'static,
{
    let mut kafka = KafkaCluster::start(KafkaKind::Node).await;
    let broker_log = kafka.log_files().remove(0);
    let protocols = match options.group_protocol {
        Some(protocol) => vec![protocol],
        None => GroupProtocol::ALL.to_vec(),
    };
    let runs: Vec<_> = (protocols.iter())
        .map(|protocol| {
            let coordinator = Coordinator::Kafka {
                protocol: *protocol,
                broker_log: broker_log.clone(),
            };
            tokio::spawn(scenario(
                kafka.bootstrap.clone(),
                options.clone(),
                coordinator,
            ))
        })
        .collect();
    let mut reports = Vec::with_capacity(runs.len());
    for (protocol, run) in protocols.into_iter().zip(runs) {
        let mut report = run.await.expect("the scenario ran to its end");
        report
            .columns
            .insert(0, ("group protocol", protocol.name().to_owned()));
        kafka.keep_logs_for(&mut report);
        reports.push(report);
    }
    reports
}
