//! A runnable executor with two handlers: `hello` succeeds, `fail` fails on purpose.
//!
//! ```text
//! KADENCE_BROKERS=127.0.0.1:9092 KADENCE_APP=demo cargo run -p kadence-executor --example demo
//! ```
//!
//! Environment: `KADENCE_BROKERS` (default `127.0.0.1:9092`), `KADENCE_BROKER_KIND` (`kafka`,
//! the default, or `tansu`: the development broker, whose quirks the client then works
//! round), `KADENCE_APP` (default `demo`),
//! `KADENCE_TOPIC_PREFIX` (default `kadence`), `KADENCE_TRUSTED_KEYS` (the scheduler's public
//! signing keys, from `kadence key list`, separated by commas: only triggers they signed run;
//! required unless `KADENCE_ALLOW_UNVERIFIED=1` says to verify nothing), `KADENCE_EXECUTOR_KEY`
//! (the app's executor key, from `kadence executor-key create --app APP`, signing what the
//! executor writes; required unless `KADENCE_ALLOW_UNSIGNED=1` says to sign nothing),
//! `KADENCE_METRICS_ADDRESS` (serve Prometheus metrics there,
//! e.g. `127.0.0.1:9464`), `KADENCE_OTLP_ENDPOINT` (export spans there, e.g.
//! `http://127.0.0.1:4318`). Stops gracefully on SIGTERM or Ctrl-C.

use std::time::Duration;

use kadence_executor::{BrokerKind, Executor, JobContext, JobError, JobResult};

/// Greets, taking a little time like real work, and watches for cancellation.
async fn hello(ctx: JobContext) -> JobResult {
    tokio::select! {
        _ = ctx.cancelled() => return Err(JobError::new("cancelled")),
        _ = tokio::time::sleep(Duration::from_millis(50)) => {}
    }
    tracing::info!(trigger_id = %ctx.trigger_id(), params = ctx.params(), "hello");
    // Lines for the run's log: `kadence job log <log id>` shows them.
    ctx.log(format!("hello with params {:?}", ctx.params()));
    ctx.log(format!(
        "shard {} of {}",
        ctx.shard_index(),
        ctx.shard_total()
    ));
    Ok(())
}

/// Always fails, to show how failures and their messages reach the scheduler.
async fn fail(ctx: JobContext) -> JobResult {
    Err(JobError::new(format!(
        "failing on purpose (params: {:?})",
        ctx.params()
    )))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let env =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let mut builder = Executor::builder();
    // Every active key during a rotation (the old and the new), so no trigger is refused.
    for key in env("KADENCE_TRUSTED_KEYS", "").split(',').map(str::trim) {
        if !key.is_empty() {
            builder = builder.trusted_key(key);
        }
    }
    // Without a key the build fails, unless this says to run unverified (a trusted network).
    if env("KADENCE_ALLOW_UNVERIFIED", "") == "1" {
        builder = builder.allow_unverified();
    }
    // What it writes is signed with its app's key; without one the build fails, unless this
    // says to run unsigned (a scheduler with `executor_auth.required = false`).
    if let Ok(key) = std::env::var("KADENCE_EXECUTOR_KEY") {
        builder = builder.executor_key(key);
    }
    if env("KADENCE_ALLOW_UNSIGNED", "") == "1" {
        builder = builder.allow_unsigned();
    }
    // Optional: Prometheus metrics on this address, spans exported to this OTLP endpoint.
    if let Ok(address) = std::env::var("KADENCE_METRICS_ADDRESS") {
        builder = builder.metrics_address(address.parse()?);
    }
    if let Ok(endpoint) = std::env::var("KADENCE_OTLP_ENDPOINT") {
        builder = builder.otlp_endpoint(endpoint);
    }
    let executor = builder
        .brokers(env("KADENCE_BROKERS", "127.0.0.1:9092"))
        .broker_kind(env("KADENCE_BROKER_KIND", "kafka").parse::<BrokerKind>()?)
        .app(env("KADENCE_APP", "demo"))
        .topic_prefix(env("KADENCE_TOPIC_PREFIX", "kadence"))
        // Hooks run once: before the first run of `hello` here, and at shutdown.
        .handler_with_hooks(
            "hello",
            hello,
            || async {
                tracing::info!("hello: init (e.g. open a connection pool)");
                Ok(())
            },
            || async {
                tracing::info!("hello: destroy (e.g. close it)");
                Ok(())
            },
        )
        .handler("fail", fail)
        .build()?;
    println!(
        "executor {} running handlers hello and fail for app {}",
        executor.id(),
        executor.app()
    );
    executor.run(kadence_executor::shutdown_signal()).await?;
    Ok(())
}
