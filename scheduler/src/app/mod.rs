//! Wiring: builds every part of a scheduler node from a [`Config`] and runs it until shutdown.
//!
//! ```text
//!  pre-read loop ─┐                                    ┌─> ack writer ─> store (DISPATCHED)
//!  claim loop ────┤                                    │
//!  API (trigger) ─┼─> fire intake ─> wheel ─> dispatch ┤
//!  follow-ups ────┘   (store first)           ▲        └─> {prefix}.triggers.{app}
//!  API (stop, edit) ──────────────────────────┴─ cancelled fires <─ cancellation poller <─ store
//!  {prefix}.results ─> results consumer ─> store (FINISHED) / {prefix}.dlq
//! ```
//!
//! The readers of what executors publish and the monitors that follow a run up are started
//! in `loops`; the HTTP side (API, console, book, metrics) is served by `http`; the API's
//! replayer reads trigger topics back (see [`crate::operations::replay`]).
//!
//! Dispatch and the control channel produce through one [`SignedProducer`]: every trigger
//! and control record is signed with the node's current key, refreshed from the store.
//!
//! Every part that touches a run's trace (pre-read, dispatch, results) shares the node's
//! [`RunTracer`] (`[telemetry] otlp_endpoint`), shut down last so its final spans go out.
//!
//! The node opens three connection pools ([`StorePools`]): the scheduling loops, the
//! background loops and the API each have their own, so a flood of API requests cannot take
//! the connections that make fires happen on time.
//!
//! Shutdown is one [`CancellationToken`] fanned out to every loop plus one wait for all tasks:
//! the loops stop taking work, dispatch drains deliveries in flight, the ack writer drains
//! what dispatch acknowledged, and fires not acknowledged stay pending in the database for
//! the next node (or this one, restarted) to claim.

mod catalogue;
mod http;
mod loops;
pub mod pools;

pub use catalogue::metric_catalogue;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use kadence_kafka::{DeadLetters, KafkaProducer, KafkaSettings, RunTracer};
use kadence_schemas::Topics;
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::pools::StorePools;
use crate::clock::Clock;
use crate::config::Config;
use crate::engine::acks::{AckLedger, AckWriter};
use crate::engine::cancellations::{CancellationPoller, CancelledFires};
use crate::engine::claims::Claimer;
use crate::engine::dispatch::{DispatchOutcomes, DispatchSettings, Dispatcher};
use crate::engine::held_runs::HeldRuns;
use crate::engine::intake::FireIntake;
use crate::engine::kafka::TopicAdmin;
use crate::engine::partitions::PartitionDirectory;
use crate::engine::preread::{PreReadSettings, PreReader};
use crate::engine::pressure::SchedulingPressure;
use crate::engine::registry::Registry;
use crate::engine::shards::{
    ShardLeaser, ShardOwnership, check_shard_lease, ensure_schedule_shards,
};
use crate::engine::signer::{SignedProducer, Signer};
use crate::engine::wheel::run_wheel;
use crate::http::book::Book;
use crate::metrics::SchedulerMetrics;
use crate::monitors::database_watch::DatabaseHealth;
use crate::operations::auth::{announce_first_admin, ensure_first_admin};
use crate::readers::executor_auth::ExecutorKeyring;
use crate::store::Store;
use crate::traces::node_tracer;

/// Capacity of the channels between the loops; a full channel is backpressure.
const CHANNEL_CAPACITY: usize = 10_000;

