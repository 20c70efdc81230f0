//! The scheduler's API as a scenario calls it: logged in as the admin the suites set, with
//! one method per operation (jobs every second, triggers, runs that succeeded, readiness,
//! metrics) and the raw requests the abuse scenario sends.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::net::metric_at;
use crate::session::{TEST_ADMIN_PASSWORD, login};

/// The app every scenario's jobs belong to (the stack creates it).
pub const APP: &str = "faults";
/// Partitions of its trigger topic.
pub const PARTITIONS: i32 = 3;

/// How many times [`Api::call`] asks again after a 503.
const BUSY_RETRIES: u32 = 30;

/// A scheduler's API, logged in as its admin.
pub struct Api {
    url: String,
    token: String,
    /// The client every request goes through (the stack reads executors' metrics with it).
    pub(super) http: reqwest::Client,
}

impl Api {
    /// The API at `url` (`http://host:port`), logged in as the admin.
    pub(super) async fn logged_in(url: String) -> Api {
        let token = login(&url, "admin", TEST_ADMIN_PASSWORD).await;
        Api {
            url,
            token,
            http: crate::api_client(),
        }
    }

    /// `method path` with a JSON `body` (none when null); panics unless it succeeds.
    ///
    /// A 503 is the API saying "busy, retry in a moment" (a topic a busy Kafka cluster is
    /// slow to spread, a request past its time): asked again after a second, as a client
    /// should, up to [`BUSY_RETRIES`] times.
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let mut tries = 0;
        loop {
            let mut request = self
                .http
                .request(method.clone(), format!("{}{path}", self.url))
                .bearer_auth(&self.token);
            if !body.is_null() {
                request = request.json(&body);
            }
            let response = request.send().await.expect("the API answers");
            let status = response.status();
            let text = response.text().await.expect("an answer");
            if status == reqwest::StatusCode::SERVICE_UNAVAILABLE && tries < BUSY_RETRIES {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
            assert!(status.is_success(), "{path}: {status} {text}");
            return serde_json::from_str(&text).unwrap_or(Value::Null);
        }
    }

