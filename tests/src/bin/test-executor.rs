//! The Rust executor process of the fault tests and the conformance suite. The reference
//! Python executor's demo (`python -m kadence_executor.demo`) has the same interface, so the
//! conformance suite drives either the same way:
//!
//! - Handlers: `ok` succeeds; `sleep` (params: ms) writes the job log line `sleeping {ms} ms
//!   on {executor id}`, then waits that long or until cancelled, then fails with `stopped
//!   early` (the line tells two runs of one trigger apart when they ran on different
//!   executors); `fail` fails with its params as the message (`failed on purpose` when
//!   empty); `log` (params: `n` or `n:bytes`) writes the job log lines `line 1` … `line n`,
//!   or with `bytes` each line `line {i} ` padded with `x` to `bytes` bytes;
//!   `shard` writes the line `shard {index} of {total}`; `noop` succeeds at once and prints
//!   nothing (the end-to-end benchmark's handler: it measures the SDK, not standard output);
//!   `work` (params: `ms:n`, the end-to-end benchmark's handler of a sustained run) writes
//!   `n` job log lines and works `ms` after the first, as an application's handler does;
//!   `describe` writes the line `describing` and fails with the message `{production|shadow}
//!   run of a {trigger type} trigger` (a failure, because a success carries no message: it
//!   is how a test sees what the handler saw).
//! - Standard output: `ready` once built, then `started <trigger id>` as every run begins, so
//!   a test knows when to stop or kill it and counts how often a trigger ran, and `owns
//!   <partitions>` (ascending, comma separated, `none` for none) whenever the group assigns
//!   or revokes partitions (a shadow executor sends no beats to show it).
//! - SIGTERM and SIGINT stop it gracefully, as they stop any executor built on
//!   `shutdown_signal`.
//!
//! Environment: `KADENCE_BROKERS`, `KADENCE_APP`, `KADENCE_TOPIC_PREFIX`, `KADENCE_EXECUTOR_ID`;
//! optional `KADENCE_SESSION_TIMEOUT_MS` (default 6000), `KADENCE_REBALANCE_TIMEOUT_MS` (the
//! hand-back wait, default half the session timeout), `KADENCE_BEAT_INTERVAL_MS` (default
//! 3000), `KADENCE_DRAIN_TIMEOUT_MS` (how long a graceful stop waits for running runs, default
//! 30000), `KADENCE_OTLP_ENDPOINT` (export spans there), `KADENCE_TRUSTED_KEYS` (scheduler
//! public keys, comma separated; required unless `KADENCE_ALLOW_UNVERIFIED` is `1` or `true`,
//! which with no key verifies nothing), `KADENCE_EXECUTOR_KEY` (the app's executor key; required
//! unless `KADENCE_ALLOW_UNSIGNED` is `1` or `true`, which signs nothing), `KADENCE_SHADOW` (`1` or
//! `true`: a shadow executor, `ExecutorBuilder::shadow`), `KADENCE_SCRIPTS` (`1` or `true`:
//! run script jobs, which needs a trusted key), `KADENCE_SCRIPT_DIR` (where their files go),
//! `KADENCE_GROUP_PROTOCOL` (`classic`, the default, also when empty, or `consumer`: Kafka's
//! KIP-848 group protocol, whose session and heartbeat are the broker's,
//! `ExecutorBuilder::group_protocol`) and `KADENCE_BROKER_KIND` (`kafka`, the default, also
//! when empty, or `tansu`: `ExecutorBuilder::broker_kind`). The reference Python executor runs
//! no scripts and takes neither script variable.

use std::io::Write;
use std::time::Duration;

use kadence_executor::{
    BrokerKind, Executor, GroupProtocol, JobContext, JobError, JobResult, OwnedPartitions,
};