/// A running scheduler node.
pub struct Scheduler {
    api_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    node_id: String,
    store: Arc<dyn Store>,
    tracer: RunTracer,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl Scheduler {
    /// Starts a node serving its API on `listener` (bind port 0 in tests).
    pub async fn start(
        config: Config,
        listener: TcpListener,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Scheduler> {
        // Before anything opens: a book setting that would serve nothing stops the node.
        let book = Book::configured(config.api.book_dir.as_deref())?;
        let node = Node::open(config, clock).await?;
        let fire_path = node.spawn_fire_path();
        node.spawn_readers().await?;
        node.spawn_monitors(&fire_path)?;
        let (api_addr, metrics_addr) = node.serve_api(listener, fire_path, book)?;
        node.tasks.close();
        tracing::info!(%api_addr, node_id = %node.node_id,
            backend = node.pools.scheduling.backend(), "scheduler started");
        Ok(Scheduler {
            api_addr,
            metrics_addr,
            node_id: node.node_id,
            store: node.pools.background,
            tracer: node.tracer,
            shutdown: node.shutdown,
            tasks: node.tasks,
        })
    }

    /// Where the API listens.
    pub fn api_addr(&self) -> SocketAddr {
        self.api_addr
    }

    /// Where `/metrics` is served when `metrics.listen` names an address of its own.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The node's store (for tests and tools).
    pub fn store(&self) -> Arc<dyn Store> {
        Arc::clone(&self.store)
    }

    /// Stops every loop and waits for them, at most `deadline`.
    pub async fn stop(self, deadline: Duration) {
        self.shutdown.cancel();
        if tokio::time::timeout(deadline, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("scheduler tasks did not stop within {deadline:?}");
        }
        // The exporter blocks while it sends the last spans.
        let tracer = self.tracer;
        let _ = tokio::task::spawn_blocking(move || tracer.shutdown()).await;
    }
}

fn default_node_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "scheduler".to_owned());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}-{}", std::process::id(), &suffix[..8])
}

