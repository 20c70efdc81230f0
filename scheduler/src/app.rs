//! Wiring: builds every part of a scheduler node from a [`Config`] and runs it until shutdown.
//!
//! ```text
//!  pre-read loop ─┐                      ┌─> ack writer ─> store (DISPATCHED)
//!  claim loop ────┼─> wheel ─> dispatch ─┤
//!  API (trigger) ─┘          ▲           └─> {prefix}.triggers.{app}
//!  API (stop, edit) ─────────┴─ cancelled fires <─ cancellation poller <─ store
//!  {prefix}.results ─> results consumer ─> store (FINISHED) / {prefix}.dlq
//! ```
//!
//! The node opens three connection pools ([`StorePools`]): the scheduling loops, the
//! background loops and the API each have their own, so a flood of API requests cannot take
//! the connections that make fires happen on time.
//!
//! Shutdown is one [`CancellationToken`] fanned out to every loop plus one wait for all tasks:
//! the loops stop taking work, dispatch drains deliveries in flight, the ack writer drains
//! what dispatch acknowledged, and fires not acknowledged stay pending in the database for
//! the next node (or this one, restarted) to claim.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use kadence_kafka::{DeadLetters, KafkaSettings};
use kadence_schemas::Topics;
use secrecy::ExposeSecret;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::acks::{AckLedger, AckWriter};
use crate::api::{ApiLimits, ApiState, router};
use crate::cancellations::{CancellationPoller, CancelledFires};
use crate::claims::Claimer;
use crate::clock::{Clock, millis};
use crate::config::{Config, DatabaseConfig};
use crate::dispatch::{DispatchOutcomes, DispatchSettings, Dispatcher, PartitionDirectory};
use crate::kafka::{ControlChannel, TopicAdmin};
use crate::logs::LogsConsumer;
use crate::lost_runs::run_lost_run_monitor;
use crate::monitors::alarm::Alarms;
use crate::monitors::follow_up::FollowUp;
use crate::monitors::reports::run_reports;
use crate::monitors::retention::run_retention;
use crate::preread::{PreReadSettings, PreReader};
use crate::registry::{BeatsReader, Registry, run_sweeper};
use crate::results::ResultsConsumer;
use crate::store::{PoolSettings, PostgresStore, SqliteStore, Store};
use crate::wheel::run_wheel;

/// Capacity of the channels between the loops; a full channel is backpressure.
const CHANNEL_CAPACITY: usize = 10_000;

/// Opens the store a database URL names (`sqlite:` or `postgres:`/`postgresql:`) with a pool
/// of `max_connections`, and brings its schema up to date.
pub async fn open_store(url: &str, max_connections: u32) -> anyhow::Result<Arc<dyn Store>> {
    let store = connect_store(url, PoolSettings::new(max_connections)).await?;
    store.migrate().await?;
    Ok(store)
}

/// Connects to the store a database URL names, without migrating.
async fn connect_store(url: &str, pool: PoolSettings) -> anyhow::Result<Arc<dyn Store>> {
    Ok(if url.starts_with("sqlite:") {
        Arc::new(SqliteStore::connect(url, pool).await?)
    } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        Arc::new(PostgresStore::connect(url, pool).await?)
    } else {
        anyhow::bail!(
            "unsupported database URL scheme: use sqlite://FILE or postgres://USER@HOST/DB"
        );
    })
}

/// A node's three connection pools on its database (see [`DatabaseConfig`]).
#[derive(Clone)]
pub struct StorePools {
    /// Pre-read, acknowledgements, claims, cancellations, results.
    pub scheduling: Arc<dyn Store>,
    /// Beats, log lines, follow-ups, reports, retention, lost runs.
    pub background: Arc<dyn Store>,
    /// HTTP requests; an operation waits at most `api_acquire_timeout` for a connection.
    pub api: Arc<dyn Store>,
}

