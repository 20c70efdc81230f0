//! The load of the bridge scenarios: jobs of the bridges' own app, [`XXL_APP`], firing
//! every second, and what the trigger and results topics and the API say of them at the
//! end, as [`Outcome::collect`] says it of the stack's app (which stays idle here: its
//! partitions and group are not the bridges').

use kadence_schemas::ResultRecord;
use serde_json::json;

use super::api::Api;
use super::load::Outcome;
use super::stack::Stack;
use super::steady::Finished;
use crate::triggers::read_records;

/// The app the bridges front (the executors' appname); the stack's own app stays idle.
pub const XXL_APP: &str = "faults-xxl";
/// Partitions of its trigger topic: two for each bridge.
pub const XXL_PARTITIONS: i32 = 4;

/// What the jobs run: the sample executor's `sleep` handler, 300 ms.
pub const RUN: (&str, &str) = ("sleep", "300");

/// `count` jobs of [`XXL_APP`] due every second (DO_NOTHING on a misfire), started, running
/// [`RUN`], routed ROUND.
pub async fn every_second_jobs(api: &Api, count: usize) -> Vec<i64> {
    let mut jobs = Vec::with_capacity(count);
    for _ in 0..count {
        let job = api
            .call(
                reqwest::Method::POST,
                "/api/jobs",
                json!({"app": XXL_APP, "handler": RUN.0, "params": RUN.1,
                       "schedule_conf": "* * * * * ?", "misfire_strategy": "DO_NOTHING",
                       "route_strategy": "ROUND", "start": true}),
            )
            .await;
        jobs.push(job["id"].as_i64().expect("a job id"));
    }
    jobs
}

/// [`Outcome::collect`] for [`XXL_APP`]: stops `jobs`, reads the app's trigger topic, waits
/// for the fires emitted in the window `[from_ms, to_ms)` to succeed, and reads the app's
/// results.
pub async fn collect(
    stack: &Stack,
    brokers: &str,
    prefix: &str,
    jobs: &[i64],
    window: (i64, i64),
) -> Finished {
    let app = (XXL_APP, XXL_PARTITIONS);
    let outcome = Outcome::collect_of(app, stack, brokers, prefix, jobs, window).await;
    let results: Vec<ResultRecord> = read_records(brokers, &format!("{prefix}.results"), 1).await;
    Finished {
        outcome,
        results: (results.into_iter())
            .filter(|result| result.app.as_str() == XXL_APP)
            .collect(),
    }
}