/// What a node's parts share while [`Scheduler::start`] wires them, one step per group of
/// loops: the fire path, the topic readers, the monitors, the API.
struct Node {
    config: Config,
    node_id: String,
    clock: Arc<dyn Clock>,
    pools: StorePools,
    topics: Topics,
    kafka: KafkaSettings,
    admin: Arc<TopicAdmin>,
    producer: KafkaProducer,
    signed: SignedProducer,
    /// The executor keys the readers check what executors write with.
    keyring: Arc<ExecutorKeyring>,
    partitions: Arc<PartitionDirectory>,
    registry: Arc<Registry>,
    /// Batch fires whose rows the ack writer holds for the results consumer.
    held_runs: Arc<HeldRuns>,
    metrics: Arc<SchedulerMetrics>,
    database: Arc<DatabaseHealth>,
    /// Whether scheduling falls behind: the pre-read and dispatch press, history yields.
    pressure: Arc<SchedulingPressure>,
    tracer: RunTracer,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// The node's metrics and the parts that keep gauges in them.
struct MeteredParts {
    metrics: Arc<SchedulerMetrics>,
    database: Arc<DatabaseHealth>,
    pressure: Arc<SchedulingPressure>,
    held_runs: Arc<HeldRuns>,
}

impl MeteredParts {
    /// The metrics, with the gauges of the database watch (healthy at `now_ms`), of the
    /// scheduling pressure (the pre-read's `read_ahead`) and of the held runs registered.
    fn new(config: &Config, read_ahead: std::time::Duration, now_ms: i64) -> MeteredParts {
        let schedule = &config.schedule;
        let metrics = Arc::new(SchedulerMetrics::with_jobs(
            config.telemetry.job_metrics.iter().copied().collect(),
        ));
        let database = Arc::new(DatabaseHealth::new(now_ms));
        metrics.register(database.collectors());
        let pressure = Arc::new(SchedulingPressure::new(
            schedule.pre_read_interval,
            read_ahead,
            schedule.history_yield,
        ));
        metrics.register(pressure.metrics().collectors());
        let held_runs = Arc::new(HeldRuns::new(
            schedule.run_row_hold(config.database.is_postgres()),
            schedule.longest_run_row_hold(),
        ));
        metrics.register(held_runs.metrics().collectors());
        MeteredParts {
            metrics,
            database,
            pressure,
            held_runs,
        }
    }
}

/// The topics' names, the client settings, and the admin client after it created the shared
/// topics and checked every app's trigger topic; the apps' partition counts.
async fn open_topics(
    config: &Config,
    pools: &StorePools,
) -> anyhow::Result<(
    Topics,
    KafkaSettings,
    Arc<TopicAdmin>,
    Arc<PartitionDirectory>,
)> {
    let topics = Topics::new(&config.kafka.topic_prefix).context("kafka.topic_prefix")?;
    let kafka = KafkaSettings {
        brokers: config.kafka.brokers.clone(),
        broker_kind: config.kafka.broker_kind,
        options: config.kafka.options.clone(),
    };
    let admin = Arc::new(TopicAdmin::new(&kafka).context("creating the Kafka admin client")?);
    admin
        .ensure_shared_topics(&topics, config.kafka.results_partitions)
        .await
        .context("creating Kadence's shared topics")?;
    let partitions = Arc::new(PartitionDirectory::new(pools.scheduling.clone()));
    let apps = pools.scheduling.list_apps().await.context("listing apps")?;
    for app in apps {
        admin
            .ensure_topic(&topics.triggers(&app.name), app.partitions, &[])
            .await
            .with_context(|| format!("verifying the trigger topic of app {}", app.name))?;
        partitions.remember(app.name, app.partitions);
    }
    Ok((topics, kafka, admin, partitions))
}

/// Handles of the fire path that later parts write into.
struct FirePath {
    /// The one way into the wheel (scheduling pool); others take it `using` their own pool.
    intake: FireIntake,
    cancelled: Arc<CancelledFires>,
    pre_read_waker: Arc<Notify>,
}

impl Node {
    /// Opens the pools, creates or checks every topic, and makes the producer.
    async fn open(config: Config, clock: Arc<dyn Clock>) -> anyhow::Result<Node> {
        let node_id = config
            .schedule
            .node_id
            .clone()
            .unwrap_or_else(default_node_id);
        let pools = StorePools::open(&config.database, config.schedule.shard_lease)
            .await
            .context("opening the database")?;
        announce_first_admin(
            ensure_first_admin(
                pools.scheduling.as_ref(),
                config.auth.admin_password.as_ref(),
                clock.now_ms(),
            )
            .await
            .context("creating the first admin")?,
        );
        let schedule = &config.schedule;
        let read_ahead = PreReadSettings::read_ahead_for(
            schedule.pre_read_interval,
            schedule.emit_lead,
            schedule.pre_read_window,
        );
        check_shard_lease(schedule.shard_lease, read_ahead, schedule.pre_read_window)?;
        schedule.check_run_row_hold()?;
        ensure_schedule_shards(pools.scheduling.as_ref(), schedule.shards)
            .await
            .context("creating the schedule shards")?;
        let (topics, kafka, admin, partitions) = open_topics(&config, &pools).await?;
        let producer = kafka
            .idempotent_producer()
            .context("creating the trigger producer")?;
        let signer = Signer::load(pools.scheduling.as_ref(), clock.now_ms())
            .await
            .context("loading the signing key")?;
        let keyring = ExecutorKeyring::load(
            Arc::clone(&pools.background) as Arc<dyn crate::store::ExecutorKeys>,
            config.executor_auth.required,
        )
        .await
        .context("loading the executor keys")?;
        let tracer = node_tracer(&config.telemetry).context("telemetry.otlp_endpoint")?;
        let MeteredParts {
            metrics,
            database,
            pressure,
            held_runs,
        } = MeteredParts::new(&config, read_ahead, clock.now_ms());
        Ok(Node {
            signed: SignedProducer::new(producer.clone(), Arc::new(signer))
                .with_signing_threads(config.signing.signing_threads()),
            tracer,
            keyring,
            registry: Arc::new(Registry::new(config.registry.dead_timeout)),
            held_runs,
            metrics,
            database,
            pressure,
            config,
            node_id,
            clock,
            pools,
            topics,
            kafka,
            admin,
            producer,
            partitions,
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
        })
    }

    fn dead_letters(&self) -> DeadLetters {
        DeadLetters::new(self.producer.clone(), self.topics.dlq())
    }

