//! The steady load the executor and cluster faults strike: `kadence serve` on a SQLite file
//! of its own, two executors of the app, and jobs firing every second whose runs take 300 ms
//! (so some are always running when the fault strikes), routed by a [`Route`]; and what it
//! counts at the end beyond
//! [`Outcome`]: the results topic (which executor finished a run, and when), runs repeated
//! under the same id, and the longest a fire due during the fault took to finish.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use kadence_schemas::{ResultRecord, TriggerRecord};

use super::api::{APP, PARTITIONS};
use super::load::{Outcome, due_in, scheduled_ms};
use super::stack::{BrokerKind, GroupProtocol, Stack, sqlite_url};
use super::{Options, millis_cell};
use crate::now_ms;
use crate::triggers::{Placed, read_placed_records, read_records};

/// What the jobs run: the test executor's `sleep` handler, 300 ms.
const RUN: (&str, &str) = ("sleep", "300");

/// A fire that took longer than this (ms) from its time to its run's end is slow: see
/// [`Finished::slow_fires`].
pub const SLOW_MS: i64 = 5_000;

/// How far into a second (ms) a fault strikes: see [`until_mid_run`].
const MID_RUN_MS: i64 = 150;

/// Waits until the next instant 150 ms past a whole second of the wall clock. Every fire of
/// the load is due on a whole second and its run starts then (executors hold a trigger
/// emitted ahead until its time) and takes 300 ms, so a fault struck at that instant finds
/// the second's runs half-way; struck at an arbitrary point it would, seven times in ten,
/// find none running, and a storm whose steps are whole seconds apart would strike every
/// change at the same point.
pub async fn until_mid_run() {
    let now = now_ms();
    let this_second = now / 1000 * 1000;
    let mid_run = if now - this_second < MID_RUN_MS {
        this_second + MID_RUN_MS
    } else {
        this_second + 1000 + MID_RUN_MS
    };
    let wait = u64::try_from(mid_run - now).unwrap_or(0);
    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
}

/// How the load's jobs pick their partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// FIRST: every fire to partition 0 (the API's default; the tansu executor scenarios
    /// kept it).
    First,
    /// ROUND: each job's fires go round the partitions, so every partition has fires every
    /// second and a fault to any executor or partition leader strikes some.
    Round,
}

impl Route {
    fn strategy(self) -> &'static str {
        match self {
            Route::First => "FIRST",
            Route::Round => "ROUND",
        }
    }
}

/// A scheduler and two executors on `brokers`, with jobs firing every second.
pub struct SteadyLoad {
    /// The processes.
    pub stack: Stack,
    /// The jobs firing.
    pub jobs: Vec<i64>,
    /// Where the topics are.
    pub brokers: String,
    /// The topics' prefix, this load's own.
    pub prefix: String,
    /// The jobs' first fire (ms): the audited window starts there.
    from_ms: i64,
    _database: tempfile::TempDir,
}

impl SteadyLoad {
    /// Starts the stack on `brokers` (of that kind) with executors of `group_protocol` and
    /// `options.jobs` jobs routed by `route`; returns once the jobs are started.
    pub async fn start(
        (brokers, broker_kind): (&str, BrokerKind),
        options: &Options,
        group_protocol: GroupProtocol,
        route: Route,
    ) -> Self {
        let prefix = crate::unique("kfaults");
        let database = tempfile::tempdir().expect("a database directory");
        let database_url = sqlite_url(database.path());
        let mut stack = Stack::start_grouped(
            &database_url,
            (brokers, broker_kind),
            &prefix,
            group_protocol,
        )
        .await;
        stack.add_executor();
        let jobs = stack
            .api
            .every_second_jobs_running(options.jobs, "DO_NOTHING", RUN, route.strategy())
            .await;
        // The jobs' first fire: the next second after the pre-read planned them, a few
        // seconds at most; the audit starts there.
        let from_ms = now_ms() + 6_000;
        SteadyLoad {
            stack,
            jobs,
            brokers: brokers.to_owned(),
            prefix,
            from_ms,
            _database: database,
        }
    }

    /// The app's trigger topic.
    pub fn trigger_topic(&self) -> String {
        format!("{}.triggers.{APP}", self.prefix)
    }

    /// The executors' consumer group.
    pub fn group(&self) -> String {
        format!("{}.executor.{APP}", self.prefix)
    }

    /// The results topic.
    pub fn results_topic(&self) -> String {
        format!("{}.results", self.prefix)
    }

    /// Stops the jobs and counts what the topics and the API say about the fires due from
    /// their first fire until now.
    pub async fn finish(&self) -> Finished {
        let window = (self.from_ms, now_ms());
        let outcome =
            Outcome::collect(&self.stack, &self.brokers, &self.prefix, &self.jobs, window).await;
        let results = read_records(&self.brokers, &self.results_topic(), 1).await;
        Finished { outcome, results }
    }
}

/// What a steady load came to.
pub struct Finished {
    /// What the trigger topic and the API say.
    pub outcome: Outcome,
    /// Every result executors published, repeats included.
    pub results: Vec<ResultRecord>,
}

