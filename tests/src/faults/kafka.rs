//! Apache Kafka 4 for the scenarios whose subject is the real broker: one KRaft node, or a
//! cluster of three (each broker and controller, replication factor 3 and
//! `min.insync.replicas=2` by default), started, hurt and stopped through `infra/broker.sh`,
//! the one place that knows how Kafka starts; and what the cluster's metadata says about
//! partitions: leader, replicas, in-sync replicas, `min.insync.replicas`.
//!
//! The nodes are JVMs the script starts in the background, not children of the harness: the
//! cluster stops them when dropped (`infra/broker.sh stop`). Their state folder (data and
//! `node-N/broker.log`) is removed then, unless [`keep_logs_for`](KafkaCluster::keep_logs_for)
//! kept it for a report that failed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use tokio::process::Command;

use super::{KEEP_LOGS, Report};

/// What `infra/broker.sh start --kind …` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaKind {
    /// One node, broker and controller; every topic has one replica.
    Node,
    /// Three nodes, each broker and controller; replication factor 3, two in-sync replicas
    /// to acknowledge a write.
    Cluster,
}

impl KafkaKind {
    fn name(self) -> &'static str {
        match self {
            KafkaKind::Node => "kafka",
            KafkaKind::Cluster => "kafka-cluster",
        }
    }
}

/// One partition as the cluster's metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The node leading it (-1: none).
    pub leader: i32,
    /// The nodes holding a replica.
    pub replicas: Vec<i32>,
    /// The replicas in sync with the leader.
    pub isr: Vec<i32>,
}

impl PartitionState {
    /// Whether it has a leader and every replica is in sync.
    pub fn fully_in_sync(&self) -> bool {
        self.leader >= 0 && self.isr.len() == self.replicas.len()
    }
}

/// A Kafka of the scenario's own, stopped when dropped.
pub struct KafkaCluster {
    /// The bootstrap list clients take (`127.0.0.1:P1,…`).
    pub bootstrap: String,
    state: PathBuf,
    /// Removes the state folder when dropped; `None` once kept.
    cleanup: Option<tempfile::TempDir>,
    admin: Arc<AdminClient<DefaultClientContext>>,
}

impl KafkaCluster {
    /// Starts `kind` on free loopback ports and returns once every node serves (a cluster
    /// takes ~35 s). Panics with the script's error when it cannot.
    pub async fn start(kind: KafkaKind) -> KafkaCluster {
        let cleanup = tempfile::Builder::new()
            .prefix("kfaults-kafka-")
            .tempdir()
            .expect("a state folder for Kafka");
        let state = cleanup.path().to_path_buf();
        let printed = broker_sh(&state, &["start", "--kind", kind.name()])
            .await
            .unwrap_or_else(|error| {
                panic!("Apache Kafka ({}) did not start: {error}", kind.name())
            });
        let bootstrap = printed.lines().last().unwrap_or_default().trim().to_owned();
        let admin = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            // Asking for a topic's metadata must not create it (a producer-type client, as
            // the admin client is, would ask the broker to).
            .set("allow.auto.create.topics", "false")
            .create()
            .expect("an admin client");
        KafkaCluster {
            bootstrap,
            state,
            cleanup: Some(cleanup),
            admin: Arc::new(admin),
        }
    }

    /// The node ids, 1 to 3 (1 for a single node).
    pub fn nodes(&self) -> Vec<i32> {
        (1..=3)
            .filter(|node| self.state.join(format!("node-{node}")).is_dir())
            .collect()
    }

    /// Kills node `node` at once (SIGKILL).
    pub async fn kill(&self, node: i32) {
        self.node("kill", node).await;
    }

    /// Stops node `node` gracefully (SIGTERM: a controlled shutdown hands its leaderships
    /// over first) and waits until it has exited.
    pub async fn stop(&self, node: i32) {
        self.node("stop", node).await;
    }

    /// Starts node `node` again on its data and ports; returns once it serves.
    pub async fn start_node(&self, node: i32) {
        self.node("start", node).await;
    }

    /// Freezes node `node` (SIGSTOP).
    pub async fn pause(&self, node: i32) {
        self.node("pause", node).await;
    }

    /// Thaws node `node` (SIGCONT).
    pub async fn resume(&self, node: i32) {
        self.node("resume", node).await;
    }

    async fn node(&self, action: &str, node: i32) {
        let node = node.to_string();
        if let Err(error) = broker_sh(&self.state, &["node", action, &node]).await {
            panic!("infra/broker.sh node {action} {node}: {error}");
        }
    }

