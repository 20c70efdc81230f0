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
use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Parser, Subcommand};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::{
    DEFAULT_PAGE_SIZE, ExecutorView, JobView, KillRequest, KillResponse, MAX_PAGE_SIZE,
    NewAppRequest, NewJobRequest, Page, RunLogView, TriggerRequest, TriggerResponse,
};
use crate::app::Scheduler;
use crate::clock::SystemClock;
use crate::config::Config;
use crate::model::{App, ExecutorStatus, Run};
use crate::schedule::{ScheduleSpec, format_in_zone, parse_time_zone, preview};

/// Kadence: a distributed job scheduler on Kafka.
#[derive(Debug, Parser)]
#[command(name = "kadence", version, about)]
pub struct Cli {
    /// Base URL of a scheduler's HTTP API (client subcommands).
    #[arg(
        long,
        global = true,
        env = "KADENCE_API_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    api: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scheduler node (configuration: --config file, then KADENCE_<SECTION>__<FIELD>).
    Serve {
        /// TOML configuration file.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Executor apps (XXL-JOB's executor groups).
    #[command(subcommand)]
    App(AppCommand),
    /// Jobs.
    #[command(subcommand)]
    Job(JobCommand),
    /// Executors known from their beats.
    #[command(subcommand)]
    Executor(ExecutorCommand),
    /// Print the next fire times of a schedule, one RFC 3339 instant per line (no server
    /// needed). Exits non-zero with a message naming the bad field for an invalid expression.
    Preview {
        /// Quartz cron expression, seconds first.
        #[arg(
            long,
            conflicts_with = "fix_rate",
            required_unless_present = "fix_rate"
        )]
        cron: Option<String>,
        /// Every N seconds.
        #[arg(long)]
        fix_rate: Option<u32>,
        /// IANA time zone the schedule is evaluated in; instants are printed in its offset.
        #[arg(long, default_value = "UTC")]
        time_zone: String,
        /// Fires strictly after this RFC 3339 instant (default: now).
        #[arg(long)]
        from: Option<String>,
        /// How many fire times.
        #[arg(long, default_value_t = 5)]
        count: usize,
    },
}

