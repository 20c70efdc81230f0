//! The dashboards and alert rules in `dashboards/` against a real Prometheus (Debian's
//! `prometheus` and `promtool`, which `infra/test.sh` installs when missing).
//!
//! A scheduler and two executors with a metrics address — the Rust SDK's (app `watched`, in
//! this process) and the Java SDK's (app `watched-java`, its test executor as a process, the
//! command in `KADENCE_TEST_JAVA_EXECUTOR` as for the conformance suite) — run the same jobs
//! (a cron job, a failing one, a slow one) while Prometheus scrapes all three every second
//! with the alert rules loaded. Then: `promtool check metrics` finds nothing to say about any
//! exposition; Prometheus loaded every rule without error; every query of every dashboard
//! panel, evaluated through Prometheus's HTTP API with the dashboards' variables set to "all",
//! succeeds and returns data — except the panels of events this run cannot cause
//! (`EVENT_ONLY`) — and every executor panel does so for each executor's app alone; and the
//! Java executor's metric families are the Rust one's (type, label names, histogram buckets),
//! plus only what Micrometer legitimately adds (`java_extra`). A second test forces the "will
//! miss its window" condition and sees its alert go pending.
//!
//! Run once, on SQLite: the subject is the metrics' names and shapes, not the store.
//! `KADENCE_TEST_PROMETHEUS` and `KADENCE_TEST_PROMTOOL` name other binaries.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::conformance::{ExecutorProcess, Implementation};
use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use crate::metrics::free_address;
use kadence_tests::fixtures::{Backend, wait_for};

/// Panels whose series appear only with an event this test does not cause.
const EVENT_ONLY: [&str; 2] = [
    // A misfire needs the scheduler to miss a fire by more than the pre-read window.
    "Misfires by strategy",
    // A store error needs the database to fail.
    "Store errors by operation",
];

fn binary(variable: &str, default: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| default.to_owned())
}

fn dashboards_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards")
}

/// The exposition at `url`.
async fn exposition(url: &str) -> String {
    reqwest::get(url).await.unwrap().text().await.unwrap()
}

