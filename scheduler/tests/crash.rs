//! Several `kadence serve` processes on one database, killed with SIGKILL: no fire is lost,
//! a re-emission carries the same trigger id, and with no crash every trigger id is emitted
//! exactly once. Trigger records are read straight from the topic (no executor needed).
//! The tests of several nodes run on PostgreSQL and on MySQL, the backends several
//! schedulers share; the restart of a lone node on SQLite.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Stdio;
use std::time::Duration;

use kadence_scheduler::store::fire_batch;
use kadence_schemas::TriggerRecord;
use kadence_tests::fixtures::{
    Backend, TestDatabase, Watchdog, brokers, fetch_rows, unique, wait_for,
};
use kadence_tests::now_ms;
use kadence_tests::serve::spawn_serve;
use kadence_tests::session::{TEST_ADMIN_PASSWORD, login};
use kadence_tests::triggers::read_triggers;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

const APP: &str = "crash";
const PARTITIONS: i32 = 3;

/// A `kadence serve` child process.
struct Node {
    child: Child,
    api: String,
    token: String,
}

impl Node {
    /// Starts a scheduler process with a short lease so tests see claims within seconds.
    async fn start(database_url: &str, prefix: &str, node_id: &str) -> Node {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kadence"));
        command
            .arg("serve")
            .env("KADENCE_DATABASE__URL", database_url)
            .env("KADENCE_KAFKA__BROKERS", brokers())
            .env(
                "KADENCE_KAFKA__BROKER_KIND",
                kadence_tests::fixtures::broker_kind().name(),
            )
            .env("KADENCE_KAFKA__TOPIC_PREFIX", prefix)
            .env("KADENCE_KAFKA__RESULTS_PARTITIONS", "1")
            .env("KADENCE_KAFKA__SESSION_TIMEOUT", "6s")
            .env("KADENCE_API__LISTEN", "127.0.0.1:0")
            .env("KADENCE_SCHEDULE__NODE_ID", node_id)
            .env("KADENCE_SCHEDULE__LEASE", "2s")
            .env("KADENCE_SCHEDULE__SHARD_LEASE", "2s")
            .env("KADENCE_SCHEDULE__CLAIM_INTERVAL", "500ms")
            .env("RUST_LOG", "warn")
            .stderr(Stdio::inherit());
        let (child, api) = spawn_serve(command).await;
        let token = login(&api, "admin", TEST_ADMIN_PASSWORD).await;
        Node { child, api, token }
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let response = reqwest::Client::new()
            .post(format!("{}{path}", self.api))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .expect("API answers");
        assert!(
            response.status().is_success(),
            "POST {path}: {}",
            response.status()
        );
        response.json().await.unwrap()
    }

    /// SIGKILL: no shutdown code runs, the wheel's contents are gone.
    async fn kill_9(mut self) {
        self.child.start_kill().expect("kill -9");
        self.child.wait().await.expect("reap");
    }

    /// Sends `signal` (`STOP`, `CONT`) to the process.
    fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("the node runs");
        let sent = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{signal} {pid}");
    }

    /// The value of the unlabelled metric `name` on the node's `/metrics`.
    async fn metric(&self, name: &str) -> f64 {
        let text = reqwest::get(format!("{}/metrics", self.api))
            .await
            .expect("GET /metrics")
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} on /metrics"))
            .parse()
            .unwrap()
    }

    /// SIGTERM, then wait for the graceful stop.
    async fn terminate(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
        let _ = tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await;
    }
}

/// Creates the app and `count` jobs firing every second, started; returns their ids.
async fn every_second_jobs(node: &Node, count: usize) -> Vec<i64> {
    node.post("/api/apps", json!({"name": APP, "partitions": PARTITIONS}))
        .await;
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let job = node
            .post(
                "/api/jobs",
                json!({"app": APP, "handler": "tick", "schedule_conf": "* * * * * ?",
                "route_strategy": "RANDOM", "start": true}),
            )
            .await;
        ids.push(job["id"].as_i64().unwrap());
    }
    ids
}

async fn stop_jobs(node: &Node, jobs: &[i64]) {
    for job in jobs {
        node.post(&format!("/api/jobs/{job}/stop"), json!({})).await;
    }
}

/// The trigger ids `sql` selects (with `$1` bound to `bind`, if given).
async fn trigger_ids(db: &TestDatabase, sql: &str, bind: Option<&str>) -> HashSet<String> {
    let rows: Vec<(String,)> = fetch_rows(db, sql, bind).await;
    rows.into_iter().map(|(trigger_id,)| trigger_id).collect()
}