/// mimalloc, as the `kadence` binary: every trigger allocates its record, run and result, and
/// with glibc's allocator a third of an executor's CPU at 10 000 triggers/s went to
/// `malloc`/`free` (`perf`, see the book's benchmarks page, `docs/src/measurements/benchmarks.md`). An application chooses its
/// allocator; the SDK works with any.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Says on standard output that the run of `ctx` began.
fn announce(ctx: &JobContext) {
    println!("started {}", ctx.trigger_id());
    std::io::stdout().flush().ok();
}

async fn ok(ctx: JobContext) -> JobResult {
    announce(&ctx);
    Ok(())
}

async fn noop(_: JobContext) -> JobResult {
    Ok(())
}

/// This executor's id (`KADENCE_EXECUTOR_ID`), for the lines handlers write.
static EXECUTOR_ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();

async fn sleep(ctx: JobContext) -> JobResult {
    announce(&ctx);
    let millis: u64 = ctx.params().trim().parse()?;
    let executor_id = EXECUTOR_ID.get().map_or("", String::as_str);
    ctx.log(format!("sleeping {millis} ms on {executor_id}"));
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(millis)) => Ok(()),
        _ = ctx.cancelled() => Err(JobError::new("stopped early")),
    }
}

async fn fail(ctx: JobContext) -> JobResult {
    announce(&ctx);
    match ctx.params() {
        "" => Err(JobError::new("failed on purpose")),
        message => Err(JobError::new(message)),
    }
}

async fn log(ctx: JobContext) -> JobResult {
    announce(&ctx);
    let params = ctx.params().trim();
    let (lines, bytes) = match params.split_once(':') {
        Some((lines, bytes)) => (lines.parse::<u32>()?, Some(bytes.parse::<usize>()?)),
        None => (params.parse::<u32>()?, None),
    };
    for number in 1..=lines {
        ctx.log(match bytes {
            Some(bytes) => format!("{:x<bytes$}", format!("line {number} ")),
            None => format!("line {number}"),
        });
    }
    Ok(())
}

/// A handler as applications write them: works `SLEEP_MS` (params `SLEEP_MS:LINES`, e.g.
/// `50:2`) and writes `LINES` log lines meanwhile, the first at its start; cancelled, it fails
/// with `stopped early`.
async fn work(ctx: JobContext) -> JobResult {
    let (millis, lines) = (ctx.params().trim())
        .split_once(':')
        .ok_or_else(|| JobError::new("params: SLEEP_MS:LINES"))?;
    let (millis, lines): (u64, u32) = (millis.parse()?, lines.parse()?);
    if lines > 0 {
        ctx.log(format!("working, line 1 of {lines}"));
    }
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(millis)) => {}
        _ = ctx.cancelled() => return Err(JobError::new("stopped early")),
    }
    for number in 2..=lines {
        ctx.log(format!("working, line {number} of {lines}"));
    }
    Ok(())
}

async fn shard(ctx: JobContext) -> JobResult {
    announce(&ctx);
    ctx.log(format!(
        "shard {} of {}",
        ctx.shard_index(),
        ctx.shard_total()
    ));
    Ok(())
}

async fn describe(ctx: JobContext) -> JobResult {
    announce(&ctx);
    ctx.log("describing");
    let executor = if ctx.is_shadow() {
        "shadow"
    } else {
        "production"
    };
    Err(JobError::new(format!(
        "{executor} run of a {} trigger",
        ctx.trigger_type()
    )))
}

/// Prints `owns <partitions>` on every change of the partitions the group assigns.
fn announce_partitions(mut partitions: OwnedPartitions) {
    tokio::spawn(async move {
        while let Some(owned) = partitions.changed().await {
            let list: Vec<String> = owned.iter().map(i32::to_string).collect();
            let list = if list.is_empty() {
                "none".to_owned()
            } else {
                list.join(",")
            };
            println!("owns {list}");
            std::io::stdout().flush().ok();
        }
    });
}

/// Whether the environment variable `name` says yes (`1` or `true`).
fn flag_from_env(name: &str) -> bool {
    match std::env::var(name).as_deref() {
        Err(_) | Ok("" | "0" | "false") => false,
        Ok("1" | "true") => true,
        Ok(other) => panic!("{name} must be 1, true, 0 or false, not {other:?}"),
    }
}

