//! `GET /metrics`: the scheduler's Prometheus metrics, read without a token while jobs run,
//! count what happened: fires planned and triggers emitted by app and trigger type, their
//! lateness, pre-read scans, results by code, dead letters, live executors and the partitions
//! they own.
//!
//! Closing it: with `metrics.token` a scrape needs that bearer token, and with `metrics.listen`
//! the metrics are served on an address of their own and the API's answers 404.
//!
//! History yielding to scheduling: the logs reader waits, counted, while the pre-read runs
//! behind, and stores every line once it caught up.
//!
//! Run once, on SQLite: the metrics count the scheduler's loops, not the store.

use std::collections::HashMap;
use std::time::Duration;

use kadence_executor::{JobContext, JobResult};
use serde_json::json;

use crate::helpers::{spawn_app, spawn_app_with};
use kadence_tests::fixtures::{Backend, wait_for};

/// The samples of a text exposition: series → value, each series written with its labels
/// sorted by name (the encoder puts a registry's constant labels last), so a test names a
/// series one way. Label values here hold no commas.
fn samples(exposition: &str) -> HashMap<String, f64> {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((canonical(series), value.parse().ok()?))
        })
        .collect()
}

/// `series` with its labels sorted by name.
fn canonical(series: &str) -> String {
    match series.split_once('{') {
        None => series.to_owned(),
        Some((name, labels)) => {
            let mut labels: Vec<&str> = labels.trim_end_matches('}').split(',').collect();
            labels.sort_unstable();
            format!("{name}{{{}}}", labels.join(","))
        }
    }
}

/// Reads `/metrics` as Prometheus does: no token.
pub(crate) async fn scrape(base_url: &str) -> (String, HashMap<String, f64>) {
    let answer = reqwest::get(format!("{base_url}/metrics"))
        .await
        .expect("scrape /metrics");
    assert_eq!(answer.status(), 200);
    let content_type = answer.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let text = answer.text().await.unwrap();
    let parsed = samples(&text);
    (text, parsed)
}