/// The schedule shards and their owners and fences, by shard.
async fn shard_owners(db: &TestDatabase) -> Vec<(Option<String>, i64)> {
    fetch_rows(
        db,
        "SELECT owner_node, fence FROM schedule_shards ORDER BY shard",
        None,
    )
    .await
}

/// How many shards `node` owns.
fn owned_by(owners: &[(Option<String>, i64)], node: &str) -> usize {
    owners
        .iter()
        .filter(|(owner, _)| owner.as_deref() == Some(node))
        .count()
}

/// Trigger ids of the fires planned and not yet recorded as runs: the open fires of the fire
/// batches (of `owner` only, if given) whose run row is not written, and the pending rows.
async fn pending_fires(db: &TestDatabase, owner: Option<&str>) -> HashSet<String> {
    let sql = match owner {
        Some(_) => "SELECT pending_from_ms, fires FROM fire_batches WHERE owner_node = $1",
        None => "SELECT pending_from_ms, fires FROM fire_batches",
    };
    let batches: Vec<(i64, Vec<u8>)> = fetch_rows(db, sql, owner).await;
    let recorded = trigger_ids(db, "SELECT trigger_id FROM job_logs", None).await;
    let mut pending: HashSet<String> = batches
        .iter()
        .flat_map(|(pending_from_ms, bytes)| {
            fire_batch::decode(bytes)
                .expect("a readable batch")
                .into_iter()
                .filter(move |fire| fire.fire_at_ms >= *pending_from_ms)
                .map(|fire| fire.trigger_id.to_string())
        })
        .filter(|trigger_id| !recorded.contains(trigger_id))
        .collect();
    let rows = match owner {
        Some(_) => "SELECT trigger_id FROM job_logs WHERE state = 'SCHEDULED' AND owner_node = $1",
        None => "SELECT trigger_id FROM job_logs WHERE state = 'SCHEDULED'",
    };
    pending.extend(trigger_ids(db, rows, owner).await);
    pending
}

/// Trigger ids of the fires a node planned and still owns (not yet acknowledged).
async fn pending_owned_by(db: &TestDatabase, node_id: &str) -> HashSet<String> {
    pending_fires(db, Some(node_id)).await
}

/// The fires the broker acknowledged so far: job id → scheduled times (ms), from the
/// trigger ids (`{job}-{scheduled_ms}`).
async fn dispatched_fires(db: &TestDatabase) -> HashMap<i64, Vec<i64>> {
    let sql = "SELECT trigger_id FROM job_logs WHERE state = 'DISPATCHED'";
    let mut fires: HashMap<i64, Vec<i64>> = HashMap::new();
    for trigger_id in trigger_ids(db, sql, None).await {
        let (job, scheduled_ms) = trigger_id
            .split_once('-')
            .unwrap_or_else(|| panic!("a scheduled trigger id: {trigger_id}"));
        fires
            .entry(job.parse().unwrap())
            .or_default()
            .push(scheduled_ms.parse().unwrap());
    }
    fires
}

/// Waits until a node has taken over from one killed at `killed_ms`: every `held` fire of
/// the dead node was claimed and acknowledged, and every job has at least `min_fires`
/// acknowledged fires, one of them due after anything the dead node could have planned
/// (its pre-read window is 5 s), so the new node schedules on its own too.
async fn wait_for_takeover(
    db: &TestDatabase,
    jobs: &[i64],
    held: &HashSet<String>,
    killed_ms: i64,
    min_fires: usize,
) {
    let beyond_the_dead_node = killed_ms + 6_000;
    wait_for(
        Duration::from_secs(60),
        &format!(
            "the killed node's {} held fires acknowledged, and {min_fires} fires of each job,              one due after {beyond_the_dead_node}",
            held.len()
        ),
        || async {
            let still_pending = pending_fires(db, None).await;
            if !held.is_disjoint(&still_pending) {
                return None;
            }
            let fires = dispatched_fires(db).await;
            jobs.iter()
                .all(|job| {
                    fires.get(job).is_some_and(|times| {
                        times.len() >= min_fires
                            && times.iter().any(|&at| at > beyond_the_dead_node)
                    })
                })
                .then_some(())
        },
    )
    .await;
}

