//! [`ExecutorBuilder`]: settings and handlers, checked once in [`ExecutorBuilder::build`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::settings::BrokerKind;
use kadence_kafka::{KafkaSettings, RunTracer};
use kadence_schemas::{AppName, Topics};

use crate::Executor;
use crate::beats::BeatPlan;
use crate::context::{JobContext, JobError, JobResult};
use crate::error::ExecutorError;
use crate::handler::{self, HandlerFn, Lifecycle, Registry};
use crate::partitions::Assignment;
use crate::settings::{ExecutorSettings, GroupProtocol};

mod fronting;
mod trust;

use fronting::script_handler_of;
use trust::default_script_dir;

/// Builds an [`Executor`]. Required: [`brokers`](Self::brokers), [`app`](Self::app) and at
/// least one [`handler`](Self::handler).
#[must_use]
pub struct ExecutorBuilder {
    brokers: Option<String>,
    app: Option<String>,
    topic_prefix: String,
    executor_id: Option<String>,
    session_timeout: Duration,
    group_protocol: GroupProtocol,
    broker_kind: BrokerKind,
    max_in_flight: usize,
    max_concurrent_per_job: usize,
    drain_timeout: Duration,
    commit_interval: Duration,
    beat_interval: Duration,
    max_log_lines: usize,
    rebalance_timeout: Duration,
    kill_memory: Duration,
    scripts: bool,
    allow_unverified_scripts: bool,
    allow_unverified: bool,
    allow_unsigned: bool,
    executor_key: Option<String>,
    script_dir: std::path::PathBuf,
    trusted_keys: Vec<String>,
    kafka_options: BTreeMap<String, String>,
    handlers: Vec<(String, HandlerFn)>,
    fallback_handler: Option<HandlerFn>,
    script_runner: Option<HandlerFn>,
    beat_plan: Option<Arc<dyn BeatPlan>>,
    lifecycles: Vec<Lifecycle>,
    metrics_address: Option<std::net::SocketAddr>,
    otlp_endpoint: Option<String>,
    shadow: bool,
}

impl Default for ExecutorBuilder {
    fn default() -> Self {
        ExecutorBuilder {
            brokers: None,
            app: None,
            topic_prefix: kadence_schemas::topics::DEFAULT_PREFIX.to_owned(),
            executor_id: None,
            session_timeout: Duration::from_secs(10),
            group_protocol: GroupProtocol::Classic,
            broker_kind: BrokerKind::Kafka,
            max_in_flight: 20_000,
            max_concurrent_per_job: 16,
            drain_timeout: Duration::from_secs(30),
            commit_interval: Duration::from_secs(1),
            beat_interval: Duration::from_secs(3),
            max_log_lines: crate::joblog::DEFAULT_MAX_LOG_LINES,
            rebalance_timeout: Duration::from_secs(5),
            kill_memory: Duration::from_secs(24 * 3600),
            scripts: false,
            allow_unverified_scripts: false,
            allow_unverified: false,
            allow_unsigned: false,
            executor_key: None,
            script_dir: default_script_dir(),
            trusted_keys: Vec::new(),
            kafka_options: BTreeMap::new(),
            handlers: Vec::new(),
            fallback_handler: None,
            script_runner: None,
            beat_plan: None,
            lifecycles: Vec::new(),
            metrics_address: None,
            otlp_endpoint: None,
            shadow: false,
        }
    }
}

impl ExecutorBuilder {
    /// Kafka bootstrap servers, comma separated (required).
    pub fn brokers(mut self, brokers: impl Into<String>) -> Self {
        self.brokers = Some(brokers.into());
        self
    }

    /// The app (XXL-JOB's executor group) whose triggers this executor runs (required).
    pub fn app(mut self, app: impl Into<String>) -> Self {
        self.app = Some(app.into());
        self
    }