async fn the_metrics_count_fires_results_and_executors(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("watched", 2).await;
    app.start_executor("watched");
    app.wait_for_executors("watched", 1, 2).await;
    let cron = app
        .create_job(
            json!({"app": "watched", "handler": "ok", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?", "start": true}),
        )
        .await;
    let failing = app
        .create_job(json!({"app": "watched", "handler": "fail", "schedule_type": "NONE"}))
        .await;
    app.trigger(failing.id, None).await;
    app.wait_for_run(failing.id, 500, Duration::from_secs(30))
        .await;
    let series = |name: &str, labels: &str| format!("{name}{{{labels}}}");
    let emitted = series(
        "kadence_scheduler_triggers_emitted_total",
        "app=\"watched\",trigger_type=\"CRON\"",
    );
    let succeeded = series(
        "kadence_scheduler_results_total",
        "app=\"watched\",code=\"200\"",
    );
    let (text, metrics) = wait_for(Duration::from_secs(30), "three cron results", || async {
        let (text, metrics) = scrape(app.api_url()).await;
        (metrics.get(&succeeded).copied().unwrap_or(0.0) >= 3.0).then_some((text, metrics))
    })
    .await;
    app.stop_job(cron.id).await;
    let value = |series: &str| {
        *metrics
            .get(series)
            .unwrap_or_else(|| panic!("{series} in:\n{text}"))
    };
    assert!(value(&emitted) >= 3.0, "{text}");
    assert_eq!(
        value(&series(
            "kadence_scheduler_results_total",
            "app=\"watched\",code=\"500\""
        )),
        1.0
    );
    assert_eq!(
        value(&series(
            "kadence_scheduler_fires_planned_total",
            "app=\"watched\",source=\"manual\",trigger_type=\"MANUAL\""
        )),
        1.0
    );
    assert!(
        value(&series(
            "kadence_scheduler_fires_planned_total",
            "app=\"watched\",source=\"schedule\",trigger_type=\"CRON\""
        )) >= 3.0
    );
    assert!(
        value(&series(
            "kadence_scheduler_fire_lateness_seconds_count",
            "app=\"watched\""
        )) >= 4.0
    );
    // A job is read once per several fires (the read-ahead), so at least once.
    assert!(value("kadence_scheduler_pre_read_jobs_read_total") >= 1.0);
    assert!(value("kadence_scheduler_pre_read_scan_duration_seconds_count") >= 1.0);
    assert_eq!(
        value(&series(
            "kadence_scheduler_live_executors",
            "app=\"watched\""
        )),
        1.0
    );
    assert_eq!(
        value(&series(
            "kadence_scheduler_owned_partitions",
            "app=\"watched\""
        )),
        2.0
    );

    // A result nobody can read is dead-lettered and counted by the kind of its reason.
    let results_topic = format!("{}.results", app.prefix);
    app.produce_signed("watched", (&results_topic, 0), "x", b"not avro")
        .await;
    let undecodable = series(
        "kadence_scheduler_dead_letters_total",
        "reason=\"undecodable\",source=\"results\"",
    );
    wait_for(
        Duration::from_secs(30),
        "the dead letter counted",
        || async {
            let (_, metrics) = scrape(app.api_url()).await;
            (metrics.get(&undecodable) == Some(&1.0)).then_some(())
        },
    )
    .await;
    app.shutdown().await;
}

/// A free loopback address for an executor's metrics endpoint.
pub(crate) fn free_address() -> std::net::SocketAddr {
    (std::net::Ipv4Addr::LOCALHOST, kadence_tests::free_port()).into()
}

/// An executor given a metrics address serves its own `/metrics`: outcomes by handler, how
/// long triggers waited to start and runs took, the group's assignment and each partition's
/// lag.
async fn an_executor_serves_its_metrics(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("counted", 1).await;
    let address = free_address();
    app.start_executor_with("counted", |builder| builder.metrics_address(address));
    app.wait_for_executors("counted", 1, 1).await;
    let base_url = format!("http://{address}");
    let sleeper = app
        .create_job(
            json!({"app": "counted", "handler": "sleep", "schedule_type": "NONE",
            "params": "1500", "block_strategy": "DISCARD_LATER"}),
        )
        .await;
    let failing = app
        .create_job(json!({"app": "counted", "handler": "fail", "schedule_type": "NONE"}))
        .await;
    app.trigger(sleeper.id, None).await;
    app.trigger(sleeper.id, None).await;
    app.trigger(failing.id, None).await;
    app.wait_for_run(sleeper.id, 200, Duration::from_secs(30))
        .await;
    app.wait_for_run(failing.id, 500, Duration::from_secs(30))
        .await;
    let results = |handler: &str, outcome: &str| {
        format!(
            "kadence_executor_results_total{{app=\"counted\",handler=\"{handler}\",outcome=\"{outcome}\"}}"
        )
    };
    let lag = "kadence_executor_consumer_lag{app=\"counted\",partition=\"0\"}";
    let (text, metrics) = wait_for(Duration::from_secs(30), "the executor's counts", || async {
        let (text, metrics) = scrape(&base_url).await;
        let counted = [
            results("sleep", "success"),
            results("sleep", "discarded"),
            results("fail", "failure"),
        ]
        .iter()
        .all(|series| metrics.get(series) == Some(&1.0));
        (counted && metrics.contains_key(lag)).then_some((text, metrics))
    })
    .await;
    let value = |series: &str| {
        *metrics
            .get(series)
            .unwrap_or_else(|| panic!("{series} in:\n{text}"))
    };
    assert_eq!(
        value("kadence_executor_run_duration_seconds_count{app=\"counted\",handler=\"sleep\"}"),
        1.0
    );
    assert!(
        value("kadence_executor_run_duration_seconds_sum{app=\"counted\",handler=\"sleep\"}")
            >= 1.5
    );
    assert_eq!(
        value("kadence_executor_trigger_to_start_seconds_count{app=\"counted\",handler=\"fail\"}"),
        1.0
    );
    assert!(value("kadence_executor_rebalances_total{app=\"counted\",change=\"assigned\"}") >= 1.0);
    assert!(value(lag) >= 0.0);
    app.shutdown().await;
}

/// With `metrics.token`, `/metrics` answers 401 (and says Bearer) to a request without that
/// token, with another, or with an API token; the scrape with it reads the metrics.
async fn a_metrics_token_closes_metrics_to_everyone_else(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.metrics.token = Some(secrecy::SecretString::from("scrape-3f9c"));
    })
    .await;
    let url = format!("{}/metrics", app.api_url());
    let http = reqwest::Client::new();
    for bearer in [None, Some("scrape-3f9"), Some(app.admin_token())] {
        let mut request = http.get(&url);
        if let Some(bearer) = bearer {
            request = request.bearer_auth(bearer);
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), 401, "{bearer:?}");
        assert_eq!(answer.headers()["www-authenticate"], "Bearer");
    }
    let answer = http
        .get(&url)
        .bearer_auth("scrape-3f9c")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert!(answer.text().await.unwrap().contains("kadence_"));
    app.shutdown().await;
}

