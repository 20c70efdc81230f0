//! `soak`: a steady load for a long time (an hour by default) on PostgreSQL with executors,
//! sampled every minute: the scheduler's resident memory, the database's size, the fires
//! emitted and their lateness. Not in the test command (`infra/faults.sh soak`, release
//! build).
//!
//! The jobs keep the history of failures only (`history: FAILURES`), as a job firing every
//! second should, and successful runs leave the table after `retention.unkept_runs_for` (set
//! to 5 minutes here): once that much time has passed the database stops growing. What must
//! hold: memory and database size flat after the first minutes, lateness not drifting, every
//! fire due emitted and completed (completion read from the results topic, since retention
//! removes the runs themselves).
//!
//! The runs retention drops leave dead rows that PostgreSQL's autovacuum makes reusable; a
//! server with autovacuum off (this project's development machine has it off) would grow
//! however well retention keeps pace. There the soak runs `VACUUM (ANALYZE)` on its database
//! after each minute's sample, as autovacuum would, and says so in its output.

use std::collections::HashSet;
use std::time::Duration;

use kadence_schemas::ResultRecord;
use serde_json::json;
use sqlx::{Connection, Row};

use super::api::{APP, PARTITIONS};
use super::postgres::ScenarioDatabase;
use super::proxy::ProxiedBroker;
use super::stack::Stack;
use super::{Options, Report};
use crate::now_ms;
use crate::triggers::{FireAudit, read_records, read_triggers};

/// The defaults: 2 000 jobs (2 000 triggers a second), 60 s of warm-up, an hour.
pub fn defaults() -> Options {
    Options {
        jobs: 2_000,
        before: Duration::from_secs(60),
        outage: Duration::from_secs(3_600),
        after: Duration::ZERO,
        group_protocol: None,
    }
}

/// One minute's sample.
struct Sample {
    minute: u64,
    rss_mib: u64,
    database_mib: u64,
    /// Runs in the table: flat once retention keeps pace with the load.
    runs_kept: u64,
    emitted_per_second: f64,
    lateness_p99_ms: f64,
}

/// Runs the scenario (`--outage-secs` is how long the soak lasts, `--before-secs` its
/// warm-up).
pub async fn run(options: &Options) -> Report {
    let database = ScenarioDatabase::create().await;
    let broker = ProxiedBroker::start().await;
    let prefix = crate::unique("kfaults");
    let settings = [("KADENCE_RETENTION__UNKEPT_RUNS_FOR", "5m")];
    let mut stack = Stack::start_with(&database.url(), &broker.address, &prefix, &settings).await;
    stack.add_executor();
    let mut jobs = Vec::with_capacity(options.jobs);
    for _ in 0..options.jobs {
        let job = (stack.api)
            .call(
                reqwest::Method::POST,
                "/api/jobs",
                json!({"app": APP, "handler": "noop", "schedule_conf": "* * * * * ?",
                       "history": "FAILURES", "start": true}),
            )
            .await;
        jobs.push(job["id"].as_i64().expect("a job id"));
    }
    tokio::time::sleep(options.before).await;
    let from_ms = now_ms();
    let samples = sample_every_minute(&stack, &database, options.outage).await;
    let to_ms = now_ms();
    stack.api.stop_jobs(&jobs).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let triggers = read_triggers(
        &broker.address,
        &format!("{prefix}.triggers.{APP}"),
        PARTITIONS,
    )
    .await;
    let audit = FireAudit::of(&triggers, &jobs, from_ms, to_ms);
    drop(triggers);
    let results: Vec<ResultRecord> =
        read_records(&broker.address, &format!("{prefix}.results"), 1).await;
    let succeeded: HashSet<String> = (results.iter())
        .filter(|result| result.code == 200)
        .map(|result| result.trigger_id.as_str().to_owned())
        .collect();
    let due_ids = jobs.iter().flat_map(|job| {
        (audit.from_ms..to_ms)
            .step_by(1000)
            .map(move |second| format!("{job}-{second}"))
    });
    let missing: HashSet<(i64, i64)> = audit.missing.iter().copied().collect();
    let not_completed = due_ids
        .filter(|id| !succeeded.contains(id))
        .filter(|id| {
            let (job, second) = id.split_once('-').unwrap_or_default();
            !missing.contains(&(job.parse().unwrap_or(0), second.parse().unwrap_or(0)))
        })
        .count();
    let report = report(options, &audit, not_completed, &samples)
        .keeping_logs_on_failure(&stack.log_files());
    drop(stack);
    database.drop_it().await;
    report
}

/// Samples the node and the database every minute for `length`; prints each as it comes.
async fn sample_every_minute(
    stack: &Stack,
    database: &ScenarioDatabase,
    length: Duration,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut last = (
        metric_total(stack, "_count").await,
        lateness_buckets(stack).await,
        std::time::Instant::now(),
    );
    let vacuums = !autovacuum_is_on(database).await;
    if vacuums {
        println!("(the server's autovacuum is off: the soak vacuums its database every minute)");
    }
    println!("| minute | scheduler RSS | database size | runs kept | emitted/s | lateness p99 |");
    println!("|---|---|---|---|---|---|");
    // On the minute whatever the sampling and the vacuum take; the rate is over the time
    // between two readings.
    let minute_length = Duration::from_secs(60);
    let mut minutes =
        tokio::time::interval_at(tokio::time::Instant::now() + minute_length, minute_length);
    for minute in 1..=length.as_secs().div_ceil(60) {
        minutes.tick().await;
        let count = metric_total(stack, "_count").await;
        let read_at = std::time::Instant::now();
        let buckets = lateness_buckets(stack).await;
        let (database_mib, runs_kept) = database_sample(database).await;
        if vacuums {
            vacuum(database).await;
        }
        let sample = Sample {
            minute,
            rss_mib: stack.scheduler_rss_mib(),
            database_mib,
            runs_kept,
            emitted_per_second: (count - last.0) / (read_at - last.2).as_secs_f64(),
            lateness_p99_ms: p99_ms(&last.1, &buckets),
        };
        println!(
            "| {} | {} MiB | {} MiB | {} | {:.0} | {:.0} ms |",
            sample.minute,
            sample.rss_mib,
            sample.database_mib,
            sample.runs_kept,
            sample.emitted_per_second,
            sample.lateness_p99_ms
        );
        samples.push(sample);
        last = (count, buckets, read_at);
    }
    samples
}