    /// The loops a fire passes through, on the scheduling pool: the shard leaser keeps this
    /// node's share of the schedule shards, pre-read (of those shards) and claims write it
    /// through the intake, the wheel releases it, dispatch emits it (unless a stop or an edit
    /// cancelled it meanwhile), the ack writer marks it dispatched.
    fn spawn_fire_path(&self) -> FirePath {
        let schedule = &self.config.schedule;
        let store = &self.pools.scheduling;
        let (wheel_tx, wheel_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let (due_tx, due_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let (ack_tx, ack_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let intake = FireIntake::new(
            Arc::clone(store),
            wheel_tx,
            self.node_id.clone(),
            schedule.lease,
        )
        .with_metrics(Arc::clone(&self.metrics));
        let ledger = Arc::new(AckLedger::new());
        let cancelled = Arc::new(CancelledFires::new());
        let pre_read_waker = self.spawn_schedule_scans(&intake);
        let claimer = Claimer::new(intake.clone(), schedule.batch_size, Arc::clone(&ledger));
        self.tasks.spawn(claimer.run(
            Arc::clone(&self.clock),
            schedule.claim_interval,
            self.shutdown.clone(),
        ));
        let poller = CancellationPoller::new(store.clone(), Arc::clone(&cancelled), schedule.lease);
        self.tasks.spawn(poller.run(
            Arc::clone(&self.clock),
            schedule.cancel_poll_interval,
            self.shutdown.clone(),
        ));
        self.tasks.spawn(run_wheel(
            wheel_rx,
            due_tx,
            Arc::clone(&self.clock),
            schedule.emit_lead,
            schedule.release_round(),
            self.metrics.pending_fires.with_label_values(&["wheel"]),
            self.shutdown.clone(),
        ));

        let dispatcher = Dispatcher::new(
            self.signed.clone(),
            self.topics.clone(),
            Arc::clone(&self.partitions),
            Arc::clone(&self.registry),
            DispatchOutcomes {
                acks: ack_tx,
                ledger: Arc::clone(&ledger),
                cancelled: Arc::clone(&cancelled),
            },
            Arc::clone(&self.clock),
            DispatchSettings {
                max_in_flight: schedule.max_in_flight,
                drain_timeout: schedule.drain_timeout,
                trigger_validity: self.config.signing.trigger_validity(),
                trigger_signatures: self.config.signing.trigger_signatures,
            },
        )
        .with_metrics(Arc::clone(&self.metrics))
        .with_tracer(self.tracer.clone())
        .pressing(Arc::clone(&self.pressure));
        self.tasks
            .spawn(dispatcher.run(due_rx, self.shutdown.clone()));
        let batches = Arc::clone(intake.open_batches());
        let ack_writer = AckWriter::new(store.clone(), ledger, batches, ack_rx, 1000)
            .holding_runs_in(Arc::clone(&self.held_runs));
        self.tasks.spawn(ack_writer.run());
        FirePath {
            intake,
            cancelled,
            pre_read_waker,
        }
    }

    /// The shard leaser and the pre-read loop over the shards it holds; returns the waker of
    /// the pre-read loop.
    fn spawn_schedule_scans(&self, intake: &FireIntake) -> Arc<Notify> {
        let schedule = &self.config.schedule;
        let ownership = Arc::new(ShardOwnership::new(self.node_id.clone()));
        let pre_reader = PreReader::new(
            intake.clone(),
            Arc::clone(&ownership),
            PreReadSettings {
                window: schedule.pre_read_window,
                read_ahead: PreReadSettings::read_ahead_for(
                    schedule.pre_read_interval,
                    schedule.emit_lead,
                    schedule.pre_read_window,
                ),
                batch_size: schedule.batch_size,
            },
        )
        .with_tracer(self.tracer.clone())
        .pressing(Arc::clone(&self.pressure));
        let pre_read_waker = pre_reader.waker();
        let leaser = ShardLeaser::new(
            self.pools.scheduling.clone(),
            ownership,
            schedule.shard_lease,
            Arc::clone(&pre_read_waker),
        )
        .with_metrics(Arc::clone(&self.metrics));
        self.tasks
            .spawn(leaser.run(Arc::clone(&self.clock), self.shutdown.clone()));
        self.tasks.spawn(pre_reader.run(
            Arc::clone(&self.clock),
            schedule.pre_read_interval,
            self.shutdown.clone(),
        ));
        pre_read_waker
    }
}
