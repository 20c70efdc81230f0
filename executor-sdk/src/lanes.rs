//! Block strategies: what happens to a trigger while the same job is running here (XXL-JOB's
//! `ExecutorBlockStrategyEnum`, plus CONCURRENT).
//!
//! The consumer loop owns one [`Lanes`]: per job, the runs going and the triggers queued.
//! - SERIAL_EXECUTION: queue behind the running run; FIFO.
//! - DISCARD_LATER: refuse while the job runs or has a queue (the refusal is a failure result).
//! - COVER_EARLY: cancel the running run and every queued one (each gets a failure result
//!   saying it was covered), then run the new one.
//! - CONCURRENT: run in parallel, at most `concurrent_cap` at once per job; beyond that, queue.
//!
//! The strategy is the one each trigger carries, so an edit of the job applies from its next
//! trigger on. The structure is pure bookkeeping and never reads the time;
//! [`Dispatch`](crate::dispatch::Dispatch) turns its decisions into runs started and triggers
//! refused, and its tests drive the strategies with real runs under tokio's paused time.

use std::collections::{HashMap, VecDeque};

use kadence_schemas::{BlockStrategy, JobId, TriggerId};
use tokio_util::sync::CancellationToken;

use crate::beats::Activity;
use crate::runner::StopReason;

/// What to do with a trigger that just arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Start it now.
    Run,
    /// Queue it behind the job's runs.
    Queue,
    /// Refuse it (DISCARD_LATER): publish a failure result with this message.
    Discard(String),
    /// Cover the job's runs (COVER_EARLY): call [`Lanes::cover`], then start it.
    Cover,
}

/// A run in progress, with the handle to stop it.
pub(crate) struct Active {
    pub(crate) trigger_id: TriggerId,
    pub(crate) cancellation: CancellationToken,
    pub(crate) stop_reason: StopReason,
}

/// A trigger waiting in its job's lane.
struct Queued<P> {
    strategy: BlockStrategy,
    trigger_id: TriggerId,
    pending: P,
}

struct Lane<P> {
    running: Vec<Active>,
    queued: VecDeque<Queued<P>>,
}

impl<P> Default for Lane<P> {
    fn default() -> Self {
        Lane {
            running: Vec::new(),
            queued: VecDeque::new(),
        }
    }
}

/// Runs and queues per job. `P` is whatever the consumer needs to start a queued trigger.
pub(crate) struct Lanes<P> {
    lanes: HashMap<JobId, Lane<P>>,
    concurrent_cap: usize,
    executor_id: String,
}

impl<P> Lanes<P> {
    pub(crate) fn new(concurrent_cap: usize, executor_id: String) -> Self {
        Lanes {
            lanes: HashMap::new(),
            concurrent_cap: concurrent_cap.max(1),
            executor_id,
        }
    }

    /// The jobs with a run in progress and with runs queued, ascending (for beats).
    pub(crate) fn activity(&self) -> Activity {
        let mut activity = Activity::default();
        for (job, lane) in &self.lanes {
            if !lane.running.is_empty() {
                activity.running_jobs.push(job.get());
            }
            if !lane.queued.is_empty() {
                activity.queued_jobs.push(job.get());
            }
        }
        activity.running_jobs.sort_unstable();
        activity.queued_jobs.sort_unstable();
        activity
    }

    /// Decides what happens to a trigger of `job` carrying `strategy`.
    pub(crate) fn admit(&mut self, job: JobId, strategy: BlockStrategy) -> Decision {
        let lane = self.lanes.entry(job).or_default();
        let busy = !lane.running.is_empty() || !lane.queued.is_empty();
        match strategy {
            BlockStrategy::SerialExecution if busy => Decision::Queue,
            BlockStrategy::DiscardLater if busy => Decision::Discard(format!(
                "discarded: job {job} is already running or queued on executor {} \
                 (block strategy DISCARD_LATER)",
                self.executor_id
            )),
            BlockStrategy::CoverEarly if busy => Decision::Cover,
            BlockStrategy::Concurrent
                if lane.running.len() >= self.concurrent_cap || !lane.queued.is_empty() =>
            {
                Decision::Queue
            }
            _ => Decision::Run,
        }
    }

    /// Queues the trigger `trigger_id` of `job`.
    pub(crate) fn queue(
        &mut self,
        job: JobId,
        strategy: BlockStrategy,
        trigger_id: TriggerId,
        pending: P,
    ) {
        self.lanes.entry(job).or_default().queued.push_back(Queued {
            strategy,
            trigger_id,
            pending,
        });
    }

    /// Records that a run of `job` started.
    pub(crate) fn started(&mut self, job: JobId, active: Active) {
        self.lanes.entry(job).or_default().running.push(active);
    }

    /// Stops every run of `job` with `reason` and empties its queue, returning the queued
    /// triggers so the caller can fail them with the same reason.
    pub(crate) fn stop_all(&mut self, job: JobId, reason: &str) -> Vec<P> {
        let Some(lane) = self.lanes.get_mut(&job) else {
            return Vec::new();
        };
        for active in &lane.running {
            active.stop_reason.set(reason.to_owned());
            active.cancellation.cancel();
        }
        lane.queued.drain(..).map(|queued| queued.pending).collect()
    }

