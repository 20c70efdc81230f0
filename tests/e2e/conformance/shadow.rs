//! Shadow executors as the protocol defines them (`schemas/PROTOCOL.md` section 10): a shadow
//! of the implementation beside a production executor of the same app, with handlers that
//! answer differently. Every trigger emitted after the shadow's start gets one result on
//! `{p}.results` from production and one on `{p}.shadow-results` from the shadow; the
//! scheduler's runs are completed by production only; the shadow's handler knew it was one;
//! the shadow ran nothing emitted before it started, beat nothing, shipped no log line and
//! dead-lettered nothing.
//!
//! The topics are read back whole (until quiet) with `kadence_tests::triggers::read_records`:
//! "one result each" is counted on the topic, where a duplicate would show, not in the
//! scheduler's rows, which keep the first result of a trigger only.

use std::collections::BTreeMap;
use std::time::Duration;

use kadence_schemas::{ExecutorBeat, LogRecord, ResultRecord};
use kadence_tests::triggers::read_records;
use rdkafka::message::Message;
use serde_json::json;

use super::lifecycle::read_until_quiet;
use super::{ExecutorProcess, Implementation, results, stage};
use crate::helpers::{TestApp, ensure_topic};
use kadence_tests::fixtures::wait_for;

const APP: &str = "shadowed";
const PRODUCTION: &str = "shadowed-1";
const SHADOW: &str = "shadowed-shadow";
/// Partitions of the results and logs topics of the test scheduler (`spawn_app`).
const RESULTS_PARTITIONS: i32 = 2;
/// How long a SIGTERMed executor with nothing running may take to commit, leave its group and
/// exit.
const EXIT_LIMIT: Duration = Duration::from_secs(45);

/// A shadow beside production: results on their own topics, runs completed by production
/// only, `is_shadow` seen, a start at the live end, no beats, no log lines, no dead letters.
async fn a_shadow_runs_every_trigger_beside_production_and_completes_nothing(
    executor: Implementation,
) {
    let (app, mut production) = stage(executor, APP, 2).await;
    // The scheduler of this tree does not create the shadow results topic: the test does, as
    // an operator would before starting a shadow.
    let shadow_results = format!("{}.shadow-results", app.prefix);
    let shadow_partitions = ensure_topic(&shadow_results, RESULTS_PARTITIONS).await;
    let job = app
        .create_job(
            json!({"app": APP, "handler": "describe", "schedule_type": "NONE",
            "route_strategy": "ROUND"}),
        )
        .await;
    // Emitted before the shadow starts: production runs it, a new shadow group never does.
    let before = app.trigger(job.id, None).await;
    results(&app, job.id, 1).await;

    let environment = [("KADENCE_SHADOW", "1")];
    let mut shadow = ExecutorProcess::start_with(executor, &app, APP, SHADOW, &environment).await;
    shadow
        .wait_for_line("owns 0,1", Duration::from_secs(60))
        .await;
    // A record nobody can read: production dead-letters it, the shadow only skips it.
    let garbage = b"not a trigger record".as_slice();
    let triggers = format!("{}.triggers.{APP}", app.prefix);
    app.produce_raw(&triggers, 0, &job.id.to_string(), garbage)
        .await;
    let mut after = Vec::new();
    for _ in 0..4 {
        after.push(app.trigger(job.id, None).await);
    }

    // Production completed every run, with its own answer.
    for run in results(&app, job.id, 5).await {
        assert_eq!(run.executor_id.as_deref(), Some(PRODUCTION), "{run:?}");
        assert_eq!(
            (run.handle_code, run.handle_msg.as_deref()),
            (Some(500), Some("production run of a MANUAL trigger")),
            "{run:?}"
        );
    }
    let shadowed = wait_for(Duration::from_secs(60), "the shadow's results", || async {
        let answers = answers_of(&app, &shadow_results, shadow_partitions, job.id).await;
        (answers.values().map(Vec::len).sum::<usize>() >= after.len()).then_some(answers)
    })
    .await;
    let produced = answers_of(
        &app,
        &format!("{}.results", app.prefix),
        RESULTS_PARTITIONS,
        job.id,
    )
    .await;

    for trigger_id in &after {
        let from_shadow = &shadowed[trigger_id.as_str()];
        assert_eq!(from_shadow.len(), 1, "one shadow result: {from_shadow:?}");
        let answer = &from_shadow[0];
        assert_eq!(answer.executor_id, SHADOW);
        assert_eq!(
            (answer.code, answer.message.as_deref()),
            (500, Some("shadow run of a MANUAL trigger")),
            "the shadow's handler knew it was one"
        );
        assert_eq!(shadow.runs_of(trigger_id), 1);
    }
    assert_eq!(shadowed.len(), after.len(), "{shadowed:?}");
    assert!(!shadowed.contains_key(before.as_str()), "{shadowed:?}");
    assert_eq!(shadow.runs_of(&before), 0, "emitted before its start");
    for trigger_id in after.iter().chain([&before]) {
        let from_production = &produced[trigger_id.as_str()];
        assert_eq!(from_production.len(), 1, "{from_production:?}");
        assert_eq!(from_production[0].executor_id, PRODUCTION);
    }
    assert_eq!(produced.len(), after.len() + 1, "{produced:?}");

    let listed: Vec<String> = app
        .executors(APP)
        .await
        .into_iter()
        .map(|view| view.entry.executor_id)
        .collect();
    assert_eq!(listed, [PRODUCTION], "the registry knows production alone");
    // Both stop gracefully, the shadow without a last beat either; then the beats topic is
    // quiet and can be read to its end.
    for process in [&mut shadow, &mut production] {
        process.terminate();
        assert!(process.exit(EXIT_LIMIT).await.success());
    }
    assert_the_shadow_stayed_out_of_production(&app, &after).await;
    let letters = read_until_quiet(&app.brokers, &format!("{}.dlq", app.prefix)).await;
    let copies = letters
        .iter()
        .filter(|letter| letter.payload() == Some(garbage))
        .count();
    assert_eq!(copies, 1, "dead-lettered by production alone");
    app.shutdown().await;
}