/// `promtool check metrics` on the exposition at `url`: it must have nothing to say.
async fn check_exposition(url: &str) {
    let text = exposition(url).await;
    let mut promtool = tokio::process::Command::new(binary("KADENCE_TEST_PROMTOOL", "promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool (infra/test.sh installs Debian's prometheus package)");
    let mut stdin = promtool.stdin.take().unwrap();
    stdin.write_all(text.as_bytes()).await.unwrap();
    drop(stdin);
    let output = promtool.wait_with_output().await.unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics on {url}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Starts Prometheus scraping `targets` every second with the alert rules and waits until it
/// is ready; returns the process (killed on drop), its base URL and its directory.
async fn start_prometheus(
    targets: &[(&str, String)],
) -> (tokio::process::Child, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let rules = dashboards_dir().join("alerts.yml");
    let scrapes: Vec<Value> = targets
        .iter()
        .map(|(job, target)| json!({"job_name": job, "static_configs": [{"targets": [target]}]}))
        .collect();
    let config = json!({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [rules],
        "scrape_configs": scrapes,
    });
    // JSON is YAML.
    let config_path = dir.path().join("prometheus.yml");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let address = free_address();
    let child = tokio::process::Command::new(binary("KADENCE_TEST_PROMETHEUS", "prometheus"))
        .arg(format!("--config.file={}", config_path.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={address}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("run prometheus (infra/test.sh installs Debian's prometheus package)");
    let base = format!("http://{address}");
    wait_for(Duration::from_secs(60), "prometheus ready", || async {
        let ready = reqwest::get(format!("{base}/-/ready")).await;
        ready
            .is_ok_and(|answer| answer.status() == 200)
            .then_some(())
    })
    .await;
    (child, base, dir)
}

/// `GET {base}/api/v1/{path}` with `query`; the `data` of a successful answer.
async fn prometheus_api(base: &str, path: &str, query: &[(&str, &str)]) -> Value {
    let answer: Value = reqwest::Client::new()
        .get(format!("{base}/api/v1/{path}"))
        .query(query)
        .send()
        .await
        .unwrap_or_else(|error| panic!("ask prometheus {path}: {error}"))
        .json()
        .await
        .unwrap();
    assert_eq!(answer["status"], "success", "{path} {query:?}: {answer}");
    answer["data"].clone()
}

/// Every (dashboard file, panel title, query) of the dashboards, `$app` set to `app` (a
/// regular expression: `.*` for all) and the other variables to "all".
fn panel_queries(app: &str) -> Vec<(String, String, String)> {
    let mut queries = Vec::new();
    for entry in std::fs::read_dir(dashboards_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|extension| extension != "json") {
            continue;
        }
        let board: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for panel in board["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().unwrap() {
                let expr = target["expr"]
                    .as_str()
                    .unwrap()
                    .replace("$__rate_interval", "30s")
                    .replace("$app", app)
                    .replace("$handler", ".*")
                    .replace("$job", ".*");
                let title = panel["title"].as_str().unwrap().to_owned();
                queries.push((file.clone(), title, expr));
            }
        }
    }
    assert!(queries.len() >= 20, "the dashboards' queries: {queries:?}");
    queries
}

/// A metric family of an exposition: its type, its label names but `le`, and the bounds of
/// its buckets (a histogram's).
///
/// Bounds are compared as numbers: the Rust client writes `le="1"` where Micrometer (through
/// Prometheus's Java client) writes `le="1.0"`. Prometheus reads both as the bound 1:
/// `histogram_quantile`, which every shipped panel and rule on a histogram uses, merges the
/// buckets of equal bounds of a mixed group, and Prometheus 3 rewrites `le` to the `1.0` form
/// on scrape. Only a query selecting one bucket by its text (`le="1"`) on a Prometheus 2 tells
/// them apart.
#[derive(Debug, PartialEq)]
struct Family {
    kind: String,
    labels: BTreeSet<String>,
    buckets: BTreeSet<String>,
}

/// The families of an exposition in Prometheus's text format, by name (a histogram's
/// `_bucket`, `_sum` and `_count` series belong to it).
fn families(text: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines().filter(|line| !line.is_empty()) {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let (name, kind) = declared.split_once(' ').unwrap();
            let family = Family {
                kind: kind.to_owned(),
                labels: BTreeSet::new(),
                buckets: BTreeSet::new(),
            };
            families.insert(name.to_owned(), family);
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, labels) = match line.split_once('{') {
            Some((series, rest)) => (series, rest.rsplit_once('}').unwrap().0),
            None => (line.split_whitespace().next().unwrap(), ""),
        };
        let histogram = ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
            let base = series.strip_suffix(suffix)?;
            (families.get(base)?.kind == "histogram").then_some(base)
        });
        let name = histogram.unwrap_or(series);
        let family = families
            .get_mut(name)
            .unwrap_or_else(|| panic!("{series} has no # TYPE line: {line}"));
        for (label, value) in label_pairs(labels) {
            if label == "le" {
                let bound: f64 = value.parse().unwrap_or_else(|_| panic!("a bound: {line}"));
                family.buckets.insert(bound.to_string());
            } else {
                family.labels.insert(label);
            }
        }
    }
    families
}

/// The `name="value"` pairs of a series' labels (values as written, escapes kept).
fn label_pairs(labels: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut rest = labels.trim_start_matches(',');
    while let Some((name, after)) = rest.split_once("=\"") {
        let mut end = 0;
        let bytes = after.as_bytes();
        while bytes[end] != b'"' {
            end += if bytes[end] == b'\\' { 2 } else { 1 };
        }
        pairs.push((name.trim().to_owned(), after[..end].to_owned()));
        rest = after[end + 1..].trim_start_matches(',');
    }
    pairs
}

/// The families the Java SDK's executor legitimately exports beyond the Rust SDK's:
/// Micrometer's `_max` gauge beside each histogram (the largest observation of a recent
/// window), which no dashboard or rule reads.
fn java_extra(name: &str, family: &Family, rust: &BTreeMap<String, Family>) -> bool {
    let beside = |base: &str| rust.get(base).is_some_and(|of| of.kind == "histogram");
    family.kind == "gauge" && name.strip_suffix("_max").is_some_and(beside)
}

