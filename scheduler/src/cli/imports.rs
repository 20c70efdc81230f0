//! `kadence import xxl-job`: reads an XXL-JOB database read-only (`xxl_reader`), posts the
//! snapshot to `POST /api/imports/xxl-job` and prints the report as tables — the mapping,
//! the differences, the reset tokens (shown only here). `--undo` posts to
//! `POST /api/imports/xxl-job/undo` instead. See `crate::operations::import` for what is mapped.

use anyhow::Context as _;
use clap::{Args, Subcommand};

use super::client::ApiClient;
use super::print::{OutputError, format_ms, outln};
use super::xxl_reader::read_snapshot;
use crate::domain::model::Access;
use crate::http::api::{XxlImportRequest, XxlUndoRequest};
use crate::operations::import::{
    Action, DEFAULT_PARTITIONS, DEFAULT_RESET_TOKEN_HOURS, ImportOptions, ImportReport, source_name,
};

/// Sources an import reads from.
#[derive(Debug, Subcommand)]
pub(super) enum ImportCommand {
    /// Import XXL-JOB's executor groups, jobs (with their script versions) and users from its
    /// MySQL database, read-only; `--dry-run` prints the mapping and every difference and
    /// writes nothing; `--undo` removes what an import created.
    XxlJob(XxlImportArgs),
}

/// Flags of `kadence import xxl-job`.
#[derive(Debug, Args)]
pub(super) struct XxlImportArgs {
    /// XXL-JOB's database: mysql://user:password@host:3306/xxl_job (read, never written).
    #[arg(long, required_unless_present = "source")]
    from: Option<String>,
    /// Print what would be created, skipped and refused and every difference; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Partitions of each new app's trigger topic: at most this many executors share an
    /// app's triggers; a SHARDING_BROADCAST job runs this many shards.
    #[arg(long, default_value_t = DEFAULT_PARTITIONS)]
    partitions: i32,
    /// IANA zone XXL-JOB's cron expressions and local times are read in (XXL-JOB used its
    /// server JVM's zone).
    #[arg(long, default_value = "UTC")]
    time_zone: String,
    /// Start the jobs RUNNING in XXL-JOB (default: every job is imported STOPPED, so nothing
    /// fires twice while both schedulers run).
    #[arg(long)]
    keep_state: bool,
    /// What an XXL-JOB user's permission on a group becomes: VIEW, OPERATE or SCRIPTS.
    #[arg(long, default_value = "OPERATE")]
    member_access: Access,
    /// Hours each imported user's reset token works.
    #[arg(long, default_value_t = DEFAULT_RESET_TOKEN_HOURS)]
    reset_token_hours: u32,
    /// The source's name in Kadence's records (default: from --from, `xxl-job:host:port/db`);
    /// a second import of the same source creates only what is new.
    #[arg(long)]
    source: Option<String>,
    /// Remove what the imports of this source created (jobs must be stopped first).
    #[arg(long)]
    undo: bool,
}

/// Runs an `import` subcommand.
pub(super) async fn import_command(
    client: &ApiClient,
    command: ImportCommand,
) -> anyhow::Result<()> {
    let ImportCommand::XxlJob(args) = command;
    let source = match (&args.source, &args.from) {
        (Some(source), _) => source.clone(),
        (None, Some(from)) => source_name(from),
        (None, None) => anyhow::bail!("give --from (XXL-JOB's database URL) or --source"),
    };
    if args.undo {
        let request = XxlUndoRequest {
            source,
            dry_run: args.dry_run,
        };
        let report: ImportReport = client.post("/api/imports/xxl-job/undo", &request).await?;
        return Ok(print_report(&report)?);
    }
    let from = args
        .from
        .as_deref()
        .context("--from is needed to read XXL-JOB's database")?;
    let snapshot = read_snapshot(from).await?;
    eprintln!(
        "read {} executor groups, {} jobs, {} script versions and {} users from {source}",
        snapshot.groups.len(),
        snapshot.jobs.len(),
        snapshot.glue_versions.len(),
        snapshot.users.len()
    );
    let request = XxlImportRequest {
        source,
        snapshot,
        options: ImportOptions {
            partitions: args.partitions,
            time_zone: args.time_zone,
            keep_state: args.keep_state,
            member_access: args.member_access,
            reset_token_hours: args.reset_token_hours,
        },
        dry_run: args.dry_run,
    };
    let report: ImportReport = client.post("/api/imports/xxl-job", &request).await?;
    Ok(print_report(&report)?)
}

fn print_report(report: &ImportReport) -> Result<(), OutputError> {
    outln!(
        "{:<6} {:>8} {:<32} {:<7} {:<24} REASON",
        "KIND",
        "XXL ID",
        "NAME",
        "ACTION",
        "KADENCE"
    )?;
    for row in &report.rows {
        outln!(
            "{:<6} {:>8} {:<32} {:<7} {:<24} {}",
            row.kind.as_str(),
            row.source_id,
            clip(&row.source_name, 32),
            row.action.as_str(),
            row.kadence.as_deref().unwrap_or("-"),
            row.reason.as_deref().unwrap_or("")
        )?;
    }
    if !report.differences.is_empty() {
        outln!("")?;
        outln!("DIFFERENCES")?;
        outln!("{:<6} {:>8} NOTE", "KIND", "XXL ID")?;
        for difference in &report.differences {
            let kind = difference.kind.map_or("ALL", |kind| kind.as_str());
            let id = difference
                .source_id
                .map_or_else(|| "-".to_owned(), |id| id.to_string());
            outln!("{kind:<6} {id:>8} {}", difference.note)?;
        }
    }
    if !report.reset_tokens.is_empty() {
        outln!("")?;
        outln!(
            "RESET TOKENS (shown only now: hand each to its user, who sets a password with it)"
        )?;
        outln!("{:<24} {:<70} EXPIRES", "USER", "TOKEN")?;
        for token in &report.reset_tokens {
            outln!(
                "{:<24} {:<70} {}",
                token.user,
                token.token,
                format_ms(Some(token.expires_at_ms))
            )?;
        }
    }
    outln!("")?;
    let counts: Vec<String> = Action::ALL
        .iter()
        .map(|action| (action, report.count(*action)))
        .filter(|(_, count)| *count > 0)
        .map(|(action, count)| format!("{count} {action}"))
        .collect();
    let what = if report.dry_run {
        "dry run, nothing written"
    } else {
        "done"
    };
    outln!("{} ({what}): {}", report.source, counts.join(", "))?;
    let refused = report.count(Action::Refuse) + report.count(Action::Keep);
    if refused > 0 {
        eprintln!("warning: {refused} rows were refused or kept: their REASON says why");
    }
    Ok(())
}

/// `text` cut to `width` characters.
fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(width - 1).collect();
        format!("{cut}…")
    }
}
