//! Stock Confluent tooling reads Kadence's records: `tests/python/decode_with_registry.py`
//! consumes every topic a run touches with confluent-kafka's `AvroDeserializer`, pointed at
//! the scheduler's schema registry endpoint (`/registry`, no credentials), and must decode
//! every record — trigger, result, log, beat and control.
//!
//! The interpreter is `KADENCE_TEST_PYTHON` (default `python3`) with `confluent-kafka` and
//! `fastavro` installed; `infra/test.sh` installs them when missing.

use std::collections::HashMap;
use std::time::Duration;

use kadence_executor::JobContext;
use kadence_schemas::{AppName, Topics};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::process::Command;

use crate::helpers::spawn_app;
use kadence_tests::fixtures::Backend;

/// Decoded records per topic, as the Python client printed them.
async fn decode_with_registry(brokers: &str, registry: &str, topics: &[String]) -> Vec<Value> {
    let python = std::env::var("KADENCE_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/python/decode_with_registry.py"
    );
    let output = Command::new(&python)
        .arg(script)
        .args(["--brokers", brokers, "--registry", registry])
        .args(topics)
        .output()
        .await
        .unwrap_or_else(|error| panic!("cannot run {python}: {error}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("ModuleNotFoundError"),
        "{python} lacks confluent-kafka or fastavro: python3 -m pip install \
         confluent-kafka fastavro (infra/test.sh installs the pinned versions)\n{stderr}"
    );
    assert!(
        output.status.success(),
        "the registry client failed:\n{stderr}"
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect()
}

/// A run with a log line, a kill and the executor's beats, all decoded by a stock
/// registry-aware deserializer through the scheduler's registry endpoint.
async fn stock_deserializers_decode_every_record_through_the_registry(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("reg", 1).await;
    app.start_executor_with("reg", |builder| {
        builder.handler("say", |ctx: JobContext| async move {
            ctx.log("hello from the registry test");
            Ok(())
        })
    });
    app.wait_for_executors("reg", 1, 1).await;
    let job = app
        .create_job(json!({"app": "reg", "handler": "say", "schedule_type": "NONE"}))
        .await;
    let trigger_id = app.trigger(job.id, Some("p")).await;
    app.wait_for_run(job.id, 200, Duration::from_secs(30)).await;
    let (status, body) = app
        .call(Method::POST, &format!("/api/jobs/{}/kill", job.id), None)
        .await;
    assert_eq!(status, 202, "{body}");
    // No more beats: the topics go quiet, which is how the reader knows it has read them all.
    app.stop_executors().await;

    let topics = Topics::new(&app.prefix).unwrap();
    let names = [
        topics.triggers(&AppName::parse("reg").unwrap()),
        topics.results(),
        topics.logs(),
        topics.beats(),
        topics.control(),
    ];
    let registry = format!("{}/registry", app.api_url());
    let decoded = decode_with_registry(&app.brokers, &registry, &names).await;
    let mut by_topic: HashMap<&str, Vec<&Value>> = HashMap::new();
    for line in &decoded {
        by_topic
            .entry(line["topic"].as_str().unwrap())
            .or_default()
            .push(&line["record"]);
    }
    let first = |topic: &String| -> &Value {
        by_topic
            .get(topic.as_str())
            .and_then(|records| records.first())
            .unwrap_or_else(|| panic!("nothing decoded from {topic}: {decoded:?}"))
    };
    let trigger = first(&names[0]);
    assert_eq!(trigger["trigger_id"], trigger_id.as_str(), "{trigger}");
    assert_eq!(trigger["params"], "p", "{trigger}");
    let result = first(&names[1]);
    assert_eq!(result["trigger_id"], trigger_id.as_str(), "{result}");
    assert_eq!(result["code"], 200, "{result}");
    assert!(
        first(&names[2])
            .to_string()
            .contains("hello from the registry test")
    );
    assert_eq!(first(&names[3])["app"], "reg");
    assert_eq!(first(&names[4])["command"], "KILL");
    app.shutdown().await;
}

on_sqlite_only!(stock_deserializers_decode_every_record_through_the_registry);