    /// Topic and group prefix; must match the scheduler's. Default `kadence`.
    pub fn topic_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.topic_prefix = prefix.into();
        self
    }

    /// This executor's id, reported on every result. Default: app, host, process id and a
    /// random suffix.
    pub fn executor_id(mut self, id: impl Into<String>) -> Self {
        self.executor_id = Some(id.into());
        self
    }

    /// Consumer group session timeout: how long the group waits for a silent executor before
    /// giving its partitions to others. Default 10 s. The executor also takes it as its own
    /// patience: how long it waits at start to read the control topic to its end before it
    /// takes triggers anyway, and (with the rebalance timeout) for a clean leave at the end.
    ///
    /// Under [`GroupProtocol::Consumer`] the broker sets the session and the heartbeat, so
    /// this only sets that patience (see [`group_protocol`](Self::group_protocol)).
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// The protocol the executor joins its consumer group with (librdkafka's
    /// `group.protocol`). Default [`GroupProtocol::Classic`].
    ///
    /// [`GroupProtocol::Consumer`] (Kafka's KIP-848 protocol, which the broker must offer:
    /// Apache Kafka 4.0 and later) leaves the session and heartbeat to the broker's
    /// `group.consumer.session.timeout.ms` and `group.consumer.heartbeat.interval.ms`, so the
    /// executor sets neither `session.timeout.ms` nor `heartbeat.interval.ms` then, and
    /// [`session_timeout`](Self::session_timeout) only sets the executor's own patience; a
    /// rebalance moves only the partitions that change owner. librdkafka refuses a consumer
    /// with `session.timeout.ms`, `heartbeat.interval.ms`, `partition.assignment.strategy` or
    /// `group.protocol.type` under that protocol, so [`build`](Self::build) fails if
    /// [`kafka_option`](Self::kafka_option) sets one of them.
    ///
    /// This is the only place to choose the protocol: [`build`](Self::build) fails if
    /// `group.protocol` is given as a raw [`kafka_option`](Self::kafka_option), because the
    /// protocol decides which other settings the consumer may carry, and a raw option would
    /// also reach every other client.
    pub fn group_protocol(mut self, protocol: GroupProtocol) -> Self {
        self.group_protocol = protocol;
        self
    }

    /// Which broker the executor talks to, where its client must behave differently.
    /// Default [`BrokerKind::Kafka`]: Apache Kafka and brokers with its semantics (Confluent,
    /// MSK, Redpanda). [`BrokerKind::Tansu`] for tansu 0.6, the development stack's broker:
    /// a partition assigned is started before the group's committed offset and the records
    /// before it dropped (tansu serves a fetch that starts inside a record batch from the next
    /// batch, which lost the rest of that batch), and trigger fetches wait at most 10 ms
    /// (tansu holds every fetch for its whole wait).
    pub fn broker_kind(mut self, kind: BrokerKind) -> Self {
        self.broker_kind = kind;
        self
    }

    /// Triggers in flight at most: received and not done with (held until their time,
    /// queued behind their job's runs, running, or their result on its way to the broker);
    /// past it the executor stops fetching triggers until some are done. Default 20 000:
    /// with the scheduler's default emit lead of 1 s an executor holds about a second of its
    /// triggers before they start, 10 000 at 10 000 triggers/s; each takes about a kilobyte.
    pub fn max_in_flight(mut self, runs: usize) -> Self {
        self.max_in_flight = runs;
        self
    }

    /// Runs of one job at once under the CONCURRENT block strategy; later triggers queue.
    /// Default 16.
    pub fn max_concurrent_per_job(mut self, runs: usize) -> Self {
        self.max_concurrent_per_job = runs.max(1);
        self
    }

    /// How long a graceful shutdown waits for running handlers before cancelling them (their
    /// triggers are then redelivered). Default 30 s.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// How often finished offsets are committed. Default 1 s.
    pub fn commit_interval(mut self, interval: Duration) -> Self {
        self.commit_interval = interval;
        self
    }

    /// How often the executor beats to `{prefix}.beats` (it also beats at once when its
    /// partitions change). Default 3 s: with the scheduler's default dead timeout of 10 s, two
    /// lost beats are tolerated before FAILOVER routes around this executor.
    pub fn beat_interval(mut self, interval: Duration) -> Self {
        self.beat_interval = interval;
        self
    }

    /// How long a rebalance waits for the runs of revoked partitions to finish before handing
    /// them back (cancelled, no result, offsets uncommitted: the new owner runs them). Default
    /// 5 s, half the default session timeout.
    ///
    /// The whole group waits meanwhile, and the wait must end well inside the limits the group
    /// sets on it: the rebalance timeout (`max.poll.interval.ms`, 300 s) and, under the classic
    /// protocol, the session timeout, since a rebalance that comes near the session can drop
    /// members that are waiting for it (brokers and clients differ in whether they renew a
    /// session while a rebalance is in progress). A dropped member rejoins and starts the next
    /// rebalance, which hands the run back again: a run longer than the wait then restarts
    /// over and over instead of once (seen with a 5 s wait in a 6 s session, never with one
    /// of half the session). So under the classic protocol [`build`](Self::build) refuses a
    /// wait longer than half the [`session_timeout`](Self::session_timeout).
    pub fn rebalance_timeout(mut self, timeout: Duration) -> Self {
        self.rebalance_timeout = timeout;
        self
    }

    /// How long a KILL is remembered: a trigger emitted before a KILL of its job (or naming
    /// its run) is refused as killed when it arrives within this time, even if no executor
    /// was up when the KILL was sent (a starting executor reads the control commands of
    /// this span before its first trigger). Default 24 h; make it at least as long as
    /// triggers may wait in the topic.
    pub fn kill_memory(mut self, memory: Duration) -> Self {
        self.kill_memory = memory;
        self
    }

    /// Lines a run's log keeps at most (what is cut is said in a last line). Default 10 000.
    pub fn max_log_lines(mut self, lines: usize) -> Self {
        self.max_log_lines = lines;
        self
    }

    /// Serves the executor's Prometheus metrics on `GET /metrics` at `address` (port 0: any
    /// free port, logged at start). Default: not served. Every name and label is in the
    /// book's metrics reference (`docs/src/reference/metrics.md`); the run fails to start if the address is taken.
    pub fn metrics_address(mut self, address: std::net::SocketAddr) -> Self {
        self.metrics_address = Some(address);
        self
    }

    /// Exports the executor's spans of each run (`kadence.consume`, `kadence.handler`) over
    /// OTLP/HTTP to `endpoint`, e.g. `http://127.0.0.1:4318`, in the trace the scheduler
    /// started. Default: not exported (results still carry the run's `traceparent`).
    pub fn otlp_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.otlp_endpoint = Some(endpoint.into());
        self
    }

    /// Makes this a **shadow executor**: it runs its handlers (a candidate version of them)
    /// on a copy of the app's production triggers, and its results are kept for comparison
    /// but never complete a run. Default `false`.
    ///
    /// A shadow executor joins the consumer group `{prefix}.shadow.{app}` on the same trigger
    /// topic `{prefix}.triggers.{app}`, beside the production group, so its group receives
    /// every trigger (shadow executors of an app share them as production executors do). A
    /// new shadow group starts at the topic's live end, fixed when the group first assigns
    /// a partition (a candidate must not run the topic's whole history), then commits as
    /// usual. It publishes its results to `{prefix}.shadow-results` (the same records), never
    /// to `{prefix}.results`, so it completes no run, raises no alarm and triggers no child
    /// job; the scheduler keeps them for its shadow report, by trigger id. It sends no beats
    /// (routing and the lost-run monitor count production executors only) and ships no job
    /// log lines (they are keyed by trigger id and would mix into the production run's log):
    /// its handlers' lines go to its own `tracing` output, at debug level. A record it cannot
    /// verify or decode is logged, counted and committed past, not dead-lettered (production
    /// dead-letters the same record). Everything else is production's: signatures, the hold,
    /// block strategies, timeouts, KILLs, redeliveries, the commit rule.
    ///
    /// Handlers can tell with [`JobContext::is_shadow`]; the executor's metrics carry the
    /// label `shadow="true"`. [`Executor::partitions`] says when the group has assigned the
    /// shadow its partitions (a shadow has no beats to show it).
    pub fn shadow(mut self, shadow: bool) -> Self {
        self.shadow = shadow;
        self
    }

    /// A raw librdkafka option for every client (security, tuning). Not `group.protocol`: see
    /// [`group_protocol`](Self::group_protocol).
    pub fn kafka_option(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.kafka_options.insert(key.into(), value.into());
        self
    }

    /// Registers `handler` under `name`: the job's handler name in the scheduler.
    pub fn handler<F, Fut>(mut self, name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        self.handlers.push((name.into(), handler::erase(handler)));
        self
    }

    /// Registers `handler` under `name` with lifecycle hooks, as XXL-JOB's
    /// `@XxlJob(value, init, destroy)`: `init` runs once, before the handler's first run on
    /// this executor (a failed init fails that run and is tried again on the next); `destroy`
    /// runs at shutdown, after the last run, if `init` ran.
    pub fn handler_with_hooks<F, Fut, I, IFut, D, DFut>(
        mut self,
        name: impl Into<String>,
        handler: F,
        init: I,
        destroy: D,
    ) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
        I: Fn() -> IFut + Send + Sync + 'static,
        IFut: Future<Output = Result<(), JobError>> + Send + 'static,
        D: Fn() -> DFut + Send + Sync + 'static,
        DFut: Future<Output = Result<(), JobError>> + Send + 'static,
    {
        let name = name.into();
        let (erased, lifecycle) = handler::with_hooks(
            name.clone(),
            handler::erase(handler),
            handler::erase_hook(init),
            handler::erase_hook(destroy),
        );
        self.lifecycles.push(lifecycle);
        self.handlers.push((name, erased));
        self
    }

    /// Checks the settings and builds the executor.
    pub fn build(self) -> Result<Executor, ExecutorError> {
        let trusted_keys = self.checked_trust()?;
        let executor_key = self.checked_executor_key()?;
        let brokers = self
            .brokers
            .filter(|brokers| !brokers.trim().is_empty())
            .ok_or_else(|| ExecutorError::Config("brokers are required".to_owned()))?;
        let app = self
            .app
            .ok_or_else(|| ExecutorError::Config("app is required".to_owned()))?;
        let app = AppName::parse(&app).map_err(|error| ExecutorError::Config(error.to_string()))?;
        let topics = Topics::new(&self.topic_prefix)
            .map_err(|error| ExecutorError::Config(error.to_string()))?;
        let executor_id = self
            .executor_id
            .unwrap_or_else(|| default_executor_id(&app));
        let registry = Registry::new(
            self.handlers,
            self.fallback_handler,
            script_handler_of(self.scripts, self.script_runner, self.script_dir),
            self.lifecycles,
            executor_id.clone(),
        )?;
        if self.beat_interval.is_zero() {
            return Err(ExecutorError::Config(
                "beat_interval must be longer than zero".to_owned(),
            ));
        }
        if self.max_in_flight == 0 {
            return Err(ExecutorError::Config(
                "max_in_flight must be at least 1".to_owned(),
            ));
        }
        check_group_options(self.group_protocol, &self.kafka_options)?;
        if self.group_protocol == GroupProtocol::Classic
            && self.rebalance_timeout * 2 > self.session_timeout
        {
            return Err(ExecutorError::Config(format!(
                "rebalance_timeout ({:?}) must be at most half of session_timeout ({:?}) under \
                 the classic group protocol: a rebalance that comes near the session drops \
                 members and starts again, handing long runs back over and over",
                self.rebalance_timeout, self.session_timeout
            )));
        }
        let tracer = RunTracer::new(app.as_str(), self.otlp_endpoint.as_deref())
            .map_err(|error| ExecutorError::Config(error.to_string()))?;
        let settings = ExecutorSettings {
            tracer,
            exports_spans: self.otlp_endpoint.is_some(),
            kafka: KafkaSettings {
                brokers,
                broker_kind: self.broker_kind,
                options: self.kafka_options,
            },
            app,
            topics,
            trusted_keys,
            executor_key,
            executor_id,
            session_timeout: self.session_timeout,
            group_protocol: self.group_protocol,
            max_in_flight: self.max_in_flight,
            max_concurrent_per_job: self.max_concurrent_per_job,
            drain_timeout: self.drain_timeout,
            commit_interval: self.commit_interval,
            beat_interval: self.beat_interval,
            max_log_lines: self.max_log_lines,
            rebalance_timeout: self.rebalance_timeout,
            kill_memory: self.kill_memory,
            metrics_address: self.metrics_address,
            shadow: self.shadow,
            beat_plan: self.beat_plan,
        };
        Ok(Executor {
            settings,
            registry: Arc::new(registry),
            assignment: Assignment::default(),
        })
    }

    /// [`build`](Self::build) for an executor that never connects (the test worker): brokers
    /// and app may be left out, and scripts need no trusted key (it reads no topic: the test
    /// hands it its triggers).
    pub(crate) fn build_offline(mut self) -> Result<Executor, ExecutorError> {
        self.brokers.get_or_insert_with(|| "unused:9092".to_owned());
        self.app.get_or_insert_with(|| "test".to_owned());
        self.allow_unverified_scripts = true;
        self.allow_unverified = true;
        self.allow_unsigned = true;
        self.build()
    }
}