/// With `metrics.listen`, the metrics are served there and nothing else is; the API's address
/// answers 404 for them.
async fn metrics_can_have_an_address_of_their_own(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.metrics.listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let on_api = reqwest::get(format!("{}/metrics", app.api_url()))
        .await
        .unwrap();
    assert_eq!(on_api.status(), 404);
    let metrics_url = format!("http://{}", app.metrics_addr().expect("a metrics address"));
    let (text, _) = scrape(&metrics_url).await;
    assert!(text.contains("kadence_"), "{text}");
    for elsewhere in ["/health", "/api/jobs", "/"] {
        let answer = reqwest::get(format!("{metrics_url}{elsewhere}"))
            .await
            .unwrap();
        assert_eq!(answer.status(), 404, "{elsewhere}");
    }
    app.shutdown().await;
}

/// Writes one log line.
async fn say(ctx: JobContext) -> JobResult {
    ctx.log("said");
    Ok(())
}

/// A fire missed while no scan ran (the job's next fire set a minute back, as after a node
/// was down) is fired once now by its FIRE_ONCE_NOW misfire strategy: the scan plans it with
/// no slack, so the pre-read is behind, and the logs reader waits
/// (`kadence_scheduler_history_yield_seconds_total{writer="logs"}` counts it), and the run's
/// line is stored all the same. With `schedule.history_yield = 0s` history never waits.
async fn history_waits_while_the_pre_read_is_behind_and_loses_nothing(backend: Backend) {
    let logs_waited = "kadence_scheduler_history_yield_seconds_total{writer=\"logs\"}";
    for (history_yield, waits) in [(Duration::from_secs(2), true), (Duration::ZERO, false)] {
        let mut app = spawn_app_with(backend, |config| {
            config.schedule.history_yield = history_yield;
        })
        .await;
        app.create_app("yielding", 1).await;
        app.start_executor_with("yielding", |builder| builder.handler("say", say));
        app.wait_for_executors("yielding", 1, 1).await;
        let (_, before) = scrape(app.api_url()).await;
        assert_eq!(before.get(logs_waited), Some(&0.0), "counted from zero");
        // Every hour: its first fire is far off, and only the missed one runs.
        let job = app
            .create_job(
                json!({"app": "yielding", "handler": "say", "schedule_type": "CRON",
                "schedule_conf": "0 0 * * * ?", "misfire_strategy": "FIRE_ONCE_NOW",
                "start": true}),
            )
            .await;
        let missed_at = kadence_tests::now_ms() - 60_000;
        (app.database())
            .execute(&format!(
                "UPDATE jobs SET next_fire_ms = {missed_at} WHERE id = {}",
                job.id
            ))
            .await;
        let run = app.wait_for_run(job.id, 200, Duration::from_secs(30)).await;
        app.stop_job(job.id).await;
        let log = format!("/api/runs/{}/log", run.log_id);
        wait_for(Duration::from_secs(30), "the run's line stored", || async {
            let (status, body) = app.call(reqwest::Method::GET, &log, None).await;
            assert_eq!(status, 200, "{body}");
            (body["lines"] == json!(["said"])).then_some(())
        })
        .await;
        // A wait is counted when it ends: at the latest once the pressure passed, 2 s after
        // the scan that planned the missed fire.
        if waits {
            wait_for(
                Duration::from_secs(10),
                "the logs reader's wait",
                || async {
                    let (_, after) = scrape(app.api_url()).await;
                    (after[logs_waited] > 0.0).then_some(())
                },
            )
            .await;
        } else {
            tokio::time::sleep(Duration::from_secs(3)).await;
            let (text, after) = scrape(app.api_url()).await;
            assert_eq!(after[logs_waited], 0.0, "history_yield 0s: never\n{text}");
        }
        app.shutdown().await;
    }
}

on_sqlite_only!(
    history_waits_while_the_pre_read_is_behind_and_loses_nothing,
    the_metrics_count_fires_results_and_executors,
    an_executor_serves_its_metrics,
    a_metrics_token_closes_metrics_to_everyone_else,
    metrics_can_have_an_address_of_their_own,
);