#[derive(Debug, Subcommand)]
enum ExecutorCommand {
    /// List executors with their state, partitions, handlers and running jobs.
    List {
        /// Only this app's executors.
        #[arg(long)]
        app: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum AppCommand {
    /// Create an app and its trigger topic.
    Add {
        /// App name: 1–64 of A-Z a-z 0-9 _ -.
        name: String,
        /// Partitions of its trigger topic: the most executors that share its triggers.
        #[arg(long)]
        partitions: i32,
        /// Human-readable title.
        #[arg(long, default_value = "")]
        title: String,
    },
    /// List apps.
    List,
}

#[derive(Debug, Subcommand)]
enum JobCommand {
    /// Create a job (stopped unless --start).
    Add(Box<AddJob>),
    /// List jobs, a page at a time.
    List {
        /// Only this app's jobs.
        #[arg(long)]
        app: Option<String>,
        /// Only RUNNING or only STOPPED jobs.
        #[arg(long)]
        status: Option<String>,
        /// Jobs per page (at most 1000).
        #[arg(long, default_value_t = DEFAULT_PAGE_SIZE)]
        limit: u32,
        /// Start after this job id (the hint under a full page gives it).
        #[arg(long)]
        after: Option<String>,
    },
    /// Show one job.
    Show {
        /// Job id.
        id: String,
    },
    /// Change a job: give the fields to change as JSON, in the shape of the job's JSON
    /// (`kadence job show`), e.g. `--set '{"params": "x", "schedule_conf": "0 0 * * * ?"}'`.
    /// A running job whose schedule changes gets its next fire recomputed.
    Edit {
        /// Job id.
        id: String,
        /// The fields to change, as a JSON object.
        #[arg(long)]
        set: String,
    },
    /// Start scheduling a job.
    Start {
        /// Job id.
        id: String,
    },
    /// Stop scheduling a job.
    Stop {
        /// Job id.
        id: String,
    },
    /// Fire a job once now.
    Trigger {
        /// Job id.
        id: String,
        /// Parameters for this run only (default: the job's).
        #[arg(long)]
        params: Option<String>,
        /// Route only among these partitions, comma separated (XXL-JOB's address override);
        /// a broadcast job sends one shard to each.
        #[arg(long, value_delimiter = ',')]
        partitions: Option<Vec<i32>>,
    },
    /// Stop a job's running and queued runs on every executor.
    Kill {
        /// Job id.
        id: String,
        /// Why; shown on the killed runs.
        #[arg(long)]
        reason: Option<String>,
    },
    /// List a job's newest runs with their result codes and messages.
    Runs {
        /// Job id.
        id: String,
        /// How many runs (at most 1000).
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Only runs older than this log id (the hint under a full page gives it).
        #[arg(long)]
        after: Option<String>,
    },
    /// Print a run's log (its log id is in `job runs`), from a line on; --follow keeps
    /// printing new lines until the run has finished.
    Log {
        /// The run's log id.
        log_id: i64,
        /// First line to print (1-based).
        #[arg(long, default_value_t = 1)]
        from: i64,
        /// Keep printing lines as they arrive, until the run has finished.
        #[arg(long)]
        follow: bool,
    },
}

#[derive(Debug, Args)]
struct AddJob {
    /// Executor app.
    #[arg(long)]
    app: String,
    /// Handler name on the executors.
    #[arg(long)]
    handler: String,
    /// Quartz cron expression, seconds first (e.g. "0 */5 * * * ?").
    #[arg(long, conflicts_with_all = ["fix_rate", "fix_delay", "manual"])]
    cron: Option<String>,
    /// Fire every N seconds.
    #[arg(long, conflicts_with_all = ["fix_delay", "manual"])]
    fix_rate: Option<u32>,
    /// Fire N seconds after the previous run finished.
    #[arg(long, conflicts_with = "manual")]
    fix_delay: Option<u32>,
    /// No schedule: manual and API triggers only.
    #[arg(long)]
    manual: bool,
    /// Display name (default: the handler).
    #[arg(long)]
    name: Option<String>,
    /// Handler parameters.
    #[arg(long)]
    params: Option<String>,
    /// IANA time zone of the schedule.
    #[arg(long, default_value = "UTC")]
    time_zone: String,
    /// DO_NOTHING or FIRE_ONCE_NOW.
    #[arg(long)]
    misfire: Option<String>,
    /// FIRST, LAST or RANDOM.
    #[arg(long)]
    route: Option<String>,
    /// SERIAL_EXECUTION, DISCARD_LATER, COVER_EARLY or CONCURRENT.
    #[arg(long)]
    block: Option<String>,
    /// Timeout in seconds (0: none).
    #[arg(long)]
    timeout: Option<u32>,
    /// Owner, for people.
    #[arg(long)]
    author: Option<String>,
    /// E-mail address for failure alarms (repeat for several).
    #[arg(long = "alarm-email")]
    alarm_emails: Vec<String>,
    /// URL POSTed on failure alarms.
    #[arg(long)]
    alarm_webhook: Option<String>,
    /// Retries of a failed run.
    #[arg(long)]
    retry: Option<u32>,
    /// Job fired when this one succeeds (repeat for several).
    #[arg(long = "child")]
    child_job_ids: Vec<i64>,
    /// For a sharded job: EACH_SHARD (default) or ALL_SHARDS (children once all shards
    /// succeeded).
    #[arg(long)]
    child_trigger_mode: Option<String>,
    /// Script type (GLUE_SHELL, GLUE_PYTHON, …) for a script job; needs --glue-file.
    #[arg(long, requires = "glue_file")]
    glue_type: Option<String>,
    /// File holding the script of a script job.
    #[arg(long, requires = "glue_type")]
    glue_file: Option<PathBuf>,
    /// Start it right away.
    #[arg(long)]
    start: bool,
}

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

async fn job_command(client: &ApiClient, command: JobCommand) -> anyhow::Result<()> {
    match command {
        JobCommand::Add(add) => {
            let (schedule_type, schedule_conf) = match (
                &add.cron,
                add.fix_rate,
                add.fix_delay,
                add.manual,
            ) {
                (Some(cron), ..) => ("CRON", cron.clone()),
                (None, Some(seconds), ..) => ("FIX_RATE", seconds.to_string()),
                (None, None, Some(seconds), _) => ("FIX_DELAY", seconds.to_string()),
                (None, None, None, true) => ("NONE", String::new()),
                (None, None, None, false) => anyhow::bail!(
                    "give a schedule: --cron EXPR, --fix-rate SECONDS, --fix-delay SECONDS or --manual"
                ),
            };
            let glue_source = match &add.glue_file {
                Some(path) => Some(
                    std::fs::read_to_string(path)
                        .with_context(|| format!("reading the script {}", path.display()))?,
                ),
                None => None,
            };
            let job: JobView = client
                .post(
                    "/api/jobs",
                    &NewJobRequest {
                        app: add.app,
                        name: add.name,
                        schedule_type: Some(schedule_type.to_owned()),
                        schedule_conf: Some(schedule_conf),
                        time_zone: Some(add.time_zone),
                        misfire_strategy: add.misfire,
                        route_strategy: add.route,
                        handler: add.handler,
                        params: add.params,
                        block_strategy: add.block,
                        timeout_seconds: add.timeout,
                        author: add.author,
                        alarm_emails: Some(add.alarm_emails),
                        alarm_webhook: add.alarm_webhook,
                        retry_count: add.retry,
                        retry_backoff: None,
                        retry_backoff_seconds: None,
                        retry_backoff_cap_seconds: None,
                        glue_type: add.glue_type,
                        glue_source,
                        glue_remark: None,
                        child_job_ids: Some(add.child_job_ids),
                        child_trigger_mode: add.child_trigger_mode,
                        start: add.start,
                    },
                )
                .await?;
            println!("created job {} ({})", job.id, describe_status(&job));
        }
        JobCommand::List {
            app,
            status,
            limit,
            after,
        } => {
            let page: Page<JobView> = client
                .page(
                    "/api/jobs",
                    &[
                        ("app", app.clone()),
                        ("status", status.clone()),
                        ("limit", Some(limit.to_string())),
                        ("after", after),
                    ],
                )
                .await?;
            println!(
                "{:>6}  {:<16} {:<20} {:<9} {:<22} SCHEDULE",
                "ID", "APP", "HANDLER", "STATUS", "NEXT FIRE"
            );
            for job in page.items {
                println!(
                    "{:>6}  {:<16} {:<20} {:<9} {:<22} {} {}",
                    job.id,
                    job.app,
                    job.handler,
                    job.status,
                    format_ms(job.next_fire_ms),
                    job.schedule_type,
                    job.schedule_conf
                );
            }
            if let Some(next) = page.next {
                let mut more = format!("kadence job list --after {next} --limit {limit}");
                for (flag, value) in [("--app", app), ("--status", status)] {
                    if let Some(value) = value {
                        more.push_str(&format!(" {flag} {value}"));
                    }
                }
                println!("more: {more}");
            }
        }
        JobCommand::Show { id } => {
            let job: JobView = client.get(&format!("/api/jobs/{id}")).await?;
            println!("{}", serde_json::to_string_pretty(&job)?);
        }
        JobCommand::Edit { id, set } => {
            let changes: serde_json::Value = serde_json::from_str(&set)
                .context("--set must be a JSON object, e.g. '{\"params\": \"x\"}'")?;
            let job: JobView = client
                .send(
                    client
                        .http
                        .patch(format!("{}/api/jobs/{id}", client.base))
                        .json(&changes),
                )
                .await?;
            println!("job {} updated ({})", job.id, describe_status(&job));
        }
        JobCommand::Start { id } => {
            let job: JobView = client.post(&format!("/api/jobs/{id}/start"), &()).await?;
            println!("job {} {}", job.id, describe_status(&job));
        }
        JobCommand::Stop { id } => {
            let job: JobView = client.post(&format!("/api/jobs/{id}/stop"), &()).await?;
            println!("job {} {}", job.id, describe_status(&job));
        }
        JobCommand::Trigger {
            id,
            params,
            partitions,
        } => {
            let fired: TriggerResponse = client
                .post(
                    &format!("/api/jobs/{id}/trigger"),
                    &TriggerRequest { params, partitions },
                )
                .await?;
            for run in fired.runs {
                if run.shard_total > 1 {
                    println!(
                        "triggered {} (log id {}, shard {}/{})",
                        run.trigger_id, run.log_id, run.shard_index, run.shard_total
                    );
                } else {
                    println!("triggered {} (log id {})", run.trigger_id, run.log_id);
                }
            }
        }
        JobCommand::Kill { id, reason } => {
            let killed: KillResponse = client
                .post(&format!("/api/jobs/{id}/kill"), &KillRequest { reason })
                .await?;
            println!("kill requested for job {}", killed.job_id);
        }
        JobCommand::Log {
            log_id,
            from,
            follow,
        } => {
            let mut next = from;
            // After the run finished, one more quiet read: its last lines may trail its result.
            let mut quiet_after_finish = 0;
            loop {
                let log: RunLogView = client
                    .get(&format!("/api/runs/{log_id}/log?from_line={next}"))
                    .await?;
                for line in &log.lines {
                    println!("{line}");
                }
                next = log.next_line;
                if !follow {
                    break;
                }
                if log.lines.is_empty() {
                    if log.finished {
                        quiet_after_finish += 1;
                        if quiet_after_finish > 1 {
                            break;
                        }
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
            }
        }
        JobCommand::Runs { id, limit, after } => {
            let page: Page<Run> = client
                .page(
                    &format!("/api/jobs/{id}/runs"),
                    &[("limit", Some(limit.to_string())), ("after", after)],
                )
                .await?;
            println!(
                "{:>8} {:<40} {:<9} {:<24} {:<11} {:>4}  MESSAGE",
                "LOG ID", "TRIGGER ID", "TYPE", "SCHEDULED", "STATE", "CODE"
            );
            for run in page.items {
                println!(
                    "{:>8} {:<40} {:<9} {:<24} {:<11} {:>4}  {}",
                    run.log_id,
                    run.trigger_id.as_str(),
                    run.trigger_type.as_str(),
                    format_ms(Some(run.scheduled_at_ms)),
                    run.state.as_str(),
                    run.handle_code
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| "-".into()),
                    run.handle_msg.as_deref().unwrap_or("").replace('\n', " ⏎ ")
                );
            }
            if let Some(next) = page.next {
                println!("more: kadence job runs {id} --after {next} --limit {limit}");
            }
        }
    }
    Ok(())
}

fn describe_status(job: &JobView) -> String {
    match job.next_fire_ms {
        Some(next) => format!("{}, next fire {}", job.status, format_ms(Some(next))),
        None => job.status.clone(),
    }
}

fn format_ms(ms: Option<i64>) -> String {
    ms.and_then(DateTime::<Utc>::from_timestamp_millis)
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|| "-".to_owned())
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
    kadence_executor::shutdown_signal().await;
    tracing::info!("shutting down");
    scheduler.stop(Duration::from_secs(30)).await;
    Ok(())
}

/// A small client of the HTTP API that turns error bodies into readable errors.
struct ApiClient {
    base: String,
    http: reqwest::Client,
}

impl ApiClient {
    fn new(base: &str) -> Self {
        ApiClient {
            base: base.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
        }
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    /// One page of a listing at `path` with the query `query` (empty values are left out).
    async fn page<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, Option<String>)],
    ) -> anyhow::Result<Page<T>> {
        let query: Vec<(&str, String)> = query
            .iter()
            .filter_map(|(name, value)| value.clone().map(|value| (*name, value)))
            .collect();
        self.send(self.http.get(format!("{}{path}", self.base)).query(&query))
            .await
    }

