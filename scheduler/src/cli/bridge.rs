//! `kadence bridge xxl-job --app APP`: runs the XXL-JOB bridge (`kadence-bridge`), a Kadence
//! executor of `APP` that is the scheduling centre of the app's unmodified XXL-JOB executors.
//! Point their `xxl.job.admin.addresses` at `http://{this host}:{port}/xxl-job-admin` (any
//! context path works) and they register here and run what Kadence triggers.
//!
//! The Kafka side takes the settings every Kadence executor takes, from the same environment
//! variables as the SDKs' demo executors (`KADENCE_BROKERS`, `KADENCE_TRUSTED_KEYS`,
//! `KADENCE_EXECUTOR_KEY`, …); the flags override them. It runs in the foreground until
//! SIGTERM or ctrl-c, then drains as any executor does, still taking callbacks meanwhile.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use kadence_bridge::{BridgeSettings, FollowSettings};
use kadence_executor::{BrokerKind, Executor};

use super::print::outln;

/// Bridges from Kadence to other schedulers' executors.
#[derive(Debug, Subcommand)]
pub(super) enum BridgeCommand {
    /// Run unmodified XXL-JOB executors of one app from Kadence's triggers: a Kadence
    /// executor on the Kafka side, their scheduling centre (api/registry, api/callback) on
    /// the HTTP side. Runs until SIGTERM or ctrl-c.
    XxlJob(XxlBridgeArgs),
}

/// Flags of `kadence bridge xxl-job`.
#[derive(Debug, Args)]
pub(super) struct XxlBridgeArgs {
    /// The app: the executors' xxl.job.executor.appname, which `kadence import xxl-job` made
    /// the Kadence app's name.
    #[arg(long, env = "KADENCE_APP")]
    app: String,
    /// Where the admin API the executors call listens.
    #[arg(long, env = "KADENCE_BRIDGE_LISTEN", default_value = "0.0.0.0:8081")]
    listen: SocketAddr,
    /// The executors' access token (xxl.job.accessToken): required on their calls here, and
    /// sent on the bridge's calls to them. Empty for none.
    #[arg(long, env = "KADENCE_BRIDGE_ACCESS_TOKEN", hide_env_values = true)]
    access_token: Option<String>,
    /// The admin address of another bridge of the same app (repeatable, or comma separated):
    /// registrations and callbacks are shared with it.
    #[arg(long = "peer", env = "KADENCE_BRIDGE_PEERS", value_delimiter = ',')]
    peers: Vec<String>,
    /// Hand script (GLUE) jobs to the executors too, which run them as XXL-JOB does. Off by
    /// default, as on every Kadence executor; needs a trusted key.
    #[arg(long, env = "KADENCE_BRIDGE_SCRIPTS")]
    scripts: bool,
    /// Kafka bootstrap servers.
    #[arg(long, env = "KADENCE_BROKERS", default_value = "127.0.0.1:9092")]
    brokers: String,
    /// The broker: kafka, or tansu (the development broker, whose quirks are worked round).
    #[arg(long, env = "KADENCE_BROKER_KIND", default_value = "kafka")]
    broker_kind: BrokerKind,
    /// The topic prefix the scheduler uses.
    #[arg(long, env = "KADENCE_TOPIC_PREFIX", default_value = "kadence")]
    topic_prefix: String,
    /// The scheduler's public key (`kadence key list`; repeatable, or comma separated during a
    /// rotation): only triggers it signed run.
    #[arg(
        long = "trusted-key",
        env = "KADENCE_TRUSTED_KEYS",
        value_delimiter = ','
    )]
    trusted_keys: Vec<String>,
    /// Verify nothing: only where nobody but the scheduler can write the trigger topic.
    #[arg(long, env = "KADENCE_ALLOW_UNVERIFIED")]
    allow_unverified: bool,
    /// The app's executor key (`kadence executor-key create --app APP`), which signs the
    /// results, log lines and beats the bridge writes.
    #[arg(long, env = "KADENCE_EXECUTOR_KEY", hide_env_values = true)]
    executor_key: Option<String>,
    /// Sign nothing: only for a scheduler that does not require executor signatures.
    #[arg(long, env = "KADENCE_ALLOW_UNSIGNED")]
    allow_unsigned: bool,
    /// This bridge's executor id (default: {app}-{host}-{pid}-{random}).
    #[arg(long, env = "KADENCE_EXECUTOR_ID")]
    executor_id: Option<String>,
    /// Serve Prometheus metrics (the executor SDK's) at this address.
    #[arg(long, env = "KADENCE_METRICS_ADDRESS")]
    metrics_address: Option<SocketAddr>,
    /// How long a run's executor may answer nothing before the run counts as lost.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    lost_after: Duration,
    /// How long a registration lasts without renewal (XXL-JOB: 90 s).
    #[arg(long, default_value = "90s", value_parser = humantime::parse_duration)]
    dead_timeout: Duration,
    /// How often each executor's beat is called.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    probe_interval: Duration,
    /// How often a running run's new log lines are fetched.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    log_poll: Duration,
    /// How long a stop lets the runs taken finish before handing them back.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    drain_timeout: Duration,
}

/// Runs `kadence bridge …`.
pub(super) async fn bridge_command(command: BridgeCommand) -> anyhow::Result<()> {
    let BridgeCommand::XxlJob(args) = command;
    super::init_logging();
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding the bridge's admin API to {}", args.listen))?;
    let address = listener.local_addr()?;
    let settings = BridgeSettings {
        access_token: args.access_token.clone().filter(|token| !token.is_empty()),
        peers: args.peers.clone(),
        probe_interval: args.probe_interval,
        dead_timeout: args.dead_timeout,
        follow: FollowSettings {
            log_poll: args.log_poll,
            lost_after: args.lost_after,
        },
        ..BridgeSettings::new(&args.app)
    };
    let scripts = args.scripts;
    let builder = executor_builder(args);
    // For whoever started it; one that stopped reading its output does not stop it.
    if let Err(error) =
        outln!("XXL-JOB bridge admin API listening on http://{address}/xxl-job-admin")
    {
        tracing::warn!(%error, "cannot print the bridge's address");
    }
    kadence_bridge::run(
        builder,
        scripts,
        settings,
        listener,
        kadence_executor::shutdown_signal(),
    )
    .await
    .context("the XXL-JOB bridge stopped")
}

/// The Kafka side's settings.
fn executor_builder(args: XxlBridgeArgs) -> kadence_executor::ExecutorBuilder {
    let mut builder = Executor::builder()
        .brokers(args.brokers)
        .broker_kind(args.broker_kind)
        .topic_prefix(args.topic_prefix)
        .drain_timeout(args.drain_timeout);
    for key in args
        .trusted_keys
        .into_iter()
        .filter(|key| !key.trim().is_empty())
    {
        builder = builder.trusted_key(key.trim());
    }
    if args.allow_unverified {
        builder = builder.allow_unverified();
    }
    if let Some(key) = args.executor_key.filter(|key| !key.is_empty()) {
        builder = builder.executor_key(key);
    }
    if args.allow_unsigned {
        builder = builder.allow_unsigned();
    }
    if let Some(id) = args.executor_id {
        builder = builder.executor_id(id);
    }
    if let Some(address) = args.metrics_address {
        builder = builder.metrics_address(address);
    }
    builder
}
