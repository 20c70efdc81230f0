//! Dispatch: the way of an admitted trigger to its start, and what a kill or the end of a run
//! changes on that way.
//!
//! A trigger is first held until its `scheduled_at_ms` (`hold`), then meets its job's block
//! strategy (`lanes`): it starts, queues, is refused (DISCARD_LATER) or covers what runs
//! (COVER_EARLY). [`Dispatch`] answers every event — a trigger admitted, a held one due, a run
//! ended, a kill — with [`Step`]s: *start this run* (its lane already counts it, and its
//! cancellation is wired) or *refuse that trigger with this message*. The consumer carries
//! them out with Kafka; nothing here touches Kafka, so the tests below drive the hold and the
//! block strategies with real handler runs under tokio's paused time.

use kadence_schemas::{JobId, TriggerId, TriggerRecord};
use tokio_util::sync::CancellationToken;

use crate::beats::Activity;
use crate::clock::Clock;
use crate::hold::Held;
use crate::lanes::{Active, Decision, Lanes};
use crate::runner::StopReason;

/// A run to start now.
pub(crate) struct Start<P> {
    /// What the consumer needs to run the trigger.
    pub(crate) pending: P,
    /// Stops the run (block strategy, kill); a child of the executor's hard stop.
    pub(crate) cancellation: CancellationToken,
    /// Why the run was stopped, when it was.
    pub(crate) stop_reason: StopReason,
}

/// What the consumer does next.
pub(crate) enum Step<P> {
    /// Start the run.
    Start(Start<P>),
    /// Do not run the trigger: publish a failure result with this message.
    Refuse(P, String),
}

/// The hold and the lanes of one executor. `P` is what the consumer needs to start a trigger.
pub(crate) struct Dispatch<P> {
    held: Held<P>,
    lanes: Lanes<P>,
    /// The parent of every run's cancellation: the executor's hard stop.
    hard_stop: CancellationToken,
}

impl<P: AsRef<TriggerRecord>> Dispatch<P> {
    /// Reads the time from `clock`; runs at most `concurrent_cap` triggers of a CONCURRENT job
    /// at once; names `executor_id` in refusals; cancels every run when `hard_stop` fires.
    pub(crate) fn new(
        clock: Clock,
        concurrent_cap: usize,
        executor_id: String,
        hard_stop: CancellationToken,
    ) -> Self {
        Dispatch {
            held: Held::new(clock),
            lanes: Lanes::new(concurrent_cap, executor_id),
            hard_stop,
        }
    }

    /// A trigger that passed admission: held until its millisecond, or placed in its job's
    /// lane at once when that has come.
    pub(crate) fn admit(&mut self, pending: P) -> Vec<Step<P>> {
        let trigger = pending.as_ref();
        let (at_ms, job, trigger_id) = (
            trigger.scheduled_at_ms,
            trigger.job_id,
            trigger.trigger_id.clone(),
        );
        let mut steps = Vec::new();
        if let Some(due) = self.held.hold(at_ms, job, trigger_id, pending) {
            self.place(due, &mut steps);
        }
        steps
    }

    /// Resolves when a held trigger is due; then call [`release_due`](Self::release_due).
    #[cfg(test)]
    pub(crate) async fn due(&self) {
        self.held.due().await
    }

    /// When the next held trigger is due (ms since the epoch), if one is held: the consumer
    /// sets its one timer to it, then calls [`release_due`](Self::release_due).
    pub(crate) fn next_release_ms(&self) -> Option<i64> {
        self.held.next_release_ms()
    }

    /// Places every held trigger that is due, in order.
    pub(crate) fn release_due(&mut self) -> Vec<Step<P>> {
        let due = self.held.release_due();
        let mut steps = Vec::with_capacity(due.len());
        for ready in due {
            self.place(ready, &mut steps);
        }
        steps
    }

    /// The run `trigger_id` of `job` ended: its lane may start queued triggers.
    pub(crate) fn finished(&mut self, job: JobId, trigger_id: &TriggerId) -> Vec<Step<P>> {
        let next = self.lanes.finished(job, trigger_id);
        next.into_iter().map(|ready| self.start(ready)).collect()
    }

