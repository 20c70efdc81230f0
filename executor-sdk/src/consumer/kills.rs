//! Remembered KILLs: what a KILL covers beyond the runs it finds.
//!
//! A KILL stops the job's runs that are running or queued here when it arrives (see
//! `control::apply`). It also covers every trigger of that job the scheduler emitted before
//! the KILL was requested that has not reached an executor yet: still waiting in the topic
//! behind a backlog, or sent while no executor was up at all. Such a trigger is refused as
//! killed when it arrives, within the executor's `kill_memory` (default 24 h) of the KILL.
//! A KILL naming one run covers that run whenever it arrives.
//!
//! A starting executor reads the control commands of the last `kill_memory` before its first
//! trigger (`control`), so it knows the KILLs sent while it was down.

use kadence_schemas::{ControlRecord, JobId, TriggerId, TriggerRecord};

/// One remembered KILL.
#[derive(Debug, Clone)]
struct RememberedKill {
    job: Option<JobId>,
    trigger_id: Option<TriggerId>,
    requested_at_ms: i64,
    reason: String,
}

/// The KILLs of the last `memory_ms`.
#[derive(Debug)]
pub(super) struct RememberedKills {
    kills: Vec<RememberedKill>,
    memory_ms: i64,
}

impl RememberedKills {
    /// Remembers KILLs for `memory_ms`.
    pub(super) fn new(memory_ms: i64) -> Self {
        RememberedKills {
            kills: Vec::new(),
            memory_ms,
        }
    }

    /// Remembers `command` (a KILL) with the run message it gives.
    pub(super) fn remember(&mut self, command: &ControlRecord, reason: &str, now_ms: i64) {
        self.forget_older_than(now_ms);
        if command.requested_at_ms < now_ms - self.memory_ms {
            return;
        }
        self.kills.push(RememberedKill {
            job: command.job_id,
            trigger_id: command.trigger_id.clone(),
            requested_at_ms: command.requested_at_ms,
            reason: reason.to_owned(),
        });
    }

    /// The message of the KILL that covers `trigger`, if one does: a KILL of its run, or a
    /// KILL of its job requested at or after the trigger was emitted.
    pub(super) fn covering(&mut self, trigger: &TriggerRecord, now_ms: i64) -> Option<String> {
        self.forget_older_than(now_ms);
        self.kills
            .iter()
            .find(|kill| match (&kill.trigger_id, kill.job) {
                (Some(trigger_id), _) => *trigger_id == trigger.trigger_id,
                (None, Some(job)) => {
                    job == trigger.job_id && trigger.emitted_at_ms <= kill.requested_at_ms
                }
                (None, None) => false,
            })
            .map(|kill| kill.reason.clone())
    }

    fn forget_older_than(&mut self, now_ms: i64) {
        let oldest = now_ms - self.memory_ms;
        self.kills.retain(|kill| kill.requested_at_ms >= oldest);
    }
}

#[cfg(test)]
mod tests {
    use kadence_schemas::{AppName, ControlCommand};

    use super::*;

    const HOUR_MS: i64 = 3_600_000;

    fn kill(job: i64, trigger: Option<&str>, at_ms: i64) -> ControlRecord {
        ControlRecord {
            command: ControlCommand::Kill,
            app: AppName::parse("app").unwrap(),
            job_id: Some(JobId::new(job).unwrap()),
            trigger_id: trigger.map(|id| TriggerId::parse(id).unwrap()),
            reason: None,
            requested_at_ms: at_ms,
        }
    }

    fn trigger(id: &str, emitted_at_ms: i64) -> TriggerRecord {
        let mut trigger = crate::context::tests_support::trigger_record();
        trigger.trigger_id = TriggerId::parse(id).unwrap();
        trigger.job_id = trigger.trigger_id.job_id();
        trigger.emitted_at_ms = emitted_at_ms;
        trigger
    }

    #[test]
    fn a_job_kill_covers_the_triggers_emitted_before_it() {
        let mut kills = RememberedKills::new(HOUR_MS);
        kills.remember(&kill(7, None, 1_000), "killed: stuck", 1_000);
        assert_eq!(
            kills.covering(&trigger("7-900", 900), 2_000).as_deref(),
            Some("killed: stuck")
        );
        assert_eq!(
            kills.covering(&trigger("7-1000", 1_000), 2_000).as_deref(),
            Some("killed: stuck")
        );
        assert_eq!(
            kills.covering(&trigger("7-1001", 1_001), 2_000),
            None,
            "emitted after"
        );
        assert_eq!(
            kills.covering(&trigger("8-900", 900), 2_000),
            None,
            "another job"
        );
    }

    #[test]
    fn a_run_kill_covers_that_run_only_and_kills_are_forgotten() {
        let mut kills = RememberedKills::new(HOUR_MS);
        kills.remember(&kill(7, Some("7-500"), 1_000), "killed: that one", 1_000);
        assert!(kills.covering(&trigger("7-500", 5_000), 2_000).is_some());
        assert!(kills.covering(&trigger("7-400", 400), 2_000).is_none());
        assert!(
            kills
                .covering(&trigger("7-500", 5_000), 1_000 + HOUR_MS + 1)
                .is_none()
        );
        kills.remember(
            &kill(7, None, 1_000),
            "killed: too old",
            1_000 + 2 * HOUR_MS,
        );
        assert!(
            kills
                .covering(&trigger("7-900", 900), 1_000 + 2 * HOUR_MS)
                .is_none()
        );
    }
}
