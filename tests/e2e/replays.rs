//! Replays and backfills on the real broker and both stores: what is replayed is read back
//! from the trigger topics (the ground truth), never taken from the API's word.
//!
//! - a replay by time and one by offsets re-emit exactly the chosen triggers (ids, params,
//!   shards, partitions), as REPLAY records with `replay_of`, their runs linked; a dry run
//!   changes nothing; a second replay of a range is refused unless forced; the outcome filter
//!   keeps only the failed runs, and a replay can go to another app;
//! - a backfill after an outage (DO_NOTHING misfires) emits exactly the fires that never
//!   fired, under their schedule's ids, and a second backfill emits nothing.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use kadence_scheduler::domain::model::{Run, RunState};
use kadence_schemas::{TriggerRecord, TriggerType};
use kadence_tests::triggers::{Placed, read_placed_records};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use kadence_tests::fixtures::{Backend, BrokerKind, wait_for};

on_every_backend!(
    replays_reproduce_exactly_the_chosen_triggers,
    a_backfill_after_an_outage_emits_exactly_the_missing_fires,
);

/// Every record of `app`'s trigger topic, with partitions and offsets.
async fn topic(app: &TestApp, name: &str, partitions: i32) -> Vec<Placed<TriggerRecord>> {
    let topic = format!("{}.triggers.{name}", app.prefix);
    read_placed_records(&app.brokers, &topic, partitions).await
}

/// The REPLAY records of `records` made by replay `id`, by the trigger they replay.
fn replays_by(
    records: &[Placed<TriggerRecord>],
    id: i64,
) -> HashMap<String, Placed<TriggerRecord>> {
    records
        .iter()
        .filter(|placed| placed.record.trigger_type == TriggerType::Replay)
        .filter(|placed| {
            placed
                .record
                .trigger_id
                .as_str()
                .ends_with(&format!("-p{id}"))
        })
        .map(|placed| {
            let original = placed
                .record
                .replay_of
                .clone()
                .expect("a replay names its original");
            (original.as_str().to_owned(), placed.clone())
        })
        .collect()
}

/// Waits until replay `id` is in the topic with `count` records; returns them.
async fn replayed(
    app: &TestApp,
    name: &str,
    partitions: i32,
    id: i64,
    count: usize,
) -> HashMap<String, Placed<TriggerRecord>> {
    let what = format!("{count} triggers of replay {id} in {name}");
    wait_for(Duration::from_secs(60), &what, || async {
        let found = replays_by(&topic(app, name, partitions).await, id);
        (found.len() >= count).then_some(found)
    })
    .await
}

/// Checks that each replayed record repeats its original (id aside) and took its partition.
fn assert_replays_repeat(
    originals: &[&Placed<TriggerRecord>],
    replays: &HashMap<String, Placed<TriggerRecord>>,
    id: i64,
    same_partition: bool,
) {
    let wanted: BTreeSet<&str> = originals
        .iter()
        .map(|p| p.record.trigger_id.as_str())
        .collect();
    let got: BTreeSet<&str> = replays.keys().map(String::as_str).collect();
    assert_eq!(
        got, wanted,
        "replay {id} replayed exactly the chosen triggers"
    );
    for original in originals {
        let replay = &replays[original.record.trigger_id.as_str()];
        let (a, b) = (&original.record, &replay.record);
        assert_eq!(b.trigger_id.as_str(), format!("{}-p{id}", a.trigger_id));
        assert_eq!(
            (
                b.job_id,
                &b.handler,
                &b.params,
                b.shard_index,
                b.shard_total,
                b.scheduled_at_ms
            ),
            (
                a.job_id,
                &a.handler,
                &a.params,
                a.shard_index,
                a.shard_total,
                a.scheduled_at_ms
            ),
            "replay of {} repeats it",
            a.trigger_id
        );
        if same_partition {
            assert_eq!(
                replay.partition, original.partition,
                "replay of {}",
                a.trigger_id
            );
        }
    }
}

async fn post(app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    app.call(Method::POST, path, Some(body)).await
}

async fn finished_runs(app: &TestApp, job: i64) -> Vec<Run> {
    app.runs(job).await
}