    /// Stops the one run or queued trigger `trigger_id` with `reason`; returns it if it was
    /// queued, so the caller can fail it.
    pub(crate) fn stop_trigger(&mut self, trigger_id: &TriggerId, reason: &str) -> Option<P> {
        for lane in self.lanes.values_mut() {
            if let Some(active) = lane
                .running
                .iter()
                .find(|active| &active.trigger_id == trigger_id)
            {
                active.stop_reason.set(reason.to_owned());
                active.cancellation.cancel();
                return None;
            }
            if let Some(position) = lane
                .queued
                .iter()
                .position(|queued| &queued.trigger_id == trigger_id)
            {
                return lane.queued.remove(position).map(|queued| queued.pending);
            }
        }
        None
    }

    /// COVER_EARLY: stops `job`'s runs and queue in favour of trigger `by`; returns the reason
    /// and the queued triggers to fail with it.
    pub(crate) fn cover(&mut self, job: JobId, by: &TriggerId) -> (String, Vec<P>) {
        let reason = format!("covered by trigger {by} (block strategy COVER_EARLY)");
        let queued = self.stop_all(job, &reason);
        (reason, queued)
    }

    /// Records that `trigger_id` of `job` finished; returns the queued triggers that may
    /// start now, in order.
    pub(crate) fn finished(&mut self, job: JobId, trigger_id: &TriggerId) -> Vec<P> {
        let Some(lane) = self.lanes.get_mut(&job) else {
            return Vec::new();
        };
        lane.running
            .retain(|active| &active.trigger_id != trigger_id);
        let mut ready = Vec::new();
        while let Some(queued) = lane.queued.front() {
            let may_start = match queued.strategy {
                BlockStrategy::Concurrent => lane.running.len() + ready.len() < self.concurrent_cap,
                _ => lane.running.is_empty() && ready.is_empty(),
            };
            if !may_start {
                break;
            }
            let queued = lane.queued.pop_front().expect("front exists");
            ready.push(queued.pending);
        }
        if lane.running.is_empty() && lane.queued.is_empty() && ready.is_empty() {
            self.lanes.remove(&job);
        }
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobId {
        JobId::new(5).unwrap()
    }

    fn trigger(n: i64) -> TriggerId {
        TriggerId::scheduled(job(), n)
    }

    fn active(n: i64) -> Active {
        Active {
            trigger_id: trigger(n),
            cancellation: CancellationToken::new(),
            stop_reason: StopReason::default(),
        }
    }

    #[test]
    fn serial_execution_queues_in_order() {
        let mut lanes: Lanes<i64> = Lanes::new(4, "e1".into());
        assert_eq!(
            lanes.admit(job(), BlockStrategy::SerialExecution),
            Decision::Run
        );
        lanes.started(job(), active(1));
        for n in 2..=3 {
            assert_eq!(
                lanes.admit(job(), BlockStrategy::SerialExecution),
                Decision::Queue
            );
            lanes.queue(job(), BlockStrategy::SerialExecution, trigger(n), n);
        }
        assert_eq!(lanes.finished(job(), &trigger(1)), vec![2]);
        lanes.started(job(), active(2));
        assert_eq!(lanes.finished(job(), &trigger(2)), vec![3]);
        lanes.started(job(), active(3));
        assert!(lanes.finished(job(), &trigger(3)).is_empty());
        assert!(lanes.lanes.is_empty(), "an idle job leaves no lane behind");
    }

    #[test]
    fn discard_later_refuses_while_busy() {
        let mut lanes: Lanes<i64> = Lanes::new(4, "e1".into());
        assert_eq!(
            lanes.admit(job(), BlockStrategy::DiscardLater),
            Decision::Run
        );
        lanes.started(job(), active(1));
        match lanes.admit(job(), BlockStrategy::DiscardLater) {
            Decision::Discard(message) => {
                assert!(
                    message.contains("job 5 is already running or queued on executor e1"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
        lanes.finished(job(), &trigger(1));
        assert_eq!(
            lanes.admit(job(), BlockStrategy::DiscardLater),
            Decision::Run
        );
    }

    #[test]
    fn cover_early_stops_the_running_and_queued_runs() {
        let mut lanes: Lanes<i64> = Lanes::new(4, "e1".into());
        let running = active(1);
        let (token, reason) = (running.cancellation.clone(), running.stop_reason.clone());
        lanes.started(job(), running);
        lanes.queue(job(), BlockStrategy::SerialExecution, trigger(2), 2);
        assert_eq!(
            lanes.admit(job(), BlockStrategy::CoverEarly),
            Decision::Cover
        );
        let (why, queued) = lanes.cover(job(), &trigger(3));
        assert_eq!(queued, vec![2]);
        assert_eq!(why, "covered by trigger 5-3 (block strategy COVER_EARLY)");
        assert!(token.is_cancelled());
        let _ = reason; // read by the runner when the run stops; see the runner tests
        lanes.started(job(), active(3));
        assert!(
            lanes.finished(job(), &trigger(1)).is_empty(),
            "nothing queued any more"
        );
    }

    #[test]
    fn concurrent_runs_up_to_the_cap_then_queues() {
        let mut lanes: Lanes<i64> = Lanes::new(2, "e1".into());
        for n in 1..=2 {
            assert_eq!(lanes.admit(job(), BlockStrategy::Concurrent), Decision::Run);
            lanes.started(job(), active(n));
        }
        assert_eq!(
            lanes.admit(job(), BlockStrategy::Concurrent),
            Decision::Queue
        );
        lanes.queue(job(), BlockStrategy::Concurrent, trigger(3), 3);
        assert_eq!(lanes.finished(job(), &trigger(1)), vec![3]);
    }
}
