//! The bridge's beats: one for the bridge itself and one for each live legacy executor, so
//! the scheduler sees the executors that run the runs.
//!
//! Each legacy executor's beat claims the range of the bridge's partitions the bridge hands
//! it (`legacy::split`), and reports as running the jobs whose runs the bridge handed it and
//! waits on. Its executor id is `{bridge id}/xxl-job@{host:port}`: an executor fronted by two
//! bridges beats once through each, for the partitions each hands it. The bridge's own beat
//! claims no partition (the legacy executors own them), so `kadence executor list` shows the
//! bridge beside them, and the lost-run monitor and FAILOVER see the executor that owns each
//! partition. An executor that leaves (its beat unanswered, its registration removed or run
//! out) gets one last STOPPING beat owning nothing, which takes it out of routing at once.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use kadence_executor::BeatPlan;
use kadence_schemas::{ExecutorBeat, ExecutorState};

use crate::legacy::{Address, LegacyExecutors, split};
use crate::runs::PendingRuns;

/// The version a legacy executor's beat shows.
const LEGACY_VERSION: &str = concat!(
    "xxl-job (via kadence-bridge ",
    env!("CARGO_PKG_VERSION"),
    ")"
);
/// The version the bridge's own beat shows.
const BRIDGE_VERSION: &str = concat!("kadence-bridge-", env!("CARGO_PKG_VERSION"));

/// The [`BeatPlan`] of a bridge (see the module docs).
pub struct LegacyBeats {
    legacy: Arc<LegacyExecutors>,
    runs: Arc<PendingRuns>,
    /// The executors the previous beat named, to say goodbye to those that left.
    named: Mutex<BTreeSet<Address>>,
}

impl LegacyBeats {
    /// Beats for the executors of `legacy`, reporting the runs of `runs`.
    pub fn new(legacy: Arc<LegacyExecutors>, runs: Arc<PendingRuns>) -> LegacyBeats {
        LegacyBeats {
            legacy,
            runs,
            named: Mutex::new(BTreeSet::new()),
        }
    }
}

/// The executor id a legacy executor at `address` beats under through the bridge `bridge_id`.
pub fn legacy_executor_id(bridge_id: &str, address: &str) -> String {
    format!("{bridge_id}/xxl-job@{}", host_port(address))
}

/// `http://10.0.0.5:9999/` → `10.0.0.5:9999`.
fn host_port(address: &str) -> &str {
    let without_scheme = address.split_once("://").map_or(address, |(_, rest)| rest);
    without_scheme.trim_end_matches('/')
}

impl BeatPlan for LegacyBeats {
    fn beats(&self, own: ExecutorBeat) -> Vec<ExecutorBeat> {
        let live = match own.state {
            // Draining or stopped: the bridge hands nothing more to anyone.
            ExecutorState::Stopping => Vec::new(),
            ExecutorState::Running => self.legacy.live(own.sent_at_ms),
        };
        let legacy_beat = |address: &str, owned_partitions: Vec<i32>, state| ExecutorBeat {
            executor_id: legacy_executor_id(&own.executor_id, address),
            host: host_port(address).to_owned(),
            version: LEGACY_VERSION.to_owned(),
            handlers: Vec::new(),
            owned_partitions,
            running_jobs: self.runs.jobs_running_on(address),
            queued_jobs: Vec::new(),
            state,
            ..own.clone()
        };
        let mut beats: Vec<ExecutorBeat> = split(&own.owned_partitions, &live)
            .into_iter()
            .map(|(address, partitions)| legacy_beat(&address, partitions, ExecutorState::Running))
            .collect();
        let now_named: BTreeSet<Address> = live.into_iter().collect();
        let mut named = self.named.lock().expect("named executors lock");
        for gone in named.difference(&now_named) {
            beats.push(legacy_beat(gone, Vec::new(), ExecutorState::Stopping));
        }
        *named = now_named;
        drop(named);
        beats.push(ExecutorBeat {
            version: BRIDGE_VERSION.to_owned(),
            owned_partitions: Vec::new(),
            ..own
        });
        beats
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kadence_schemas::AppName;

    use super::*;

    fn own(state: ExecutorState, owned_partitions: Vec<i32>) -> ExecutorBeat {
        ExecutorBeat {
            executor_id: "bridge-1".into(),
            app: AppName::parse("legacy").unwrap(),
            host: "bridge-host".into(),
            version: "0.1.0".into(),
            handlers: Vec::new(),
            owned_partitions,
            running_jobs: vec![7],
            queued_jobs: vec![8],
            state,
            sent_at_ms: 10_000,
            features: vec![ExecutorBeat::ROUND_SIGNATURES.to_owned()],
        }
    }

    #[test]
    fn each_live_executor_beats_its_range_and_a_leaver_says_goodbye_once() {
        let legacy = Arc::new(LegacyExecutors::new(Duration::from_secs(90)));
        let runs = Arc::new(PendingRuns::default());
        legacy.register("http://10.0.0.1:9999/", 9_000);
        legacy.register("http://10.0.0.2:9999/", 9_000);
        let _waiting = runs.expect(5, "http://10.0.0.2:9999/", 42);
        let plan = LegacyBeats::new(Arc::clone(&legacy), runs);

        let beats = plan.beats(own(ExecutorState::Running, vec![0, 1, 2, 3]));
        let summary: Vec<(&str, &[i32], &[i64], ExecutorState)> = (beats.iter())
            .map(|beat| {
                let id = beat.executor_id.as_str();
                (
                    id,
                    &beat.owned_partitions[..],
                    &beat.running_jobs[..],
                    beat.state,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "bridge-1/xxl-job@10.0.0.1:9999",
                    &[0, 1][..],
                    &[][..],
                    ExecutorState::Running
                ),
                (
                    "bridge-1/xxl-job@10.0.0.2:9999",
                    &[2, 3][..],
                    &[42][..],
                    ExecutorState::Running
                ),
                ("bridge-1", &[][..], &[7][..], ExecutorState::Running),
            ]
        );
        assert_eq!(beats[1].host, "10.0.0.2:9999");

        legacy.answered("http://10.0.0.1:9999/", false);
        let beats = plan.beats(own(ExecutorState::Running, vec![0, 1, 2, 3]));
        let ids: Vec<(&str, &[i32], ExecutorState)> = (beats.iter())
            .map(|beat| {
                (
                    beat.executor_id.as_str(),
                    &beat.owned_partitions[..],
                    beat.state,
                )
            })
            .collect();
        assert_eq!(
            ids,
            [
                (
                    "bridge-1/xxl-job@10.0.0.2:9999",
                    &[0, 1, 2, 3][..],
                    ExecutorState::Running
                ),
                (
                    "bridge-1/xxl-job@10.0.0.1:9999",
                    &[][..],
                    ExecutorState::Stopping
                ),
                ("bridge-1", &[][..], ExecutorState::Running),
            ]
        );
        let again = plan.beats(own(ExecutorState::Running, vec![0, 1, 2, 3]));
        assert_eq!(again.len(), 2, "the goodbye is said once");

        // Stopping: every legacy executor says goodbye with the bridge.
        let last = plan.beats(own(ExecutorState::Stopping, Vec::new()));
        let states: Vec<ExecutorState> = last.iter().map(|beat| beat.state).collect();
        assert_eq!(states, [ExecutorState::Stopping, ExecutorState::Stopping]);
    }
}