/// Every trigger record of the app's topic.
async fn emitted_triggers(prefix: &str) -> Vec<TriggerRecord> {
    read_triggers(&brokers(), &format!("{prefix}.triggers.{APP}"), PARTITIONS).await
}

/// Checks that every fire written was emitted (in particular the `held` ones a killed node
/// owned), that each job's fires are consecutive seconds, and returns how many times each
/// trigger id was emitted.
async fn check_nothing_lost(
    db: &TestDatabase,
    prefix: &str,
    jobs: &[i64],
    min_fires: usize,
    held: &HashSet<String>,
) -> HashMap<String, usize> {
    wait_for(
        Duration::from_secs(30),
        "every pending fire emitted",
        || async { pending_fires(db, None).await.is_empty().then_some(()) },
    )
    .await;
    // The jobs are stopped at the end: their fires planned beyond the stop are cancelled.
    let written = trigger_ids(
        db,
        "SELECT trigger_id FROM job_logs WHERE state <> 'CANCELLED'",
        None,
    )
    .await;
    let cancelled = trigger_ids(
        db,
        "SELECT trigger_id FROM job_logs WHERE state = 'CANCELLED'",
        None,
    )
    .await;
    let records = emitted_triggers(prefix).await;
    let mut emitted: HashMap<String, usize> = HashMap::new();
    let mut per_job: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for record in &records {
        *emitted.entry(record.trigger_id.to_string()).or_default() += 1;
        assert_eq!(
            record.trigger_id.as_str(),
            format!("{}-{}", record.job_id, record.scheduled_at_ms)
        );
        per_job
            .entry(record.job_id.get())
            .or_default()
            .push(record.scheduled_at_ms);
    }
    let missing: Vec<&String> = written
        .iter()
        .filter(|id| !emitted.contains_key(*id))
        .collect();
    let emitted_cancelled: Vec<&String> = cancelled
        .iter()
        .filter(|id| emitted.contains_key(*id))
        .collect();
    assert!(
        emitted_cancelled.is_empty(),
        "cancelled fires were emitted: {emitted_cancelled:?}"
    );
    for trigger_id in held {
        assert!(
            emitted.contains_key(trigger_id),
            "held fire {trigger_id} was lost"
        );
    }
    assert!(
        missing.is_empty(),
        "{} written fires never emitted, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    for job in jobs {
        let mut times = per_job.remove(job).unwrap_or_default();
        times.sort_unstable();
        times.dedup();
        assert!(
            times.len() >= min_fires,
            "job {job} fired {} times",
            times.len()
        );
        for pair in times.windows(2) {
            assert_eq!(
                pair[1] - pair[0],
                1_000,
                "job {job} has a gap after {}",
                pair[0]
            );
        }
    }
    emitted
}

