//! What the cluster scenarios do to Kafka's nodes, and how the cluster answered: a node
//! killed and started again, the active controller killed and started again, every node
//! restarted in turn, a node frozen past its broker session. Each injection returns its
//! account in words (which node, what it led, how long the cluster took to move on) and what
//! went wrong on the way; the counts are [`super::cluster_faults`]'.

use std::time::Duration;

use super::kafka::KafkaCluster;
use crate::now_ms;

/// How long a node restarted in a rolling restart may take until every partition has all
/// its replicas in sync again, before the roll stops there (a failure).
const BACK_IN_SYNC_LIMIT: Duration = Duration::from_secs(120);

/// An injection's account.
pub struct Injected {
    /// What was done and how the cluster answered, in words.
    pub words: String,
    /// What went wrong (fails the scenario).
    pub failures: Vec<String>,
}

/// Kills (SIGKILL) a node leading partitions of `topic` ([`leader_to_strike`]), starts it
/// again after `outage`.
pub async fn kill_leader(cluster: &KafkaCluster, topic: &str, outage: Duration) -> Injected {
    let Some(leader) = leader_to_strike(cluster, topic).await else {
        return no_leader(topic);
    };
    let role = role_of(cluster, topic, leader).await;
    let back_at = tokio::time::Instant::now() + outage;
    cluster.kill(leader).await;
    let moved = leaderships_moved(cluster, topic, leader, now_ms(), back_at).await;
    tokio::time::sleep_until(back_at).await;
    let serving_after = restart(cluster, leader).await;
    Injected {
        words: format!(
            "node {leader} ({role}) killed with SIGKILL; {moved}; started again after {} s \
             (serving {serving_after} ms later)",
            outage.as_secs()
        ),
        failures: Vec::new(),
    }
}