/// `kadence_scheduler_fire_lateness_seconds{suffix}` summed over the apps.
async fn metric_total(stack: &Stack, suffix: &str) -> f64 {
    let name = format!("kadence_scheduler_fire_lateness_seconds{suffix}");
    stack.api.metric(&name, &[]).await.unwrap_or(0.0)
}

/// The lateness histogram's cumulative buckets: (upper bound in seconds, count).
async fn lateness_buckets(stack: &Stack) -> Vec<(f64, f64)> {
    let text = stack.api.metrics_text().await;
    (text.lines())
        .filter(|line| line.starts_with("kadence_scheduler_fire_lateness_seconds_bucket{"))
        .filter_map(|line| {
            let bound = line.split("le=\"").nth(1)?.split('"').next()?;
            let bound = if bound == "+Inf" {
                f64::INFINITY
            } else {
                bound.parse().ok()?
            };
            Some((bound, line.rsplit_once(' ')?.1.parse().ok()?))
        })
        .collect()
}

/// The 99th percentile, ms, of the observations between two readings of the buckets: the
/// upper bound of the first bucket holding 99 % of them.
fn p99_ms(before: &[(f64, f64)], after: &[(f64, f64)]) -> f64 {
    let delta: Vec<(f64, f64)> = (after.iter())
        .map(|(bound, count)| {
            let earlier = (before.iter())
                .find(|(other, _)| other == bound)
                .map_or(0.0, |(_, count)| *count);
            (*bound, count - earlier)
        })
        .collect();
    let total = delta.last().map_or(0.0, |(_, count)| *count);
    (delta.iter())
        .find(|(_, count)| *count >= total * 0.99)
        .map_or(0.0, |(bound, _)| bound * 1000.0)
}

/// Whether the server runs autovacuum (`true` when it cannot tell).
async fn autovacuum_is_on(database: &ScenarioDatabase) -> bool {
    let Ok(mut connection) = sqlx::PgConnection::connect(&database.url()).await else {
        return true;
    };
    sqlx::query_scalar::<_, String>("SHOW autovacuum")
        .fetch_one(&mut connection)
        .await
        .map_or(true, |setting| setting == "on")
}

/// `VACUUM (ANALYZE)` of the database: dead rows become reusable, as autovacuum makes them.
async fn vacuum(database: &ScenarioDatabase) {
    let Ok(mut connection) = sqlx::PgConnection::connect(&database.url()).await else {
        return;
    };
    if let Err(error) = sqlx::raw_sql("VACUUM (ANALYZE)")
        .execute(&mut connection)
        .await
    {
        println!("(vacuum failed: {error})");
    }
}

/// The database's size on disk (MiB) and the runs in its table (0 and 0 when it cannot be
/// read).
async fn database_sample(database: &ScenarioDatabase) -> (u64, u64) {
    let Ok(mut connection) = sqlx::PgConnection::connect(&database.url()).await else {
        return (0, 0);
    };
    sqlx::query(
        "SELECT pg_database_size(current_database()) / (1024 * 1024), \
         (SELECT count(*) FROM job_logs)",
    )
    .fetch_one(&mut connection)
    .await
    .ok()
    .and_then(|row| {
        Some((
            row.try_get::<i64, _>(0).ok()?,
            row.try_get::<i64, _>(1).ok()?,
        ))
    })
    .map_or((0, 0), |(mib, runs)| {
        (
            u64::try_from(mib).unwrap_or(0),
            u64::try_from(runs).unwrap_or(0),
        )
    })
}

fn report(
    options: &Options,
    audit: &FireAudit,
    not_completed: usize,
    samples: &[Sample],
) -> Report {
    let emitted = audit.expected - audit.missing.len();
    let lost = audit.missing.len() + not_completed;
    let span = |value: &dyn Fn(&Sample) -> String| match (samples.first(), samples.last()) {
        (Some(first), Some(last)) => format!("{} → {}", value(first), value(last)),
        _ => "—".to_owned(),
    };
    Report {
        scenario: "soak",
        injected: format!(
            "{} jobs firing every second for {} min on PostgreSQL, two executors",
            options.jobs,
            options.outage.as_secs() / 60
        ),
        columns: vec![
            ("fires due", audit.expected.to_string()),
            ("emitted", emitted.to_string()),
            (
                "completed",
                (emitted - not_completed.min(emitted)).to_string(),
            ),
            ("emitted twice (same id)", audit.doubled.len().to_string()),
            ("lost", lost.to_string()),
            (
                "RSS, first → last minute",
                span(&|sample| format!("{} MiB", sample.rss_mib)),
            ),
            (
                "database, first → last minute",
                span(&|sample| format!("{} MiB", sample.database_mib)),
            ),
            (
                "runs kept, first → last minute",
                span(&|sample| sample.runs_kept.to_string()),
            ),
            (
                "lateness p99, first → last minute",
                span(&|sample| format!("{:.0} ms", sample.lateness_p99_ms)),
            ),
        ],
        lost,
        failures: Vec::new(),
        details: vec![audit.summary()],
    }
}