impl StorePools {
    /// Opens the three pools and brings the schema up to date.
    pub async fn open(config: &DatabaseConfig) -> anyhow::Result<StorePools> {
        let url = config.url.expose_secret();
        let scheduling = connect_store(url, PoolSettings::new(config.scheduling_connections))
            .await
            .context("opening the scheduling connection pool")?;
        scheduling.migrate().await?;
        let background = connect_store(url, PoolSettings::new(config.background_connections))
            .await
            .context("opening the background connection pool")?;
        let api = connect_store(
            url,
            PoolSettings {
                max_connections: config.api_connections,
                acquire_timeout: config.api_acquire_timeout,
            },
        )
        .await
        .context("opening the API connection pool")?;
        Ok(StorePools {
            scheduling,
            background,
            api,
        })
    }
}

/// A running scheduler node.
pub struct Scheduler {
    api_addr: SocketAddr,
    node_id: String,
    store: Arc<dyn Store>,
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
        let node_id = config
            .schedule
            .node_id
            .clone()
            .unwrap_or_else(default_node_id);
        let pools = StorePools::open(&config.database)
            .await
            .context("opening the database")?;
        let store = Arc::clone(&pools.scheduling);
        let topics = Topics::new(&config.kafka.topic_prefix).context("kafka.topic_prefix")?;
        let kafka = KafkaSettings {
            brokers: config.kafka.brokers.clone(),
            options: config.kafka.options.clone(),
        };

        let admin = Arc::new(TopicAdmin::new(&kafka).context("creating the Kafka admin client")?);
        admin
            .ensure_shared_topics(&topics, config.kafka.results_partitions)
            .await
            .context("creating Kadence's shared topics")?;
        let partitions = Arc::new(PartitionDirectory::new(Arc::clone(&store)));
        for app in store.list_apps().await.context("listing apps")? {
            admin
                .ensure_topic(&topics.triggers(&app.name), app.partitions, &[])
                .await
                .with_context(|| format!("verifying the trigger topic of app {}", app.name))?;
            partitions.remember(app.name, app.partitions);
        }

