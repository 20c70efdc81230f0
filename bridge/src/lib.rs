//! The XXL-JOB bridge: runs unmodified XXL-JOB executors from Kadence's Kafka triggers, so a
//! team moves its scheduling centre to Kadence in one step and ports handlers later, if ever.
//!
//! Towards Kafka the bridge is a Kadence executor of one app, built on the executor SDK: it
//! joins the app's consumer group, verifies trigger signatures, holds triggers to their
//! millisecond, applies block strategies, timeouts and KILLs, publishes log lines and results
//! signed with the app's executor key, and commits only after a result is out. Towards the
//! legacy executors it is their scheduling centre: they register with it, it triggers their
//! handlers over their own HTTP API, and they call back with the result.
//!
//! ```text
//!   {p}.triggers.{app} ──► SDK consumer ──► forward ──run──► XXL-JOB executor
//!                                    ▲         │  ◄──log───        │
//!   {p}.results, {p}.logs ◄──────────┘         └─◄─── callback ◄───┘ (admin)
//! ```
//!
//! The modules:
//! - `admin`: the admin API executors call (`api/registry`, `api/registryRemove`,
//!   `api/callback`), with the access token, its relay to peer bridges, and the
//!   registrations a starting bridge takes from its peers.
//! - `legacy`: the registry of legacy executors (registrations, their beats, XXL-JOB's 90 s
//!   dead timeout) and the split of the bridge's partitions among them, which is how the
//!   scheduler's routing strategies reach them.
//! - `forward`: a trigger's way to an executor and back: choosing it (a broadcast's shards as
//!   XXL-JOB numbers them), `run`, following its log lines, the callback as the result, the
//!   lost run, and `kill` when the run is stopped.
//! - `runs`: the runs handed over and waiting for their callbacks, by XXL-JOB log id.
//! - `beats`: the bridge's beats, one per live legacy executor with its partitions and runs.
//! - `client`: the calls to an executor's embedded server.
//! - `wire`: XXL-JOB's JSON bodies and answers.
//!
//! [`run`] wires them: the SDK executor, the admin API on the given listener, the loop that
//! probes the executors (`beat`) and drops the registrations that run out, and the one that
//! takes the peers' registrations.

mod admin;
mod beats;
mod client;
mod forward;
mod legacy;
mod runs;
mod wire;

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kadence_executor::{Executor, ExecutorBuilder, ExecutorError, OwnedPartitions};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use admin::RELAY_HEADER;
pub use beats::legacy_executor_id;
pub use forward::FollowSettings;

use admin::AdminState;
use beats::LegacyBeats;
use client::ExecutorClient;
use forward::{Forwarder, now_ms};
use legacy::LegacyExecutors;
use runs::PendingRuns;

/// How a bridge treats its legacy executors. [`BridgeSettings::new`] gives XXL-JOB's values.
#[derive(Debug, Clone)]
pub struct BridgeSettings {
    /// The app this bridge fronts: the executors' `xxl.job.executor.appname`, which the
    /// import made the Kadence app's name.
    pub app: String,
    /// The access token both directions carry (`xxl.job.accessToken`); `None` for none.
    pub access_token: Option<String>,
    /// The admin addresses of the app's other bridges (`http://bridge-2:8080/xxl-job-admin`),
    /// which get every registration and the callbacks this bridge does not wait on.
    pub peers: Vec<String>,
    /// How often each registered executor's `beat` is called. Default 3 s.
    pub probe_interval: Duration,
    /// How long a registration lasts without renewal: XXL-JOB's 90 s.
    pub dead_timeout: Duration,
    /// How often and how patiently a running run is followed.
    pub follow: FollowSettings,
    /// The deadline of each call to an executor: XXL-JOB's admin gives 3 s.
    pub call_timeout: Duration,
}

impl BridgeSettings {
    /// XXL-JOB's values for the app `app`: no token, no peers, executors probed every 3 s and
    /// dropped 90 s after their last registration, log lines fetched every second, and a run
    /// lost once its executor has answered nothing for 30 s.
    pub fn new(app: impl Into<String>) -> BridgeSettings {
        BridgeSettings {
            app: app.into(),
            access_token: None,
            peers: Vec::new(),
            probe_interval: Duration::from_secs(3),
            dead_timeout: Duration::from_secs(90),
            follow: FollowSettings {
                log_poll: Duration::from_secs(1),
                lost_after: Duration::from_secs(30),
            },
            call_timeout: Duration::from_secs(3),
        }
    }
}