impl Finished {
    /// How many results each trigger id has.
    pub fn results_per_id(&self) -> HashMap<&str, usize> {
        let mut per_id: HashMap<&str, usize> = HashMap::new();
        for result in &self.results {
            *per_id.entry(result.trigger_id.as_str()).or_default() += 1;
        }
        per_id
    }

    /// Emitted fires with more than one result: run again after a handover, under the same
    /// id (the scheduler keeps the first result).
    pub fn run_twice(&self) -> usize {
        let per_id = self.results_per_id();
        (self.outcome.emitted.keys())
            .filter(|id| per_id.get(id.as_str()).is_some_and(|count| *count > 1))
            .count()
    }

    /// The first successful result of each trigger id.
    pub fn first_successes(&self) -> HashMap<&str, &ResultRecord> {
        let mut first: HashMap<&str, &ResultRecord> = HashMap::new();
        for result in self.results.iter().filter(|result| result.code == 200) {
            let kept = first.entry(result.trigger_id.as_str()).or_insert(result);
            if result.finished_at_ms < kept.finished_at_ms {
                *kept = result;
            }
        }
        first
    }

    /// The longest a fire due within `fault` (ms) took from its scheduled time until its run
    /// finished (`None` when none finished).
    pub fn longest_to_finish(&self, fault: Range<i64>) -> Option<i64> {
        let outcome = &self.outcome;
        (outcome.succeeded.iter())
            .filter(|(id, _)| outcome.emitted.contains_key(*id) && due_in(id, fault.clone()))
            .filter_map(|(id, finished)| Some(finished - scheduled_ms(id)?))
            .max()
    }

    /// The columns of every steady-load table: [`Outcome::columns`], then runs repeated.
    pub fn columns(&self) -> Vec<(&'static str, String)> {
        let mut columns = self.outcome.columns();
        columns.push((
            "run twice (result repeated, same id)",
            self.run_twice().to_string(),
        ));
        columns
    }

    /// The last column: the longest a fire due within `fault` took to finish.
    pub fn recovery_column(&self, fault: Range<i64>) -> (&'static str, String) {
        (
            "longest fire to finish (time to recover)",
            millis_cell(self.longest_to_finish(fault)),
        )
    }

    /// Of the fires due within `fault`, those that took more than [`SLOW_MS`] to finish: how
    /// many, on which partitions their records are, and how late their runs started. (When
    /// a record reached the broker the topic does not tell: its time is the producer's.) For
    /// the report's details.
    pub async fn slow_fires(&self, load: &SteadyLoad, fault: Range<i64>) -> String {
        let first = self.first_successes();
        let slow: HashMap<&str, i64> = (self.outcome.succeeded.iter())
            .filter(|(id, _)| self.outcome.emitted.contains_key(*id) && due_in(id, fault.clone()))
            .filter_map(|(id, finished)| {
                let scheduled = scheduled_ms(id)?;
                (finished - scheduled > SLOW_MS).then_some((id.as_str(), scheduled))
            })
            .collect();
        if slow.is_empty() {
            return format!("no fire due during the fault took over {SLOW_MS} ms to finish");
        }
        let placed: Vec<Placed<TriggerRecord>> =
            read_placed_records(&load.brokers, &load.trigger_topic(), PARTITIONS).await;
        let mut partitions: BTreeMap<i32, usize> = BTreeMap::new();
        for record in
            (placed.iter()).filter(|placed| slow.contains_key(placed.record.trigger_id.as_str()))
        {
            *partitions.entry(record.partition).or_default() += 1;
        }
        let started_late: Vec<i64> = (slow.iter())
            .filter_map(|(id, scheduled)| Some(first.get(id)?.started_at_ms - scheduled))
            .collect();
        format!(
            "{} fires due during the fault took over {SLOW_MS} ms to finish; their records \
             (copies included) by partition: {partitions:?}; their runs started {} to {} ms \
             after their time",
            slow.len(),
            started_late.iter().min().unwrap_or(&0),
            started_late.iter().max().unwrap_or(&0),
        )
    }

    /// Which fires are lost, and where the open ones wait, for the report's details.
    pub async fn details(&self, load: &SteadyLoad) -> Vec<String> {
        let mut details = self.outcome.lost_details();
        if !self.outcome.not_completed.is_empty() {
            details.push(self.where_the_open_fires_are(load).await);
        }
        details
    }

    /// Where the fires emitted and never completed are: how many have a result in the
    /// results topic (run, but not recorded) and in which partitions they wait (not run).
    async fn where_the_open_fires_are(&self, load: &SteadyLoad) -> String {
        let placed: Vec<Placed<TriggerRecord>> =
            read_placed_records(&load.brokers, &load.trigger_topic(), PARTITIONS).await;
        let open: std::collections::HashSet<&str> = (self.outcome.not_completed.iter())
            .map(String::as_str)
            .collect();
        let mut partitions: HashMap<i32, usize> = HashMap::new();
        for record in placed
            .iter()
            .filter(|placed| open.contains(placed.record.trigger_id.as_str()))
        {
            *partitions.entry(record.partition).or_default() += 1;
        }
        let per_id = self.results_per_id();
        let with_result = open.iter().filter(|id| per_id.contains_key(*id)).count();
        format!(
            "of those, {with_result} have a result in the results topic; by partition: \
             {partitions:?}"
        )
    }
}
