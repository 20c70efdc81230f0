//! `spawn_app()`: a scheduler on a fresh database with its own topic prefix, an HTTP client
//! for its API with one method per operation, and test executors with known handlers.

use std::sync::Arc;
use std::time::Duration;

use kadence_executor::{Executor, JobContext, JobError, JobResult};
use kadence_scheduler::api::JobView;
use kadence_scheduler::app::Scheduler;
use kadence_scheduler::clock::SystemClock;
use kadence_scheduler::config::Config;
use kadence_scheduler::model::Run;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use secrecy::SecretString;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::common::{Backend, TestDatabase, brokers, unique, wait_for};

/// Session timeout for test consumers: the broker's first group join is slow otherwise.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(6);

/// A running scheduler plus the executors a test started.
pub struct TestApp {
    pub prefix: String,
    pub brokers: String,
    base_url: String,
    http: reqwest::Client,
    scheduler: Option<Scheduler>,
    executors: Vec<(CancellationToken, JoinHandle<()>)>,
    _database: TestDatabase,
}

/// Starts a scheduler on a fresh `backend` database with a unique topic prefix.
pub async fn spawn_app(backend: Backend) -> TestApp {
    let database = TestDatabase::create(backend).await;
    let prefix = unique("kt");
    let brokers = brokers();
    let mut config = Config::default();
    config.database.url = SecretString::from(database.url.clone());
    config.kafka.brokers = brokers.clone();
    config.kafka.topic_prefix = prefix.clone();
    config.kafka.results_partitions = 2;
    config.kafka.session_timeout = SESSION_TIMEOUT;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheduler = Scheduler::start(config, listener, Arc::new(SystemClock))
        .await
        .expect("scheduler starts");
    TestApp {
        prefix,
        brokers,
        base_url: format!("http://{}", scheduler.api_addr()),
        http: reqwest::Client::new(),
        scheduler: Some(scheduler),
        executors: Vec::new(),
        _database: database,
    }
}

/// Succeeds.
async fn ok(_ctx: JobContext) -> JobResult {
    Ok(())
}

/// Sleeps for `params` milliseconds, stopping early when cancelled.
async fn sleep(ctx: JobContext) -> JobResult {
    let millis: u64 = ctx.params().trim().parse()?;
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(millis)) => Ok(()),
        _ = ctx.cancelled() => Err(JobError::new("stopped early")),
    }
}

/// Fails with a message naming its params.
async fn fail(ctx: JobContext) -> JobResult {
    Err(JobError::new(format!(
        "failing on purpose with params {:?}",
        ctx.params()
    )))
}

impl TestApp {
    /// Sends a request; returns the status and the JSON body.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base_url));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("API answers");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub async fn create_app(&self, name: &str, partitions: i32) {
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                "/api/apps",
                Some(json!({"name": name, "partitions": partitions})),
            )
            .await;
        assert_eq!(status, 201, "create app: {body}");
    }

    /// Creates a job from `body`; panics unless it is created.
    pub async fn create_job(&self, body: Value) -> JobView {
        let (status, answer) = self
            .call(reqwest::Method::POST, "/api/jobs", Some(body))
            .await;
        assert_eq!(status, 201, "create job: {answer}");
        serde_json::from_value(answer).unwrap()
    }

    pub async fn stop_job(&self, id: i64) {
        let (status, body) = self
            .call(reqwest::Method::POST, &format!("/api/jobs/{id}/stop"), None)
            .await;
        assert_eq!(status, 200, "stop job: {body}");
    }

    /// Triggers a job once; returns the trigger id.
    pub async fn trigger(&self, id: i64, params: Option<&str>) -> String {
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                &format!("/api/jobs/{id}/trigger"),
                Some(json!({"params": params})),
            )
            .await;
        assert_eq!(status, 202, "trigger: {body}");
        body["trigger_id"].as_str().unwrap().to_owned()
    }

    pub async fn runs(&self, id: i64) -> Vec<Run> {
        let (status, body) = self
            .call(
                reqwest::Method::GET,
                &format!("/api/jobs/{id}/runs?limit=1000"),
                None,
            )
            .await;
        assert_eq!(status, 200, "runs: {body}");
        serde_json::from_value(body).unwrap()
    }

    /// Waits until `job` has a finished run with result `code`; returns it.
    pub async fn wait_for_run(&self, job: i64, code: i32, limit: Duration) -> Run {
        wait_for(
            limit,
            &format!("a run of job {job} with code {code}"),
            || async {
                self.runs(job)
                    .await
                    .into_iter()
                    .find(|run| run.handle_code == Some(code))
            },
        )
        .await
    }

    /// Starts an executor of `app` with handlers `ok`, `fail` and `sleep` (params: ms), at
    /// most two CONCURRENT runs per job.
    pub fn start_executor(&mut self, app: &str) {
        let executor = Executor::builder()
            .brokers(&self.brokers)
            .app(app)
            .topic_prefix(&self.prefix)
            .session_timeout(SESSION_TIMEOUT)
            .drain_timeout(Duration::from_secs(5))
            .max_concurrent_per_job(2)
            .handler("ok", ok)
            .handler("fail", fail)
            .handler("sleep", sleep)
            .build()
            .expect("executor builds");
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            executor
                .run(stopped.cancelled_owned())
                .await
                .expect("executor runs");
        });
        self.executors.push((stop, task));
    }

    /// Produces raw bytes to `topic` (poison records, hand-made results).
    pub async fn produce_raw(&self, topic: &str, partition: i32, key: &str, payload: &[u8]) {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .create()
            .expect("test producer");
        producer
            .send(
                FutureRecord::to(topic)
                    .partition(partition)
                    .key(key)
                    .payload(payload),
                Timeout::After(Duration::from_secs(10)),
            )
            .await
            .map_err(|(error, _)| error)
            .expect("produce");
    }

    /// Reads `{prefix}.dlq` from the start until `count` records arrived; returns each one's
    /// reason header and payload.
    pub async fn dead_letters(&self, count: usize) -> Vec<(String, Vec<u8>)> {
        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .set("group.id", format!("{}.test-dlq-reader", self.prefix))
            .set("enable.auto.commit", "false")
            .create()
            .expect("test consumer");
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(&format!("{}.dlq", self.prefix), 0, Offset::Beginning)
            .unwrap();
        consumer.assign(&assignment).expect("assign the DLQ");
        let mut found = Vec::new();
        while found.len() < count {
            let message = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
                .await
                .expect("dead letters arrive in time")
                .expect("receive from the DLQ");
            let reason = message
                .headers()
                .and_then(|headers| {
                    headers
                        .iter()
                        .find(|header| header.key == kadence_schemas::headers::DLQ_REASON)
                        .and_then(|header| header.value)
                        .map(|value| String::from_utf8_lossy(value).into_owned())
                })
                .expect("a reason header");
            found.push((reason, message.payload().unwrap_or_default().to_vec()));
        }
        found
    }

    /// Stops executors and the scheduler.
    pub async fn shutdown(mut self) {
        for (stop, task) in self.executors.drain(..) {
            stop.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
        if let Some(scheduler) = self.scheduler.take() {
            scheduler.stop(Duration::from_secs(10)).await;
        }
    }
}