/// The Java executor's families are the Rust executor's — each with the same type, label
/// names and buckets — plus only [`java_extra`] ones.
fn assert_same_families(rust: &BTreeMap<String, Family>, java: &BTreeMap<String, Family>) {
    let mut differences = Vec::new();
    for (name, family) in rust {
        match java.get(name) {
            None => differences.push(format!("{name}: missing from the Java executor")),
            Some(other) if other != family => {
                differences.push(format!("{name}: Rust {family:?}, Java {other:?}"))
            }
            Some(_) => {}
        }
    }
    for (name, family) in java {
        if !rust.contains_key(name) && !java_extra(name, family, rust) {
            differences.push(format!("{name}: only the Java executor has it: {family:?}"));
        }
    }
    assert!(
        differences.is_empty(),
        "the Java SDK's metrics differ from the Rust SDK's: {differences:#?}"
    );
}

/// The jobs both executors run: a cron job every second on `ok` (returned: `[telemetry]
/// job_metrics` lists the first two ids), one on `fail` whose alarm webhook nobody listens on
/// (a failed delivery, for the channel panel) and one on `sleep`, each of the last two
/// triggered once and waited for.
async fn run_the_jobs(app: &TestApp, executor_app: &str) -> i64 {
    let cron = app
        .create_job(
            json!({"app": executor_app, "handler": "ok", "schedule_type": "CRON",
        "schedule_conf": "* * * * * ?", "start": true}),
        )
        .await;
    let failing = app
        .create_job(
            json!({"app": executor_app, "handler": "fail", "schedule_type": "NONE",
            "alarm_webhook": "http://127.0.0.1:9/kadence-alarm"}),
        )
        .await;
    let slow = app
        .create_job(
            json!({"app": executor_app, "handler": "sleep", "schedule_type": "NONE",
            "params": "1500"}),
        )
        .await;
    for job in [failing.id, slow.id] {
        app.trigger(job, None).await;
    }
    app.wait_for_run(failing.id, 500, Duration::from_secs(30))
        .await;
    app.wait_for_run(slow.id, 200, Duration::from_secs(30))
        .await;
    cron.id
}