    /// Kills `job`'s runs and triggers, or the one trigger `trigger_id`, or both: running
    /// runs are cancelled with `reason`, queued and held triggers are refused with it.
    pub(crate) fn kill(
        &mut self,
        job: Option<JobId>,
        trigger_id: Option<&TriggerId>,
        reason: &str,
    ) -> Vec<Step<P>> {
        let mut refused = Vec::new();
        if let Some(job) = job {
            refused.extend(self.lanes.stop_all(job, reason));
            refused.extend(self.held.take_job(job));
        }
        if let Some(trigger_id) = trigger_id {
            refused.extend(self.lanes.stop_trigger(trigger_id, reason));
            refused.extend(self.held.take_trigger(trigger_id));
        }
        let refuse = |pending| Step::Refuse(pending, reason.to_owned());
        refused.into_iter().map(refuse).collect()
    }

    /// How many triggers are held until their time.
    pub(crate) fn held_count(&self) -> usize {
        self.held.len()
    }

    /// How many held triggers `matches` says yes to.
    pub(crate) fn held_matching(&self, matches: impl Fn(&P) -> bool) -> usize {
        self.held.count_matching(matches)
    }

    /// What the beats report: running and queued jobs, held triggers counting as queued.
    pub(crate) fn activity(&self) -> Activity {
        let mut activity = self.lanes.activity();
        activity
            .queued_jobs
            .extend(self.held.jobs().map(JobId::get));
        activity.queued_jobs.sort_unstable();
        activity.queued_jobs.dedup();
        activity
    }

    /// Applies the job's block strategy to a trigger that is due; adds what to do to `steps`.
    fn place(&mut self, ready: P, steps: &mut Vec<Step<P>>) {
        let trigger = ready.as_ref();
        let (job, strategy) = (trigger.job_id, trigger.block_strategy);
        match self.lanes.admit(job, strategy) {
            Decision::Run => steps.push(self.start(ready)),
            Decision::Queue => {
                let trigger_id = trigger.trigger_id.clone();
                self.lanes.queue(job, strategy, trigger_id, ready);
            }
            Decision::Discard(message) => steps.push(Step::Refuse(ready, message)),
            Decision::Cover => {
                let (reason, covered) = self.lanes.cover(job, &trigger.trigger_id);
                steps.extend(
                    covered
                        .into_iter()
                        .map(|queued| Step::Refuse(queued, reason.clone())),
                );
                steps.push(self.start(ready));
            }
        }
    }

