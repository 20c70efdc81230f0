//! Runs as the protocol defines them: cron and manual runs, failures and their exact messages,
//! timeouts (502), job logs, sharding broadcast, early triggers held to their millisecond,
//! unreadable and unsigned triggers sent to the dead-letter queue, and a BACKFILL trigger, the
//! one kind the scheduler writes as `TriggerRecord` v2 (schema id 1002).

use std::collections::BTreeSet;
use std::time::Duration;

use kadence_schemas::{
    AppName, BlockStrategy, GlueType, JobId, ResultRecord, TriggerId, TriggerRecord, TriggerType,
    codec,
};
use kadence_tests::triggers::read_records;
use serde_json::{Value, json};

use super::{
    ExecutorProcess, Implementation, dispatched_results, finished_results, results, run_of, stage,
    start_owner,
};
use crate::helpers::{TestApp, spawn_app_with};
use kadence_tests::fixtures::{Backend, wait_for};

/// A cron job fires on the executor every second, and a manual trigger of it runs once.
async fn cron_and_manual_runs_complete(executor: Implementation) {
    let (app, mut process) = stage(executor, "cron", 2).await;
    let job = app
        .create_job(
            json!({"app": "cron", "handler": "ok", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?", "route_strategy": "ROUND", "start": true}),
        )
        .await;
    finished_results(&app, job.id, 3).await;
    app.stop_job(job.id).await;
    let manual = app.trigger(job.id, None).await;
    let runs = wait_for(Duration::from_secs(30), "the manual run", || async {
        let runs = app.runs(job.id).await;
        runs.iter()
            .any(|run| run.trigger_id.as_str() == manual && run.handle_code.is_some())
            .then_some(runs)
    })
    .await;
    let finished: Vec<_> = runs
        .iter()
        .filter(|run| run.handle_code.is_some())
        .collect();
    for run in &finished {
        assert_eq!(run.handle_code, Some(200), "{run:?}");
        assert_eq!(
            run.handle_msg, None,
            "a success whose handler gave no note carries no message: {run:?}"
        );
        assert_eq!(run.executor_id.as_deref(), Some("cron-1"));
        assert_eq!(process.runs_of(run.trigger_id.as_str()), 1, "{run:?}");
    }
    let cron_runs = finished
        .iter()
        .filter(|run| run.trigger_type == TriggerType::Cron)
        .count();
    assert!(cron_runs >= 3, "{finished:?}");
    assert_eq!(run_of(&runs, &manual).trigger_type, TriggerType::Manual);
    app.shutdown().await;
}

/// FAILOVER and BUSYOVER triggers carry the `kadence.route` header (PROTOCOL.md section 3),
/// which an executor that fronts no others ignores, as every header it does not know: each
/// runs once, as any trigger does.
async fn failover_and_busyover_triggers_run_as_any_other(executor: Implementation) {
    let (app, mut process) = stage(executor, "routed", 1).await;
    for strategy in ["FAILOVER", "BUSYOVER"] {
        let job = app
            .create_job(
                json!({"app": "routed", "handler": "ok", "schedule_type": "NONE",
                "route_strategy": strategy}),
            )
            .await;
        let trigger_id = app.trigger(job.id, None).await;
        let runs = wait_for(Duration::from_secs(30), "the routed run", || async {
            let runs = app.runs(job.id).await;
            runs.iter()
                .any(|run| run.trigger_id.as_str() == trigger_id && run.handle_code.is_some())
                .then_some(runs)
        })
        .await;
        assert_eq!(
            run_of(&runs, &trigger_id).handle_code,
            Some(200),
            "{strategy}: {runs:?}"
        );
        assert_eq!(process.runs_of(&trigger_id), 1, "{strategy}");
    }
    app.shutdown().await;
}

/// A failure carries the handler's message; a trigger for a handler the executor lacks, or a
/// script on an executor that runs none, fails with the protocol's exact message.
async fn failures_carry_their_messages(executor: Implementation) {
    let (app, _process) = stage(executor, "fails", 1).await;
    let job = |handler: &str, extra: Value| {
        let mut body = json!({"app": "fails", "handler": handler, "schedule_type": "NONE"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        app.create_job(body)
    };
    let failing = job("fail", json!({"params": "bad input"})).await;
    let missing = job("nope", json!({})).await;
    let script = job(
        "script",
        json!({"glue_type": "GLUE_SHELL", "glue_source": "echo hi"}),
    )
    .await;
    let expected = [
        (failing.id, "bad input".to_owned()),
        (
            missing.id,
            "executor fails-1 has no handler named \"nope\" (it has: describe, fail, log, noop, ok, shard, sleep, work)"
                .to_owned(),
        ),
        (
            script.id,
            "executor fails-1 does not run scripts (GLUE_SHELL): script handlers are switched off"
                .to_owned(),
        ),
    ];
    for (job, _) in &expected {
        app.trigger(*job, None).await;
    }
    for (job, message) in expected {
        let runs = results(&app, job, 1).await;
        assert_eq!(runs[0].handle_code, Some(500), "{runs:?}");
        assert_eq!(runs[0].handle_msg.as_deref(), Some(message.as_str()));
    }
    app.shutdown().await;
}

/// A run past its timeout is cancelled and answers 502 with the exact message.
async fn a_run_past_its_timeout_answers_502(executor: Implementation) {
    let (app, _process) = stage(executor, "slow", 1).await;
    let job = app
        .create_job(
            json!({"app": "slow", "handler": "sleep", "schedule_type": "NONE",
            "params": "20000", "timeout_seconds": 1}),
        )
        .await;
    app.trigger(job.id, None).await;
    let run = &results(&app, job.id, 1).await[0];
    assert_eq!(run.handle_code, Some(502), "{run:?}");
    assert_eq!(
        run.handle_msg.as_deref(),
        Some("run timed out after 1 s and was cancelled")
    );
    let took = run.handle_at_ms.unwrap() - run.started_at_ms.unwrap();
    assert!(
        (1_000..15_000).contains(&took),
        "cancelled at its limit: {run:?}"
    );
    app.shutdown().await;
}

/// The lines a handler writes reach the run's log, numbered from 1, before its result.
async fn job_log_lines_reach_the_run_log(executor: Implementation) {
    let (app, _process) = stage(executor, "logs", 1).await;
    let job = app
        .create_job(
            json!({"app": "logs", "handler": "log", "schedule_type": "NONE",
            "params": "3"}),
        )
        .await;
    app.trigger(job.id, None).await;
    let run = &results(&app, job.id, 1).await[0];
    assert_eq!(run.handle_code, Some(200), "{run:?}");
    assert_eq!(
        log_lines(&app, run.log_id, 3).await,
        ["line 1", "line 2", "line 3"]
    );
    app.shutdown().await;
}

/// A sharding broadcast runs once per partition, shard index = partition, each knowing its
/// shard.
async fn sharding_broadcast_runs_each_shard_once(executor: Implementation) {
    let (app, mut process) = stage(executor, "shards", 3).await;
    let job = app
        .create_job(
            json!({"app": "shards", "handler": "shard", "schedule_type": "NONE",
            "route_strategy": "SHARDING_BROADCAST"}),
        )
        .await;
    app.trigger(job.id, None).await;
    let runs = dispatched_results(&app, job.id, 3).await;
    assert_eq!(runs.len(), 3, "{runs:?}");
    let mut shards = BTreeSet::new();
    for run in &runs {
        assert_eq!(run.handle_code, Some(200), "{run:?}");
        assert_eq!((run.shard_total, run.partition), (3, Some(run.shard_index)));
        assert_eq!(process.runs_of(run.trigger_id.as_str()), 1);
        let line = format!("shard {} of 3", run.shard_index);
        assert_eq!(log_lines(&app, run.log_id, 1).await, [line]);
        shards.insert(run.shard_index);
    }
    assert_eq!(shards, BTreeSet::from([0, 1, 2]));
    app.shutdown().await;
}

/// Triggers the scheduler emits 3 s early reach the executor early and start at their
/// scheduled millisecond, never before.
async fn early_triggers_start_at_their_millisecond(executor: Implementation) {
    let app = spawn_app_with(Backend::Sqlite, |config| {
        config.schedule.emit_lead = Duration::from_secs(3);
    })
    .await;
    let _process = start_owner(executor, &app, "early", 1).await;
    let job = app
        .create_job(
            json!({"app": "early", "handler": "ok", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?", "start": true}),
        )
        .await;
    let runs = finished_results(&app, job.id, 3).await;
    app.stop_job(job.id).await;
    for run in &runs {
        assert_eq!(run.handle_code, Some(200), "{run:?}");
        assert!(
            run.dispatched_at_ms.unwrap() < run.scheduled_at_ms,
            "at the executor before its time: {run:?}"
        );
        assert!(
            run.started_at_ms.unwrap() >= run.scheduled_at_ms,
            "never started early: {run:?}"
        );
    }
    app.shutdown().await;
}

/// Records that are not Kadence triggers, or that this reader cannot decode, go to the
/// dead-letter queue with the protocol's reasons, and the partition keeps flowing.
async fn unreadable_triggers_go_to_the_dead_letter_queue(executor: Implementation) {
    let (app, _process) = stage(executor, "poison", 1).await;
    let topic = format!("{}.triggers.poison", app.prefix);
    app.produce_raw(&topic, 0, "1", b"{\"not\": \"avro\"}")
        .await;
    let mut from_the_future = codec::encode(&stray_result()).unwrap();
    from_the_future[1..5].copy_from_slice(&1_999u32.to_be_bytes());
    app.produce_raw(&topic, 0, "1", &from_the_future).await;
    let wrong_type = codec::encode(&stray_result()).unwrap();
    app.produce_raw(&topic, 0, "1", &wrong_type).await;
    let job = app
        .create_job(json!({"app": "poison", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    app.trigger(job.id, None).await;
    assert_eq!(results(&app, job.id, 1).await[0].handle_code, Some(200));
    let letters = app.dead_letters(3).await;
    let reasons: Vec<&str> = letters.iter().map(|(reason, _)| reason.as_str()).collect();
    for expected in [
        "undecodable trigger record: record is not Confluent-framed Avro: first byte is 0x7b, \
         expected 0x00",
        "undecodable trigger record: unknown schema id 1999: this reader accepts TriggerRecord \
         ids 1001, 1002, 1003;",
        "undecodable trigger record: schema id 2001 is a ResultRecord, expected a TriggerRecord",
    ] {
        assert!(
            reasons.iter().any(|reason| reason.starts_with(expected)),
            "{expected:?} among {reasons:?}"
        );
    }
    // The dead-letter queue keeps each record's bytes; its order across records is not part
    // of the protocol, so the garbage record is found by its reason.
    let (_, garbage) = letters
        .iter()
        .find(|(reason, _)| reason.contains("not Confluent-framed"))
        .unwrap();
    assert_eq!(garbage, b"{\"not\": \"avro\"}", "the original bytes");
    app.shutdown().await;
}

/// An executor that trusts the scheduler's key runs its signed triggers and dead-letters an
/// unsigned one.
async fn with_a_trusted_key_only_signed_triggers_run(executor: Implementation) {
    let app = crate::helpers::spawn_app(Backend::Sqlite).await;
    app.create_app("signed", 1).await;
    let key = app.signing_public_key().await;
    let environment = [("KADENCE_TRUSTED_KEYS", key.as_str())];
    let _process =
        ExecutorProcess::start_with(executor, &app, "signed", "signed-1", &environment).await;
    app.wait_for_executors("signed", 1, 1).await;
    let job = app
        .create_job(json!({"app": "signed", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    app.trigger(job.id, None).await;
    assert_eq!(results(&app, job.id, 1).await[0].handle_code, Some(200));
    let unsigned = crate::signing::count_trigger("signed", job.id, 1);
    let topic = format!("{}.triggers.signed", app.prefix);
    app.produce_raw(
        &topic,
        0,
        &job.id.to_string(),
        &codec::encode(&unsigned).unwrap(),
    )
    .await;
    let letters = app.dead_letters(1).await;
    assert!(
        letters[0]
            .0
            .starts_with("refused trigger record: unsigned record"),
        "{letters:?}"
    );
    app.shutdown().await;
}

/// A BACKFILL trigger, produced straight to the trigger topic as the scheduler would emit it
/// (written as `TriggerRecord` v2, signed with the scheduler's key), runs on an executor that
/// verifies, and its handler sees the trigger type.
async fn a_backfill_trigger_runs(executor: Implementation) {
    let (app, _process, job_id) = stage_verifying(executor, "backfill").await;
    // A fire an hour ago that never happened, on its second.
    let scheduled_at_ms = (kadence_tests::now_ms() - 3_600_000) / 1000 * 1000;
    let backfill = hand_made_trigger(job_id, "backfill", TriggerType::Backfill, scheduled_at_ms);
    let bytes = codec::encode(&backfill).unwrap();
    assert_eq!(bytes[1..5], 1002u32.to_be_bytes(), "written as v2");
    produce_signed(&app, "backfill", job_id, &bytes).await;
    let result = result_of(&app, &backfill.trigger_id).await;
    assert_eq!(result.executor_id, "backfill-1");
    assert_eq!(
        (result.code, result.message.as_deref()),
        (500, Some("production run of a BACKFILL trigger"))
    );
    app.shutdown().await;
}

/// Triggers carrying a validity window (`TriggerRecord` v3, schema id 1003), signed with the
/// scheduler's key: one received after its window is dead-lettered as expired, with the
/// protocol's reason, and never runs; one within it runs.
async fn a_trigger_past_its_validity_window_is_dead_lettered(executor: Implementation) {
    let (app, _process, job_id) = stage_verifying(executor, "windowed").await;
    let now_ms = kadence_tests::now_ms();
    let expired = TriggerRecord {
        expires_at_ms: Some(now_ms - 60_000),
        ..hand_made_trigger(job_id, "windowed", TriggerType::Manual, now_ms - 120_000)
    };
    let valid = TriggerRecord {
        expires_at_ms: Some(now_ms + 600_000),
        ..hand_made_trigger(job_id, "windowed", TriggerType::Manual, now_ms)
    };
    let expired_bytes = codec::encode(&expired).unwrap();
    assert_eq!(expired_bytes[1..5], 1003u32.to_be_bytes(), "written as v3");
    produce_signed(&app, "windowed", job_id, &expired_bytes).await;
    produce_signed(&app, "windowed", job_id, &codec::encode(&valid).unwrap()).await;
    // Behind the expired one in the one partition: once it has run, the other was read.
    let result = result_of(&app, &valid.trigger_id).await;
    assert_eq!(
        result.message.as_deref(),
        Some("production run of a MANUAL trigger"),
        "the valid trigger ran"
    );
    let letters = app.dead_letters(1).await;
    let (reason, letter) = &letters[0];
    assert_eq!(letter, &expired_bytes);
    let expected = format!(
        "expired trigger record: {} was valid until {} (ms since the epoch) and arrived ",
        expired.trigger_id,
        now_ms - 60_000
    );
    assert!(reason.starts_with(&expected), "{reason}");
    let results =
        read_records::<ResultRecord>(&app.brokers, &format!("{}.results", app.prefix), 2).await;
    assert!(
        results
            .iter()
            .all(|result| result.trigger_id != expired.trigger_id),
        "the expired trigger was answered: {results:?}"
    );
    app.shutdown().await;
}

/// A scheduler on SQLite with app `app_name` (one partition), an executor of `executor` that
/// trusts the scheduler's key (its id `{app_name}-1`), and a job of its `describe` handler.
pub(super) async fn stage_verifying(
    executor: Implementation,
    app_name: &str,
) -> (TestApp, ExecutorProcess, JobId) {
    let app = crate::helpers::spawn_app(Backend::Sqlite).await;
    app.create_app(app_name, 1).await;
    let key = app.signing_public_key().await;
    let environment = [("KADENCE_TRUSTED_KEYS", key.as_str())];
    let executor_id = format!("{app_name}-1");
    let process =
        ExecutorProcess::start_with(executor, &app, app_name, &executor_id, &environment).await;
    app.wait_for_executors(app_name, 1, 1).await;
    let job = app
        .create_job(json!({"app": app_name, "handler": "describe", "schedule_type": "NONE"}))
        .await;
    (app, process, JobId::new(job.id).unwrap())
}
/// A trigger of the `describe` handler of `job_id`, made by hand as the scheduler would make
/// it (no validity window), for a run the scheduler does not know (log id 1).
pub(super) fn hand_made_trigger(
    job_id: JobId,
    app_name: &str,
    trigger_type: TriggerType,
    scheduled_at_ms: i64,
) -> TriggerRecord {
    TriggerRecord {
        trigger_id: TriggerId::scheduled(job_id, scheduled_at_ms),
        log_id: 1,
        job_id,
        app: AppName::parse(app_name).unwrap(),
        handler: "describe".into(),
        params: String::new(),
        shard_index: 0,
        shard_total: 1,
        block_strategy: BlockStrategy::SerialExecution,
        timeout_ms: 0,
        trigger_type,
        scheduled_at_ms,
        emitted_at_ms: kadence_tests::now_ms(),
        attempt: 0,
        glue_type: GlueType::Bean,
        glue_source: None,
        glue_updated_at_ms: None,
        replay_of: None,
        expires_at_ms: None,
    }
}

/// Produces `bytes`, a trigger of `job_id`, to partition 0 of `app_name`'s trigger topic, keyed
/// and signed with the scheduler's key as the scheduler does.
async fn produce_signed(app: &TestApp, app_name: &str, job_id: JobId, bytes: &[u8]) {
    let topic = format!("{}.triggers.{app_name}", app.prefix);
    let signature = crate::signing::scheduler_key(app)
        .await
        .headers(&topic, bytes);
    app.produce_with_headers(&topic, 0, &job_id.to_string(), bytes, Some(signature))
        .await;
}

/// The result of trigger `trigger_id`, once it is on the results topic.
pub(super) async fn result_of(app: &TestApp, trigger_id: &TriggerId) -> ResultRecord {
    let results_topic = format!("{}.results", app.prefix);
    wait_for(
        Duration::from_secs(60),
        &format!("the result of {trigger_id}"),
        || async {
            let results = read_records::<ResultRecord>(&app.brokers, &results_topic, 2).await;
            results
                .into_iter()
                .find(|result| &result.trigger_id == trigger_id)
        },
    )
    .await
}

/// A result record, which is not a trigger.
fn stray_result() -> ResultRecord {
    ResultRecord {
        trigger_id: TriggerId::parse("1-1000").unwrap(),
        log_id: 1,
        job_id: kadence_schemas::JobId::new(1).unwrap(),
        app: AppName::parse("poison").unwrap(),
        executor_id: "elsewhere".into(),
        code: 200,
        message: None,
        started_at_ms: 1,
        finished_at_ms: 2,
        attempt: 0,
        retry_after_ms: None,
    }
}

/// The `count` lines of the run log `log_id`: lines and results are stored by separate
/// consumers, so the last lines of a finished run may show a moment after its result.
async fn log_lines(app: &TestApp, log_id: i64, count: usize) -> Vec<String> {
    wait_for(
        Duration::from_secs(30),
        &format!("{count} lines of run {log_id}"),
        || async {
            let (status, body) = app
                .call(
                    reqwest::Method::GET,
                    &format!("/api/runs/{log_id}/log?from_line=1"),
                    None,
                )
                .await;
            assert_eq!(status, 200, "{body}");
            let lines: Vec<String> = serde_json::from_value(body["lines"].clone()).unwrap();
            (lines.len() >= count).then_some(lines)
        },
    )
    .await
}

on_every_executor!(
    cron_and_manual_runs_complete,
    failover_and_busyover_triggers_run_as_any_other,
    failures_carry_their_messages,
    a_run_past_its_timeout_answers_502,
    job_log_lines_reach_the_run_log,
    sharding_broadcast_runs_each_shard_once,
    early_triggers_start_at_their_millisecond,
    unreadable_triggers_go_to_the_dead_letter_queue,
    with_a_trusted_key_only_signed_triggers_run,
    a_backfill_trigger_runs,
    a_trigger_past_its_validity_window_is_dead_lettered,
);
