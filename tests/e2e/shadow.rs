//! Shadow runs on the real broker and both stores: a shadow executor with a deliberately
//! different handler runs every trigger beside production, its results reach the diff report
//! and nothing else. The report names exactly the triggers where the two differ, first; the
//! production runs keep production's results (no retry, although the job has one, so no
//! shadow failure counted as a failure); the shadow does not appear among the executors.

use std::collections::BTreeSet;
use std::time::Duration;

use kadence_executor::{JobContext, JobError, JobResult};
use kadence_scheduler::domain::model::{Run, RunState};
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::spawn_app;
use kadence_tests::fixtures::{Backend, wait_for};

on_every_backend!(a_shadow_group_yields_a_diff_report_naming_exactly_the_disagreements);

/// The candidate version of `ok`: refuses the fires of odd seconds, and anything that is not
/// a shadow run (which would show up as disagreements everywhere).
async fn candidate(ctx: JobContext) -> JobResult {
    if !ctx.is_shadow() {
        return Err(JobError::new("the candidate ran outside the shadow group"));
    }
    if (ctx.scheduled_at_ms() / 1000) % 2 == 1 {
        return Err(JobError::new("candidate refuses odd seconds"));
    }
    Ok(())
}

async fn a_shadow_group_yields_a_diff_report_naming_exactly_the_disagreements(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("demo", 2).await;
    app.start_executor("demo");
    let shadow = app
        .bare_executor("demo")
        .shadow(true)
        .handler("ok", candidate);
    let mut shadow_partitions = app.run_executor(shadow);
    // A new shadow group starts at the live end: it must own its partitions before the
    // triggers it is to see are emitted.
    tokio::time::timeout(
        Duration::from_secs(30),
        shadow_partitions.wait_until(|owned| owned == [0, 1]),
    )
    .await
    .expect("the shadow executor is assigned both partitions")
    .expect("the shadow executor runs");
    let from_ms = kadence_tests::now_ms();
    let job = app
        .create_job(
            json!({"app": "demo", "handler": "ok", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?", "retry_count": 1, "start": true}),
        )
        .await
        .id;
    // The first fire is a pre-read window (5 s) away; then a few seconds of fires.
    tokio::time::sleep(Duration::from_secs(10)).await;
    app.stop_job(job).await;
    let runs = wait_for(
        Duration::from_secs(30),
        "every production run finished",
        || async {
            let runs = app.runs(job).await;
            runs.iter()
                .all(|run| run.state == RunState::Finished)
                .then_some(runs)
        },
    )
    .await;
    assert!(runs.len() >= 3, "a few fires: {runs:?}");
    for run in &runs {
        assert_eq!(
            (run.trigger_type, run.handle_code, run.handle_msg.as_deref()),
            (kadence_schemas::TriggerType::Cron, Some(200), None),
            "production's result, untouched by the shadow's: {run:?}"
        );
    }
    let to_ms = kadence_tests::now_ms() + 1;
    let path = format!("/api/shadow/report?app=demo&from_ms={from_ms}&to_ms={to_ms}");
    let report: Value = wait_for(Duration::from_secs(30), "every shadow result", || async {
        let (status, report) = app.call(Method::GET, &path, None).await;
        assert_eq!(status, 200, "{report}");
        (report["compared"] == json!(runs.len())).then_some(report)
    })
    .await;
    let odd: BTreeSet<String> = runs
        .iter()
        .filter(|run| (run.scheduled_at_ms / 1000) % 2 == 1)
        .map(|run| run.trigger_id.as_str().to_owned())
        .collect();
    let rows = report["rows"].as_array().unwrap();
    let disagreeing: BTreeSet<String> = rows
        .iter()
        .filter(|row| row["disagrees"] == json!(true))
        .map(|row| row["trigger_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(disagreeing, odd, "{report}");
    assert_eq!(report["disagreements"], json!(odd.len()));
    let flags: Vec<bool> = rows
        .iter()
        .map(|row| row["disagrees"] == json!(true))
        .collect();
    assert!(
        flags.windows(2).all(|pair| pair[0] >= pair[1]),
        "disagreements first: {flags:?}"
    );
    for row in rows.iter().filter(|row| row["disagrees"] == json!(true)) {
        assert_eq!(row["production"]["code"], json!(200), "{row}");
        assert_eq!(row["shadow"]["code"], json!(500), "{row}");
        assert_eq!(
            row["shadow"]["message"],
            json!("candidate refuses odd seconds"),
            "{row}"
        );
        assert!(row["shadow"]["duration_ms"].is_i64() && row["production"]["duration_ms"].is_i64());
    }
    // No retry: the shadow's failures failed nothing. (A trigger already on the broker when
    // the job stopped may still add its cron run; it is the retries that must not come.) And
    // the shadow sends no beats.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let retries: Vec<Run> = (app.runs(job).await.into_iter())
        .filter(|run| run.trigger_type != kadence_schemas::TriggerType::Cron)
        .collect();
    assert!(retries.is_empty(), "no retry was fired: {retries:?}");
    let executors = app.executors("demo").await;
    assert_eq!(
        executors.len(),
        1,
        "only the production executor beats: {executors:?}"
    );
    app.shutdown().await;
}