/// Raw options librdkafka refuses in a consumer of the KIP-848 protocol: the broker keeps the
/// session and heartbeat and assigns the partitions.
const CLASSIC_ONLY_OPTIONS: [&str; 4] = [
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "group.protocol.type",
];

/// Fails on a raw `group.protocol` (the typed setting is the only one) and, under
/// [`GroupProtocol::Consumer`], on raw options that protocol does not take, so the mistake
/// shows at build with the way out instead of as librdkafka's refusal when the executor runs.
fn check_group_options(
    protocol: GroupProtocol,
    options: &BTreeMap<String, String>,
) -> Result<(), ExecutorError> {
    if let Some(value) = options.get("group.protocol") {
        return Err(ExecutorError::Config(format!(
            "kafka_option(\"group.protocol\", {value:?}): choose the group protocol with \
             group_protocol(GroupProtocol::Classic | GroupProtocol::Consumer) instead"
        )));
    }
    if protocol == GroupProtocol::Consumer
        && let Some(key) = CLASSIC_ONLY_OPTIONS
            .into_iter()
            .find(|key| options.contains_key(*key))
    {
        return Err(ExecutorError::Config(format!(
            "kafka_option({key:?}) is not allowed with group_protocol(GroupProtocol::Consumer): \
             the broker sets the session, the heartbeat and the assignment under that protocol \
             (group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms, \
             group.consumer.assignors); leave the option out, or use GroupProtocol::Classic"
        )));
    }
    Ok(())
}

