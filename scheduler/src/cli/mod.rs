//! The `kadence` command: `kadence serve` runs a scheduler node; every other subcommand is a
//! client of a node's HTTP API (`--api`, or `KADENCE_API_URL`), so operators never write SQL.
//!
//! ```text
//! kadence app add demo --partitions 3
//! kadence job add --app demo --handler hello --cron "*/5 * * * * ?" --start
//! kadence job trigger 1 --params '{"n": 1}'
//! kadence job runs 1
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::Parser;

use crate::api::{ExecutorView, NewAppRequest};
use crate::app::Scheduler;
use crate::clock::SystemClock;
use crate::config::Config;
use crate::model::{App, ExecutorStatus};
use crate::schedule::{ScheduleSpec, format_in_zone, parse_time_zone, preview};

mod args;
mod client;
mod jobs;
mod print;

pub use args::Cli;
use args::{AppCommand, Command, ExecutorCommand};
use client::ApiClient;
use jobs::job_command;
use print::{format_ms, join_or_dash};

/// Entry point of the `kadence` binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let client = ApiClient::new(&cli.api);
    match cli.command {
        Command::Serve { config } => serve(config).await,
        Command::App(AppCommand::Add {
            name,
            partitions,
            title,
        }) => {
            let app: App = client
                .post(
                    "/api/apps",
                    &NewAppRequest {
                        name,
                        partitions,
                        title,
                    },
                )
                .await?;
            println!(
                "created app {} with {} partitions",
                app.name, app.partitions
            );
            Ok(())
        }
        Command::App(AppCommand::List) => {
            let apps: Vec<App> = client.all("/api/apps", &[]).await?;
            println!("{:<24} {:>10}  TITLE", "APP", "PARTITIONS");
            for app in apps {
                println!("{:<24} {:>10}  {}", app.name, app.partitions, app.title);
            }
            Ok(())
        }
        Command::Job(command) => job_command(&client, command).await,
        Command::Executor(ExecutorCommand::List { app }) => {
            let executors: Vec<ExecutorView> =
                client.all("/api/executors", &[("app", app)]).await?;
            println!(
                "{:<36} {:<16} {:<8} {:<12} {:<24} {:<16} HANDLERS",
                "EXECUTOR", "APP", "STATE", "PARTITIONS", "LAST BEAT", "RUNNING JOBS"
            );
            for view in executors {
                let executor = view.entry;
                let state = match (view.live, executor.state) {
                    (false, ExecutorStatus::Running) => "STALE",
                    (_, state) => state.as_str(),
                };
                println!(
                    "{:<36} {:<16} {:<8} {:<12} {:<24} {:<16} {}",
                    executor.executor_id,
                    executor.app,
                    state,
                    join_or_dash(&executor.owned_partitions),
                    format_ms(Some(executor.last_beat_at_ms)),
                    join_or_dash(&executor.running_jobs),
                    join_or_dash(&executor.handlers),
                );
            }
            Ok(())
        }
        Command::Preview {
            cron,
            fix_rate,
            time_zone,
            from,
            count,
        } => {
            let schedule = match (cron, fix_rate) {
                (Some(cron), _) => ScheduleSpec::parse("CRON", &cron)?,
                (None, Some(seconds)) => ScheduleSpec::parse("FIX_RATE", &seconds.to_string())?,
                (None, None) => anyhow::bail!("give a schedule: --cron EXPR or --fix-rate SECONDS"),
            };
            let zone = parse_time_zone(&time_zone)?;
            let after = match from {
                Some(text) => DateTime::parse_from_rfc3339(&text)
                    .with_context(|| format!("--from {text:?} is not an RFC 3339 instant"))?
                    .timestamp_millis(),
                None => Utc::now().timestamp_millis(),
            };
            for fire in preview(&schedule, zone, after, count) {
                println!("{}", format_in_zone(fire, zone));
            }
            Ok(())
        }
    }
}

async fn serve(config_file: Option<PathBuf>) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let config = Config::load(config_file.as_deref())?;
    let listener = tokio::net::TcpListener::bind(config.api.listen)
        .await
        .with_context(|| format!("binding the API to {}", config.api.listen))?;
    let scheduler = Scheduler::start(config, listener, Arc::new(SystemClock)).await?;
    println!("Kadence API listening on http://{}", scheduler.api_addr());
    kadence_kafka::shutdown_signal().await;
    tracing::info!("shutting down");
    scheduler.stop(Duration::from_secs(30)).await;
    Ok(())
}