/// The group protocol `KADENCE_GROUP_PROTOCOL` names; classic when it is unset or empty.
fn group_protocol_from_env() -> GroupProtocol {
    match std::env::var("KADENCE_GROUP_PROTOCOL").as_deref() {
        Err(_) | Ok("") => GroupProtocol::Classic,
        Ok(value) => value.parse().unwrap_or_else(|_| {
            panic!("KADENCE_GROUP_PROTOCOL must be classic or consumer, not {value:?}")
        }),
    }
}

/// The broker kind `KADENCE_BROKER_KIND` names; Apache Kafka when it is unset or empty.
fn broker_kind_from_env() -> BrokerKind {
    let value = std::env::var("KADENCE_BROKER_KIND").unwrap_or_default();
    value
        .parse()
        .unwrap_or_else(|error| panic!("KADENCE_BROKER_KIND: {error}"))
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
    EXECUTOR_ID.get_or_init(|| env("KADENCE_EXECUTOR_ID"));
    let session_timeout_ms = millis_from_env("KADENCE_SESSION_TIMEOUT_MS", 6_000);
    let mut builder = Executor::builder()
        .brokers(env("KADENCE_BROKERS"))
        .app(env("KADENCE_APP"))
        .topic_prefix(env("KADENCE_TOPIC_PREFIX"))
        .executor_id(env("KADENCE_EXECUTOR_ID"))
        .session_timeout(Duration::from_millis(session_timeout_ms))
        .rebalance_timeout(Duration::from_millis(millis_from_env(
            "KADENCE_REBALANCE_TIMEOUT_MS",
            session_timeout_ms / 2,
        )))
        .beat_interval(Duration::from_millis(millis_from_env(
            "KADENCE_BEAT_INTERVAL_MS",
            3_000,
        )))
        .drain_timeout(Duration::from_millis(millis_from_env(
            "KADENCE_DRAIN_TIMEOUT_MS",
            30_000,
        )))
        .handler("ok", ok)
        .handler("noop", noop)
        .handler("sleep", sleep)
        .handler("fail", fail)
        .handler("log", log)
        .handler("work", work)
        .handler("shard", shard)
        .handler("describe", describe)
        .shadow(flag_from_env("KADENCE_SHADOW"))
        .group_protocol(group_protocol_from_env())
        .broker_kind(broker_kind_from_env());
    if flag_from_env("KADENCE_SCRIPTS") {
        builder = builder.scripts(true);
    }
    if let Ok(dir) = std::env::var("KADENCE_SCRIPT_DIR") {
        builder = builder.script_dir(dir);
    }
    let trusted_keys = std::env::var("KADENCE_TRUSTED_KEYS").unwrap_or_default();
    for key in trusted_keys.split(',').filter(|key| !key.trim().is_empty()) {
        builder = builder.trusted_key(key.trim());
    }
    if flag_from_env("KADENCE_ALLOW_UNVERIFIED") {
        builder = builder.allow_unverified();
    }
    if let Ok(key) = std::env::var("KADENCE_EXECUTOR_KEY").map(|key| key.trim().to_owned())
        && !key.is_empty()
    {
        builder = builder.executor_key(key);
    }
    if flag_from_env("KADENCE_ALLOW_UNSIGNED") {
        builder = builder.allow_unsigned();
    }
    if let Ok(address) = std::env::var("KADENCE_METRICS_ADDRESS") {
        let address = address
            .parse()
            .unwrap_or_else(|_| panic!("KADENCE_METRICS_ADDRESS must be host:port, not {address}"));
        builder = builder.metrics_address(address);
    }
    if let Ok(endpoint) = std::env::var("KADENCE_OTLP_ENDPOINT") {
        builder = builder.otlp_endpoint(endpoint);
    }
    let executor = builder.build()?;
    announce_partitions(executor.partitions());
    println!("ready");
    std::io::stdout().flush().ok();
    executor.run(kadence_executor::shutdown_signal()).await
}