fn default_executor_id(app: &AppName) -> String {
    let host = crate::beats::host_name();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{app}-{host}-{}-{}", std::process::id(), &suffix[..6])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobResult;
    use crate::testing::TestWorker;

    async fn ok(_ctx: JobContext) -> JobResult {
        Ok(())
    }

    #[tokio::test]
    async fn init_runs_once_before_the_first_run_and_destroy_only_if_it_ran() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let inits = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&inits);
        let worker = TestWorker::new(
            ExecutorBuilder::default()
                .allow_unverified()
                .allow_unsigned()
                .handler_with_hooks(
                    "hooked",
                    ok,
                    move || {
                        let attempt = counted.fetch_add(1, Ordering::SeqCst);
                        async move {
                            // The first init fails: that run fails and the next one tries again.
                            if attempt == 0 {
                                Err(JobError::new("warming up"))
                            } else {
                                Ok(())
                            }
                        }
                    },
                    || async { Ok(()) },
                )
                .handler_with_hooks(
                    "idle",
                    ok,
                    || async { Ok(()) },
                    || async { Err(JobError::new("never")) },
                ),
        )
        .unwrap();
        let first = worker.run(TestWorker::trigger("hooked")).await;
        assert_eq!(
            (first.code(), first.message()),
            (500, Some("init hook failed: warming up"))
        );
        assert_eq!(worker.run(TestWorker::trigger("hooked")).await.code(), 200);
        assert_eq!(worker.run(TestWorker::trigger("hooked")).await.code(), 200);
        assert_eq!(
            inits.load(Ordering::SeqCst),
            2,
            "init succeeds once, then never runs again"
        );
        // Only the handler whose init ran is destroyed (the idle one's destroy would fail).
        assert_eq!(worker.shutdown().await, vec!["hooked".to_owned()]);
    }

    #[test]
    fn build_checks_required_settings_and_handler_names() {
        let missing_brokers = ExecutorBuilder::default()
            .allow_unverified()
            .allow_unsigned()
            .app("demo")
            .handler("ok", ok)
            .build();
        assert!(matches!(missing_brokers, Err(ExecutorError::Config(m)) if m.contains("brokers")));
        let bad_app = ExecutorBuilder::default()
            .allow_unverified()
            .allow_unsigned()
            .brokers("b:9092")
            .app("a b")
            .handler("ok", ok)
            .build();
        assert!(matches!(bad_app, Err(ExecutorError::Config(m)) if m.contains("invalid app name")));
        let no_handlers = ExecutorBuilder::default()
            .allow_unverified()
            .allow_unsigned()
            .brokers("b:9092")
            .app("demo")
            .build();
        assert!(
            matches!(no_handlers, Err(ExecutorError::Config(m)) if m.contains("at least one handler"))
        );
        let twice = ExecutorBuilder::default()
            .allow_unverified()
            .allow_unsigned()
            .brokers("b:9092")
            .app("demo")
            .handler("ok", ok)
            .handler("ok", ok)
            .build();
        assert!(matches!(twice, Err(ExecutorError::Config(m)) if m.contains("registered twice")));
        let built = ExecutorBuilder::default()
            .allow_unverified()
            .allow_unsigned()
            .brokers("b:9092")
            .app("demo")
            .executor_id("e-1")
            .handler("ok", ok)
            .build()
            .expect("valid");
        assert_eq!(built.id(), "e-1");
    }

    #[test]
    fn a_raw_group_protocol_and_classic_only_options_under_consumer_fail_the_build() {
        let base = |protocol| {
            ExecutorBuilder::default()
                .allow_unverified()
                .allow_unsigned()
                .brokers("b:9092")
                .app("demo")
                .handler("ok", ok)
                .group_protocol(protocol)
        };
        assert_eq!(
            base(GroupProtocol::Classic)
                .build()
                .unwrap()
                .settings
                .group_protocol,
            GroupProtocol::Classic
        );
        assert_eq!(
            ExecutorBuilder::default()
                .allow_unverified()
                .allow_unsigned()
                .brokers("b:9092")
                .app("demo")
                .handler("ok", ok)
                .build()
                .unwrap()
                .settings
                .group_protocol,
            GroupProtocol::Classic,
            "classic unless said otherwise"
        );
        let raw = base(GroupProtocol::Consumer)
            .kafka_option("group.protocol", "consumer")
            .build();
        assert!(
            matches!(&raw, Err(ExecutorError::Config(m)) if m.starts_with("kafka_option(\"group.protocol\", \"consumer\"): choose the group protocol with group_protocol(")),
            "{:?}",
            raw.err()
        );
        for key in CLASSIC_ONLY_OPTIONS {
            let refused = base(GroupProtocol::Consumer).kafka_option(key, "1").build();
            assert!(
                matches!(&refused, Err(ExecutorError::Config(m)) if m.starts_with(&format!("kafka_option({key:?}) is not allowed with group_protocol(GroupProtocol::Consumer)"))),
                "{key}: {:?}",
                refused.err()
            );
            assert!(
                base(GroupProtocol::Classic)
                    .kafka_option(key, "1")
                    .build()
                    .is_ok(),
                "{key} is the classic protocol's to take"
            );
        }
        let consumer = base(GroupProtocol::Consumer)
            .kafka_option("group.remote.assignor", "uniform")
            .build()
            .unwrap();
        assert_eq!(consumer.settings.group_protocol, GroupProtocol::Consumer);
    }

    #[test]
    fn the_hand_back_wait_must_end_inside_the_classic_session() {
        let base = || {
            ExecutorBuilder::default()
                .brokers("localhost:9092")
                .app("billing")
                .handler("ok", ok)
                .allow_unverified()
                .allow_unsigned()
                .session_timeout(Duration::from_secs(10))
        };
        assert!(base().build().is_ok(), "the defaults: 5 s inside 10 s");
        let refused = base()
            .rebalance_timeout(Duration::from_millis(5_001))
            .build()
            .err()
            .expect("a wait past half the session is refused");
        assert!(
            refused.to_string().contains(
                "rebalance_timeout (5.001s) must be at most half of session_timeout (10s)"
            ),
            "{refused}"
        );
        // The broker keeps the session under the consumer protocol: the wait answers to its
        // rebalance timeout only.
        assert!(
            base()
                .rebalance_timeout(Duration::from_secs(10))
                .group_protocol(GroupProtocol::Consumer)
                .build()
                .is_ok()
        );
    }

    #[test]
    fn an_executor_needs_a_trusted_key_unless_it_opts_out_loudly() {
        let base = || {
            ExecutorBuilder::default()
                .brokers("b:9092")
                .app("demo")
                .handler("ok", ok)
        };
        let refused = base().build();
        assert!(
            matches!(&refused, Err(ExecutorError::Config(m)) if m.starts_with("no trusted_key")),
            "{:?}",
            refused.err()
        );
        let unverified = base().allow_unverified().allow_unsigned().build().unwrap();
        assert!(unverified.settings.trusted_keys.is_empty());
    }

    #[test]
    fn an_executor_needs_an_executor_key_unless_it_opts_out_loudly() {
        let base = || {
            ExecutorBuilder::default()
                .brokers("b:9092")
                .app("demo")
                .handler("ok", ok)
                .allow_unverified()
        };
        let refused = base().build();
        assert!(
            matches!(&refused, Err(ExecutorError::Config(m)) if m.starts_with("no executor_key")),
            "{:?}",
            refused.err()
        );
        let secret = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";
        let bad = base()
            .executor_key(format!("0123456789abcdef.{}", &secret[..30]))
            .build();
        assert!(
            matches!(&bad, Err(ExecutorError::Config(m)) if m.starts_with("executor_key: invalid executor key") && !m.contains(&secret[..30])),
            "{:?}",
            bad.err()
        );
        let signing = base()
            .executor_key(format!("0123456789abcdef.{secret}"))
            .build()
            .unwrap();
        let key = signing
            .settings
            .executor_key
            .as_ref()
            .map(|key| key.key_id());
        assert_eq!(key, Some("0123456789abcdef"));
        let unsigned = base().allow_unsigned().build().unwrap();
        assert!(unsigned.settings.executor_key.is_none());
    }

    #[test]
    fn scripts_need_a_trusted_key_unless_allowed_unverified() {
        let base = || {
            ExecutorBuilder::default()
                .allow_unverified()
                .allow_unsigned()
                .brokers("b:9092")
                .app("demo")
                .handler("ok", ok)
        };
        let unverified = base().scripts(true).build();
        assert!(
            matches!(&unverified, Err(ExecutorError::Config(m)) if m.contains("needs at least one trusted_key")),
            "{:?}",
            unverified.err()
        );
        assert!(
            base()
                .scripts(true)
                .allow_unverified_scripts()
                .build()
                .is_ok()
        );
        let key = kadence_kafka::RecordSigner::generate()
            .unwrap()
            .public_key()
            .to_base64();
        let verified = base().scripts(true).trusted_key(&key).build().unwrap();
        assert_eq!(verified.settings.trusted_keys.key_ids().len(), 1);
        let bad = base().trusted_key("not a key").build();
        assert!(
            matches!(&bad, Err(ExecutorError::Config(m)) if m.starts_with("trusted_key: invalid Ed25519 public key")),
            "{:?}",
            bad.err()
        );
    }
}
