//! A scheduler node killed under load, for the throughput benchmark's `--kill-node-at`: the
//! kill -9 of the last node, the time until the survivor owns every schedule shard, the wait
//! until the dead node's fire batches were claimed and emitted, and the audit of the trigger
//! topic for fires lost or emitted twice.

use std::time::{Duration, Instant};

use kadence_tests::triggers::{FireAudit, read_triggers};

use super::{APP, Database, PARTITIONS, Serve, now_ms, sleep_until_ms};

/// What a kill -9 of a scheduler node in the middle of the window did.
pub struct FaultOutcome {
    /// Seconds into the window the node was killed at.
    pub killed_at_s: u64,
    /// From the kill to the survivor owning every schedule shard, ms.
    pub takeover_ms: i64,
    /// The audit of every job's fires over the window, from the trigger topic.
    pub audit: FireAudit,
}

impl FaultOutcome {
    /// Audits every fire of jobs `1..=jobs` in `window` from the trigger topic of `prefix` on
    /// `brokers`, after the last node was killed `killed_at_s` into it.
    pub async fn audit(
        (brokers, prefix): (&str, &str),
        jobs: usize,
        window: (i64, i64),
        (killed_at_s, takeover_ms): (u64, i64),
    ) -> FaultOutcome {
        let topic = format!("{prefix}.triggers.{APP}");
        let records = read_triggers(brokers, &topic, PARTITIONS).await;
        let due: Vec<i64> = (1..=jobs as i64).collect();
        FaultOutcome {
            killed_at_s,
            takeover_ms,
            audit: FireAudit::of(&records, &due, window.0, window.1),
        }
    }
}

/// The node id of scheduler node `index` in a benchmark.
pub fn node_id(index: usize) -> String {
    format!("bench-node-{index}")
}

/// Kills the last of `serves` with SIGKILL at `at_ms` and waits until node 0 owns every
/// schedule shard; returns how long that took, ms.
pub async fn kill_and_time_takeover(database: &Database, serves: &[Serve], at_ms: i64) -> i64 {
    sleep_until_ms(at_ms).await;
    let victim = serves.last().expect("nodes").pid();
    let killed = std::process::Command::new("kill")
        .args(["-9", &victim.to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success(), "kill -9 {victim}");
    let killed_ms = now_ms();
    let survivor = node_id(0);
    loop {
        let owned = database
            .integers(
                &format!(
                    "SELECT COUNT(*), SUM(CASE WHEN owner_node = '{survivor}' THEN 1 ELSE 0 END) \
                     FROM schedule_shards"
                ),
                &[],
            )
            .await;
        if owned[0][0] == owned[0][1] {
            return now_ms() - killed_ms;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (at most a minute) until no fire due before `until_ms` is still pending (no fire
/// batch waits for one): the dead node's batches are claimed once their lease ends.
pub async fn wait_until_emitted(database: &Database, until_ms: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let pending = database
            .integers(
                "SELECT COUNT(*) FROM fire_batches WHERE pending_from_ms < $1",
                &[until_ms],
            )
            .await;
        if pending[0][0] == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
