//! The end of every scenario: stop the jobs, read what the trigger topic holds, wait until
//! every fire emitted has completed (or [`DRAIN_LIMIT`] passed), and count.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use kadence_schemas::TriggerRecord;

use super::api::{APP, PARTITIONS};
use super::stack::Stack;
use crate::now_ms;
use crate::triggers::{FireAudit, read_triggers_among_others};

/// How long the emitted fires may take to complete after the jobs stopped before the ones
/// still open count as lost.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(120);

/// How many of the fires not completed a report names, each with how its run stands.
const LOST_SHOWN: usize = 20;

/// What the topic and the API say once a scenario's load stopped.
pub struct Outcome {
    /// The trigger records of the app, every copy.
    pub records: Vec<TriggerRecord>,
    /// The audit of the window: fires due, missing, emitted twice, misfires.
    pub audit: FireAudit,
    /// Trigger id → when its run finished (ms), for every succeeded run of the app.
    pub succeeded: HashMap<String, i64>,
    /// Distinct trigger ids of the audited jobs scheduled in the window, and when each was
    /// first emitted.
    pub emitted: BTreeMap<String, i64>,
    /// Emitted ids without a succeeded run when the drain ended.
    pub not_completed: Vec<String>,
    /// How the runs of the first of those stood then (see [`Outcome::lost_details`]).
    not_completed_states: Vec<String>,
    /// From the jobs' stop until the last emitted fire completed.
    pub drained_after_ms: Option<i64>,
}

impl Outcome {
    /// Stops `jobs`, reads the topic of the stack's app and waits for the emitted fires of
    /// the window `[from_ms, to_ms)` to complete.
    pub async fn collect(
        stack: &Stack,
        brokers: &str,
        prefix: &str,
        jobs: &[i64],
        window: (i64, i64),
    ) -> Outcome {
        Outcome::collect_of((APP, PARTITIONS), stack, brokers, prefix, jobs, window).await
    }

    /// [`collect`](Self::collect) for the jobs of another app of the stack, `app` with
    /// `partitions` partitions.
    pub async fn collect_of(
        (app, partitions): (&str, i32),
        stack: &Stack,
        brokers: &str,
        prefix: &str,
        jobs: &[i64],
        (from_ms, to_ms): (i64, i64),
    ) -> Outcome {
        stack.api.stop_jobs(jobs).await;
        let stopped_ms = now_ms();
        // The last fires' runs end within a few seconds of the stop; the topic is read to
        // where its records stop.
        tokio::time::sleep(Duration::from_secs(5)).await;
        // Passing over what is not a trigger: a scenario may have put such records there.
        let records =
            read_triggers_among_others(brokers, &format!("{prefix}.triggers.{app}"), partitions)
                .await;
        let audit = FireAudit::of(&records, jobs, from_ms, to_ms);
        let mut emitted = BTreeMap::new();
        for record in records.iter().filter(|record| {
            jobs.contains(&record.job_id.get())
                && (audit.from_ms..to_ms).contains(&record.scheduled_at_ms)
        }) {
            let first = emitted
                .entry(record.trigger_id.as_str().to_owned())
                .or_insert(record.emitted_at_ms);
            *first = (*first).min(record.emitted_at_ms);
        }
        let deadline = stopped_ms + i64::try_from(DRAIN_LIMIT.as_millis()).unwrap_or(0);
        let (succeeded, not_completed) = loop {
            let succeeded = stack.api.succeeded_of(app).await;
            let open: Vec<String> = emitted
                .keys()
                .filter(|id| !succeeded.contains_key(*id))
                .cloned()
                .collect();
            if open.is_empty() || now_ms() > deadline {
                break (succeeded, open);
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        let drained_after_ms = not_completed.is_empty().then(|| now_ms() - stopped_ms);
        let not_completed_states = if not_completed.is_empty() {
            Vec::new()
        } else {
            let states = stack.api.run_states_of(app).await;
            (not_completed.iter().take(LOST_SHOWN))
                .map(|id| {
                    let state = states.get(id).map_or("no run row", String::as_str);
                    format!("{id}: {state}")
                })
                .collect()
        };
        Outcome {
            records,
            audit,
            succeeded,
            emitted,
            not_completed,
            not_completed_states,
            drained_after_ms,
        }
    }

    /// Emitted fires (distinct ids) of the window.
    pub fn emitted_count(&self) -> usize {
        self.emitted.len()
    }

    /// Emitted fires of the window whose run succeeded.
    pub fn completed(&self) -> usize {
        self.emitted.len() - self.not_completed.len()
    }

    /// Fires due without a record plus fires emitted and never completed.
    pub fn lost(&self) -> usize {
        self.audit.missing.len() + self.not_completed.len()
    }

    /// Which fires are lost, for the report's details.
    pub fn lost_details(&self) -> Vec<String> {
        let mut details = vec![self.audit.summary()];
        if !self.not_completed.is_empty() {
            details.push(format!(
                "{} emitted and not completed {} s after the stop; the first {LOST_SHOWN} and \
                 their runs: {:?}",
                self.not_completed.len(),
                DRAIN_LIMIT.as_secs(),
                self.not_completed_states,
            ));
        }
        details
    }

    /// The columns every scenario shows first: fires due, emitted, completed, emitted twice
    /// (same id), lost.
    pub fn columns(&self) -> Vec<(&'static str, String)> {
        self.columns_with_lost(self.lost())
    }

    /// [`columns`](Self::columns) where the scenario counted the lost fires its own way.
    pub fn columns_with_lost(&self, lost: usize) -> Vec<(&'static str, String)> {
        vec![
            ("fires due", self.audit.expected.to_string()),
            ("emitted", self.emitted_count().to_string()),
            ("completed", self.completed().to_string()),
            (
                "emitted twice (same id)",
                self.audit.doubled.len().to_string(),
            ),
            ("lost", lost.to_string()),
        ]
    }
}

/// The scheduled time (ms) in trigger id `{job}-{scheduled ms}`.
pub fn scheduled_ms(id: &str) -> Option<i64> {
    id.rsplit_once('-')?.1.parse().ok()
}

/// Whether trigger id `{job}-{scheduled ms}` was due within `range`.
pub fn due_in(id: &str, range: std::ops::Range<i64>) -> bool {
    scheduled_ms(id).is_some_and(|scheduled| range.contains(&scheduled))
}