async fn a_survivor_emits_the_pending_fires_of_a_killed_scheduler(backend: Backend) {
    let database = TestDatabase::create(backend).await;
    let prefix = unique("kcrash");
    let doomed = Node::start(&database.url, &prefix, "node-doomed").await;
    let jobs = every_second_jobs(&doomed, 20).await;
    let held = wait_for(
        Duration::from_secs(20),
        "the doomed node to hold pending fires",
        || async {
            let held = pending_owned_by(&database, "node-doomed").await;
            (held.len() >= 40).then_some(held)
        },
    )
    .await;
    let survivor = Node::start(&database.url, &prefix, "node-survivor").await;
    doomed.kill_9().await;
    let killed_ms = now_ms();
    // The survivor keeps scheduling and, once the dead node's leases end, emits its fires.
    let min_fires = 6;
    wait_for_takeover(&database, &jobs, &held, killed_ms, min_fires).await;
    stop_jobs(&survivor, &jobs).await;
    check_nothing_lost(&database, &prefix, &jobs, min_fires, &held).await;
    survivor.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_sqlite_scheduler_restarted_after_kill_9_loses_nothing() {
    let _watchdog = Watchdog::arm("a_lone_sqlite_scheduler_restarted_after_kill_9_loses_nothing");
    let database = TestDatabase::create(Backend::Sqlite).await;
    let prefix = unique("kcrash");
    let first = Node::start(&database.url, &prefix, "node-first-life").await;
    let jobs = every_second_jobs(&first, 10).await;
    let held = wait_for(Duration::from_secs(20), "pending fires", || async {
        let held = pending_owned_by(&database, "node-first-life").await;
        (held.len() >= 20).then_some(held)
    })
    .await;
    first.kill_9().await;
    let killed_ms = now_ms();
    // The scenario: the only scheduler stays down for a while (a fixed time: it is the
    // outage, not a wait for something to happen).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let second = Node::start(&database.url, &prefix, "node-second-life").await;
    // The second life claims what the first held and schedules on; the restart's gap is
    // filled by the claims.
    let min_fires = 6;
    wait_for_takeover(&database, &jobs, &held, killed_ms, min_fires).await;
    stop_jobs(&second, &jobs).await;
    check_nothing_lost(&database, &prefix, &jobs, min_fires, &held).await;
    second.terminate().await;
}

async fn three_schedulers_emit_every_fire_exactly_once(backend: Backend) {
    let database = TestDatabase::create(backend).await;
    let prefix = unique("kthree");
    let first = Node::start(&database.url, &prefix, "node-1").await;
    let second = Node::start(&database.url, &prefix, "node-2").await;
    let third = Node::start(&database.url, &prefix, "node-3").await;
    let jobs = every_second_jobs(&first, 200).await;
    // The scenario: a minute of fires under three nodes contending for the schedule lock,
    // renewing and claiming leases. A fixed time, since what is checked is that in all that
    // time no trigger id went out twice (the absence of something), which no condition
    // can report earlier.
    tokio::time::sleep(Duration::from_secs(60)).await;
    stop_jobs(&second, &jobs).await;
    // 60 s from start + 5 s to the stop + 1.25 s (later fires are cancelled): about 56; the
    // margin is for 200 job creations on a busy machine.
    let emitted = check_nothing_lost(&database, &prefix, &jobs, 50, &HashSet::new()).await;
    let repeated: Vec<(&String, &usize)> =
        emitted.iter().filter(|(_, count)| **count > 1).collect();
    assert!(
        repeated.is_empty(),
        "{} trigger ids emitted more than once, e.g. {:?}",
        repeated.len(),
        &repeated[..repeated.len().min(5)]
    );
    assert!(emitted.len() >= 200 * 55, "{} fires", emitted.len());
    for node in [first, second, third] {
        node.terminate().await;
    }
}

async fn a_paused_shard_owner_is_fenced_out_and_nothing_is_lost(backend: Backend) {
    let database = TestDatabase::create(backend).await;
    let url = &database.url;
    let db = &database;
    let prefix = unique("kfence");
    let paused = Node::start(url, &prefix, "node-paused").await;
    let other = Node::start(url, &prefix, "node-other").await;
    let jobs = every_second_jobs(&paused, 40).await;
    let before = wait_for(
        Duration::from_secs(30),
        "the nodes to share the shards",
        || async {
            let owners = shard_owners(db).await;
            (owned_by(&owners, "node-paused") == 8 && owned_by(&owners, "node-other") == 8)
                .then_some(owners)
        },
    )
    .await;

    wait_for(
        Duration::from_secs(20),
        "the node to hold pending fires",
        || async { (pending_owned_by(db, "node-paused").await.len() >= 40).then_some(()) },
    )
    .await;
    // Frozen past its leases (2 s here), holding its shards' row locks if it can be caught
    // so: the other node takes every shard over, and claims the fires the frozen one held.
    let holding_locks = stop_holding_the_shard_rows(&paused, db).await;
    let stopped_ms = now_ms();
    let held = pending_owned_by(db, "node-paused").await;
    let after = wait_for(
        Duration::from_secs(60),
        "the other node to own every shard",
        || async {
            let owners = shard_owners(db).await;
            (owned_by(&owners, "node-other") == 16).then_some(owners)
        },
    )
    .await;
    eprintln!(
        "shard takeover after SIGSTOP: {} ms (frozen holding the shard rows: {holding_locks})",
        now_ms() - stopped_ms
    );
    for ((owner, fence), (_, new_fence)) in before.iter().zip(&after) {
        if owner.as_deref() == Some("node-paused") {
            assert!(new_fence > fence, "a taken shard has a new fence");
        }
    }
    // The other node schedules alone beyond anything the frozen one planned.
    let min_fires = 4;
    wait_for_takeover(db, &jobs, &held, stopped_ms, min_fires).await;

    // Woken, the node still believes it owns 8 shards: its scan or its lease step finds them
    // fenced and it writes nothing for them; later it gets a share again.
    paused.signal("CONT");
    wait_for(
        Duration::from_secs(30),
        "the woken node to count its shards lost",
        || async {
            (paused.metric("kadence_scheduler_shards_lost_total").await >= 1.0).then_some(())
        },
    )
    .await;
    wait_for(
        Duration::from_secs(30),
        "the nodes to share the shards again",
        || async {
            let owners = shard_owners(db).await;
            (owned_by(&owners, "node-paused") == 8).then_some(())
        },
    )
    .await;
    stop_jobs(&other, &jobs).await;
    let emitted = check_nothing_lost(db, &prefix, &jobs, min_fires, &held).await;
    // Its wheel still held fires the other node had claimed meanwhile: those went out twice,
    // each time with the same trigger id.
    let twice = emitted.values().filter(|count| **count > 1).count();
    eprintln!(
        "{} fires held when frozen; {twice} of {} trigger ids emitted twice",
        held.len(),
        emitted.len()
    );
    for node in [paused, other] {
        node.terminate().await;
    }
}

/// SIGSTOPs `node` at a moment one of its transactions holds row locks on the schedule
/// shards (a lease step or a pre-read scan), so the locks stay held while it is frozen: the
/// case the sessions' idle-in-transaction limit is for (with a limit longer than the shard
/// lease the other node's lease step waits on them, and the frozen node's fires are missed
/// rather than late). Tries again, letting the node run a few milliseconds between tries,
/// for at most 60 s; returns whether it caught one (the node is stopped either way).
async fn stop_holding_the_shard_rows(node: &Node, db: &TestDatabase) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        node.signal("STOP");
        // A statement sent just before the stop still finishes on the server; locks then
        // still held belong to a transaction the node was in the middle of.
        tokio::time::sleep(Duration::from_millis(20)).await;
        if shard_rows_stay_locked(db).await {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        node.signal("CONT");
        let run_ms = rand::random_range(2..40);
        tokio::time::sleep(Duration::from_millis(run_ms)).await;
    }
}

