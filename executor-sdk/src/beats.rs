//! Beats: the executor tells the scheduler it is alive, what it can run and what it runs.
//!
//! An `ExecutorBeat` goes to the compacted topic `{prefix}.beats` (key: executor id, so
//! compaction keeps the latest per executor) every `beat_interval` (default 3 s), and at once
//! when the group assigns or revokes partitions. It names the executor's handlers, the
//! partitions of `{prefix}.triggers.{app}` it owns, and the jobs it has running and queued.
//! The scheduler builds its registry from them: FAILOVER routes to partitions whose owner
//! beats, BUSYOVER to owners where the job is idle, the lost-run monitor fails runs only when
//! their executor stopped beating.
//!
//! A graceful shutdown sends a STOPPING beat as soon as the drain begins (the scheduler stops
//! routing to this executor at once) and a last one, owning nothing, when it is done.
//!
//! A shadow executor (`ExecutorBuilder::shadow`) sends none: it is not production, and the
//! registry must not route to it or count its runs.
//!
//! An executor that fronts others (the XXL-JOB bridge, whose legacy executors run the runs)
//! gives a [`BeatPlan`]: each beat is then the plan's beats made of the executor's own, every
//! one keyed by its own executor id and signed alike.
//!
//! Beats never hold the consumer loop: each is sent from its own task with a deadline of one
//! interval, and one that fails is only logged — the next one carries the same news.

use std::sync::Arc;
use std::time::Duration;

use kadence_schemas::{AppName, ExecutorBeat, ExecutorState, codec};
use rdkafka::message::OwnedHeaders;
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;

use crate::clock::Clock;
use crate::publisher::Publisher;
use crate::settings::ExecutorSettings;

/// What a beat reports about the runs (from the block-strategy lanes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Activity {
    /// Jobs with a run in progress.
    pub(crate) running_jobs: Vec<i64>,
    /// Jobs with runs queued.
    pub(crate) queued_jobs: Vec<i64>,
}

/// Decides what an executor's beats say, for an executor that fronts others: the XXL-JOB
/// bridge beats for each legacy executor it hands triggers to, naming the partitions it hands
/// them, so that the scheduler's registry, `kadence executor list`, FAILOVER, BUSYOVER and
/// the lost-run monitor see those executors rather than the bridge.
///
/// Called for every beat (every beat interval, at once when the group assigns or revokes
/// partitions, STOPPING when the executor drains and a last one when it stops), from the
/// consumer's task: keep it quick, and never wait in it.
pub trait BeatPlan: Send + Sync + 'static {
    /// The beats to send in place of `own`, the beat this executor would send for itself at
    /// this instant (its state, its owned partitions, its running and queued jobs). Each is
    /// sent to `{prefix}.beats` keyed by its `executor_id`; return `own` among them to keep
    /// the executor itself in the registry.
    fn beats(&self, own: ExecutorBeat) -> Vec<ExecutorBeat>;
}

/// Builds and sends this executor's beats.
#[derive(Clone)]
pub(crate) struct Beats {
    /// The executor's producer, which also signs each beat with the executor key.
    publisher: Publisher,
    topic: String,
    executor_id: String,
    app: AppName,
    host: String,
    handlers: Vec<String>,
    /// Deadline of one send: the next beat supersedes a late one.
    send_timeout: Duration,
    /// Turns each beat into the beats sent, when the executor fronts others.
    plan: Option<Arc<dyn BeatPlan>>,
    /// The consumer loop's clock, which dates each beat.
    clock: Clock,
}

impl Beats {
    /// What the executor `settings` describe announces, with its `handlers`, dated by `clock`:
    /// its partitions,
    /// or with a beat plan the beats of the executors it fronts. A shadow executor sends
    /// none: the partitions it holds are its own group's, and routing must not send
    /// production's triggers by them.
    pub(crate) fn of_executor(
        settings: &ExecutorSettings,
        publisher: &Publisher,
        handlers: Vec<String>,
        clock: Clock,
    ) -> Option<Beats> {
        (!settings.shadow).then(|| {
            Beats::new(
                publisher.clone(),
                settings.topics.beats(),
                settings.executor_id.clone(),
                settings.app.clone(),
                handlers,
                settings.beat_interval,
                clock,
            )
            .with_plan(settings.beat_plan.clone())
        })
    }

    pub(crate) fn new(
        publisher: Publisher,
        topic: String,
        executor_id: String,
        app: AppName,
        mut handlers: Vec<String>,
        send_timeout: Duration,
        clock: Clock,
    ) -> Beats {
        handlers.sort_unstable();
        Beats {
            publisher,
            topic,
            executor_id,
            app,
            host: host_name(),
            handlers,
            send_timeout,
            plan: None,
            clock,
        }
    }

    /// These beats, made into the beats `plan` says (see [`BeatPlan`]).
    pub(crate) fn with_plan(mut self, plan: Option<Arc<dyn BeatPlan>>) -> Beats {
        self.plan = plan;
        self
    }

    /// The beat for this instant.
    pub(crate) fn beat(
        &self,
        state: ExecutorState,
        owned_partitions: Vec<i32>,
        activity: Activity,
    ) -> ExecutorBeat {
        ExecutorBeat {
            executor_id: self.executor_id.clone(),
            app: self.app.clone(),
            host: self.host.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            handlers: self.handlers.clone(),
            owned_partitions,
            running_jobs: activity.running_jobs,
            queued_jobs: activity.queued_jobs,
            state,
            // The registry compares beats with its own wall clock: the loop's clock is the
            // system's outside the SDK's own tests.
            sent_at_ms: self.clock.now_ms(),
            // Triggers are verified by `TrustedKeys::verify_message`, which takes both forms.
            features: vec![ExecutorBeat::ROUND_SIGNATURES.to_owned()],
        }
    }

    /// Sends `beat` from its own task; a failure is logged.
    pub(crate) fn send(&self, beat: ExecutorBeat) {
        let beats = self.clone();
        tokio::spawn(async move { beats.send_and_wait(beat).await });
    }

    /// Sends `beat` (or the beats the plan makes of it) and waits for the broker (at most one
    /// send timeout each, sent together); a failure is logged.
    pub(crate) async fn send_and_wait(&self, beat: ExecutorBeat) {
        match &self.plan {
            None => self.send_one(beat).await,
            Some(plan) => {
                let beats = plan.beats(beat);
                futures::future::join_all(beats.into_iter().map(|beat| self.send_one(beat))).await;
            }
        }
    }

    async fn send_one(&self, beat: ExecutorBeat) {
        let payload = match codec::encode(&beat) {
            Ok(payload) => payload,
            Err(error) => {
                tracing::error!(%error, "cannot encode a beat");
                return;
            }
        };
        let headers = self
            .publisher
            .signed(&self.topic, &payload, OwnedHeaders::new());
        let record = FutureRecord::<str, [u8]>::to(&self.topic)
            .key(&beat.executor_id)
            .payload(&payload)
            .headers(headers);
        if let Err(error) = self
            .publisher
            .producer()
            .send(record, Timeout::After(self.send_timeout))
            .await
        {
            tracing::warn!(%error, "cannot send a beat; the next one will say the same");
        }
    }
}

/// This machine's host name, as beats and default executor ids show it.
pub(crate) fn host_name() -> String {
    gethostname::gethostname()
        .into_string()
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}