    /// The active KRaft controller's node id, as the live nodes know it (`None` while they
    /// know none).
    pub async fn controller(&self) -> Option<i32> {
        let printed = broker_sh(&self.state, &["controller"]).await.ok()?;
        printed.trim().parse().ok()
    }

    /// Every partition of `topic` (every topic's when `None`), by the metadata of whichever
    /// node answers first; `None` when none answered within 5 s (a frozen node may hold
    /// the request: ask again).
    pub async fn partitions(&self, topic: Option<&str>) -> Option<Vec<PartitionState>> {
        let admin = Arc::clone(&self.admin);
        let topic = topic.map(str::to_owned);
        // The metadata request blocks: off the runtime's threads.
        tokio::task::spawn_blocking(move || {
            let metadata = (admin.inner())
                .fetch_metadata(topic.as_deref(), Duration::from_secs(5))
                .ok()?;
            let mut partitions = Vec::new();
            for topic in metadata.topics() {
                for partition in topic.partitions() {
                    partitions.push(PartitionState {
                        topic: topic.name().to_owned(),
                        partition: partition.id(),
                        leader: partition.leader(),
                        replicas: partition.replicas().to_vec(),
                        isr: partition.isr().to_vec(),
                    });
                }
            }
            Some(partitions)
        })
        .await
        .ok()?
    }

    /// Waits until every partition of every topic has a leader and all its replicas in sync
    /// (what an operator waits for between two nodes of a rolling restart), at most
    /// `limit`; how long that took, or the partitions still short when it ran out.
    pub async fn wait_in_sync(&self, limit: Duration) -> Result<Duration, String> {
        let started = tokio::time::Instant::now();
        let mut short = Vec::new();
        while started.elapsed() < limit {
            if let Some(partitions) = self.partitions(None).await {
                short = (partitions.into_iter())
                    .filter(|state| !state.fully_in_sync())
                    .collect();
                if short.is_empty() {
                    return Ok(started.elapsed());
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let named: Vec<String> = (short.iter().take(5))
            .map(|state| {
                format!(
                    "{}-{} (leader {}, in sync {:?} of {:?})",
                    state.topic, state.partition, state.leader, state.isr, state.replicas
                )
            })
            .collect();
        Err(format!(
            "{} partitions not fully in sync after {limit:?}, e.g. {}",
            short.len(),
            named.join(", ")
        ))
    }

    /// `topic`'s `min.insync.replicas` (the broker's default unless the topic sets it).
    pub async fn min_insync_replicas(&self, topic: &str) -> Option<String> {
        let described = self
            .admin
            .describe_configs(&[ResourceSpecifier::Topic(topic)], &AdminOptions::new())
            .await
            .ok()?;
        let resource = described.into_iter().next()?.ok()?;
        resource.get("min.insync.replicas")?.value.clone()
    }

    /// Every node's log (`node-N/broker.log` in the state folder).
    pub fn log_files(&self) -> Vec<PathBuf> {
        (self.nodes().iter())
            .map(|node| self.state.join(format!("node-{node}/broker.log")))
            .collect()
    }

    /// Keeps the state folder (every node's `broker.log` and data) when `report` failed or
    /// [`KEEP_LOGS`] is set, and names the logs in its details.
    pub fn keep_logs_for(&mut self, report: &mut Report) {
        if report.passed() && std::env::var_os(KEEP_LOGS).is_none() {
            return;
        }
        if let Some(cleanup) = self.cleanup.take() {
            let _ = cleanup.keep();
        }
        let logs: Vec<String> = (self.log_files().iter())
            .map(|log| log.display().to_string())
            .collect();
        report
            .details
            .push(format!("Kafka's logs: {}", logs.join(" ")));
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        let stopped = std::process::Command::new(broker_script())
            .args(["stop", "--state"])
            .arg(&self.state)
            .status();
        if !stopped.is_ok_and(|status| status.success()) {
            eprintln!(
                "could not stop the Kafka nodes of {}; stop them with infra/broker.sh stop \
                 --state {0}",
                self.state.display()
            );
        }
    }
}

fn broker_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/broker.sh")
}

/// Runs `infra/broker.sh ARGS… --state STATE`: what it printed, or its error output.
async fn broker_sh(state: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new(broker_script())
        .args(args)
        .arg("--state")
        .arg(state)
        .output()
        .await
        .map_err(|error| format!("cannot run infra/broker.sh: {error}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
    }
}
