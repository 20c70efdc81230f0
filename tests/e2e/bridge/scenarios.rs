//! The bridge's scenarios, each run at both xxl-job-core versions (see the module docs of
//! `bridge`).

use std::time::Duration;

use kadence_bridge::legacy_executor_id;
use kadence_scheduler::domain::model::Run;
use kadence_scheduler::http::api::ExecutorView;
use serde_json::{Value, json};

use super::{BridgeProcess, LegacyExecutor, XxlVersion, post};
use crate::helpers::{TestApp, spawn_app};
use crate::scripts::log_of;
use crate::xxl_import::{XxlDatabase, kadence};
use kadence_tests::fixtures::{Backend, unique, wait_for};

/// The access token of every scenario's executors and bridges (but the refused ones).
const TOKEN: &str = "kadence-bridge-test-token";

/// A scheduler, an app, a bridge of it and its legacy executors, registered and routed to.
struct Stage {
    app: TestApp,
    appname: String,
    bridge: BridgeProcess,
    executors: Vec<LegacyExecutor>,
}

impl Stage {
    /// `executors` legacy executors at `version` behind one bridge (`bridge_args` added to
    /// its command) of an app with `partitions` partitions; returns once the registry shows
    /// every executor live and owning its range of the partitions.
    async fn new(
        version: XxlVersion,
        partitions: i32,
        executors: usize,
        bridge_args: &[&str],
    ) -> Stage {
        let app = spawn_app(Backend::Sqlite).await;
        let appname = unique("xxl-");
        app.create_app(&appname, partitions).await;
        let bridge = BridgeProcess::start(&app, &appname, "bridge-1", TOKEN, bridge_args).await;
        let mut legacy = Vec::new();
        for _ in 0..executors {
            legacy.push(LegacyExecutor::start(version, &appname, &bridge.admin, TOKEN).await);
        }
        let ids: Vec<String> = (legacy.iter())
            .map(|executor| legacy_executor_id("bridge-1", &executor.address))
            .collect();
        let output = || {
            let executors = legacy.iter().map(|executor| executor.output.text());
            format!(
                "bridge:\n{}\nexecutors:\n{}",
                bridge.output.text(),
                executors.collect::<Vec<_>>().join("\n")
            )
        };
        fronted(&app, &appname, &ids, partitions, output).await;
        Stage {
            app,
            appname,
            bridge,
            executors: legacy,
        }
    }

    /// A job of the app from `body` (no schedule unless it says one); its id.
    async fn job(&self, body: Value) -> i64 {
        let mut job = json!({"app": self.appname, "schedule_type": "NONE"});
        (job.as_object_mut().unwrap()).extend(body.as_object().unwrap().clone());
        self.app.create_job(job).await.id
    }

    /// Triggers `job` once and waits for the run's result.
    async fn run_once(&self, job: i64) -> Run {
        let trigger_id = self.app.trigger(job, None).await;
        self.result_of(job, &trigger_id).await
    }

    /// The run of `trigger_id`, once it has its result.
    async fn result_of(&self, job: i64, trigger_id: &str) -> Run {
        let what = format!("the result of {trigger_id}");
        wait_for(Duration::from_secs(90), &what, || async {
            (self.app.runs(job).await.into_iter())
                .find(|run| run.trigger_id.as_str() == trigger_id && run.handle_code.is_some())
        })
        .await
    }

    /// Triggers `job` and waits until its run has been handed to a legacy executor; the run.
    async fn handed_over(&self, job: i64) -> Run {
        let trigger_id = self.app.trigger(job, None).await;
        wait_for(Duration::from_secs(60), "the run handed over", || async {
            let run = (self.app.runs(job).await.into_iter())
                .find(|run| run.trigger_id.as_str() == trigger_id)?;
            let log = lines_of(&self.app, run.log_id).await;
            log.iter()
                .any(|line| line.contains("[bridge] handed to"))
                .then_some(run)
        })
        .await
    }
}

