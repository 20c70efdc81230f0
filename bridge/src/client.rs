//! The calls a bridge makes to a legacy executor's embedded server, as XXL-JOB's admin makes
//! them (`ExecutorBizClient`): `run`, `kill`, `log`, `beat` and `idleBeat`, each a JSON POST
//! to `{address}{call}` with the access token.
//!
//! A failed call says whether the executor was reached at all: a run whose `run` call never
//! connected did not start, so the bridge may hand it to another executor; one whose answer
//! was lost may be running, so it is waited on instead.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::wire::{ACCESS_TOKEN_HEADER, JobParam, LogParam, LogResult, ReturnT, TriggerParam};

/// Why a call to a legacy executor did not get an answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Nothing was reached at the address (refused, no route, connect timeout): the call did
    /// nothing there.
    #[error("cannot reach the XXL-JOB executor at {address}: {source}")]
    Unreachable {
        /// The executor's address.
        address: String,
        /// The connection's error.
        source: reqwest::Error,
    },
    /// The executor was reached, but its answer did not come or was not XXL-JOB's.
    #[error("the XXL-JOB executor at {address} gave no usable answer to {call}: {detail}")]
    NoAnswer {
        /// The executor's address.
        address: String,
        /// The call.
        call: &'static str,
        /// What went wrong.
        detail: String,
    },
}

/// Calls legacy executors (see the module docs).
#[derive(Clone)]
pub struct ExecutorClient {
    http: reqwest::Client,
    access_token: Option<String>,
}

impl ExecutorClient {
    /// A client that sends `access_token` (none when `None` or empty) and gives each call
    /// `timeout` (XXL-JOB's admin: 3 s for `run`).
    pub fn new(access_token: Option<String>, timeout: Duration) -> ExecutorClient {
        let http = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(3)))
            .timeout(timeout)
            .build()
            .expect("an HTTP client with timeouts only");
        ExecutorClient {
            http,
            access_token: access_token.filter(|token| !token.is_empty()),
        }
    }

    /// Starts a run (`run`); the executor answers at once and calls back when it ends.
    pub async fn run(
        &self,
        address: &str,
        trigger: &TriggerParam,
    ) -> Result<ReturnT<String>, CallError> {
        self.call(address, "run", trigger).await
    }

    /// Stops the job's running run and drops its queued ones (`kill`).
    pub async fn kill(&self, address: &str, job_id: i32) -> Result<ReturnT<String>, CallError> {
        self.call(address, "kill", &JobParam { job_id }).await
    }

    /// The run's log lines from `from_line` on (`log`).
    pub async fn log(&self, address: &str, log: LogParam) -> Result<ReturnT<LogResult>, CallError> {
        self.call(address, "log", &log).await
    }

    /// Whether the executor is up (`beat`): what XXL-JOB's FAILOVER asks.
    pub async fn beat(&self, address: &str) -> Result<ReturnT<String>, CallError> {
        self.call(address, "beat", &serde_json::json!({})).await
    }

    /// Whether the job is idle there (`idleBeat`): what XXL-JOB's BUSYOVER asks. Code 200
    /// idle, 500 running or queued.
    pub async fn idle_beat(
        &self,
        address: &str,
        job_id: i32,
    ) -> Result<ReturnT<String>, CallError> {
        self.call(address, "idleBeat", &JobParam { job_id }).await
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        address: &str,
        call: &'static str,
        body: &B,
    ) -> Result<ReturnT<T>, CallError> {
        let url = format!("{}/{call}", address.trim_end_matches('/'));
        let mut request = self.http.post(url).json(body);
        if let Some(token) = &self.access_token {
            request = request.header(ACCESS_TOKEN_HEADER, token);
        }
        let no_answer = |detail: String| CallError::NoAnswer {
            address: address.to_owned(),
            call,
            detail,
        };
        let response = request.send().await.map_err(|source| {
            if source.is_connect() {
                CallError::Unreachable {
                    address: address.to_owned(),
                    source,
                }
            } else {
                no_answer(source.to_string())
            }
        })?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|error| no_answer(error.to_string()))?;
        serde_json::from_str(&text)
            .map_err(|error| no_answer(format!("HTTP {status}, {error}: {}", snippet(&text))))
    }
}

/// The start of a body, for an error message.
fn snippet(text: &str) -> &str {
    match text.char_indices().nth(200) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}