        let producer = kafka
            .idempotent_producer()
            .context("creating the trigger producer")?;
        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        let (wheel_tx, wheel_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let (due_tx, due_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let (ack_tx, ack_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let schedule = &config.schedule;

        let ledger = Arc::new(AckLedger::new());
        let cancelled = Arc::new(CancelledFires::new());
        let pre_reader = PreReader::new(
            Arc::clone(&store),
            PreReadSettings {
                window: schedule.pre_read_window,
                batch_size: schedule.batch_size,
                lease: schedule.lease,
                node_id: node_id.clone(),
            },
            wheel_tx.clone(),
        );
        let pre_read_waker = pre_reader.waker();
        tasks.spawn(pre_reader.run(
            Arc::clone(&clock),
            schedule.pre_read_interval,
            shutdown.clone(),
        ));

        let claimer = Claimer::new(
            Arc::clone(&store),
            node_id.clone(),
            schedule.lease,
            schedule.batch_size,
            wheel_tx.clone(),
            Arc::clone(&ledger),
        );
        tasks.spawn(claimer.run(
            Arc::clone(&clock),
            schedule.claim_interval,
            shutdown.clone(),
        ));
        tasks.spawn(
            CancellationPoller::new(Arc::clone(&store), Arc::clone(&cancelled), schedule.lease)
                .run(
                    Arc::clone(&clock),
                    schedule.cancel_poll_interval,
                    shutdown.clone(),
                ),
        );
        tasks.spawn(run_wheel(
            wheel_rx,
            due_tx,
            Arc::clone(&clock),
            schedule.emit_lead,
            shutdown.clone(),
        ));

        let registry = Arc::new(Registry::new(config.registry.dead_timeout));
        let beats_partitions = admin
            .partition_count(&topics.beats())
            .await
            .context("reading the beats topic")?;
        let beats = BeatsReader::new(
            &kafka,
            &topics,
            beats_partitions,
            Arc::clone(&registry),
            Arc::clone(&pools.background),
            DeadLetters::new(producer.clone(), topics.dlq()),
            Arc::clone(&clock),
        )
        .context("starting the beats reader")?;
        tasks.spawn(beats.run(shutdown.clone()));
        tasks.spawn(run_sweeper(
            Arc::clone(&pools.background),
            config.registry.clone(),
            Arc::clone(&clock),
            shutdown.clone(),
        ));
        tasks.spawn(run_lost_run_monitor(
            Arc::clone(&pools.background),
            config.registry.clone(),
            Arc::clone(&clock),
            shutdown.clone(),
        ));

        let dispatcher = Dispatcher::new(
            producer.clone(),
            topics.clone(),
            Arc::clone(&partitions),
            Arc::clone(&registry),
            DispatchOutcomes {
                acks: ack_tx,
                ledger: Arc::clone(&ledger),
                cancelled: Arc::clone(&cancelled),
            },
            Arc::clone(&clock),
            DispatchSettings {
                max_in_flight: schedule.max_in_flight,
                drain_timeout: schedule.drain_timeout,
            },
        );
        tasks.spawn(dispatcher.run(due_rx, shutdown.clone()));
        tasks.spawn(AckWriter::new(Arc::clone(&store), ledger, ack_rx, 1000).run());

        let results = ResultsConsumer::new(
            &kafka,
            &topics,
            config.kafka.session_timeout,
            Arc::clone(&store),
            DeadLetters::new(producer.clone(), topics.dlq()),
            1000,
        )
        .context("starting the results consumer")?;
        tasks.spawn(results.run(shutdown.clone()));

        let logs = LogsConsumer::new(
            &kafka,
            &topics,
            config.kafka.session_timeout,
            Arc::clone(&pools.background),
            DeadLetters::new(producer.clone(), topics.dlq()),
            config.logs.max_lines_per_run,
        )
        .context("starting the logs consumer")?;
        tasks.spawn(logs.run(shutdown.clone()));

        let alarms = Arc::new(Alarms::from_config(&config.alarm).context("setting up alarms")?);
        let follow_up = FollowUp::new(
            Arc::clone(&pools.background),
            alarms,
            wheel_tx.clone(),
            node_id.clone(),
            millis(schedule.lease),
            config.monitors.clone(),
        );
        tasks.spawn(follow_up.run(Arc::clone(&clock), shutdown.clone()));
        tasks.spawn(run_reports(
            Arc::clone(&pools.background),
            config.monitors.report_interval,
            Arc::clone(&clock),
            shutdown.clone(),
        ));
        tasks.spawn(run_retention(
            Arc::clone(&pools.background),
            config.retention.clone(),
            Arc::clone(&clock),
            shutdown.clone(),
        ));

        let control = ControlChannel::new(producer, topics.control());
        let state = Arc::new(ApiState {
            store: Arc::clone(&pools.api),
            admin,
            topics,
            partitions,
            wheel: wheel_tx,
            cancelled,
            pre_read_waker,
            control,
            registry,
            clock,
            node_id: node_id.clone(),
            lease_ms: millis(schedule.lease),
            pre_read_window_ms: millis(schedule.pre_read_window),
            change_settle_ms: millis(schedule.emit_lead + schedule.cancel_poll_interval),
        });
        let api_limits = ApiLimits::from(&config.api);
        let api_addr = listener.local_addr().context("reading the API address")?;
        let api_shutdown = shutdown.clone();
        tasks.spawn(async move {
            let served = axum::serve(listener, router(state, api_limits))
                .with_graceful_shutdown(api_shutdown.cancelled_owned())
                .await;
            if let Err(error) = served {
                tracing::error!(%error, "API server stopped");
            }
        });
        tasks.close();
        tracing::info!(%api_addr, %node_id, backend = store.backend(), "scheduler started");
        Ok(Scheduler {
            api_addr,
            node_id,
            store: pools.background,
            shutdown,
            tasks,
        })
    }

    /// Where the API listens.
    pub fn api_addr(&self) -> SocketAddr {
        self.api_addr
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