/// The results of `job` on `topic` (of `partitions`), by trigger id.
async fn answers_of(
    app: &TestApp,
    topic: &str,
    partitions: i32,
    job: i64,
) -> BTreeMap<String, Vec<ResultRecord>> {
    let mut answers: BTreeMap<String, Vec<ResultRecord>> = BTreeMap::new();
    for result in read_records::<ResultRecord>(&app.brokers, topic, partitions).await {
        if result.job_id.get() == job {
            let trigger_id = result.trigger_id.to_string();
            answers.entry(trigger_id).or_default().push(result);
        }
    }
    answers
}

/// No beat from the shadow, to its last, and no log line: the runs of `trigger_ids` have
/// production's lines only.
async fn assert_the_shadow_stayed_out_of_production(app: &TestApp, trigger_ids: &[String]) {
    let beats = format!("{}.beats", app.prefix);
    let beaters: Vec<String> = read_records::<ExecutorBeat>(&app.brokers, &beats, 1)
        .await
        .into_iter()
        .map(|beat| beat.executor_id)
        .collect();
    assert!(beaters.iter().any(|id| id == PRODUCTION), "{beaters:?}");
    assert!(!beaters.iter().any(|id| id == SHADOW), "{beaters:?}");
    let logs = format!("{}.logs", app.prefix);
    let records = read_records::<LogRecord>(&app.brokers, &logs, RESULTS_PARTITIONS).await;
    for trigger_id in trigger_ids {
        let writers: Vec<(&str, &[String])> = records
            .iter()
            .filter(|record| record.trigger_id.as_str() == trigger_id)
            .map(|record| (record.executor_id.as_str(), record.lines.as_slice()))
            .collect();
        let describing = ["describing".to_owned()];
        assert_eq!(
            writers,
            [(PRODUCTION, describing.as_slice())],
            "{trigger_id}"
        );
    }
}

on_every_executor!(a_shadow_runs_every_trigger_beside_production_and_completes_nothing);