async fn dashboards_and_rules_hold_against_a_real_prometheus(backend: Backend) {
    // The per-job dashboard needs the jobs listed: the Rust executor's cron and failing jobs
    // are the database's first two.
    let mut app = spawn_app_with(backend, |config| {
        config.telemetry.job_metrics = vec![1, 2];
        // The failing job's webhook is on loopback, which webhooks reach only when allowed.
        config.alarm.webhook_allowed_networks =
            kadence_scheduler::config::WebhookNetworks::parse(&["127.0.0.1"]).unwrap();
    })
    .await;
    app.create_app("watched", 2).await;
    let executor_address = free_address();
    app.start_executor_with("watched", |builder| {
        builder.metrics_address(executor_address)
    });
    app.create_app("watched-java", 2).await;
    let java_address = free_address().to_string();
    let _java = ExecutorProcess::start_with(
        Implementation::Java,
        &app,
        "watched-java",
        "watched-java-1",
        &[("KADENCE_METRICS_ADDRESS", &java_address)],
    )
    .await;
    app.wait_for_executors("watched", 1, 2).await;
    app.wait_for_executors("watched-java", 1, 2).await;
    let scheduler = app.api_url().trim_start_matches("http://").to_owned();
    let (_prometheus, base, _dir) = start_prometheus(&[
        ("kadence-scheduler", scheduler.clone()),
        ("kadence-executor", executor_address.to_string()),
        ("kadence-executor-java", java_address.clone()),
    ])
    .await;
    let cron = run_the_jobs(&app, "watched").await;
    assert_eq!(cron, 1, "the job [telemetry] job_metrics lists");
    run_the_jobs(&app, "watched-java").await;

    check_exposition(&format!("http://{scheduler}/metrics")).await;
    check_exposition(&format!("http://{executor_address}/metrics")).await;
    check_exposition(&format!("http://{java_address}/metrics")).await;

    wait_for(Duration::from_secs(60), "every target up", || async {
        let targets = prometheus_api(&base, "targets", &[]).await;
        let active = targets["activeTargets"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        (active.len() == 3 && active.iter().all(|target| target["health"] == "up")).then_some(())
    })
    .await;
    let rules = prometheus_api(&base, "rules", &[]).await;
    let loaded: Vec<&Value> = rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|group| group["rules"].as_array().unwrap())
        .collect();
    let rules_file = std::fs::read_to_string(dashboards_dir().join("alerts.yml")).unwrap();
    let written = (rules_file.lines())
        .filter(|line| line.trim_start().starts_with("- alert:"))
        .count();
    assert_eq!(
        loaded.len(),
        written,
        "every rule of alerts.yml loaded: {rules}"
    );
    assert!(loaded.iter().all(|rule| rule["health"] != "err"), "{rules}");

    // Every panel's query answers, with data once the counters have moved for a while; each
    // executor panel for either executor's app alone too.
    let mut queries = panel_queries(".*");
    for executor_app in ["watched", "watched-java"] {
        queries.extend(
            panel_queries(executor_app)
                .into_iter()
                .filter(|(_, _, expr)| expr.contains("kadence_executor_"))
                .map(|(file, title, expr)| (file, format!("{title} [{executor_app}]"), expr)),
        );
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let mut empty = Vec::new();
        for (file, title, expr) in &queries {
            let data = prometheus_api(&base, "query", &[("query", expr)]).await;
            if data["result"].as_array().is_none_or(Vec::is_empty) {
                empty.push(format!("{file} / {title}: {expr}"));
            }
        }
        let unexpected: Vec<&String> = empty
            .iter()
            .filter(|line| {
                !EVENT_ONLY
                    .iter()
                    .any(|title| line.contains(&format!("/ {title}:")))
            })
            .collect();
        if unexpected.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "panels without data after 90 s: {unexpected:#?}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }

    // Both executors have now recorded every kind of series the jobs cause.
    let rust = families(&exposition(&format!("http://{executor_address}/metrics")).await);
    let java = families(&exposition(&format!("http://{java_address}/metrics")).await);
    assert_same_families(&rust, &java);
    app.shutdown().await;
}

/// The "will miss its window" signal: a job firing every second whose runs take 5 s piles
/// triggers behind its SERIAL_EXECUTION queue. The executor's expected wait of the newest
/// trigger grows, and the KadenceWillMissWindow alert (expected wait over 30 s) goes pending
/// while every run that has started was less than 30 s late: before runs start late.
async fn a_backlog_raises_the_will_miss_alert_before_runs_start_late(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("behind", 1).await;
    let executor_address = free_address();
    app.start_executor_with("behind", |builder| {
        builder.metrics_address(executor_address)
    });
    app.wait_for_executors("behind", 1, 1).await;
    let (_prometheus, base, _dir) =
        start_prometheus(&[("kadence-executor", executor_address.to_string())]).await;
    let job = app
        .create_job(
            json!({"app": "behind", "handler": "sleep", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?", "params": "5000",
            "block_strategy": "SERIAL_EXECUTION", "start": true}),
        )
        .await;
    let alert = wait_for(
        Duration::from_secs(120),
        "KadenceWillMissWindow pending",
        || async {
            let alerts = prometheus_api(&base, "alerts", &[]).await;
            alerts["alerts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|alert| alert["labels"]["alertname"] == "KadenceWillMissWindow")
                .cloned()
        },
    )
    .await;
    let runs = app.runs(job.id).await;
    app.stop_job(job.id).await;
    assert!(
        ["pending", "firing"].contains(&alert["state"].as_str().unwrap()),
        "{alert}"
    );
    assert_eq!(alert["labels"]["app"], "behind", "{alert}");
    let started: Vec<i64> = runs
        .iter()
        .filter_map(|run| Some(run.started_at_ms? - run.scheduled_at_ms))
        .collect();
    assert!(!started.is_empty(), "{runs:?}");
    assert!(
        started.iter().all(|late| *late < 30_000),
        "the alert came before any run started 30 s late: {started:?}"
    );
    app.shutdown().await;
}

on_sqlite_only!(
    dashboards_and_rules_hold_against_a_real_prometheus,
    a_backlog_raises_the_will_miss_alert_before_runs_start_late,
);
