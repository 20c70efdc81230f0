//! `spawn_app()`: a scheduler on a fresh database with its own topic prefix, an HTTP client
//! for its API with one method per operation, and test executors with known handlers.

use std::sync::Arc;
use std::time::Duration;

use kadence_executor::{
    Executor, ExecutorBuilder, JobContext, JobError, JobResult, OwnedPartitions,
};
use kadence_scheduler::app::Scheduler;
use kadence_scheduler::clock::SystemClock;
use kadence_scheduler::config::Config;
use kadence_scheduler::domain::model::Run;
use kadence_scheduler::http::api::{ExecutorView, JobView, SigningKeyView};
use kadence_scheduler::store::Store;
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

use kadence_tests::fixtures::{Backend, TestDatabase, brokers, unique, wait_for};
pub use kadence_tests::session::{TEST_ADMIN_PASSWORD, login};

/// Creates `topic` with `partitions` on the test broker, as an operator (or another tool)
/// would before Kadence sees it.
pub async fn create_topic(topic: &str, partitions: i32) {
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        ClientConfig::new()
            .set("bootstrap.servers", brokers())
            .create()
            .expect("admin client");
    let results = admin
        .create_topics(
            [&rdkafka::admin::NewTopic::new(
                topic,
                partitions,
                rdkafka::admin::TopicReplication::Fixed(-1),
            )],
            &rdkafka::admin::AdminOptions::new(),
        )
        .await
        .expect("create topics");
    for result in results {
        result.unwrap_or_else(|(topic, code)| panic!("cannot create topic {topic}: {code}"));
    }
}