/// Whether a locking read of the schedule shards that must not wait (`NOWAIT`) fails three
/// times 30 ms apart: some transaction holds their rows, and not for a live node's moment.
async fn shard_rows_stay_locked(db: &TestDatabase) -> bool {
    use sqlx::Connection as _;
    const SQL: &str = "SELECT shard FROM schedule_shards FOR UPDATE NOWAIT";
    macro_rules! locked_with {
        ($connection:ty) => {{
            let mut connection = <$connection>::connect(&db.url).await.expect("connect");
            let mut transaction = connection.begin().await.expect("begin");
            let locked = match sqlx::query(SQL).fetch_all(&mut *transaction).await {
                Ok(_) => false,
                Err(error) => {
                    assert_refused_for_a_lock(&error);
                    true
                }
            };
            transaction.rollback().await.expect("roll back");
            locked
        }};
    }
    for attempt in 0..3 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        let locked = match db.backend() {
            Backend::Postgres => locked_with!(sqlx::PgConnection),
            Backend::MySql => locked_with!(sqlx::MySqlConnection),
            Backend::Sqlite => unreachable!("several nodes share a server database only"),
        };
        if !locked {
            return false;
        }
    }
    true
}

/// Fails the test unless `error` is the refusal of a `NOWAIT` read to wait for a lock (the
/// check would otherwise see locks that are not there).
fn assert_refused_for_a_lock(error: &sqlx::Error) {
    let refused = error.as_database_error().is_some_and(|database_error| {
        // PostgreSQL's lock_not_available; MariaDB's lock wait timeout; MySQL 8's NOWAIT.
        database_error.code().as_deref() == Some("55P03")
            || database_error
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some_and(|mysql| matches!(mysql.number(), 1205 | 3572))
    });
    assert!(refused, "the locking read of the shards failed: {error}");
}

/// One test per named `async fn name(backend: Backend)` and server backend (PostgreSQL and
/// MySQL: several schedulers share a database only there), each under a [`Watchdog`].
macro_rules! on_server_backends {
    ($($test:ident),* $(,)?) => {
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                let _watchdog = super::Watchdog::arm(concat!("postgres::", stringify!($test)));
                super::$test(super::Backend::Postgres).await
            })*
        }
        mod mysql {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                let _watchdog = super::Watchdog::arm(concat!("mysql::", stringify!($test)));
                super::$test(super::Backend::MySql).await
            })*
        }
    };
}

on_server_backends!(
    a_survivor_emits_the_pending_fires_of_a_killed_scheduler,
    three_schedulers_emit_every_fire_exactly_once,
    a_paused_shard_owner_is_fenced_out_and_nothing_is_lost,
);