/// Three jobs fire for a few seconds (one fails, one is a broadcast over three partitions);
/// then the replays.
async fn replays_reproduce_exactly_the_chosen_triggers(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("demo", 3).await;
    app.create_app("staging", 1).await;
    app.start_executor("demo");
    let job = |handler: &str, params: &str, cron: &str, route: &str| {
        json!({"app": "demo", "handler": handler, "params": params, "schedule_type": "CRON",
            "schedule_conf": cron, "route_strategy": route, "start": true})
    };
    let ok = app
        .create_job(job("ok", "a", "* * * * * ?", "ROUND"))
        .await
        .id;
    let failing = app
        .create_job(job("fail", "b", "* * * * * ?", "RANDOM"))
        .await
        .id;
    let broadcast = app
        .create_job(job("ok", "c", "*/2 * * * * ?", "SHARDING_BROADCAST"))
        .await
        .id;
    // A started job's first fire is a pre-read window (5 s) away.
    tokio::time::sleep(Duration::from_secs(10)).await;
    for id in [ok, failing, broadcast] {
        app.stop_job(id).await;
    }
    for id in [ok, failing, broadcast] {
        wait_for(Duration::from_secs(30), "every run finished", || async {
            let runs = finished_runs(&app, id).await;
            runs.iter()
                .all(|run| run.state == RunState::Finished)
                .then_some(())
        })
        .await;
    }
    let before = topic(&app, "demo", 3).await;
    let mut seconds: Vec<i64> = before.iter().map(|p| p.record.scheduled_at_ms).collect();
    seconds.sort_unstable();
    seconds.dedup();
    assert!(seconds.len() >= 4, "fired for a few seconds: {seconds:?}");
    let (from_ms, to_ms) = (seconds[1], seconds[1] + 2_000);
    let chosen: Vec<&Placed<TriggerRecord>> = before
        .iter()
        .filter(|p| (from_ms..to_ms).contains(&p.record.scheduled_at_ms))
        .filter(|p| [ok, broadcast].contains(&p.record.job_id.get()))
        .collect();
    assert!(
        chosen.iter().any(|p| p.record.shard_total == 3),
        "a broadcast in the range"
    );
    let request = json!({"app": "demo", "from_ms": from_ms, "to_ms": to_ms,
        "job_ids": [ok, broadcast], "rate_per_second": 1000});

    // A dry run counts, and changes nothing: no replay recorded, no record, no run.
    let mut dry = request.clone();
    dry["dry_run"] = json!(true);
    let (status, summary) = post(&app, "/api/replays", dry).await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(summary["triggers"], json!(chosen.len()), "{summary}");
    assert!(summary["operation"].is_null());
    let shares: Vec<i64> = summary["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_id"].as_i64().unwrap())
        .collect();
    assert_eq!(shares, vec![ok.min(broadcast), ok.max(broadcast)]);
    let (_, listed) = app.call(Method::GET, "/api/replays", None).await;
    assert_eq!(listed["items"], json!([]));
    assert_eq!(
        topic(&app, "demo", 3).await.len(),
        before.len(),
        "the dry run emitted nothing"
    );
    let runs_before = finished_runs(&app, ok).await.len();
    assert_eq!(finished_runs(&app, ok).await.len(), runs_before);

    // The replay: exactly the chosen triggers again, same partitions, runs linked.
    let (status, summary) = post(&app, "/api/replays", request.clone()).await;
    assert_eq!(status, 201, "{summary}");
    let first = summary["operation"]["id"].as_i64().unwrap();
    assert_eq!(summary["operation"]["triggers"], json!(chosen.len()));
    let replays = replayed(&app, "demo", 3, first, chosen.len()).await;
    assert_replays_repeat(&chosen, &replays, first, true);
    let linked = wait_for(Duration::from_secs(30), "the replayed runs", || async {
        let runs: Vec<Run> = finished_runs(&app, ok)
            .await
            .into_iter()
            .filter(|run| run.operation_id == Some(first) && run.state == RunState::Finished)
            .collect();
        let expected = chosen
            .iter()
            .filter(|p| p.record.job_id.get() == ok)
            .count();
        (runs.len() == expected).then_some(runs)
    })
    .await;
    for run in &linked {
        assert_eq!(run.trigger_type, TriggerType::Replay);
        let original = run.replay_of.as_ref().expect("linked to its original");
        assert_eq!(run.trigger_id.as_str(), format!("{original}-p{first}"));
    }
    let (_, shown) = app
        .call(Method::GET, &format!("/api/replays/{first}"), None)
        .await;
    assert_eq!(shown["requested_by"], json!("admin"));
    assert_eq!(shown["kind"], json!("REPLAY"));
    assert_eq!(shown["triggers"], json!(chosen.len()));

    // Twice is refused, unless forced.
    let (status, refused) = post(&app, "/api/replays", request.clone()).await;
    assert_eq!(status, 409, "{refused}");
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("replay {first}")) && error.contains("force"),
        "{error}"
    );
    let mut forced = request.clone();
    forced["force"] = json!(true);
    let (status, again) = post(&app, "/api/replays", forced).await;
    assert_eq!(status, 201, "{again}");
    let second = again["operation"]["id"].as_i64().unwrap();
    assert_replays_repeat(
        &chosen,
        &replayed(&app, "demo", 3, second, chosen.len()).await,
        second,
        true,
    );

    // By offsets: exactly those of partition 0.
    let mut partition_zero: Vec<&Placed<TriggerRecord>> =
        before.iter().filter(|p| p.partition == 0).collect();
    partition_zero.sort_by_key(|p| p.offset);
    let picked = &partition_zero[1..4];
    let (status, by_offsets) = post(
        &app,
        "/api/replays",
        json!({"app": "demo", "force": true,
        "rate_per_second": 1000,
        "offsets": [{"partition": 0, "from": picked[0].offset, "to": picked[2].offset + 1}]}),
    )
    .await;
    assert_eq!(status, 201, "{by_offsets}");
    let third = by_offsets["operation"]["id"].as_i64().unwrap();
    assert_eq!(by_offsets["triggers"], json!(3), "{by_offsets}");
    assert_replays_repeat(
        picked,
        &replayed(&app, "demo", 3, third, 3).await,
        third,
        true,
    );

    // Only the failed runs, into another app.
    let failed: Vec<&Placed<TriggerRecord>> = before
        .iter()
        .filter(|p| p.record.job_id.get() == failing)
        .collect();
    let (status, into_staging) = post(
        &app,
        "/api/replays",
        json!({"app": "demo",
        "from_ms": seconds[0], "to_ms": seconds[seconds.len() - 1] + 1, "outcomes": ["FAILED"],
        "target_app": "staging", "rate_per_second": 1000, "force": true}),
    )
    .await;
    assert_eq!(status, 201, "{into_staging}");
    let fourth = into_staging["operation"]["id"].as_i64().unwrap();
    let staged = replayed(&app, "staging", 1, fourth, failed.len()).await;
    assert_replays_repeat(&failed, &staged, fourth, false);
    assert!(
        staged
            .values()
            .all(|p| p.record.app.as_str() == "staging" && p.partition == 0)
    );

    let (_, listed) = app
        .call(Method::GET, "/api/replays?app=staging", None)
        .await;
    let ids: Vec<i64> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![fourth]);
    app.shutdown().await;
}

