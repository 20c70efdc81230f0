//! `kadence replay …`, `kadence backfill …`, `kadence shadow report …` (see
//! [`crate::operations::replay`]).

use anyhow::{Context as _, bail};
use kadence_schemas::{JobId, TriggerType};

use clap::{Args, Subcommand};

use super::client::ApiClient;
use super::print::{OutputError, format_ms, outln};
use crate::http::api::{BackfillBody, ReplayBody};
use crate::operations::replay::OperationSummary;
use crate::operations::replay::shadow::ShadowReport;
use crate::operations::replay::topic_range::PartitionOffsets;
use crate::store::{Operation, RunOutcome};

/// `kadence replay`: a replay, unless a subcommand lists or shows them.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct ReplayArgs {
    #[command(subcommand)]
    pub(super) command: Option<ReplayCommand>,
    /// The app whose trigger topic is read.
    #[arg(long)]
    pub(super) app: Option<String>,
    /// Start of a time range (triggers scheduled at or after): RFC 3339 instant or ms.
    #[arg(long, requires = "to", conflicts_with = "offsets")]
    pub(super) from: Option<String>,
    /// End of a time range (scheduled before).
    #[arg(long, requires = "from")]
    pub(super) to: Option<String>,
    /// Offsets of one partition, PARTITION:FROM-TO (TO exclusive); repeat per partition.
    #[arg(long)]
    pub(super) offsets: Vec<String>,
    /// Only this job's triggers (repeatable).
    #[arg(long = "job")]
    pub(super) jobs: Vec<i64>,
    /// Only triggers of this type (repeatable): CRON, MANUAL, RETRY, …
    #[arg(long = "type")]
    pub(super) types: Vec<String>,
    /// Only triggers whose runs went so (repeatable): SUCCEEDED, FAILED, UNFINISHED, UNKNOWN.
    #[arg(long = "outcome")]
    pub(super) outcomes: Vec<String>,
    /// Send the replayed triggers to this app's executors instead (a staging group).
    #[arg(long)]
    pub(super) into: Option<String>,
    /// Triggers per second (default: the scheduler's replay.rate_per_second).
    #[arg(long)]
    pub(super) rate: Option<u32>,
    /// Replay triggers an earlier replay replayed.
    #[arg(long)]
    pub(super) force: bool,
    /// Only count what would be replayed.
    #[arg(long)]
    pub(super) dry_run: bool,
}