    /// `GET /health/ready`: whether it answered 200, and its body.
    pub async fn readiness(&self) -> Option<(bool, Value)> {
        let response = self
            .http
            .get(format!("{}/health/ready", self.url))
            .timeout(std::time::Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        let ready = response.status().is_success();
        Some((ready, response.json().await.unwrap_or(Value::Null)))
    }

    /// `GET /metrics`, as text (empty when it does not answer).
    pub async fn metrics_text(&self) -> String {
        match self.http.get(format!("{}/metrics", self.url)).send().await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// The value of metric `name` in `GET /metrics`, of the first series whose labels include
    /// each of `labels` (`key="value"`).
    pub async fn metric(&self, name: &str, labels: &[&str]) -> Option<f64> {
        metric_at(&self.http, &self.url, name, labels).await
    }

    /// The public keys of the cluster's signing keys, for an executor to trust.
    pub async fn trusted_keys(&self) -> String {
        let keys = self
            .call(reqwest::Method::GET, "/api/signing-keys", Value::Null)
            .await;
        let keys: Vec<&str> = keys
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|key| key["public_key"].as_str())
            .collect();
        keys.join(",")
    }

    /// A new executor key of `app`: the text its executors sign with.
    pub async fn executor_key(&self, app: &str) -> String {
        let key = self
            .call(
                reqwest::Method::POST,
                &format!("/api/apps/{app}/executor-keys"),
                Value::Null,
            )
            .await;
        key["executor_key"]
            .as_str()
            .unwrap_or_else(|| panic!("no executor key for {app} in {key}"))
            .to_owned()
    }

    /// `count` jobs due every second with misfire strategy `misfire`, started, running the
    /// test executor's `noop` handler, routed FIRST (every fire to partition 0, the API's
    /// default).
    pub async fn every_second_jobs(&self, count: usize, misfire: &str) -> Vec<i64> {
        self.every_second_jobs_running(count, misfire, ("noop", ""), "FIRST")
            .await
    }

    /// [`every_second_jobs`](Self::every_second_jobs) running `handler` with `params`,
    /// routed by `route` (a route strategy: `FIRST`, `ROUND`, …).
    pub async fn every_second_jobs_running(
        &self,
        count: usize,
        misfire: &str,
        (handler, params): (&str, &str),
        route: &str,
    ) -> Vec<i64> {
        let mut jobs = Vec::with_capacity(count);
        for _ in 0..count {
            let job = self
                .call(
                    reqwest::Method::POST,
                    "/api/jobs",
                    json!({"app": APP, "handler": handler, "params": params,
                           "schedule_conf": "* * * * * ?", "misfire_strategy": misfire,
                           "route_strategy": route, "start": true}),
                )
                .await;
            jobs.push(job["id"].as_i64().expect("a job id"));
        }
        jobs
    }

    /// A job that fires only when triggered, running `handler` with `params`.
    pub async fn manual_job(&self, (handler, params): (&str, &str)) -> i64 {
        let job = self
            .call(
                reqwest::Method::POST,
                "/api/jobs",
                json!({"app": APP, "handler": handler, "params": params, "schedule_type": "NONE"}),
            )
            .await;
        job["id"].as_i64().expect("a job id")
    }

    /// Fires `job` once now; its trigger id.
    pub async fn trigger(&self, job: i64) -> String {
        let fired = self
            .call(
                reqwest::Method::POST,
                &format!("/api/jobs/{job}/trigger"),
                json!({}),
            )
            .await;
        fired["trigger_id"]
            .as_str()
            .expect("a trigger id")
            .to_owned()
    }

    /// `POST path` with `body` as JSON, whatever it holds: the status and the answer.
    pub async fn post_raw(&self, path: &str, body: Vec<u8>) -> (u16, String) {
        let sent = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await;
        status_and_text(sent).await
    }

    /// `POST path` declaring a body of `declared` bytes and sending only `sent`, then reading
    /// the answer: how a client sends a body too large to buffer, which the server must refuse
    /// without waiting for the rest. The status and the answer's body (status 0: no answer).
    pub async fn post_declaring(&self, path: &str, declared: usize, sent: &[u8]) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let address = self.url.trim_start_matches("http://");
        let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else {
            return (0, "cannot connect".to_owned());
        };
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {declared}\r\n\
             Connection: close\r\n\r\n",
            self.token
        );
        // The server may answer and close before it has read all that was sent.
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(sent).await;
        let mut answer = Vec::new();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            stream.read_to_end(&mut answer),
        )
        .await;
        if read.is_err() && answer.is_empty() {
            return (0, "no answer within 10 s".to_owned());
        }
        let answer = String::from_utf8_lossy(&answer);
        let status = (answer.split_whitespace().nth(1))
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        (status, body.to_owned())
    }

    /// `POST path` without credentials, with `body` sent as `content_type`: the status and the
    /// answer (status 0: none).
    pub async fn post_anonymously(
        &self,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (u16, String) {
        let sent = (self.http.post(format!("{}{path}", self.url)))
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body)
            .send()
            .await;
        status_and_text(sent).await
    }

    /// `POST path` with `body` as JSON and `Authorization: Bearer token` (a token the node may
    /// not know): the status and the answer (status 0: none).
    pub async fn post_with_token(&self, path: &str, token: &str, body: Vec<u8>) -> (u16, String) {
        let sent = (self.http.post(format!("{}{path}", self.url)))
            .bearer_auth(token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await;
        status_and_text(sent).await
    }

    /// The status of one `GET path` as the admin, not asked again after a 503 (0: no answer).
    pub async fn status_of(&self, path: &str) -> u16 {
        let sent = (self.http.get(format!("{}{path}", self.url)))
            .bearer_auth(&self.token)
            .send()
            .await;
        sent.map_or(0, |response| response.status().as_u16())
    }

    /// A client that sends the head of `POST path` (no credentials) declaring a JSON body of
    /// `declared` bytes, then the body a byte every 200 ms, until the node answers: the
    /// answer's status (0: none within a minute). Detached from `self`, so it can be spawned.
    pub fn dribbler(
        &self,
        path: &str,
        declared: usize,
    ) -> impl std::future::Future<Output = u16> + Send + 'static {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let address = self.url.trim_start_matches("http://").to_owned();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
             Content-Length: {declared}\r\n\r\n"
        );
        async move {
            let Ok(stream) = tokio::net::TcpStream::connect(&address).await else {
                return 0;
            };
            let (mut answers, mut sending) = stream.into_split();
            let writer = tokio::spawn(async move {
                let mut sent = sending.write_all(head.as_bytes()).await;
                while sent.is_ok() {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    sent = sending.write_all(b" ").await;
                }
            });
            // The status line, however the answer's bytes arrive.
            let mut answer = Vec::new();
            let _ = tokio::time::timeout(std::time::Duration::from_secs(60), async {
                let mut chunk = [0_u8; 256];
                while !answer.windows(2).any(|pair| pair == b"\r\n") {
                    match answers.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(read) => answer.extend_from_slice(&chunk[..read]),
                    }
                }
            })
            .await;
            writer.abort();
            let answer = String::from_utf8_lossy(&answer);
            (answer.split_whitespace().nth(1))
                .and_then(|code| code.parse().ok())
                .unwrap_or(0)
        }
    }

    /// Stops each of `jobs`.
    pub async fn stop_jobs(&self, jobs: &[i64]) {
        for job in jobs {
            self.call(
                reqwest::Method::POST,
                &format!("/api/jobs/{job}/stop"),
                json!({}),
            )
            .await;
        }
    }

    /// The app's runs that succeeded: trigger id → when the run finished (ms).
    pub async fn succeeded(&self) -> HashMap<String, i64> {
        self.succeeded_of(APP).await
    }

    /// [`succeeded`](Self::succeeded) for another app of the stack.
    pub async fn succeeded_of(&self, app: &str) -> HashMap<String, i64> {
        (self.runs_of(app, Some("SUCCEEDED")).await.iter())
            .filter_map(|run| {
                let id = run["trigger_id"].as_str()?;
                Some((id.to_owned(), run["handle_at_ms"].as_i64()?))
            })
            .collect()
    }

    /// How each run of `app` stands: trigger id → its state, with its result code once it
    /// has one (`FINISHED 500`). For the details of a report that lost fires: a fire whose
    /// run has no row was never recorded, one DISPATCHED never got its result.
    pub async fn run_states_of(&self, app: &str) -> HashMap<String, String> {
        (self.runs_of(app, None).await.iter())
            .filter_map(|run| {
                let id = run["trigger_id"].as_str()?;
                let state = run["state"].as_str().unwrap_or("?");
                let state = match run["handle_code"].as_i64() {
                    Some(code) => format!("{state} {code}"),
                    None => state.to_owned(),
                };
                Some((id.to_owned(), state))
            })
            .collect()
    }

    /// Every run of `app` (with `outcome`, if given), newest first, a page at a time.
    async fn runs_of(&self, app: &str, outcome: Option<&str>) -> Vec<Value> {
        let mut runs = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let mut path = format!("/api/runs?app={app}&limit=1000");
            if let Some(outcome) = outcome {
                path.push_str(&format!("&outcome={outcome}"));
            }
            if let Some(after) = &after {
                path.push_str(&format!("&after={after}"));
            }
            let page = self.call(reqwest::Method::GET, &path, Value::Null).await;
            runs.extend(page["items"].as_array().into_iter().flatten().cloned());
            match &page["next"] {
                Value::Null => return runs,
                next => after = Some(next.to_string().trim_matches('"').to_owned()),
            }
        }
    }
}

/// What a request got: the status and the answer's text, or status 0 and the error when no
/// answer came.
async fn status_and_text(sent: reqwest::Result<reqwest::Response>) -> (u16, String) {
    match sent {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.text().await.unwrap_or_default())
        }
        Err(error) => (0, error.to_string()),
    }
}
