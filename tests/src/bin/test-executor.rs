//! An executor process for the fault tests: handlers `ok` and `sleep` (params: ms). It prints
//! `started <trigger id>` when a `sleep` run begins, so a test knows when to kill it. SIGTERM
//! and SIGINT stop it gracefully, as they stop any executor built on `shutdown_signal`.
//!
//! Environment: `KADENCE_BROKERS`, `KADENCE_APP`, `KADENCE_TOPIC_PREFIX`, `KADENCE_EXECUTOR_ID`;
//! optional `KADENCE_SESSION_TIMEOUT_MS` (default 6000) and `KADENCE_BEAT_INTERVAL_MS`.

use std::io::Write;
use std::time::Duration;

use kadence_executor::{Executor, JobContext, JobError, JobResult};

async fn ok(_ctx: JobContext) -> JobResult {
    Ok(())
}

async fn sleep(ctx: JobContext) -> JobResult {
    println!("started {}", ctx.trigger_id());
    std::io::stdout().flush().ok();
    let millis: u64 = ctx.params().trim().parse()?;
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(millis)) => Ok(()),
        _ = ctx.cancelled() => Err(JobError::new("stopped early")),
    }
}

/// A duration in ms from the environment, or `default`.
fn millis_from_env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|value| {
            value
                .parse()
                .unwrap_or_else(|_| panic!("{name} must be a number of ms"))
        })
        .unwrap_or(default)
}

#[tokio::main]
async fn main() -> Result<(), kadence_executor::ExecutorError> {
    let env = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is required"));
    let executor = Executor::builder()
        .brokers(env("KADENCE_BROKERS"))
        .app(env("KADENCE_APP"))
        .topic_prefix(env("KADENCE_TOPIC_PREFIX"))
        .executor_id(env("KADENCE_EXECUTOR_ID"))
        .session_timeout(Duration::from_millis(millis_from_env(
            "KADENCE_SESSION_TIMEOUT_MS",
            6_000,
        )))
        .beat_interval(Duration::from_millis(millis_from_env(
            "KADENCE_BEAT_INTERVAL_MS",
            3_000,
        )))
        .handler("ok", ok)
        .handler("sleep", sleep)
        .build()?;
    println!("ready");
    executor.run(kadence_executor::shutdown_signal()).await
}
