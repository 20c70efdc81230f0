//! The `kadence` command: `kadence serve` runs a scheduler node; every other subcommand is a
//! client of a node's HTTP API (`--api`, or `KADENCE_API_URL`), so operators never write SQL.
//!
//! Every client subcommand sends a token: `KADENCE_TOKEN`, else the one `kadence login` saved
//! (`credentials`). Login and logout are `sessions`; users and API tokens `users`; signing
//! keys `keys`; replays, backfills and the shadow report `replays`; `kadence import xxl-job`
//! `imports`, which reads XXL-JOB's MySQL database itself (`xxl_reader`, read-only) and posts
//! what it read: the server maps and writes it. `kadence bridge xxl-job` (`bridge`) is the
//! other long-running command: the `kadence-bridge` crate's XXL-JOB bridge.
//!
//! ```text
//! kadence login --user admin
//! kadence app add demo --partitions 3
//! kadence job add --app demo --handler hello --cron "*/5 * * * * ?" --start
//! kadence job trigger 1 --params '{"n": 1}'
//! kadence job runs 1
//! ```
//!
//! Output goes through `print::outln!`, never `println!`: a reader that stops early
//! (`kadence job list | head -1`) ends the command quietly instead of a panic (see `print`).

#![deny(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;

use crate::app::Scheduler;
use crate::clock::SystemClock;
use crate::config::Config;

mod apps;
mod args;
mod bridge;
mod client;
mod credentials;
mod executors;
mod imports;
mod jobs;
mod keys;
mod preview;
mod print;
mod replays;
mod sessions;
mod users;
mod xxl_reader;

use apps::app_command;
pub use args::Cli;
use args::{Command, ExecutorCommand};
use client::ApiClient;
use executors::list_executors;
use jobs::job_command;
use keys::{executor_key_command, key_command};
use preview::print_preview;
use print::{OutputError, outln};
use users::{print_audit, token_command, user_command};

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
        // The reader of our output has all it wanted (`| head -1`): not a failure.
        Err(error) if matches!(error.downcast_ref(), Some(OutputError::Closed)) => {
            ExitCode::SUCCESS
        }
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
        Command::App(command) => app_command(&client, command).await,
        Command::Job(command) => job_command(&client, command).await,
        Command::Executor(ExecutorCommand::List { app }) => list_executors(&client, app).await,
        Command::Login {
            user,
            password_stdin,
        } => sessions::login(&client, user, password_stdin).await,
        Command::Logout => sessions::logout(&client).await,
        Command::User(command) => user_command(&client, command).await,
        Command::Token(command) => token_command(&client, command).await,
        Command::Key(command) => key_command(&client, command).await,
        Command::ExecutorKey(command) => executor_key_command(&client, command).await,
        Command::Replay(args) => replays::replay_command(&client, args).await,
        Command::Backfill {
            job,
            from,
            to,
            rate,
            dry_run,
        } => replays::backfill_command(&client, job, (from, to), rate, dry_run).await,
        Command::Shadow(command) => replays::shadow_command(&client, command).await,
        Command::Import(command) => imports::import_command(&client, command).await,
        Command::Bridge(command) => bridge::bridge_command(command).await,
        Command::Audit {
            app,
            user,
            target,
            limit,
            after,
        } => {
            let filter = [("app", app), ("user", user), ("target", target)];
            print_audit(&client, filter, limit, after).await
        }
        Command::Openapi => {
            let document = crate::http::api::openapi_document().to_pretty_json()?;
            outln!("{document}")?;
            Ok(())
        }
        Command::Preview {
            cron,
            fix_rate,
            time_zone,
            from,
            count,
        } => print_preview(cron, fix_rate, &time_zone, from, count),
    }
}

/// Logs of a long-running command (`serve`, `bridge`) to standard error, filtered by
/// `RUST_LOG` (`info` when unset), coloured only on a terminal.
fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
}

async fn serve(config_file: Option<PathBuf>) -> anyhow::Result<()> {
    init_logging();
    let config = Config::load(config_file.as_deref())?;
    let listener = tokio::net::TcpListener::bind(config.api.listen)
        .await
        .with_context(|| format!("binding the API to {}", config.api.listen))?;
    let scheduler = Scheduler::start(config, listener, Arc::new(SystemClock)).await?;
    // For whoever started the node; one that stopped reading its output does not stop it.
    if let Err(error) = outln!("Kadence API listening on http://{}", scheduler.api_addr()) {
        tracing::warn!(%error, "cannot print the API's address");
    }
    kadence_kafka::shutdown_signal().await;
    tracing::info!("shutting down");
    scheduler.stop(Duration::from_secs(30)).await;
    Ok(())
}