    /// Every item of a listing, page after page (for the short ones: apps, executors).
    async fn all<T: DeserializeOwned>(
        &self,
        path: &str,
        filter: &[(&str, Option<String>)],
    ) -> anyhow::Result<Vec<T>> {
        let mut items = Vec::new();
        let mut after = None;
        loop {
            let mut query = filter.to_vec();
            query.push(("limit", Some(MAX_PAGE_SIZE.to_string())));
            query.push(("after", after));
            let page: Page<T> = self.page(path, &query).await?;
            items.extend(page.items);
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(items),
            }
        }
    }

    async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<T> {
        self.send(self.http.post(format!("{}{path}", self.base)).json(body))
            .await
    }

    async fn send<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> anyhow::Result<T> {
        let response = request.send().await.with_context(|| {
            format!(
                "cannot reach the Kadence API at {} (is `kadence serve` running? set --api or KADENCE_API_URL)",
                self.base
            )
        })?;
        let status = response.status();
        let body = response.text().await.context("reading the API response")?;
        if !status.is_success() {
            let message = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|value| value.get("error")?.as_str().map(str::to_owned))
                .unwrap_or(body);
            anyhow::bail!("{message} (HTTP {})", status.as_u16());
        }
        serde_json::from_str(&body).with_context(|| format!("unexpected API response: {body}"))
    }
}

/// Items joined with commas, or "-" for none.
fn join_or_dash<T: std::fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "-".to_owned();
    }
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
