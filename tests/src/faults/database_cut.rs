//! `database-cut`: the scheduler's PostgreSQL becomes unreachable during a steady load of
//! fires: a [`CuttableProxy`] sits between the scheduler and the server (the server other
//! tests share keeps running), cuts every connection and refuses new ones, then lets them
//! through again. Half the jobs are DO_NOTHING, half FIRE_ONCE_NOW.
//!
//! What must hold, each checked from the topic and the API:
//! - the scheduler's process keeps running, reports the outage (`/health/ready` 503 and the
//!   gauge `kadence_scheduler_database_reachable` 0) and reports it over when it is back;
//! - fires planned before the outage are emitted during it; fires the scheduler could not
//!   plan in time follow their job's misfire strategy exactly: a DO_NOTHING job skips them
//!   and has no MISFIRE record, a FIRE_ONCE_NOW job has exactly one MISFIRE record (under the
//!   first missed fire's trigger id), and the misfire counters say the same; a fire due
//!   outside the outage is never missing;
//! - every emitted fire completes: the results executors published during the outage wait in
//!   their topic until the scheduler can write them.
//!
//! [`CuttableProxy`]: super::proxy::CuttableProxy

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use kadence_schemas::TriggerType;

use super::api::Api;
use super::disk::SmallDisk;
use super::load::Outcome;
use super::postgres::ScenarioDatabase;
use super::proxy::{CuttableProxy, ProxiedBroker};
use super::stack::{Stack, sqlite_url};
use super::{Options, Report, millis_cell};
use crate::now_ms;

/// The defaults: 20 jobs, 10 s before, 30 s away, 20 s after.
pub fn defaults() -> Options {
    Options {
        jobs: 20,
        before: Duration::from_secs(10),
        outage: Duration::from_secs(30),
        after: Duration::from_secs(20),
        group_protocol: None,
    }
}

/// How long after the database is back a missed fire may still be skipped: the pool's
/// reconnection, the shard lease's renewal and the first scan.
const CATCH_UP_MS: i64 = 15_000;

/// What was seen of the node while the scenario ran, polled every 250 ms.
#[derive(Default)]
struct Observed {
    /// `/health/ready`: (when, answered 200).
    readiness: Vec<(i64, bool)>,
    /// `kadence_scheduler_database_reachable` was 0 at some poll.
    gauge_showed_outage: bool,
    /// After the database was back: (when, the trigger ids of the succeeded runs).
    succeeded: Vec<(i64, HashSet<String>)>,
}