/// Why a bridge could not run.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The executor side could not be built or stopped with an error.
    #[error(transparent)]
    Executor(#[from] ExecutorError),
    /// The admin API could not serve.
    #[error("the admin API stopped: {0}")]
    Serve(#[source] std::io::Error),
}

/// Runs a bridge until `shutdown` resolves: the executor side as `builder` describes it (the
/// brokers, keys and Kafka settings; the bridge adds the app, its handlers and its beats),
/// `with_scripts` saying whether script triggers go to the executors (they run GLUE jobs;
/// the SDK's rule that scripts need a trusted key holds), and the admin API on `listener`.
///
/// The admin API keeps answering while the executor drains, so the runs it waits for can
/// still call back; it stops once the executor has.
pub async fn run(
    builder: ExecutorBuilder,
    with_scripts: bool,
    settings: BridgeSettings,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), BridgeError> {
    let legacy = Arc::new(LegacyExecutors::new(settings.dead_timeout));
    let runs = Arc::new(PendingRuns::default());
    let client = ExecutorClient::new(settings.access_token.clone(), settings.call_timeout);
    let partitions: Arc<OnceLock<OwnedPartitions>> = Arc::new(OnceLock::new());
    let forwarder = Arc::new(Forwarder {
        legacy: Arc::clone(&legacy),
        runs: Arc::clone(&runs),
        client: client.clone(),
        partitions: Arc::clone(&partitions),
        follow: settings.follow,
    });
    let mut builder = (builder.app(&settings.app))
        .beat_plan(Arc::new(LegacyBeats::new(
            Arc::clone(&legacy),
            Arc::clone(&runs),
        )))
        .fallback_handler({
            let forwarder = Arc::clone(&forwarder);
            move |ctx| Arc::clone(&forwarder).forward(ctx)
        });
    if with_scripts {
        builder = builder.script_runner(move |ctx| Arc::clone(&forwarder).forward(ctx));
    }
    let executor: Executor = builder.build()?;
    let _ = partitions.set(executor.partitions());

    let stop = CancellationToken::new();
    let admin_state = Arc::new(AdminState {
        app: settings.app.clone(),
        access_token: (settings.access_token.clone()).filter(|token| !token.is_empty()),
        legacy: Arc::clone(&legacy),
        runs,
        peers: settings.peers.clone(),
        http: reqwest::Client::new(),
    });
    let admin = admin::router(Arc::clone(&admin_state));
    let serving =
        axum::serve(listener, admin).with_graceful_shutdown(stop.clone().cancelled_owned());
    let server = tokio::spawn(async move { serving.await });
    let probes = tokio::spawn(probe_executors(
        legacy,
        client,
        settings.probe_interval,
        stop.clone(),
    ));
    let peers = tokio::spawn(pull_from_peers(admin_state, stop.clone()));

    let ran = executor.run(shutdown).await;
    stop.cancel();
    let _ = probes.await;
    let _ = peers.await;
    let served = server.await.unwrap_or(Ok(()));
    ran?;
    served.map_err(BridgeError::Serve)
}

/// At once and every 30 s (XXL-JOB's registration interval): takes the peers'
/// registrations, so a bridge that starts, or missed what they passed on while it was down,
/// knows their executors.
async fn pull_from_peers(state: Arc<AdminState>, stop: CancellationToken) {
    if state.peers.is_empty() {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => admin::pull_registrations(&state).await,
        }
    }
}

/// Every `interval`: drops the registrations that ran out and calls each executor's `beat`,
/// taking the ones that answer nothing out of routing (XXL-JOB's FAILOVER asks the same at
/// each trigger).
async fn probe_executors(
    legacy: Arc<LegacyExecutors>,
    client: ExecutorClient,
    interval: Duration,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        for address in legacy.expire(now_ms()) {
            tracing::warn!(%address, "an XXL-JOB executor's registration ran out");
        }
        let probes = legacy.registered().into_iter().map(|address| {
            let client = client.clone();
            async move {
                let answers = match client.beat(&address).await {
                    Ok(answer) if answer.is_success() => true,
                    // It answers, so it stays in routing: a run handed to it then fails with
                    // the same refusal, where its operator sees it, instead of waiting.
                    Ok(answer) => {
                        tracing::warn!(%address, msg = ?answer.msg,
                            "an XXL-JOB executor refuses the bridge's beat (its access token?)");
                        true
                    }
                    Err(error) => {
                        tracing::debug!(%error, "an XXL-JOB executor did not answer its beat");
                        false
                    }
                };
                (address, answers)
            }
        });
        for (address, answers) in futures::future::join_all(probes).await {
            legacy.answered(&address, answers);
        }
    }
}