    /// Records the run in its lane and hands it to the consumer.
    fn start(&mut self, ready: P) -> Step<P> {
        let trigger = ready.as_ref();
        let cancellation = self.hard_stop.child_token();
        let stop_reason = StopReason::default();
        let active = Active {
            trigger_id: trigger.trigger_id.clone(),
            cancellation: cancellation.clone(),
            stop_reason: stop_reason.clone(),
        };
        self.lanes.started(trigger.job_id, active);
        Step::Start(Start {
            pending: ready,
            cancellation,
            stop_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    //! Each test feeds triggers (and kills) in at given milliseconds, runs every started
    //! trigger through the real runner with a handler that sleeps `params` ms, and compares
    //! what happened, and when, with what must happen. Time is tokio's paused time: the
    //! milliseconds are exact, and nobody sleeps for real.

    use std::collections::VecDeque;
    use std::sync::Arc;
    use std::time::Duration;

    use kadence_schemas::BlockStrategy;
    use tokio::sync::mpsc;

    use super::*;
    use crate::context::RunPlace;
    use crate::context::tests_support::trigger_record;
    use crate::handler::{HandlerFn, erase};
    use crate::joblog::JobLogger;
    use crate::runner::{RunOutcome, run_handler};

    const EXECUTOR: &str = "e1";

    #[derive(Debug, PartialEq, Eq)]
    enum Event {
        Started(String, i64),
        Ended(String, i32, Option<String>, i64),
        Refused(String, String, i64),
    }
    use Event::*;

    enum Input {
        Arrive(Arc<TriggerRecord>),
        Kill(Option<JobId>, Option<TriggerId>, &'static str),
    }

    /// Trigger `n` of job `job`, due at `scheduled_at_ms`, running `run_ms` ms.
    fn trigger(
        job: i64,
        n: i64,
        strategy: BlockStrategy,
        scheduled_at_ms: i64,
        run_ms: u64,
    ) -> Input {
        let job = JobId::new(job).unwrap();
        Input::Arrive(Arc::new(TriggerRecord {
            trigger_id: TriggerId::scheduled(job, n),
            job_id: job,
            block_strategy: strategy,
            scheduled_at_ms,
            params: run_ms.to_string(),
            ..trigger_record()
        }))
    }

    fn id(job: i64, n: i64) -> String {
        format!("{job}-{n}")
    }

    fn sleeper() -> HandlerFn {
        erase(|ctx: crate::JobContext| async move {
            let run_ms: u64 = ctx.params().parse()?;
            tokio::time::sleep(Duration::from_millis(run_ms)).await;
            Ok(())
        })
    }

    /// Plays `inputs` (each at its ms, in order) against a dispatch with `concurrent_cap`, on
    /// a clock at 0, until no run is going and nothing is queued or held.
    async fn play(concurrent_cap: usize, inputs: Vec<(i64, Input)>) -> Vec<Event> {
        let clock = Clock::following_tokio(0);
        let mut dispatch = Dispatch::new(
            clock,
            concurrent_cap,
            EXECUTOR.to_owned(),
            CancellationToken::new(),
        );
        let (ended_tx, mut ended_rx) =
            mpsc::unbounded_channel::<(Arc<TriggerRecord>, RunOutcome)>();
        let mut inputs = VecDeque::from(inputs);
        let (mut events, mut running) = (Vec::new(), 0usize);
        loop {
            let idle = running == 0 && dispatch.activity() == Activity::default();
            if inputs.is_empty() && idle {
                return events;
            }
            let next_input_ms = inputs.front().map(|(at, _)| *at);
            let steps = tokio::select! {
                biased;
                Some((trigger, outcome)) = ended_rx.recv() => {
                    running -= 1;
                    let id = trigger.trigger_id.to_string();
                    events.push(Ended(id, outcome.code, outcome.message, clock.now_ms()));
                    dispatch.finished(trigger.job_id, &trigger.trigger_id)
                }
                _ = dispatch.due() => dispatch.release_due(),
                _ = clock.sleep_until_ms(next_input_ms.unwrap_or(0)), if next_input_ms.is_some() => {
                    match inputs.pop_front().expect("an input is next").1 {
                        Input::Arrive(trigger) => dispatch.admit(trigger),
                        Input::Kill(job, trigger_id, reason) => dispatch.kill(job, trigger_id.as_ref(), reason),
                    }
                }
            };
            for step in steps {
                match step {
                    Step::Start(start) => {
                        running += 1;
                        events.push(Started(
                            start.pending.trigger_id.to_string(),
                            clock.now_ms(),
                        ));
                        let ended = ended_tx.clone();
                        tokio::spawn(async move {
                            let trigger = start.pending;
                            let outcome = run_handler(
                                sleeper(),
                                Arc::clone(&trigger),
                                start.cancellation,
                                start.stop_reason,
                                JobLogger::new(10),
                                RunPlace::default(),
                            )
                            .await;
                            let _ = ended.send((trigger, outcome));
                        });
                    }
                    Step::Refuse(trigger, message) => events.push(Refused(
                        trigger.trigger_id.to_string(),
                        message,
                        clock.now_ms(),
                    )),
                }
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_trigger_starts_on_its_millisecond_and_a_due_one_at_once() {
        use BlockStrategy::SerialExecution as Serial;
        let events = play(
            4,
            vec![
                (0, trigger(5, 1, Serial, 1_500, 100)),
                (0, trigger(6, 1, Serial, -10, 100)),
            ],
        )
        .await;
        assert_eq!(
            events,
            vec![
                Started(id(6, 1), 0),
                Ended(id(6, 1), 200, None, 100),
                Started(id(5, 1), 1_500),
                Ended(id(5, 1), 200, None, 1_600),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn serial_execution_runs_one_at_a_time_in_arrival_order() {
        use BlockStrategy::SerialExecution as Serial;
        let events = play(
            4,
            vec![
                (0, trigger(5, 1, Serial, 0, 1_000)),
                (10, trigger(5, 2, Serial, 0, 1_000)),
                (20, trigger(5, 3, Serial, 0, 1_000)),
            ],
        )
        .await;
        assert_eq!(
            events,
            vec![
                Started(id(5, 1), 0),
                Ended(id(5, 1), 200, None, 1_000),
                Started(id(5, 2), 1_000),
                Ended(id(5, 2), 200, None, 2_000),
                Started(id(5, 3), 2_000),
                Ended(id(5, 3), 200, None, 3_000),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn discard_later_refuses_while_the_job_runs_and_runs_once_it_is_idle() {
        use BlockStrategy::DiscardLater as Discard;
        let events = play(
            4,
            vec![
                (0, trigger(5, 1, Discard, 0, 1_000)),
                (500, trigger(5, 2, Discard, 0, 1_000)),
                (1_500, trigger(5, 3, Discard, 0, 100)),
            ],
        )
        .await;
        let refusal = "discarded: job 5 is already running or queued on executor e1 \
                       (block strategy DISCARD_LATER)";
        assert_eq!(
            events,
            vec![
                Started(id(5, 1), 0),
                Refused(id(5, 2), refusal.to_owned(), 500),
                Ended(id(5, 1), 200, None, 1_000),
                Started(id(5, 3), 1_500),
                Ended(id(5, 3), 200, None, 1_600),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cover_early_cancels_the_running_run_and_refuses_the_queued_ones() {
        use BlockStrategy::{CoverEarly as Cover, SerialExecution as Serial};
        let events = play(
            4,
            vec![
                (0, trigger(5, 1, Serial, 0, 1_000)),
                (100, trigger(5, 2, Serial, 0, 1_000)),
                (400, trigger(5, 3, Cover, 0, 1_000)),
            ],
        )
        .await;
        let covered = "covered by trigger 5-3 (block strategy COVER_EARLY)".to_owned();
        assert_eq!(
            events,
            vec![
                Started(id(5, 1), 0),
                Refused(id(5, 2), covered.clone(), 400),
                Started(id(5, 3), 400),
                Ended(id(5, 1), 500, Some(covered), 400),
                Ended(id(5, 3), 200, None, 1_400),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_runs_up_to_the_cap_and_queues_beyond_it() {
        use BlockStrategy::Concurrent;
        let events = play(
            2,
            vec![
                (0, trigger(5, 1, Concurrent, 0, 1_000)),
                (0, trigger(5, 2, Concurrent, 0, 1_200)),
                (0, trigger(5, 3, Concurrent, 0, 1_000)),
            ],
        )
        .await;
        assert_eq!(
            events,
            vec![
                Started(id(5, 1), 0),
                Started(id(5, 2), 0),
                Ended(id(5, 1), 200, None, 1_000),
                Started(id(5, 3), 1_000),
                Ended(id(5, 2), 200, None, 1_200),
                Ended(id(5, 3), 200, None, 2_000),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_kill_cancels_runs_and_refuses_queued_and_held_triggers() {
        use BlockStrategy::SerialExecution as Serial;
        let (job5, job6) = (JobId::new(5).unwrap(), JobId::new(6).unwrap());
        let events = play(
            4,
            vec![
                (0, trigger(5, 1, Serial, 0, 1_000)),
                (0, trigger(5, 2, Serial, 0, 1_000)),
                (0, trigger(5, 3, Serial, 5_000, 1_000)),
                (0, trigger(6, 1, Serial, 0, 1_000)),
                (300, Input::Kill(Some(job5), None, "killed: stuck")),
                (
                    500,
                    Input::Kill(None, Some(TriggerId::scheduled(job6, 1)), "killed: one"),
                ),
            ],
        )
        .await;
        let stuck = || "killed: stuck".to_owned();
        assert_eq!(
            events,
            vec![
                Started(id(5, 1), 0),
                Started(id(6, 1), 0),
                Refused(id(5, 2), stuck(), 300),
                Refused(id(5, 3), stuck(), 300),
                Ended(id(5, 1), 500, Some(stuck()), 300),
                Ended(id(6, 1), 500, Some("killed: one".to_owned()), 500),
            ]
        );
    }
}