/// Polls readiness and the gauge every 250 ms until `until_ms`; with `runs`, also the
/// succeeded runs every second.
async fn observe(api: &Api, observed: &mut Observed, until_ms: i64, runs: bool) {
    let mut last_runs_ms = 0;
    while now_ms() < until_ms {
        let now = now_ms();
        if let Some((ready, _)) = api.readiness().await {
            observed.readiness.push((now, ready));
        }
        if api
            .metric("kadence_scheduler_database_reachable", &[])
            .await
            == Some(0.0)
        {
            observed.gauge_showed_outage = true;
        }
        if runs && now - last_runs_ms >= 1_000 {
            last_runs_ms = now;
            let ids = api.succeeded().await.into_keys().collect();
            observed.succeeded.push((now_ms(), ids));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Runs `database-cut`.
pub async fn run(options: &Options) -> Report {
    run_outage(options, StoreFault::cut().await).await
}

/// Runs `disk-full`: the scheduler's SQLite file on a small disk of its own, filled to the
/// last byte for the outage and freed again. The same must hold as for a cut (the outage
/// reported, the misfire strategies applied, no result lost), and the file must pass
/// SQLite's integrity check afterwards.
pub async fn run_disk_full(options: &Options) -> Report {
    match SmallDisk::mount(64) {
        Ok(disk) => run_outage(options, StoreFault::DiskFull(disk)).await,
        Err(why) => panic!("disk-full: {why}"),
    }
}

/// The fault of the scheduler's store, and what it needs.
enum StoreFault {
    /// PostgreSQL behind a proxy that is cut.
    Cut(ScenarioDatabase, CuttableProxy),
    /// SQLite on a disk that is filled.
    DiskFull(SmallDisk),
}

impl StoreFault {
    async fn cut() -> StoreFault {
        let database = ScenarioDatabase::create().await;
        let proxy = CuttableProxy::start(database.server_port).await;
        StoreFault::Cut(database, proxy)
    }

    fn database_url(&self) -> String {
        match self {
            StoreFault::Cut(database, proxy) => database.url_through(proxy.port()),
            StoreFault::DiskFull(disk) => sqlite_url(disk.path()),
        }
    }

    fn inject(&self) {
        match self {
            StoreFault::Cut(_, proxy) => proxy.cut(),
            StoreFault::DiskFull(disk) => {
                let bytes = disk.fill();
                eprintln!("disk filled with {bytes} bytes");
            }
        }
    }

    fn recover(&self) {
        match self {
            StoreFault::Cut(_, proxy) => proxy.mend(),
            StoreFault::DiskFull(disk) => disk.free(),
        }
    }

    /// The scenario's name, and what it injected.
    fn describe(&self, options: &Options) -> (&'static str, String) {
        let load = format!(
            "during {} jobs firing every second (half DO_NOTHING, half FIRE_ONCE_NOW)",
            options.jobs
        );
        let secs = options.outage.as_secs();
        match self {
            StoreFault::Cut(..) => (
                "database-cut",
                format!(
                    "every connection to PostgreSQL cut and new ones refused for {secs} s, {load}"
                ),
            ),
            StoreFault::DiskFull(_) => (
                "disk-full",
                format!("the disk of the SQLite file filled to the last byte for {secs} s, {load}"),
            ),
        }
    }

    /// After the scheduler stopped: the SQLite file's integrity check ("ok"), or none; the
    /// PostgreSQL database dropped.
    async fn finish(self) -> Option<String> {
        match self {
            StoreFault::Cut(database, _) => {
                database.drop_it().await;
                None
            }
            StoreFault::DiskFull(disk) => {
                Some(integrity_check(&disk.path().join("kadence.db")).await)
            }
        }
    }
}

/// `PRAGMA integrity_check` of the SQLite file at `path`: "ok", or what is wrong.
async fn integrity_check(path: &std::path::Path) -> String {
    use sqlx::{Connection, Row};
    let url = format!("sqlite://{}", path.display());
    match sqlx::SqliteConnection::connect(&url).await {
        Ok(mut connection) => match sqlx::query("PRAGMA integrity_check")
            .fetch_all(&mut connection)
            .await
        {
            Ok(rows) => rows
                .iter()
                .map(|row| row.try_get::<String, _>(0).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("; "),
            Err(error) => format!("cannot check: {error}"),
        },
        Err(error) => format!("cannot open: {error}"),
    }
}

/// The scenario's timeline around `fault`, and its judgement.
async fn run_outage(options: &Options, fault: StoreFault) -> Report {
    let broker = ProxiedBroker::start().await;
    let prefix = crate::unique("kfaults");
    let mut stack = Stack::start(&fault.database_url(), &broker.address, &prefix).await;
    let half = options.jobs.div_ceil(2);
    let skipping = stack.api.every_second_jobs(half, "DO_NOTHING").await;
    let firing_once = (stack.api)
        .every_second_jobs(options.jobs - half, "FIRE_ONCE_NOW")
        .await;
    let from_ms = now_ms() + 6_000;
    let mut observed = Observed::default();
    let until = |start: i64, span: Duration| start + i64::try_from(span.as_millis()).unwrap_or(0);
    observe(
        &stack.api,
        &mut observed,
        until(now_ms(), options.before),
        false,
    )
    .await;
    fault.inject();
    let cut_ms = now_ms();
    observe(
        &stack.api,
        &mut observed,
        until(cut_ms, options.outage),
        false,
    )
    .await;
    fault.recover();
    let back_ms = now_ms();
    observe(
        &stack.api,
        &mut observed,
        until(back_ms, options.after),
        true,
    )
    .await;
    let jobs: Vec<i64> = skipping.iter().chain(&firing_once).copied().collect();
    let window = (from_ms, now_ms());
    let outcome = Outcome::collect(&stack, &broker.address, &prefix, &jobs, window).await;
    let counted = (
        misfires_counted(&stack.api, "DO_NOTHING").await,
        misfires_counted(&stack.api, "FIRE_ONCE_NOW").await,
    );
    let outage = Outage {
        cut_ms,
        back_ms,
        running: stack.scheduler_running(),
    };
    let policy = Policy::judge(&outcome, (&skipping, &firing_once), &outage, counted);
    let mut report = report(
        fault.describe(options),
        &outcome,
        &policy,
        &outage,
        &observed,
    );
    // The integrity check needs the scheduler stopped.
    let logs = stack.log_files();
    drop(stack);
    if let Some(integrity) = fault.finish().await {
        if integrity != "ok" {
            report
                .failures
                .push(format!("SQLite's integrity check: {integrity}"));
        }
        report.columns.push(("integrity check", integrity));
    }
    report.keeping_logs_on_failure(&logs)
}

/// `kadence_scheduler_misfires_total` of `strategy`.
async fn misfires_counted(api: &Api, strategy: &str) -> usize {
    let label = format!("strategy=\"{strategy}\"");
    api.metric("kadence_scheduler_misfires_total", &[&label])
        .await
        .unwrap_or(0.0) as usize
}

/// The outage as the scenario made it.
struct Outage {
    cut_ms: i64,
    back_ms: i64,
    /// Whether the scheduler's process still ran at the end.
    running: bool,
}

/// The fires the outage cost, judged against each job's misfire strategy.
#[derive(Default)]
struct Policy {
    /// Missed fires inside the outage (and the catch-up after it): the strategy's to skip.
    skipped: usize,
    /// MISFIRE records.
    fired_once: usize,
    /// Missed fires outside the outage: lost.
    lost: Vec<String>,
    failures: Vec<String>,
}

impl Policy {
    /// Each job's missed seconds and MISFIRE records, against its strategy and the counters.
    fn judge(
        outcome: &Outcome,
        (skipping, firing_once): (&[i64], &[i64]),
        outage: &Outage,
        counted: (usize, usize),
    ) -> Policy {
        let skippable = outage.cut_ms..=outage.back_ms + CATCH_UP_MS;
        let mut misfire_records: HashMap<i64, usize> = HashMap::new();
        for record in &outcome.records {
            if record.trigger_type == TriggerType::Misfire {
                *misfire_records.entry(record.job_id.get()).or_default() += 1;
            }
        }
        let mut missing: HashMap<i64, Vec<i64>> = HashMap::new();
        for (job, second) in &outcome.audit.missing {
            missing.entry(*job).or_default().push(*second);
        }
        let mut policy = Policy::default();
        let mut jobs_that_missed = (0, 0);
        let jobs = (skipping.iter().map(|job| (*job, true)))
            .chain(firing_once.iter().map(|job| (*job, false)));
        for (job, skips) in jobs {
            let missed = missing.remove(&job).unwrap_or_default();
            let records = misfire_records.get(&job).copied().unwrap_or(0);
            policy.fired_once += records;
            for second in &missed {
                if skippable.contains(second) {
                    policy.skipped += 1;
                } else {
                    policy.lost.push(format!("{job}-{second}"));
                }
            }
            match (skips, records, missed.is_empty()) {
                (true, 0, true) | (false, 0, true) => {}
                (true, 0, false) => jobs_that_missed.0 += 1,
                (false, 1, _) => jobs_that_missed.1 += 1,
                (true, _, _) => policy.failures.push(format!(
                    "DO_NOTHING job {job} has {records} MISFIRE records (expected none)"
                )),
                (false, _, _) => policy.failures.push(format!(
                    "FIRE_ONCE_NOW job {job} has {records} MISFIRE records and {} missed \
                     fires (expected exactly one MISFIRE record)",
                    missed.len()
                )),
            }
        }
        if counted != jobs_that_missed {
            policy.failures.push(format!(
                "kadence_scheduler_misfires_total says DO_NOTHING {}, FIRE_ONCE_NOW {}; the \
                 topic says {} and {} jobs missed fires",
                counted.0, counted.1, jobs_that_missed.0, jobs_that_missed.1
            ));
        }
        policy
    }
}

/// The table, with what the readiness polls and the gauge showed of the outage.
fn report(
    (scenario, injected): (&'static str, String),
    outcome: &Outcome,
    policy: &Policy,
    outage: &Outage,
    observed: &Observed,
) -> Report {
    let (cut_ms, back_ms) = (outage.cut_ms, outage.back_ms);
    let first = |from: i64, to: i64, ready: bool| {
        (observed.readiness.iter())
            .find(|(at, answer)| (from..to).contains(at) && *answer == ready)
            .map(|(at, _)| at - from)
    };
    let reported_ms = first(cut_ms, back_ms, false);
    let ready_ms = first(back_ms, i64::MAX, true);
    // From the database's return until every fire emitted before it had its run written.
    let emitted_before_back: Vec<&String> = (outcome.emitted.iter())
        .filter(|(_, emitted_at)| **emitted_at < back_ms)
        .map(|(id, _)| id)
        .collect();
    let results_written_ms = (observed.succeeded.iter())
        .find(|(_, ids)| emitted_before_back.iter().all(|id| ids.contains(*id)))
        .map(|(at, _)| at - back_ms);
    let mut failures = policy.failures.clone();
    for (wrong, what) in [
        (!outage.running, "the scheduler's process exited"),
        (
            reported_ms.is_none(),
            "/health/ready never answered 503 during the outage",
        ),
        (
            !observed.gauge_showed_outage,
            "kadence_scheduler_database_reachable never read 0",
        ),
        (
            ready_ms.is_none(),
            "/health/ready never answered 200 after the outage",
        ),
    ] {
        if wrong {
            failures.push(what.to_owned());
        }
    }
    let mut details = outcome.lost_details();
    if !policy.lost.is_empty() {
        details.push(format!("missing outside the outage: {:?}", policy.lost));
    }
    let lost = policy.lost.len() + outcome.not_completed.len();
    let mut columns = outcome.columns_with_lost(lost);
    columns.extend([
        ("skipped by misfire policy", policy.skipped.to_string()),
        ("fired once as MISFIRE", policy.fired_once.to_string()),
        ("outage reported after", millis_cell(reported_ms)),
        (
            "time to recover",
            millis_cell(results_written_ms.max(ready_ms)),
        ),
    ]);
    Report {
        scenario,
        injected,
        columns,
        lost,
        failures,
        details,
    }
}
