//! API load: many clients listing jobs (`GET /api/jobs`) back to back for a while, every
//! answer tallied by status, with its latency.
//!
//! This is the load under which the API, sharing one database pool with the scheduling loops,
//! starved them (fires skipped and emitted twice, list requests failing with 500 after a pool
//! timeout). Only status codes count: the body's shape is the API's business, and a client
//! that gets no answer at all (connection error, its own timeout) is a failure like a 500.
//!
//! Clients behave as the CLI and the console should: a 503 (the API shedding load) is
//! retried after its `Retry-After` (at most 5 s; 1 s without one), anything else at once. A
//! client that ignored it would turn shed load into a busy loop that measures nothing but
//! how fast the API can say no.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::percentile;

/// How long one client waits for a whole answer before counting the request as unanswered:
/// well past any pool timeout, so a slow answer is seen for what it is.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest wait a 503's `Retry-After` gets.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(5);

/// The wait after a 503 without `Retry-After`.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Every answer of a load run.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Answers by HTTP status.
    pub statuses: BTreeMap<u16, u64>,
    /// Requests without an answer (connection error, timeout, body cut off).
    pub unanswered: u64,
    /// What went wrong with the first unanswered request.
    pub first_error: Option<String>,
    /// Time from sending to the end of the body of every answer, ms, sorted.
    pub latencies_ms: Vec<f64>,
    /// From the first request to the last answer.
    pub elapsed: Duration,
}

impl LoadReport {
    /// Answers with a 2xx status.
    pub fn succeeded(&self) -> u64 {
        self.count(|status| (200..300).contains(&status))
    }

    /// Answers with 503 Service Unavailable: the API shedding load, which clients retry.
    pub fn unavailable(&self) -> u64 {
        self.count(|status| status == 503)
    }

    /// Everything else: other statuses (a 500 above all) and unanswered requests.
    pub fn other(&self) -> u64 {
        self.count(|status| !(200..300).contains(&status) && status != 503) + self.unanswered
    }

    fn count(&self, wanted: impl Fn(u16) -> bool) -> u64 {
        self.statuses
            .iter()
            .filter(|(status, _)| wanted(**status))
            .map(|(_, count)| count)
            .sum()
    }

    /// Latency of answers at `fraction` (0.99 = p99), ms.
    pub fn latency_ms(&self, fraction: f64) -> f64 {
        percentile(&self.latencies_ms, fraction)
    }

    /// One line: answers by status, unanswered requests and why, latencies.
    pub fn summary(&self) -> String {
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(status, count)| format!("{status} ×{count}"))
            .collect();
        format!(
            "API answers in {:.1} s: {}, unanswered {}{}; latency p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
            self.elapsed.as_secs_f64(),
            statuses.join(", "),
            self.unanswered,
            self.first_error
                .as_deref()
                .map(|error| format!(" (first: {error})"))
                .unwrap_or_default(),
            self.latency_ms(0.5),
            self.latency_ms(0.99),
            self.latencies_ms.last().copied().unwrap_or_default(),
        )
    }

    fn merge(&mut self, other: LoadReport) {
        for (status, count) in other.statuses {
            *self.statuses.entry(status).or_default() += count;
        }
        self.unanswered += other.unanswered;
        self.first_error = self.first_error.take().or(other.first_error);
        self.latencies_ms.extend(other.latencies_ms);
    }
}

/// Runs `clients` clients, each sending `GET {api}/api/jobs` with `token` again as soon as it
/// has the whole answer, until `duration` has passed; returns once every client has its last
/// answer.
pub async fn list_jobs_under_load(
    api: &str,
    token: &str,
    clients: usize,
    duration: Duration,
) -> LoadReport {
    let started = Instant::now();
    let deadline = started + duration;
    let url = format!("{api}/api/jobs");
    let tasks: Vec<_> = (0..clients)
        .map(|_| tokio::spawn(one_client(url.clone(), token.to_owned(), deadline)))
        .collect();
    let mut report = LoadReport::default();
    for task in tasks {
        report.merge(task.await.expect("a load client"));
    }
    report.latencies_ms.sort_by(f64::total_cmp);
    report.elapsed = started.elapsed();
    report
}

/// One client with its own connection, as a separate program would have.
async fn one_client(url: String, token: String, deadline: Instant) -> LoadReport {
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("HTTP client");
    let mut report = LoadReport::default();
    while Instant::now() < deadline {
        let sent = Instant::now();
        let answer = match http.get(&url).bearer_auth(&token).send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|value| value.to_str().ok()?.trim().parse().ok())
                    .map_or(DEFAULT_RETRY_AFTER, Duration::from_secs);
                response.bytes().await.map(|_| (status, retry_after))
            }
            Err(error) => Err(error),
        };
        match answer {
            Ok((status, retry_after)) => {
                *report.statuses.entry(status).or_default() += 1;
                report
                    .latencies_ms
                    .push(sent.elapsed().as_secs_f64() * 1000.0);
                if status == 503 {
                    let resume = Instant::now() + retry_after.min(MAX_RETRY_AFTER);
                    tokio::time::sleep_until(resume.min(deadline).into()).await;
                }
            }
            Err(error) => {
                report.unanswered += 1;
                report.first_error.get_or_insert_with(|| {
                    format!("{error} after {:.1} s", sent.elapsed().as_secs_f64())
                });
                // A refused connection fails at once: do not spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    report
}