/// A job fires every second; the scheduler is down for twelve seconds (past the pre-read
/// window: DO_NOTHING skips what it missed); a backfill emits exactly the missing fires.
async fn a_backfill_after_an_outage_emits_exactly_the_missing_fires(backend: Backend) {
    let mut app = spawn_app_with(backend, |config| {
        // The backfill's settle time is pre-read window + lease + emit lead: short here.
        config.schedule.lease = Duration::from_secs(2);
    })
    .await;
    app.create_app("demo", 2).await;
    app.start_executor("demo");
    let job = app
        .create_job(
            json!({"app": "demo", "handler": "ok", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?", "misfire_strategy": "DO_NOTHING", "start": true}),
        )
        .await
        .id;
    // A started job's first fire is a pre-read window (5 s) away: the range starts there.
    let from_ms = wait_for(Duration::from_secs(30), "the first fire", || async {
        app.runs(job)
            .await
            .iter()
            .map(|run| run.scheduled_at_ms)
            .min()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    app.restart_scheduler_after(Duration::from_secs(12)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let to_ms = kadence_tests::now_ms() / 1000 * 1000;
    // Stopped, so that the topic can be read to its end (a live one never goes quiet).
    app.stop_job(job).await;
    // The range must end a settle time before now: 5 s window + 2 s lease + 1 s lead.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let fired = |records: &[Placed<TriggerRecord>]| -> HashMap<i64, usize> {
        let mut counts = HashMap::new();
        for placed in records.iter().filter(|p| p.record.job_id.get() == job) {
            *counts.entry(placed.record.scheduled_at_ms).or_insert(0) += 1;
        }
        counts
    };
    let before = fired(&topic(&app, "demo", 2).await);
    let missing: Vec<i64> = (from_ms..to_ms)
        .step_by(1000)
        .filter(|second| !before.contains_key(second))
        .collect();
    assert!(
        missing.len() >= 5,
        "the outage swallowed fires: {missing:?} of {before:?}"
    );
    let request =
        json!({"job_id": job, "from_ms": from_ms, "to_ms": to_ms, "rate_per_second": 1000});

    let mut dry = request.clone();
    dry["dry_run"] = json!(true);
    let (status, summary) = post(&app, "/api/backfills", dry).await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(summary["triggers"], json!(missing.len()), "{summary}");
    assert_eq!(summary["first"]["scheduled_at_ms"], json!(missing[0]));
    assert_eq!(
        summary["last"]["scheduled_at_ms"],
        json!(missing[missing.len() - 1])
    );

    let (status, summary) = post(&app, "/api/backfills", request.clone()).await;
    assert_eq!(status, 201, "{summary}");
    assert_eq!(
        summary["operation"]["triggers"],
        json!(missing.len()),
        "{summary}"
    );
    let after = wait_for(Duration::from_secs(60), "the backfilled fires", || async {
        let records = topic(&app, "demo", 2).await;
        let backfilled = records
            .iter()
            .filter(|p| p.record.trigger_type == TriggerType::Backfill)
            .count();
        (backfilled >= missing.len()).then_some(records)
    })
    .await;
    let counts = fired(&after);
    for second in (from_ms..to_ms).step_by(1000) {
        assert_eq!(
            counts.get(&second),
            Some(&1),
            "second {second} fired exactly once: {counts:?}"
        );
    }
    let backfilled: Vec<i64> = after
        .iter()
        .filter(|p| p.record.trigger_type == TriggerType::Backfill)
        .map(|p| {
            assert_eq!(
                p.record.trigger_id.as_str(),
                format!("{job}-{}", p.record.scheduled_at_ms)
            );
            p.record.scheduled_at_ms
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(backfilled, missing);

    // Nothing is left to fill: a second backfill emits nothing.
    let (status, again) = post(&app, "/api/backfills", request).await;
    assert_eq!(status, 201, "{again}");
    assert_eq!(again["operation"]["triggers"], json!(0), "{again}");
    app.shutdown().await;
}

on_sqlite_only!(a_range_older_than_the_retention_is_refused_naming_the_earliest_offset);

/// A broker whose records a test can delete as the broker's retention would. On Apache
/// Kafka that is the tests' broker and DeleteRecords, which moves a partition's start as
/// retention does. tansu 0.6 answers no DeleteRecords and runs its retention every ten
/// minutes, too rarely for a test: there it is a tansu of the test's own on SQLite storage,
/// whose rows the test deletes as tansu's retention does.
enum RetentionBroker {
    Kafka {
        address: String,
    },
    TansuOnSqlite {
        state: tempfile::TempDir,
        address: String,
    },
}

impl RetentionBroker {
    fn start() -> RetentionBroker {
        if kadence_tests::fixtures::broker_kind() == BrokerKind::Kafka {
            return RetentionBroker::Kafka {
                address: kadence_tests::fixtures::brokers(),
            };
        }
        let state = tempfile::tempdir().expect("broker state dir");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/broker.sh");
        let output = std::process::Command::new(script)
            .args(["start", "--kind", "tansu", "--storage", "sqlite", "--state"])
            .arg(state.path())
            .output()
            .expect("infra/broker.sh runs");
        assert!(output.status.success(), "broker starts: {output:?}");
        let address = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        RetentionBroker::TansuOnSqlite { state, address }
    }

    fn address(&self) -> &str {
        match self {
            RetentionBroker::Kafka { address } | RetentionBroker::TansuOnSqlite { address, .. } => {
                address
            }
        }
    }

    /// Deletes the records of partition 0 of `topic` below `offset`, as retention does.
    async fn delete_before(&self, topic: &str, offset: i64) {
        match self {
            RetentionBroker::Kafka { address } => delete_records(address, topic, offset).await,
            RetentionBroker::TansuOnSqlite { state, .. } => {
                delete_tansu_rows(state.path(), topic, offset).await
            }
        }
    }
}

async fn delete_records(address: &str, topic: &str, offset: i64) {
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", address)
            .create()
            .expect("admin client");
    let mut before = rdkafka::TopicPartitionList::new();
    before
        .add_partition_offset(topic, 0, rdkafka::Offset::Offset(offset))
        .expect("partition offset");
    let deleted = admin
        .delete_records(&before, &rdkafka::admin::AdminOptions::new())
        .await
        .expect("DeleteRecords answered");
    for element in deleted.elements() {
        assert!(element.error().is_ok(), "records deleted: {element:?}");
    }
}

async fn delete_tansu_rows(state: &std::path::Path, topic: &str, offset: i64) {
    let url = format!("sqlite://{}?mode=rw", state.join("broker.db").display());
    let pool = sqlx::SqlitePool::connect(&url)
        .await
        .expect("the broker's database");
    sqlx::query(
        "DELETE FROM record WHERE offset_id < $1 AND topition IN \
         (SELECT tp.id FROM topition tp JOIN topic t ON t.id = tp.topic \
          WHERE t.name = $2 AND tp.partition = 0)",
    )
    .bind(offset)
    .bind(topic)
    .execute(&pool)
    .await
    .expect("records deleted");
    pool.close().await;
}

impl Drop for RetentionBroker {
    fn drop(&mut self) {
        let RetentionBroker::TansuOnSqlite { state, .. } = self else {
            return;
        };
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/broker.sh");
        let _ = std::process::Command::new(script)
            .args(["stop", "--state"])
            .arg(state.path())
            .status();
    }
}

/// Ten records, the first four deleted: a replay from before them is refused with the
/// earliest offset still there and when it was produced; from there on it reads.
async fn a_range_older_than_the_retention_is_refused_naming_the_earliest_offset(backend: Backend) {
    let broker = RetentionBroker::start();
    let address = broker.address().to_owned();
    let app = spawn_app_with(backend, |config| config.kafka.brokers = address).await;
    app.create_app("demo", 1).await;
    let topic = format!("{}.triggers.demo", app.prefix);
    let producer: rdkafka::producer::FutureProducer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", broker.address())
        .create()
        .expect("producer");
    let start_ms = kadence_tests::now_ms();
    for n in 0..10 {
        let payload = format!("not a trigger {n}");
        producer
            .send(
                rdkafka::producer::FutureRecord::to(&topic)
                    .partition(0)
                    .key("1")
                    .payload(&payload),
                Duration::from_secs(10),
            )
            .await
            .expect("produced");
    }
    broker.delete_before(&topic, 4).await;

    let by_offsets = json!({"app": "demo", "dry_run": true,
        "offsets": [{"partition": 0, "from": 2, "to": 10}]});
    let (status, refused) = post(&app, "/api/replays", by_offsets).await;
    assert_eq!(status, 409, "{refused}");
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains("earliest offset still there is 4 (produced at 20"),
        "{error}"
    );
    assert!(error.contains("deleted by retention"), "{error}");
    let by_time = json!({"app": "demo", "dry_run": true, "from_ms": start_ms - 3_600_000,
        "to_ms": start_ms + 60_000});
    let (status, refused) = post(&app, "/api/replays", by_time).await;
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("earliest offset still there is 4"),
        "{refused}"
    );

    // From the earliest offset on, it reads (and replays none of these records: they are
    // not triggers signed by this cluster).
    let (status, read) = post(
        &app,
        "/api/replays",
        json!({"app": "demo", "dry_run": true,
        "offsets": [{"partition": 0, "from": 4, "to": 10}]}),
    )
    .await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(
        (
            read["read"]["records"].as_u64(),
            read["read"]["refused"].as_u64(),
            read["triggers"].as_u64()
        ),
        (Some(6), Some(6), Some(0)),
        "{read}"
    );
    app.shutdown().await;
}