/// Creates `topic` with `partitions` unless it exists (as the scheduler's own topic admin
/// does); returns the partitions it has.
pub async fn ensure_topic(topic: &str, partitions: i32) -> i32 {
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        ClientConfig::new()
            .set("bootstrap.servers", brokers())
            .create()
            .expect("admin client");
    let new_topic = rdkafka::admin::NewTopic::new(
        topic,
        partitions,
        rdkafka::admin::TopicReplication::Fixed(-1),
    );
    let options = rdkafka::admin::AdminOptions::new();
    for result in admin
        .create_topics([&new_topic], &options)
        .await
        .expect("create topics")
    {
        match result {
            Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => panic!("cannot create topic {topic}: {code}"),
        }
    }
    let topic = topic.to_owned();
    // Metadata requests block: off the runtime's threads.
    tokio::task::spawn_blocking(move || {
        let consumer: rdkafka::consumer::BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", brokers())
            .create()
            .expect("metadata client");
        // A topic just created can take a moment to show in the metadata.
        for _ in 0..50 {
            if let Ok(metadata) = consumer.fetch_metadata(Some(&topic), Duration::from_secs(5))
                && let Some(found) = metadata.topics().first()
                && !found.partitions().is_empty()
            {
                return i32::try_from(found.partitions().len()).expect("a partition count");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("{topic} has no partitions in the broker's metadata");
    })
    .await
    .expect("metadata query")
}

/// Session timeout for test consumers: the broker's first group join is slow otherwise.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(6);

/// A running scheduler plus the executors a test started.
pub struct TestApp {
    pub prefix: String,
    pub brokers: String,
    base_url: String,
    http: reqwest::Client,
    /// The first admin's session token, which [`TestApp::call`] sends.
    admin_token: String,
    /// The scheduler's configuration, for starting more nodes on the same database.
    config: Config,
    scheduler: Option<Scheduler>,
    executors: Vec<(CancellationToken, JoinHandle<()>)>,
    /// The executor key of each app [`TestApp::create_app`] made, which the executors a test
    /// starts for that app sign with.
    executor_keys: std::sync::Mutex<std::collections::HashMap<String, String>>,
    _database: TestDatabase,
}

/// Logs of the scheduler and executors running inside the test process, when
/// `KADENCE_TEST_LOG` holds a filter (e.g. `kadence_executor=info`); silent otherwise.
fn init_test_log() {
    if let Ok(filter) = std::env::var("KADENCE_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

/// Starts a scheduler on a fresh `backend` database with a unique topic prefix.
pub async fn spawn_app(backend: Backend) -> TestApp {
    spawn_app_with(backend, |_| {}).await
}

/// [`spawn_app`] with configuration changes applied after the test defaults.
pub async fn spawn_app_with(backend: Backend, configure: impl FnOnce(&mut Config)) -> TestApp {
    init_test_log();
    let database = TestDatabase::create(backend).await;
    let prefix = unique("kt");
    let brokers = brokers();
    let mut config = Config::default();
    config.database.url = SecretString::from(database.url.clone());
    config.kafka.brokers = brokers.clone();
    config.kafka.broker_kind = kadence_tests::fixtures::broker_kind();
    config.kafka.topic_prefix = prefix.clone();
    config.kafka.results_partitions = 2;
    config.kafka.session_timeout = SESSION_TIMEOUT;
    config.auth.admin_password = Some(SecretString::from(TEST_ADMIN_PASSWORD));
    configure(&mut config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheduler = Scheduler::start(config.clone(), listener, Arc::new(SystemClock))
        .await
        .expect("scheduler starts");
    let base_url = format!("http://{}", scheduler.api_addr());
    TestApp {
        prefix,
        brokers,
        admin_token: login(&base_url, "admin", TEST_ADMIN_PASSWORD).await,
        base_url,
        http: kadence_tests::api_client(),
        config,
        scheduler: Some(scheduler),
        executors: Vec::new(),
        executor_keys: Default::default(),
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

/// How often each trigger id ran a `count` handler, across the test process.
static EXECUTIONS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, u32>>> =
    std::sync::LazyLock::new(Default::default);

/// Succeeds after counting its execution (see [`executions`]).
async fn count(ctx: JobContext) -> JobResult {
    *EXECUTIONS
        .lock()
        .unwrap()
        .entry(ctx.trigger_id().as_str().to_owned())
        .or_default() += 1;
    Ok(())
}

/// Counts its execution (see [`executions`]), then sleeps for `params` milliseconds,
/// stopping early when cancelled.
async fn slow_count(ctx: JobContext) -> JobResult {
    count(ctx.clone()).await?;
    sleep(ctx).await
}

/// How many times a `count` handler ran `trigger_id` in this process.
pub fn executions(trigger_id: &str) -> u32 {
    EXECUTIONS
        .lock()
        .unwrap()
        .get(trigger_id)
        .copied()
        .unwrap_or(0)
}

/// Lets `chatty` runs finish (see [`release_chatty`]).
static CHATTY_GATE: std::sync::LazyLock<tokio::sync::Semaphore> =
    std::sync::LazyLock::new(|| tokio::sync::Semaphore::new(0));

/// Logs "line 1" to "line 5", waits until the test calls [`release_chatty`], logs "line 6"
/// and "line 7", succeeds.
async fn chatty(ctx: JobContext) -> JobResult {
    for n in 1..=5 {
        ctx.log(format!("line {n}"));
    }
    let permit = CHATTY_GATE.acquire().await.expect("the gate stays open");
    permit.forget();
    ctx.log("line 6\nline 7");
    Ok(())
}

/// Lets one waiting `chatty` run go on.
pub fn release_chatty() {
    CHATTY_GATE.add_permits(1);
}

/// Fails on its first two attempts, succeeds on the third.
async fn flaky(ctx: JobContext) -> JobResult {
    if ctx.attempt() < 2 {
        return Err(JobError::new(format!(
            "flaky: attempt {} fails",
            ctx.attempt()
        )));
    }
    Ok(())
}

/// Fails with a message naming its params.
async fn fail(ctx: JobContext) -> JobResult {
    Err(JobError::new(format!(
        "failing on purpose with params {:?}",
        ctx.params()
    )))
}

impl TestApp {
    /// Starts another scheduler node on the same database and topics; returns it with the
    /// base URL of its API.
    pub async fn start_node(&self) -> (Scheduler, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let node = Scheduler::start(self.config.clone(), listener, Arc::new(SystemClock))
            .await
            .expect("second scheduler starts");
        let url = format!("http://{}", node.api_addr());
        (node, url)
    }

    /// The test's database.
    pub fn database(&self) -> &TestDatabase {
        &self._database
    }

    /// The API's address, e.g. `http://127.0.0.1:41234`.
    pub fn api_url(&self) -> &str {
        &self.base_url
    }

    /// The scheduler's store, for loading data faster than through the API.
    pub fn store(&self) -> Arc<dyn Store> {
        self.scheduler.as_ref().expect("the scheduler runs").store()
    }

    /// The first admin's session token.
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// Sends a request as the first admin; returns the status and the JSON body.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.call_node(&self.base_url, method, path, body).await
    }

    /// Sends a request to the node at `base_url` as the first admin; returns the status and
    /// the JSON body.
    pub async fn call_node(
        &self,
        base_url: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.send(base_url, Some(&self.admin_token), method, path, body)
            .await
    }

    /// Sends a request with `token` (none: no credentials); returns the status and the JSON
    /// body.
    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.send(&self.base_url, token, method, path, body).await
    }

    async fn send(
        &self,
        base_url: &str,
        token: Option<&str>,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{base_url}{path}"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
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

    /// The signing keys (`GET /api/signing-keys`), newest first.
    pub async fn signing_keys(&self) -> Vec<SigningKeyView> {
        let (status, body) = self
            .call(reqwest::Method::GET, "/api/signing-keys", None)
            .await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_value(body).expect("signing keys")
    }

    /// The public key (base64) of the key the scheduler signs with now, for an executor's
    /// `trusted_key`.
    pub async fn signing_public_key(&self) -> String {
        let keys = self.signing_keys().await;
        let signing = keys.into_iter().find(|key| key.signing);
        signing.expect("a signing key").public_key
    }

    /// Creates a member with `grants` (app, access) and logs them in; returns their token.
    pub async fn add_member(&self, name: &str, grants: &[(&str, &str)]) -> String {
        let password = format!("{name}-password-1");
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                "/api/users",
                Some(json!({"name": name, "password": password})),
            )
            .await;
        assert_eq!(status, 201, "create user {name}: {body}");
        for (app, access) in grants {
            let (status, body) = self
                .call(
                    reqwest::Method::PUT,
                    &format!("/api/users/{name}/grants/{app}"),
                    Some(json!({ "access": access })),
                )
                .await;
            assert_eq!(status, 200, "grant {access} on {app} to {name}: {body}");
        }
        login(&self.base_url, name, &password).await
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
        self.create_executor_key(name).await;
    }

    /// Makes an executor key for `app` through the API and keeps it as the one the test's
    /// executors of `app` sign with; returns its text.
    pub async fn create_executor_key(&self, app: &str) -> String {
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                &format!("/api/apps/{app}/executor-keys"),
                None,
            )
            .await;
        assert_eq!(status, 201, "create an executor key for {app}: {body}");
        let key = body["executor_key"]
            .as_str()
            .expect("the key's text")
            .to_owned();
        (self.executor_keys.lock().unwrap()).insert(app.to_owned(), key.clone());
        key
    }

    /// The executor key the test's executors of `app` sign with, if [`create_app`] or
    /// [`create_executor_key`] made one.
    ///
    /// [`create_app`]: Self::create_app
    /// [`create_executor_key`]: Self::create_executor_key
    pub fn executor_key(&self, app: &str) -> Option<String> {
        self.executor_keys.lock().unwrap().get(app).cloned()
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

    /// Triggers a job with a request body of the test's choosing; returns status and body.
    pub async fn trigger_with(&self, id: i64, body: Value) -> (u16, Value) {
        self.call(
            reqwest::Method::POST,
            &format!("/api/jobs/{id}/trigger"),
            Some(body),
        )
        .await
    }

    /// The registry's executors of `app`.
    pub async fn executors(&self, app: &str) -> Vec<ExecutorView> {
        let (status, body) = self
            .call(
                reqwest::Method::GET,
                &format!("/api/executors?app={app}"),
                None,
            )
            .await;
        assert_eq!(status, 200, "executors: {body}");
        serde_json::from_value(body["items"].clone()).unwrap()
    }

    /// Waits until `count` live executors of `app` own its `partitions` partitions between
    /// them, each partition once and each executor at least one, and that assignment holds
    /// for three seconds (the group has settled: members joining one after another cause
    /// several rebalances); returns them.
    pub async fn wait_for_executors(
        &self,
        app: &str,
        count: usize,
        partitions: i32,
    ) -> Vec<ExecutorView> {
        let live = || async {
            let mut live: Vec<ExecutorView> = self
                .executors(app)
                .await
                .into_iter()
                .filter(|view| view.live)
                .collect();
            live.sort_by(|a, b| a.entry.executor_id.cmp(&b.entry.executor_id));
            live
        };
        let settled = |live: &[ExecutorView]| {
            let mut owned: Vec<i32> = live
                .iter()
                .flat_map(|view| view.entry.owned_partitions.clone())
                .collect();
            owned.sort_unstable();
            let everyone_owns = live
                .iter()
                .all(|view| !view.entry.owned_partitions.is_empty());
            live.len() == count && everyone_owns && owned == (0..partitions).collect::<Vec<_>>()
        };
        let assignment = |views: &[ExecutorView]| -> Vec<(String, Vec<i32>)> {
            views
                .iter()
                .map(|view| {
                    (
                        view.entry.executor_id.clone(),
                        view.entry.owned_partitions.clone(),
                    )
                })
                .collect()
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        let mut previous: Option<Vec<(String, Vec<i32>)>> = None;
        loop {
            let now = live().await;
            if settled(&now) {
                if previous.as_ref() == Some(&assignment(&now)) {
                    return now;
                }
                previous = Some(assignment(&now));
            } else {
                previous = None;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{count} live executors of {app} never settled on its {partitions} partitions; \
                 last seen: {:?}",
                assignment(&now)
            );
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
    }

    /// Waits until the registry lists an executor of `app` for which `check` holds (what its
    /// latest beat said, and whether it is live); panics naming `what` after 20 s. Executors
    /// beat every second, so this is how a test sees what they are doing.
    pub async fn wait_for_beat(
        &self,
        app: &str,
        what: &str,
        check: impl Fn(&ExecutorView) -> bool,
    ) {
        wait_for(Duration::from_secs(20), what, || async {
            self.executors(app).await.iter().any(&check).then_some(())
        })
        .await
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
        serde_json::from_value(body["items"].clone()).unwrap()
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

    /// Starts an executor of `app` with handlers `ok`, `fail`, `sleep` (params: ms) and `count`
    /// (see [`executions`]), at most two CONCURRENT runs per job.
    pub fn start_executor(&mut self, app: &str) {
        self.start_executor_with(app, |builder| builder);
    }

    /// [`start_executor`](Self::start_executor) with builder settings of the test's choosing
    /// applied last.
    pub fn start_executor_with(
        &mut self,
        app: &str,
        configure: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder,
    ) {
        let builder = self
            .bare_executor(app)
            .handler("ok", ok)
            .handler("fail", fail)
            .handler("sleep", sleep)
            .handler("count", count)
            .handler("chatty", chatty)
            .handler("flaky", flaky)
            .handler("slow_count", slow_count);
        self.run_executor(configure(builder));
    }

    /// An executor of `app` on this test's broker and topics, without handlers. It verifies
    /// triggers only when the test gives it a trusted key: many tests feed it hand-made
    /// records, and those whose subject is verification say which keys it trusts. It signs
    /// what it writes with the app's executor key (see [`executor_key`](Self::executor_key));
    /// for an app without one it runs unsigned, which the test's scheduler refuses.
    pub fn bare_executor(&self, app: &str) -> ExecutorBuilder {
        let builder = match self.executor_key(app) {
            Some(key) => Executor::builder().executor_key(key),
            None => Executor::builder().allow_unsigned(),
        };
        builder
            .allow_unverified()
            .brokers(&self.brokers)
            .broker_kind(kadence_tests::fixtures::broker_kind())
            .app(app)
            .topic_prefix(&self.prefix)
            .session_timeout(SESSION_TIMEOUT)
            .rebalance_timeout(SESSION_TIMEOUT / 2)
            .drain_timeout(Duration::from_secs(5))
            .beat_interval(Duration::from_secs(1))
            .max_concurrent_per_job(2)
    }

    /// Builds and runs `builder` until the test stops its executors; returns the watch of
    /// the partitions its group assigns it.
    pub fn run_executor(&mut self, builder: ExecutorBuilder) -> OwnedPartitions {
        let executor = builder.build().expect("executor builds");
        let partitions = executor.partitions();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            executor
                .run(stopped.cancelled_owned())
                .await
                .expect("executor runs");
        });
        self.executors.push((stop, task));
        partitions
    }

    /// Produces raw bytes to `topic` (poison records, hand-made results).
    pub async fn produce_raw(&self, topic: &str, partition: i32, key: &str, payload: &[u8]) {
        self.produce_with_headers(topic, partition, key, payload, None)
            .await
    }

    /// [`produce_raw`](Self::produce_raw) signed with the executor key of `signer_app`, as an
    /// executor of that app would write it (hand-made results, beats, log records).
    pub async fn produce_signed(
        &self,
        signer_app: &str,
        (topic, partition): (&str, i32),
        key: &str,
        payload: &[u8],
    ) {
        let signer = self
            .executor_key(signer_app)
            .unwrap_or_else(|| panic!("no executor key of {signer_app}: create_app makes one"));
        let signer = kadence_kafka::ExecutorKey::parse(&signer).expect("a valid executor key");
        let headers = signer.headers(topic, payload, None);
        self.produce_with_headers(topic, partition, key, payload, Some(headers))
            .await
    }

    /// [`produce_raw`](Self::produce_raw) with `headers` (a signature, say).
    pub async fn produce_with_headers(
        &self,
        topic: &str,
        partition: i32,
        key: &str,
        payload: &[u8],
        headers: Option<rdkafka::message::OwnedHeaders>,
    ) {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .create()
            .expect("test producer");
        let mut record = FutureRecord::to(topic)
            .partition(partition)
            .key(key)
            .payload(payload);
        if let Some(headers) = headers {
            record = record.headers(headers);
        }
        producer
            .send(record, Timeout::After(Duration::from_secs(10)))
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

    /// Stops the executors this test started, gracefully, and waits for them.
    pub async fn stop_executors(&mut self) {
        for (stop, task) in self.executors.drain(..) {
            stop.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
    }

    /// Stops the scheduler gracefully, keeps it down for `outage`, then starts a new node on
    /// the same database and topics and sends later calls to it.
    pub async fn restart_scheduler_after(&mut self, outage: Duration) {
        if let Some(scheduler) = self.scheduler.take() {
            scheduler.stop(Duration::from_secs(10)).await;
        }
        tokio::time::sleep(outage).await;
        let (node, url) = self.start_node().await;
        self.scheduler = Some(node);
        self.base_url = url;
    }

    /// Where the first node serves `/metrics` when `metrics.listen` gives it an address of its
    /// own.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.scheduler.as_ref().and_then(Scheduler::metrics_addr)
    }

    pub async fn shutdown(mut self) {
        self.stop_executors().await;
        if let Some(scheduler) = self.scheduler.take() {
            scheduler.stop(Duration::from_secs(10)).await;
        }
    }
}