/// Kills (SIGKILL) the active KRaft controller, starts it again after `outage`.
pub async fn kill_controller(cluster: &KafkaCluster, topic: &str, outage: Duration) -> Injected {
    let Some(controller) = cluster.controller().await else {
        return Injected {
            words: "no fault: no node named the active controller".to_owned(),
            failures: vec!["no live node knew the active KRaft controller".to_owned()],
        };
    };
    let role = role_of(cluster, topic, controller).await;
    let back_at = tokio::time::Instant::now() + outage;
    cluster.kill(controller).await;
    let killed_ms = now_ms();
    let mut elected = None;
    while tokio::time::Instant::now() < back_at && elected.is_none() {
        elected = cluster
            .controller()
            .await
            .filter(|node| *node != controller)
            .map(|node| (node, now_ms() - killed_ms));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let moved = leaderships_moved(cluster, topic, controller, killed_ms, back_at).await;
    tokio::time::sleep_until(back_at).await;
    let serving_after = restart(cluster, controller).await;
    let (elected_words, failures) = match elected {
        Some((node, after_ms)) => (
            format!("node {node} controller {after_ms} ms later"),
            vec![],
        ),
        None => (
            "no other controller elected".to_owned(),
            vec![format!(
                "no controller elected within {} s of the kill",
                outage.as_secs()
            )],
        ),
    };
    Injected {
        words: format!(
            "node {controller} ({role}) killed with SIGKILL; {elected_words}; {moved}; started \
             again after {} s (serving {serving_after} ms later)",
            outage.as_secs()
        ),
        failures,
    }
}

/// Restarts every node in turn: SIGTERM (a controlled shutdown), start, and wait until every
/// partition of every topic has all its replicas in sync before the next; the active
/// controller last, as operators do (one controller election, not three).
pub async fn roll(cluster: &KafkaCluster) -> Injected {
    let controller = cluster.controller().await;
    let mut nodes = cluster.nodes();
    nodes.sort_by_key(|node| Some(*node) == controller);
    let mut steps = Vec::new();
    let mut failures = Vec::new();
    for node in nodes {
        let began = tokio::time::Instant::now();
        cluster.stop(node).await;
        let stopped_ms = began.elapsed().as_millis();
        cluster.start_node(node).await;
        let serving_ms = began.elapsed().as_millis();
        match cluster.wait_in_sync(BACK_IN_SYNC_LIMIT).await {
            Ok(_) => steps.push(format!(
                "node {node} stopped in {stopped_ms} ms, serving at {serving_ms} ms, all in \
                 sync at {} ms",
                began.elapsed().as_millis()
            )),
            Err(short) => {
                failures.push(format!(
                    "after node {node}'s restart: {short}; the roll stopped"
                ));
                steps.push(format!("node {node} never back in sync"));
                break;
            }
        }
    }
    let controller = controller.map_or_else(|| "unknown".to_owned(), |node| node.to_string());
    Injected {
        words: format!(
            "rolling restart of the three nodes (SIGTERM, start, wait for every partition's \
             replicas in sync; the controller, node {controller}, last): {}",
            steps.join("; ")
        ),
        failures,
    }
}

/// Freezes (SIGSTOP) a node leading partitions of `topic` ([`leader_to_strike`]) for
/// `outage`, longer than its broker session (6 s), then thaws it (SIGCONT).
pub async fn freeze_leader(cluster: &KafkaCluster, topic: &str, outage: Duration) -> Injected {
    let Some(leader) = leader_to_strike(cluster, topic).await else {
        return no_leader(topic);
    };
    let role = role_of(cluster, topic, leader).await;
    let thaw_at = tokio::time::Instant::now() + outage;
    cluster.pause(leader).await;
    let moved = leaderships_moved(cluster, topic, leader, now_ms(), thaw_at).await;
    tokio::time::sleep_until(thaw_at).await;
    cluster.resume(leader).await;
    Injected {
        words: format!(
            "node {leader} ({role}) frozen with SIGSTOP for {} s (broker session 6 s); \
             {moved}; then SIGCONT",
            outage.as_secs()
        ),
        failures: Vec::new(),
    }
}

/// The node a leader fault strikes: the leader of the lowest partition of `topic` whose
/// leader is not the active controller, or partition 0's when every leader is (one node).
/// Every node is a controller too (combined mode), and killing or freezing the active one
/// is a controller election as well as a leader's loss: the controller kill is a fault of
/// its own. Asks for up to 10 s (a node may be slow to answer).
async fn leader_to_strike(cluster: &KafkaCluster, topic: &str) -> Option<i32> {
    let controller = cluster.controller().await;
    for _ in 0..20 {
        let mut partitions = cluster.partitions(Some(topic)).await.unwrap_or_default();
        partitions.sort_by_key(|state| state.partition);
        let leaders: Vec<i32> = (partitions.iter())
            .map(|state| state.leader)
            .filter(|leader| *leader >= 0)
            .collect();
        let not_controller = leaders.iter().find(|leader| Some(**leader) != controller);
        if let Some(leader) = not_controller.or(leaders.first()) {
            return Some(*leader);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

fn no_leader(topic: &str) -> Injected {
    Injected {
        words: "no fault: no partition had a leader to strike".to_owned(),
        failures: vec![format!(
            "no partition of {topic} had a leader in the metadata"
        )],
    }
}

/// What `node` is to the scenario: the trigger topic's partitions it leads, and whether it
/// is the active controller (in combined mode a node is both, so a controller kill is a
/// broker kill too).
async fn role_of(cluster: &KafkaCluster, topic: &str, node: i32) -> String {
    let led: Vec<i32> = (cluster.partitions(Some(topic)).await.unwrap_or_default())
        .iter()
        .filter(|state| state.leader == node)
        .map(|state| state.partition)
        .collect();
    let controller = cluster.controller().await == Some(node);
    format!(
        "leading trigger partitions {led:?}; {}the active controller",
        if controller { "" } else { "not " }
    )
}

/// Waits, until `until` at most, until no partition of `topic` is led by `node` any more
/// (the controller moves a stopped or silent node's leaderships once its broker session ran
/// out); says how long that took from `since_ms` (the fault), or that it did not happen.
async fn leaderships_moved(
    cluster: &KafkaCluster,
    topic: &str,
    node: i32,
    since_ms: i64,
    until: tokio::time::Instant,
) -> String {
    loop {
        // `None` while no node answers (a frozen one may hold the request).
        let partitions = cluster.partitions(Some(topic)).await;
        let still_led = partitions.map(|partitions| {
            (partitions.iter())
                .filter(|state| state.leader == node)
                .count()
        });
        let after_ms = now_ms() - since_ms;
        match still_led {
            Some(0) => {
                return format!("its trigger partitions led by other nodes {after_ms} ms later");
            }
            _ if tokio::time::Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Some(_) => return format!("the metadata still named it leader {after_ms} ms later"),
            None => return format!("no node answered for the metadata {after_ms} ms later"),
        }
    }
}

/// Starts `node` again; how long until it served (ms).
async fn restart(cluster: &KafkaCluster, node: i32) -> u128 {
    let began = tokio::time::Instant::now();
    cluster.start_node(node).await;
    began.elapsed().as_millis()
}