/// The run's stored log lines so far.
async fn lines_of(app: &TestApp, log_id: i64) -> Vec<String> {
    let (status, body) = app
        .call(
            reqwest::Method::GET,
            &format!("/api/runs/{log_id}/log"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_value(body["lines"].clone()).unwrap()
}

/// Waits until the registry shows each executor of `ids` live, together owning every one of
/// the app's `partitions` partitions; returns their views. `output` is shown if they never
/// are.
async fn fronted(
    app: &TestApp,
    appname: &str,
    ids: &[String],
    partitions: i32,
    output: impl Fn() -> String,
) -> Vec<ExecutorView> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let views: Vec<ExecutorView> = (app.executors(appname).await.into_iter())
            .filter(|view| view.live && ids.contains(&view.entry.executor_id))
            .collect();
        let mut owned: Vec<i32> = (views.iter())
            .flat_map(|view| view.entry.owned_partitions.clone())
            .collect();
        owned.sort_unstable();
        if views.len() == ids.len() && owned == (0..partitions).collect::<Vec<_>>() {
            return views;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the legacy executors {ids:?} never owned every partition: {views:?}\n{}",
            output()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A cron job every second runs through Kafka, the bridge and the legacy executor: results in
/// the store, the executor's log lines in the run's log, and the executor in the registry as
/// the owner of the partitions, the bridge beside it owning none.
pub async fn a_cron_job_runs_every_second_with_its_log(version: XxlVersion) {
    let stage = Stage::new(version, 2, 1, &[]).await;
    let address = &stage.executors[0].address;
    let job = stage
        .job(
            json!({"handler": "lines", "params": "3", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?", "start": true}),
        )
        .await;
    let runs = wait_for(Duration::from_secs(60), "three finished runs", || async {
        let done: Vec<Run> = (stage.app.runs(job).await.into_iter())
            .filter(|run| run.handle_code.is_some())
            .collect();
        (done.len() >= 3).then_some(done)
    })
    .await;
    stage.app.stop_job(job).await;
    for run in &runs {
        assert_eq!(
            run.handle_code,
            Some(200),
            "{run:?}\n{}",
            stage.bridge.output.text()
        );
        assert_eq!(run.executor_id.as_deref(), Some("bridge-1"), "{run:?}");
    }
    let log = log_of(&stage.app, &runs[0], 5).await;
    let handed = format!("[bridge] handed to the XXL-JOB executor at {address}");
    assert!(log.iter().any(|line| line.starts_with(&handed)), "{log:#?}");
    for line in 1..=3 {
        let wanted = format!("line {line} of 3");
        assert!(
            log.iter().any(|logged| logged.ends_with(&wanted)),
            "{wanted}: {log:#?}"
        );
    }
    let views = stage.app.executors(&stage.appname).await;
    let legacy = (views.iter())
        .find(|view| view.entry.executor_id == legacy_executor_id("bridge-1", address))
        .expect("the legacy executor beats");
    assert!(
        legacy.live && legacy.entry.version.contains("xxl-job"),
        "{legacy:?}"
    );
    assert_eq!(
        legacy.entry.host,
        address.trim_start_matches("http://").trim_end_matches('/')
    );
    let bridge = (views.iter())
        .find(|view| view.entry.executor_id == "bridge-1")
        .expect("the bridge beats too");
    assert!(bridge.entry.owned_partitions.is_empty(), "{bridge:?}");
    stage.app.shutdown().await;
}

/// A handler's failure, an unknown handler and a success come back as the legacy executor
/// reports them.
pub async fn failures_and_unknown_handlers_come_back_as_xxl_job_reports_them(version: XxlVersion) {
    let stage = Stage::new(version, 2, 1, &[]).await;
    let failing = stage.job(json!({"handler": "fail", "params": "x"})).await;
    let run = stage.run_once(failing).await;
    assert_eq!(run.handle_code, Some(500));
    let message = run.handle_msg.unwrap_or_default();
    assert!(message.contains("failed on purpose: x"), "{message}");

    let unknown = stage.job(json!({"handler": "nope"})).await;
    let run = stage.run_once(unknown).await;
    assert_eq!(run.handle_code, Some(500));
    let message = run.handle_msg.unwrap_or_default();
    assert!(
        message.contains("job handler [nope] not found."),
        "{message}"
    );

    let echo = stage
        .job(json!({"handler": "echo", "params": "hello"}))
        .await;
    assert_eq!(stage.run_once(echo).await.handle_code, Some(200));
    stage.app.shutdown().await;
}

/// A KILL of a running run and a run past its timeout both end the run in Kadence and stop
/// it on the legacy executor, which is idle again soon after.
pub async fn a_kill_and_a_timeout_stop_the_legacy_run(version: XxlVersion) {
    let stage = Stage::new(version, 2, 1, &[]).await;
    let executor = &stage.executors[0];
    let sleeping = stage
        .job(json!({"handler": "sleep", "params": "60000"}))
        .await;
    let run = stage.handed_over(sleeping).await;
    assert!(
        !executor.is_idle(sleeping, TOKEN).await,
        "the legacy run goes on"
    );
    let (status, answer) = stage
        .app
        .call(
            reqwest::Method::POST,
            &format!("/api/runs/{}/kill", run.log_id),
            Some(json!({"reason": "enough"})),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    let killed = stage.result_of(sleeping, run.trigger_id.as_str()).await;
    assert_eq!(
        (killed.handle_code, killed.handle_msg.as_deref()),
        (Some(500), Some("killed: enough"))
    );
    wait_for(
        Duration::from_secs(20),
        "the killed run stopped",
        || async { executor.is_idle(sleeping, TOKEN).await.then_some(()) },
    )
    .await;

    let limited = stage
        .job(json!({"handler": "sleep", "params": "60000", "timeout_seconds": 2}))
        .await;
    let timed_out = stage.run_once(limited).await;
    assert_eq!(timed_out.handle_code, Some(502), "{timed_out:?}");
    wait_for(
        Duration::from_secs(20),
        "the timed-out run stopped",
        || async { executor.is_idle(limited, TOKEN).await.then_some(()) },
    )
    .await;
    stage.app.shutdown().await;
}

/// A SHARDING_BROADCAST over two legacy executors runs once on each, numbered as XXL-JOB
/// numbers them: executor i of the address-ordered list runs shard i of 2.
pub async fn a_broadcast_runs_once_on_each_executor_with_xxl_jobs_shard_numbers(
    version: XxlVersion,
) {
    let stage = Stage::new(version, 2, 2, &[]).await;
    let job = stage
        .job(json!({"handler": "shard", "route_strategy": "SHARDING_BROADCAST"}))
        .await;
    stage.app.trigger(job, None).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let runs = loop {
        let runs = stage.app.runs(job).await;
        if runs.iter().filter(|run| run.handle_code.is_some()).count() == 2 {
            break runs;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "both shards did not finish: {runs:#?}\n{}",
            stage.bridge.output.text()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let mut addresses: Vec<&str> = stage.executors.iter().map(|e| e.address.as_str()).collect();
    addresses.sort_unstable();
    let mut seen = Vec::new();
    for run in &runs {
        assert_eq!(run.handle_code, Some(200), "{run:?}");
        let log = log_of(&stage.app, run, 3).await;
        let shard = (0..2)
            .find(|shard| {
                log.iter()
                    .any(|line| line.ends_with(&format!("shard {shard} of 2")))
            })
            .unwrap_or_else(|| panic!("no shard line: {log:#?}"));
        let handed = format!(
            "[bridge] handed to the XXL-JOB executor at {} as shard {shard} of 2",
            addresses[shard]
        );
        assert!(
            log.iter().any(|line| line.starts_with(&handed)),
            "{handed}: {log:#?}"
        );
        seen.push(shard);
    }
    seen.sort_unstable();
    assert_eq!(seen, [0, 1], "each executor ran its shard once");
    stage.app.shutdown().await;
}

/// An executor killed mid-run (kill -9: no callback will come) loses its run: it fails,
/// saying so, once the executor has answered nothing for the bridge's `--lost-after`.
pub async fn a_run_whose_executor_dies_is_lost(version: XxlVersion) {
    let mut stage = Stage::new(version, 2, 1, &["--lost-after", "3s"]).await;
    let sleeping = stage
        .job(json!({"handler": "sleep", "params": "60000"}))
        .await;
    let run = stage.handed_over(sleeping).await;
    stage.executors[0].kill_9().await;
    let lost = stage.result_of(sleeping, run.trigger_id.as_str()).await;
    assert_eq!(lost.handle_code, Some(500), "{lost:?}");
    let message = lost.handle_msg.unwrap_or_default();
    let wanted = format!(
        "lost run: the XXL-JOB executor at {}",
        stage.executors[0].address
    );
    assert!(message.starts_with(&wanted), "{message}");
    stage.app.shutdown().await;
}

/// The access token, both ways: an executor with another token cannot register at the
/// bridge, and an executor registered by hand but holding another token refuses the bridge's
/// `run`, which fails the run saying so.
pub async fn a_wrong_access_token_is_refused_on_both_sides(version: XxlVersion) {
    let stage = Stage::new(version, 2, 1, &[]).await;
    let intruder =
        LegacyExecutor::start(version, &stage.appname, &stage.bridge.admin, "wrong").await;
    (stage.bridge.output)
        .line_with("wrong access token", Duration::from_secs(30), "the bridge")
        .await;
    let intruder_id = legacy_executor_id("bridge-1", &intruder.address);
    let views = stage.app.executors(&stage.appname).await;
    assert!(
        views
            .iter()
            .all(|view| view.entry.executor_id != intruder_id),
        "refused, it is not routed to: {views:?}"
    );

    // Registered by hand: the bridge calls it with its own token, which it refuses.
    let registered = post(
        &format!("{}/api/registry", stage.bridge.admin),
        TOKEN,
        json!({"registryGroup": "EXECUTOR", "registryKey": stage.appname,
            "registryValue": intruder.address}),
    )
    .await;
    assert_eq!(registered["code"], 200, "{registered}");
    // The honest one leaves, so the intruder holds every partition.
    post(
        &format!("{}/api/registryRemove", stage.bridge.admin),
        TOKEN,
        json!({"registryGroup": "EXECUTOR", "registryKey": stage.appname,
            "registryValue": stage.executors[0].address}),
    )
    .await;
    fronted(&stage.app, &stage.appname, &[intruder_id], 2, || {
        intruder.output.text()
    })
    .await;
    let echo = stage.job(json!({"handler": "echo", "params": "hi"})).await;
    let run = stage.run_once(echo).await;
    assert_eq!(run.handle_code, Some(500), "{run:?}");
    let message = run.handle_msg.unwrap_or_default();
    assert!(message.contains("The access token is wrong."), "{message}");
    stage.app.shutdown().await;
}

/// Two bridges in the app's group split its partitions; the executor, which registers and
/// calls back at the first admin address only, is known to both through their relay, and
/// every trigger runs once: on the executor, once per run (one "execute start" in each run's
/// log), through the bridge whose partition it came from.
pub async fn two_bridges_split_the_partitions_and_share_the_executors(version: XxlVersion) {
    let app = spawn_app(Backend::Sqlite).await;
    let appname = unique("xxl-");
    app.create_app(&appname, 4).await;
    let ports = [BridgeProcess::reserve_port(), BridgeProcess::reserve_port()];
    let admin = |port: u16| format!("http://127.0.0.1:{port}/xxl-job-admin");
    let first = BridgeProcess::start_on(
        &app,
        &appname,
        "bridge-1",
        TOKEN,
        ports[0],
        &["--peer", &admin(ports[1])],
    )
    .await;
    let second = BridgeProcess::start_on(
        &app,
        &appname,
        "bridge-2",
        TOKEN,
        ports[1],
        &["--peer", &admin(ports[0])],
    )
    .await;
    let addresses = format!("{},{}", first.admin, second.admin);
    let executor = LegacyExecutor::start(version, &appname, &addresses, TOKEN).await;
    let ids = [
        legacy_executor_id("bridge-1", &executor.address),
        legacy_executor_id("bridge-2", &executor.address),
    ];
    let output = || {
        format!(
            "{}\n{}\n{}",
            first.output.text(),
            second.output.text(),
            executor.output.text()
        )
    };
    let views = fronted(&app, &appname, &ids, 4, output).await;
    assert!(
        views
            .iter()
            .all(|view| view.entry.owned_partitions.len() == 2),
        "{views:?}"
    );

    let job = {
        let body = json!({"app": appname, "handler": "ok", "schedule_type": "CRON",
            "schedule_conf": "* * * * * ?", "route_strategy": "ROUND", "start": true});
        app.create_job(body).await.id
    };
    let runs = wait_for(Duration::from_secs(90), "eight finished runs", || async {
        let done: Vec<Run> = (app.runs(job).await.into_iter())
            .filter(|run| run.handle_code.is_some())
            .collect();
        (done.len() >= 8).then_some(done)
    })
    .await;
    app.stop_job(job).await;
    let mut bridges: Vec<&str> = runs
        .iter()
        .filter_map(|run| run.executor_id.as_deref())
        .collect();
    bridges.sort_unstable();
    bridges.dedup();
    assert_eq!(
        bridges,
        ["bridge-1", "bridge-2"],
        "both bridges ran triggers: {runs:?}"
    );
    for run in &runs {
        assert_eq!(
            run.handle_code,
            Some(200),
            "{run:?}\n{}\n{}",
            first.output.text(),
            second.output.text()
        );
        let log = log_of(&app, run, 3).await;
        let starts = (log.iter())
            .filter(|line| line.contains("xxl-job job execute start"))
            .count();
        assert_eq!(starts, 1, "handed over once: {log:#?}");
    }
    app.shutdown().await;
}

/// Jobs imported by `kadence import xxl-job --keep-state` from an XXL-JOB database (the
/// import suite's fixture: XXL-JOB's own tables and rows), as a team switching its scheduling
/// centre in one step imports them, run unchanged through one bridge per app: the
/// cron job of `billing` on its BEAN handler `ok` with its params, and the GLUE_SHELL job of
/// `reports`, whose source and version the legacy executor runs as XXL-JOB ran them (its
/// bridge hands scripts on: `--scripts`).
pub async fn imported_jobs_run_unchanged_through_the_bridge(version: XxlVersion) {
    let xxl = XxlDatabase::create().await;
    let app = spawn_app(Backend::Sqlite).await;
    let (ok, stdout, stderr) = kadence(
        &app,
        &["import", "xxl-job", "--from", &xxl.url, "--keep-state"],
    )
    .await;
    assert!(ok, "import: {stderr}\n{stdout}");
    let jobs = app
        .call(reqwest::Method::GET, "/api/jobs?limit=1000", None)
        .await
        .1;
    let job_named = |name: &str| -> i64 {
        let items = jobs["items"].as_array().expect("jobs");
        let job = items.iter().find(|job| job["name"] == name);
        job.and_then(|job| job["id"].as_i64())
            .unwrap_or_else(|| panic!("no job {name}: {jobs}"))
    };
    let (every_two_seconds, shell) = (job_named("every two seconds"), job_named("shell script"));
    let mut bridges = Vec::new();
    for (appname, extra) in [("billing", &[][..]), ("reports", &["--scripts"][..])] {
        app.create_executor_key(appname).await;
        let bridge = BridgeProcess::start(&app, appname, appname, TOKEN, extra).await;
        let executor = LegacyExecutor::start(version, appname, &bridge.admin, TOKEN).await;
        let id = legacy_executor_id(appname, &executor.address);
        let partitions = partitions_of(&app, appname).await;
        let output = || format!("{}\n{}", bridge.output.text(), executor.output.text());
        fronted(&app, appname, &[id], partitions, output).await;
        bridges.push((bridge, executor));
    }

    let run = wait_for(
        Duration::from_secs(60),
        "a run of the imported cron job",
        || async {
            (app.runs(every_two_seconds).await.into_iter()).find(|run| run.handle_code.is_some())
        },
    )
    .await;
    assert_eq!(
        run.handle_code,
        Some(200),
        "{run:?}\n{}",
        bridges[0].0.output.text()
    );
    let log = log_of(&app, &run, 3).await;
    assert!(
        log.iter().any(|line| line.ends_with("ok: params=p-100")),
        "{log:#?}"
    );
    app.stop_job(every_two_seconds).await;

    let trigger_id = app.trigger(shell, None).await;
    let run = wait_for(
        Duration::from_secs(60),
        "the imported GLUE_SHELL run",
        || async {
            (app.runs(shell).await.into_iter())
                .find(|run| run.trigger_id.as_str() == trigger_id && run.handle_code.is_some())
        },
    )
    .await;
    assert_eq!(
        run.handle_code,
        Some(200),
        "{run:?}\n{}",
        bridges[1].0.output.text()
    );
    let log = log_of(&app, &run, 3).await;
    assert!(
        log.iter().any(|line| line.trim_end() == "version 35"),
        "{log:#?}"
    );
    app.shutdown().await;
}

/// The partitions of `appname`'s trigger topic, as the API shows the app.
async fn partitions_of(app: &TestApp, appname: &str) -> i32 {
    let (status, body) = app.call(reqwest::Method::GET, "/api/apps", None).await;
    assert_eq!(status, 200, "{body}");
    let apps = body["items"].as_array().expect("apps");
    let found = apps.iter().find(|entry| entry["name"] == appname);
    let partitions = found.and_then(|entry| entry["partitions"].as_i64());
    i32::try_from(partitions.unwrap_or_else(|| panic!("no app {appname}: {body}"))).unwrap()
}

/// FAILOVER and BUSYOVER choose as XXL-JOB does at the moment of the trigger (the trigger's
/// `kadence.route` header tells the bridge): with one executor busy with a BUSYOVER job's run,
/// the next run goes to the other, asked with `idleBeat`; with the first executor dead, a
/// FAILOVER run goes to the one that answers `beat`.
pub async fn busyover_and_failover_ask_the_executors_as_xxl_job_does(version: XxlVersion) {
    let mut stage = Stage::new(version, 2, 2, &[]).await;
    let mut addresses: Vec<String> = stage.executors.iter().map(|e| e.address.clone()).collect();
    addresses.sort_unstable();
    let busy = stage
        .job(
            json!({"handler": "sleep", "params": "5000", "route_strategy": "BUSYOVER",
            "block_strategy": "CONCURRENT"}),
        )
        .await;
    let first = stage.handed_over(busy).await;
    let second = stage.handed_over(busy).await;
    for (run, address) in [(&first, &addresses[0]), (&second, &addresses[1])] {
        let log = lines_of(&stage.app, run.log_id).await;
        let handed = format!("[bridge] handed to the XXL-JOB executor at {address}");
        assert!(
            log.iter().any(|line| line.starts_with(&handed)),
            "{handed}: {log:#?}"
        );
    }

    let first_address = addresses[0].clone();
    let index = (stage.executors.iter())
        .position(|executor| executor.address == first_address)
        .unwrap();
    stage.executors[index].kill_9().await;
    let failing_over = stage
        .job(json!({"handler": "echo", "params": "over", "route_strategy": "FAILOVER"}))
        .await;
    let run = stage.run_once(failing_over).await;
    assert_eq!(run.handle_code, Some(200), "{run:?}");
    let handed = format!(
        "[bridge] handed to the XXL-JOB executor at {}",
        addresses[1]
    );
    // The run's lines reach the log apart from its result, and not all at once: the note of
    // the executor that did not answer can be read before the line of the one that did.
    wait_for(Duration::from_secs(20), &handed, || async {
        let log = log_of(&stage.app, &run, 1).await;
        log.iter()
            .any(|line| line.starts_with(&handed))
            .then_some(())
    })
    .await;
    stage.app.shutdown().await;
}