#[derive(Debug, Subcommand)]
pub(super) enum ReplayCommand {
    /// Replays and backfills, newest first.
    List {
        /// Only those that read or ran in this app.
        #[arg(long)]
        app: Option<String>,
        /// Entries per page (at most 1000).
        #[arg(long, default_value_t = crate::http::api::DEFAULT_PAGE_SIZE)]
        limit: u32,
        /// Only entries older than this id (the hint under a full page gives it).
        #[arg(long)]
        after: Option<String>,
    },
    /// One replay or backfill: who, what, how many.
    Show {
        /// Its id.
        id: i64,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum ShadowCommand {
    /// Shadow runs beside production's results by trigger id, disagreements first.
    Report {
        /// The app.
        #[arg(long)]
        app: String,
        /// Shadow runs started at or after: RFC 3339 instant or ms since the epoch.
        #[arg(long)]
        from: String,
        /// Shadow runs started before (default: now).
        #[arg(long)]
        to: Option<String>,
        /// Rows at most.
        #[arg(long, default_value_t = 1000)]
        limit: u32,
    },
}

/// Runs `kadence replay`.
pub(super) async fn replay_command(client: &ApiClient, args: ReplayArgs) -> anyhow::Result<()> {
    match args.command {
        Some(ReplayCommand::List { app, limit, after }) => {
            let query = [
                ("app", app),
                ("limit", Some(limit.to_string())),
                ("after", after),
            ];
            let page = client.page::<Operation>("/api/replays", &query).await?;
            print_operations(&page.items)?;
            if let Some(next) = page.next {
                eprintln!("more: --after {next}");
            }
            Ok(())
        }
        Some(ReplayCommand::Show { id }) => {
            let operation: Operation = client.get(&format!("/api/replays/{id}")).await?;
            print_operations(std::slice::from_ref(&operation))?;
            outln!("selection: {}", operation.request.selection)?;
            Ok(())
        }
        None => {
            let body = replay_body(args)?;
            let summary: OperationSummary = client.post("/api/replays", &body).await?;
            print_summary(&summary)
        }
    }
}

/// The request a `kadence replay` line makes.
fn replay_body(args: ReplayArgs) -> anyhow::Result<ReplayBody> {
    let Some(app) = args.app else {
        bail!("name the app whose triggers to replay: --app APP");
    };
    let offsets = if args.offsets.is_empty() {
        None
    } else {
        Some(
            args.offsets
                .iter()
                .map(|text| parse_offsets(text))
                .collect::<anyhow::Result<Vec<_>>>()?,
        )
    };
    if offsets.is_none() && args.from.is_none() {
        bail!("choose the range: --from and --to (times), or --offsets PARTITION:FROM-TO");
    }
    Ok(ReplayBody {
        app,
        offsets,
        from_ms: args.from.as_deref().map(parse_instant).transpose()?,
        to_ms: args.to.as_deref().map(parse_instant).transpose()?,
        job_ids: args
            .jobs
            .into_iter()
            .map(|id| JobId::new(id).context("--job"))
            .collect::<anyhow::Result<_>>()?,
        trigger_types: args
            .types
            .iter()
            .map(|text| text.parse::<TriggerType>().context("--type"))
            .collect::<anyhow::Result<_>>()?,
        outcomes: args
            .outcomes
            .iter()
            .map(|text| text.parse::<RunOutcome>().context("--outcome"))
            .collect::<anyhow::Result<_>>()?,
        target_app: args.into,
        rate_per_second: args.rate,
        force: args.force,
        dry_run: args.dry_run,
    })
}

/// Runs `kadence backfill`.
pub(super) async fn backfill_command(
    client: &ApiClient,
    job: i64,
    (from, to): (String, String),
    rate: Option<u32>,
    dry_run: bool,
) -> anyhow::Result<()> {
    let body = BackfillBody {
        job_id: JobId::new(job).context("--job")?,
        from_ms: parse_instant(&from)?,
        to_ms: parse_instant(&to)?,
        rate_per_second: rate,
        dry_run,
    };
    let summary: OperationSummary = client.post("/api/backfills", &body).await?;
    print_summary(&summary)
}

/// Runs `kadence shadow …`.
pub(super) async fn shadow_command(
    client: &ApiClient,
    command: ShadowCommand,
) -> anyhow::Result<()> {
    let ShadowCommand::Report {
        app,
        from,
        to,
        limit,
    } = command;
    let to_ms = match to {
        Some(text) => parse_instant(&text)?,
        None => kadence_schemas::now_ms(),
    };
    let query = [
        ("app", Some(app)),
        ("from_ms", Some(parse_instant(&from)?.to_string())),
        ("to_ms", Some(to_ms.to_string())),
        ("limit", Some(limit.to_string())),
    ];
    let report: ShadowReport = client.get_with("/api/shadow/report", &query).await?;
    outln!(
        "{} shadow runs compared, {} disagree{}",
        report.compared,
        report.disagreements,
        if report.truncated {
            " (more in the range: raise --limit)"
        } else {
            ""
        }
    )?;
    outln!(
        "{:<40} {:>6} {:>6} {:>9} {:>9} {:<4} MESSAGES (production | shadow)",
        "TRIGGER",
        "PROD",
        "SHADOW",
        "PROD MS",
        "SHADOW MS",
        "DIFF"
    )?;
    for row in &report.rows {
        let production = row.production.as_ref();
        outln!(
            "{:<40} {:>6} {:>6} {:>9} {:>9} {:<4} {} | {}",
            row.trigger_id.as_str(),
            production.map_or("-".to_owned(), |p| p.code.to_string()),
            row.shadow.code,
            production
                .and_then(|p| p.duration_ms)
                .map_or("-".to_owned(), |ms| ms.to_string()),
            row.shadow
                .duration_ms
                .map_or("-".to_owned(), |ms| ms.to_string()),
            if row.disagrees { "yes" } else { "" },
            production.and_then(|p| p.message.as_deref()).unwrap_or("-"),
            row.shadow.message.as_deref().unwrap_or("-"),
        )?;
    }
    Ok(())
}

/// `PARTITION:FROM-TO`.
fn parse_offsets(text: &str) -> anyhow::Result<PartitionOffsets> {
    let parsed = text.split_once(':').and_then(|(partition, range)| {
        let (from, to) = range.split_once('-')?;
        Some(PartitionOffsets {
            partition: partition.trim().parse().ok()?,
            from: from.trim().parse().ok()?,
            to: to.trim().parse().ok()?,
        })
    });
    parsed.with_context(|| format!("--offsets {text:?}: write PARTITION:FROM-TO, e.g. 0:100-200"))
}

/// An RFC 3339 instant, or ms since the epoch.
fn parse_instant(text: &str) -> anyhow::Result<i64> {
    if let Ok(ms) = text.trim().parse::<i64>() {
        return Ok(ms);
    }
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .map(|at| at.timestamp_millis())
        .with_context(|| format!("{text:?} is neither an RFC 3339 instant nor ms since the epoch"))
}

/// What a replay or backfill selected, per job, and whether it was emitted.
fn print_summary(summary: &OperationSummary) -> anyhow::Result<()> {
    match &summary.operation {
        Some(operation) => outln!(
            "{} {} recorded: {} triggers into app {}, emitted {} to {}",
            operation.request.kind.as_str().to_lowercase(),
            operation.id,
            operation.triggers,
            operation.request.target_app,
            format_ms(summary.emitted_from_ms),
            format_ms(summary.emitted_until_ms),
        )?,
        None => outln!(
            "dry run: {} triggers would be emitted; nothing changed",
            summary.triggers
        )?,
    }
    outln!(
        "read {} records ({} refused: undecodable or not signed by this cluster)",
        summary.read.records,
        summary.read.refused
    )?;
    if let (Some(first), Some(last)) = (&summary.first, &summary.last) {
        outln!(
            "first {} ({}), last {} ({})",
            first.trigger_id.as_str(),
            format_ms(Some(first.scheduled_at_ms)),
            last.trigger_id.as_str(),
            format_ms(Some(last.scheduled_at_ms))
        )?;
    }
    outln!(
        "{:<8} {:>8} {:<26} {:<26}",
        "JOB",
        "TRIGGERS",
        "FIRST",
        "LAST"
    )?;
    for job in &summary.jobs {
        outln!(
            "{:<8} {:>8} {:<26} {:<26}",
            job.job_id,
            job.triggers,
            format_ms(Some(job.first_scheduled_at_ms)),
            format_ms(Some(job.last_scheduled_at_ms))
        )?;
    }
    Ok(())
}

/// One line per replay or backfill.
fn print_operations(operations: &[Operation]) -> Result<(), OutputError> {
    outln!(
        "{:<6} {:<8} {:<16} {:<16} {:>8} {:<12} REQUESTED",
        "ID",
        "KIND",
        "APP",
        "INTO",
        "TRIGGERS",
        "BY"
    )?;
    for operation in operations {
        let request = &operation.request;
        outln!(
            "{:<6} {:<8} {:<16} {:<16} {:>8} {:<12} {}",
            operation.id,
            request.kind.as_str(),
            request.app.as_str(),
            request.target_app.as_str(),
            operation.triggers,
            request.requested_by,
            format_ms(Some(request.requested_at_ms))
        )?;
    }
    Ok(())
}
