//! `kadence job …`: every job subcommand, as calls to the API.

use anyhow::Context as _;

use super::args::{AddJob, JobCommand};
use super::client::ApiClient;
use super::print::{describe_status, format_ms, outln};
use crate::domain::model::Run;
use crate::http::api::{
    JobView, KillRequest, KillResponse, NewJobRequest, Page, RunKillResponse, RunLogView,
    TriggerRequest, TriggerResponse,
};

pub(super) async fn job_command(client: &ApiClient, command: JobCommand) -> anyhow::Result<()> {
    match command {
        JobCommand::Add(add) => add_job(client, *add).await?,
        JobCommand::List {
            app,
            status,
            limit,
            after,
        } => list_jobs(client, app, status, limit, after).await?,
        JobCommand::Show { id } => {
            let job: JobView = client.get(&format!("/api/jobs/{id}")).await?;
            outln!("{}", serde_json::to_string_pretty(&job)?)?;
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
            outln!("job {} updated ({})", job.id, describe_status(&job))?;
        }
        JobCommand::Start { id } => {
            let job: JobView = client.post(&format!("/api/jobs/{id}/start"), &()).await?;
            outln!("job {} {}", job.id, describe_status(&job))?;
        }
        JobCommand::Stop { id } => {
            let job: JobView = client.post(&format!("/api/jobs/{id}/stop"), &()).await?;
            outln!("job {} {}", job.id, describe_status(&job))?;
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
                    outln!(
                        "triggered {} (log id {}, shard {}/{})",
                        run.trigger_id,
                        run.log_id,
                        run.shard_index,
                        run.shard_total
                    )?;
                } else {
                    outln!("triggered {} (log id {})", run.trigger_id, run.log_id)?;
                }
            }
        }
        JobCommand::KillRun { log_id, reason } => kill_run(client, log_id, reason).await?,
        JobCommand::Kill { id, reason } => {
            let killed: KillResponse = client
                .post(&format!("/api/jobs/{id}/kill"), &KillRequest { reason })
                .await?;
            outln!("kill requested for job {}", killed.job_id)?;
        }
        JobCommand::Log {
            log_id,
            from,
            follow,
        } => print_log(client, log_id, from, follow).await?,
        JobCommand::Runs { id, limit, after } => list_runs(client, &id, limit, after).await?,
    }
    Ok(())
}

/// Asks the executors to stop the run `log_id`.
async fn kill_run(client: &ApiClient, log_id: i64, reason: Option<String>) -> anyhow::Result<()> {
    let killed: RunKillResponse = client
        .post(&format!("/api/runs/{log_id}/kill"), &KillRequest { reason })
        .await?;
    outln!(
        "kill requested for run {} ({})",
        killed.log_id,
        killed.trigger_id
    )?;
    Ok(())
}

/// Creates a job from the flags of `kadence job add`.
async fn add_job(client: &ApiClient, add: AddJob) -> anyhow::Result<()> {
    let (schedule_type, schedule_conf) = match (&add.cron, add.fix_rate, add.fix_delay, add.manual)
    {
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
                history: add.history,
                start: add.start,
            },
        )
        .await?;
    outln!("created job {} ({})", job.id, describe_status(&job))?;
    Ok(())
}

/// A page of jobs, with the command for the next one when it is full.
async fn list_jobs(
    client: &ApiClient,
    app: Option<String>,
    status: Option<String>,
    limit: u32,
    after: Option<String>,
) -> anyhow::Result<()> {
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
    outln!(
        "{:>6}  {:<16} {:<20} {:<9} {:<22} SCHEDULE",
        "ID",
        "APP",
        "HANDLER",
        "STATUS",
        "NEXT FIRE"
    )?;
    for job in page.items {
        outln!(
            "{:>6}  {:<16} {:<20} {:<9} {:<22} {} {}",
            job.id,
            job.app,
            job.handler,
            job.status,
            format_ms(job.next_fire_ms),
            job.schedule_type,
            job.schedule_conf
        )?;
    }
    if let Some(next) = page.next {
        let mut more = format!("kadence job list --after {next} --limit {limit}");
        for (flag, value) in [("--app", app), ("--status", status)] {
            if let Some(value) = value {
                more.push_str(&format!(" {flag} {value}"));
            }
        }
        outln!("more: {more}")?;
    }
    Ok(())
}

/// A run's log from line `from`; with `follow`, until the run has ended. A trigger that runs
/// again (its first run handed back in a rebalance, or its executor died) replaces the log
/// shown: following, say so and print the new run's log from line 1.
async fn print_log(client: &ApiClient, log_id: i64, from: i64, follow: bool) -> anyhow::Result<()> {
    let mut next = from;
    let mut run_shown = None;
    // After the run finished, one more quiet read: its last lines may trail its result.
    let mut quiet_after_finish = 0;
    loop {
        let mut log: RunLogView = client
            .get(&format!("/api/runs/{log_id}/log?from_line={next}"))
            .await?;
        if run_shown.is_some() && log.run_started_at_ms != run_shown {
            outln!(
                "[kadence] the trigger ran again: the log of its later run follows from line 1"
            )?;
            log = client
                .get(&format!("/api/runs/{log_id}/log?from_line=1"))
                .await?;
        }
        if log.run_started_at_ms.is_some() {
            run_shown = log.run_started_at_ms;
        }
        for line in &log.lines {
            outln!("{line}")?;
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
    Ok(())
}

/// A job's runs, newest first, a page at a time. A full page says that older runs exist and
/// how to list them: without it, the newest 20 looked like all there were.
async fn list_runs(
    client: &ApiClient,
    id: &str,
    limit: u32,
    after: Option<String>,
) -> anyhow::Result<()> {
    let first_page = after.is_none();
    let page: Page<Run> = client
        .page(
            &format!("/api/jobs/{id}/runs"),
            &[("limit", Some(limit.to_string())), ("after", after)],
        )
        .await?;
    outln!(
        "{:>8} {:<40} {:<9} {:<24} {:<11} {:>4}  MESSAGE",
        "LOG ID",
        "TRIGGER ID",
        "TYPE",
        "SCHEDULED",
        "STATE",
        "CODE"
    )?;
    for run in page.items {
        outln!(
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
        )?;
    }
    if let Some(next) = page.next {
        let shown = if first_page {
            format!("these are the newest {limit} runs; for older ones: ")
        } else {
            "for older runs: ".to_owned()
        };
        outln!("more: {shown}kadence job runs {id} --after {next} --limit {limit}")?;
    }
    Ok(())
}
