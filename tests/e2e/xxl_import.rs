//! `kadence import xxl-job` against XXL-JOB's own schema: each test creates a MariaDB
//! database of its own (random name, dropped at the end; `KADENCE_TEST_MYSQL_URL`, default
//! `mysql://root@127.0.0.1:3306`), loads XXL-JOB's published DDL and seed rows
//! (`tests/fixtures/xxl-job/tables_xxl_job.sql`, v3.4.0) and the varied rows of
//! `fixture.sql`, and imports them through the real `kadence` command (the `kadence-cli`
//! binary of this package: `kadence_scheduler::cli::main`).
//!
//! Runs on both stores: the import is one transaction of the store, `imported_ids` is what
//! makes a second run idempotent, and the imported jobs' fires come from the pre-read scan.

use std::collections::HashMap;
use std::time::Duration;

use kadence_scheduler::domain::model::Run;
use kadence_schemas::TriggerType;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::{Connection as _, Executor as _};

use crate::helpers::{TestApp, spawn_app};
use kadence_tests::fixtures::{Backend, unique, wait_for};

/// XXL-JOB's DDL and seed rows, as published.
const XXL_JOB_DDL: &str = include_str!("../fixtures/xxl-job/tables_xxl_job.sql");
/// The rows the tests import, on top of the seed rows.
const FIXTURE: &str = include_str!("../fixtures/xxl-job/fixture.sql");

fn mysql_server_url() -> String {
    std::env::var("KADENCE_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// A MariaDB database holding XXL-JOB's tables, dropped when it goes.
pub(crate) struct XxlDatabase {
    pub(crate) url: String,
    name: String,
}

impl XxlDatabase {
    pub(crate) async fn create() -> XxlDatabase {
        let server = mysql_server_url();
        let name = unique("xxl_job_");
        let mut connection = sqlx::MySqlConnection::connect(&server)
            .await
            .unwrap_or_else(|error| panic!("cannot reach MariaDB at {server}: {error}"));
        connection
            .execute(format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4").as_str())
            .await
            .expect("create the XXL-JOB database");
        let database = XxlDatabase {
            url: format!("{server}/{name}"),
            name,
        };
        database.run_script(XXL_JOB_DDL).await;
        database.run_script(FIXTURE).await;
        database
    }

    /// Runs each statement of `script` (`;` at a line's end ends one), leaving out the
    /// published DDL's own `CREATE DATABASE` and `USE`: the tables go into this database.
    async fn run_script(&self, script: &str) {
        let mut connection = sqlx::MySqlConnection::connect(&self.url).await.unwrap();
        let text: String = script
            .lines()
            .filter(|line| {
                !line.trim_start().starts_with("--") && !line.trim_start().starts_with('#')
            })
            .map(|line| format!("{line}\n"))
            .collect();
        for statement in text.split(";\n").map(str::trim).filter(|s| !s.is_empty()) {
            let lower = statement.to_ascii_lowercase();
            if lower.starts_with("create database") || lower.starts_with("use ") {
                continue;
            }
            connection
                .execute(statement)
                .await
                .unwrap_or_else(|error| panic!("{statement}: {error}"));
        }
    }

    async fn execute(&self, sql: &str) {
        let mut connection = sqlx::MySqlConnection::connect(&self.url).await.unwrap();
        connection
            .execute(sql)
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"));
    }
}

impl Drop for XxlDatabase {
    /// Drops the database even when the test panicked (on a thread of its own: `Drop`
    /// cannot await).
    fn drop(&mut self) {
        let (server, name) = (mysql_server_url(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let mut connection = sqlx::MySqlConnection::connect(&server).await?;
                connection
                    .execute(format!("DROP DATABASE IF EXISTS `{name}`").as_str())
                    .await
                    .map(|_| ())
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("warning: could not drop the XXL-JOB test database: {dropped:?}");
        }
    }
}

/// Runs `kadence import xxl-job …` as the admin; (success, standard output, standard error).
pub(crate) async fn kadence(app: &TestApp, args: &[&str]) -> (bool, String, String) {
    kadence_as(app, app.admin_token(), args).await
}

/// Runs `kadence …` with `token`; (success, standard output, standard error).
async fn kadence_as(app: &TestApp, token: &str, args: &[&str]) -> (bool, String, String) {
    let home = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_kadence-cli"))
        .args(args)
        .env("KADENCE_API_URL", app.api_url())
        .env("KADENCE_TOKEN", token)
        .env("HOME", home.path())
        .output()
        .await
        .expect("the kadence command runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), stdout, stderr)
}

/// The line of the mapping table for `kind` row `id`.
fn mapping_line<'a>(stdout: &'a str, kind: &str, id: i64) -> &'a str {
    stdout
        .lines()
        .find(|line| {
            let mut words = line.split_whitespace();
            words.next() == Some(kind) && words.next() == Some(id.to_string().as_str())
        })
        .unwrap_or_else(|| panic!("no {kind} {id} row in:\n{stdout}"))
}

fn assert_row(stdout: &str, kind: &str, id: i64, action: &str, reason: &str) {
    let line = mapping_line(stdout, kind, id);
    assert!(
        line.contains(&format!(" {action} ")) && line.contains(reason),
        "{kind} {id}: expected {action} with {reason:?}, got: {line}"
    );
}

async fn get(app: &TestApp, path: &str) -> Value {
    let (status, body) = app.call(Method::GET, path, None).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// Every job by name.
async fn jobs_by_name(app: &TestApp) -> HashMap<String, Value> {
    let jobs = get(app, "/api/jobs?limit=1000").await;
    jobs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| (job["name"].as_str().unwrap().to_owned(), job.clone()))
        .collect()
}

/// The whole move: dry run, import, every field checked, a second run, imported jobs firing
/// as XXL-JOB fired them, a reset token redeemed, the undo.
async fn an_xxl_job_database_moves_over_and_back(backend: Backend) {
    let xxl = XxlDatabase::create().await;
    let mut app = spawn_app(backend).await;
    let from = xxl.url.as_str();
    let base = [
        "import",
        "xxl-job",
        "--from",
        from,
        "--time-zone",
        "Asia/Shanghai",
    ];

    let dry: Vec<&str> = base.iter().copied().chain(["--dry-run"]).collect();
    let (ok, stdout, stderr) = kadence(&app, &dry).await;
    assert!(ok, "dry run: {stderr}\n{stdout}");
    check_dry_run(&stdout);
    assert_eq!(
        jobs_by_name(&app).await.len(),
        0,
        "a dry run writes nothing"
    );
    assert_eq!(get(&app, "/api/apps").await["items"], json!([]));

    let (ok, stdout, stderr) = kadence(&app, &base).await;
    assert!(ok, "import: {stderr}\n{stdout}");
    assert!(stdout.contains("(done)"), "{stdout}");
    let tokens = reset_tokens(&stdout);
    let mut users: Vec<&str> = tokens.keys().map(String::as_str).collect();
    users.sort_unstable();
    assert_eq!(users, ["boss", "li"], "{stdout}");
    assert!(
        tokens
            .values()
            .all(|token| token.starts_with("kdr_") && token.len() == 68),
        "{tokens:?}"
    );
    let jobs = check_imported(&app).await;

    // A job changed in XXL-JOB since, and one added: only the new one is created.
    xxl.execute("UPDATE xxl_job_info SET executor_param = 'changed' WHERE id = 102")
        .await;
    xxl.execute(
        "INSERT INTO xxl_job_info (id, job_group, job_desc, schedule_type, schedule_conf, \
         misfire_strategy, executor_route_strategy, executor_handler, executor_block_strategy, \
         glue_type, trigger_status) VALUES (117, 10, 'added later', 'NONE', '', 'DO_NOTHING', \
         'FIRST', 'ok', 'SERIAL_EXECUTION', 'BEAN', 0)",
    )
    .await;
    let (ok, stdout, stderr) = kadence(&app, &base).await;
    assert!(ok, "second import: {stderr}\n{stdout}");
    for id in [100, 101, 110, 111, 116, 1] {
        assert_row(&stdout, "JOB", id, "SKIP", "imported by an earlier run");
    }
    assert_row(&stdout, "JOB", 117, "CREATE", "");
    assert_row(&stdout, "USER", 10, "SKIP", "");
    assert!(
        stdout.lines().any(|line| line.starts_with("JOB")
            && line.contains(" 102 ")
            && line.contains("changed in XXL-JOB")),
        "{stdout}"
    );
    assert!(
        !stdout.contains("RESET TOKENS"),
        "no user is created twice: {stdout}"
    );
    let after = jobs_by_name(&app).await;
    assert_eq!(after.len(), jobs.len() + 1, "only the new job was created");
    assert_eq!(
        after["manual only"]["params"],
        json!("{\"n\": 1}"),
        "never overwritten"
    );

    snapshots_beyond_the_usual_body_limit_and_bad_ones(&app).await;
    fires_as_xxl_job_did(&mut app, &jobs).await;
    redeems_a_reset_token(&app, &tokens["li"]).await;
    undoes_the_import(&app, &jobs, &base).await;
    app.shutdown().await;
}

fn check_dry_run(stdout: &str) {
    assert!(stdout.contains("(dry run, nothing written)"), "{stdout}");
    assert_row(stdout, "GROUP", 10, "CREATE", "app billing");
    assert_row(stdout, "GROUP", 12, "REFUSE", "cannot name a Kadence app");
    assert_row(stdout, "JOB", 100, "CREATE", "new job");
    assert_row(stdout, "JOB", 112, "REFUSE", "GLUE_GROOVY");
    assert_row(stdout, "JOB", 113, "REFUSE", "its child job 112 is refused");
    assert_row(stdout, "JOB", 114, "REFUSE", "executor group 12 is refused");
    assert_row(stdout, "JOB", 115, "REFUSE", "never fires");
    assert_row(
        stdout,
        "USER",
        1,
        "REFUSE",
        "a Kadence user named admin exists",
    );
    assert_row(stdout, "USER", 10, "CREATE", "user li");
    for difference in [
        "time zone Asia/Shanghai",
        "imported STOPPED",
        "SHARDING_BROADCAST: one shard per partition, shard total 3",
        "FAILOVER: the first partition whose owning executor's beat is fresh",
        "CONSISTENT_HASH: XXL-JOB's ring over the app's 3 partitions",
        "executor addresses entered by hand (http://10.0.0.1:9999/",
        "FIX_RATE 3 s",
        "GLUE_POWERSHELL runs with pwsh",
        "35 script versions in XXL-JOB: the newest 30 are imported",
        "permission on executor group 99, which does not exist",
        "passwords are not imported",
    ] {
        assert!(
            stdout.contains(difference),
            "the dry run names {difference:?}:\n{stdout}"
        );
    }
    assert!(!stdout.contains("RESET TOKENS"), "{stdout}");
}

/// user → token, from the report's RESET TOKENS table.
fn reset_tokens(stdout: &str) -> HashMap<String, String> {
    stdout
        .lines()
        .skip_while(|line| !line.starts_with("RESET TOKENS"))
        .skip(2)
        .take_while(|line| !line.trim().is_empty())
        .map(|line| {
            let mut words = line.split_whitespace();
            (
                words.next().unwrap().to_owned(),
                words.next().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A field whose value the test cannot know (set by the seed rows' `now()`), or checks apart.
const ANY: &str = "<any>";

/// Every field of every job, the apps, the script versions, the users; the jobs by name.
async fn check_imported(app: &TestApp) -> HashMap<String, Value> {
    let apps = get(app, "/api/apps").await;
    let apps: Vec<(&str, &str, i64)> = apps["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|app| {
            (
                app["name"].as_str().unwrap(),
                app["title"].as_str().unwrap(),
                app["partitions"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        apps,
        [
            ("billing", "Billing", 3),
            ("reports", "Reports", 3),
            ("xxl-job-executor-sample", "通用执行器Sample", 3),
            ("xxl-job-executor-sample-ai", "AI执行器Sample", 3)
        ]
    );
    let jobs = jobs_by_name(app).await;
    assert_eq!(jobs.len(), 17, "{:?}", jobs.keys().collect::<Vec<_>>());
    let id = |name: &str| jobs[name]["id"].as_i64().unwrap();
    let every = |name: &str,
                 app: &str,
                 schedule: (&str, &str),
                 strategies: (&str, &str, &str),
                 handler: &str| {
        json!({"name": name, "app": app, "schedule_type": schedule.0, "schedule_conf": schedule.1,
            "time_zone": "Asia/Shanghai", "misfire_strategy": strategies.0, "route_strategy": strategies.1,
            "block_strategy": strategies.2, "handler": handler, "status": "STOPPED", "next_fire_ms": null,
            "last_fire_ms": null, "retry_backoff": "NONE", "retry_backoff_seconds": 0,
            "retry_backoff_cap_seconds": 0, "alarm_webhook": null, "child_trigger_mode": "EACH_SHARD",
            "history": "ALL", "params": "", "timeout_seconds": 0, "retry_count": 0, "author": "li",
            "alarm_emails": [], "glue_type": "BEAN", "glue_source": null, "glue_remark": "GLUE代码初始化",
            "child_job_ids": [], "glue_updated_at_ms": 1_767_317_400_000_i64})
    };
    let mut expected: Vec<(Value, Value)> = vec![
        (
            every(
                "every two seconds",
                "billing",
                ("CRON", "*/2 * * * * ?"),
                ("DO_NOTHING", "FIRST", "SERIAL_EXECUTION"),
                "ok",
            ),
            json!({"params": "p-100", "timeout_seconds": 30, "retry_count": 2, "author": "li",
            "alarm_emails": ["ops@example.com", "dev@example.com"], "glue_type": "BEAN", "glue_source": null,
            "child_job_ids": [id("fixed rate")]}),
        ),
        (
            every(
                "fixed rate",
                "billing",
                ("FIX_RATE", "3"),
                ("FIRE_ONCE_NOW", "ROUND", "DISCARD_LATER"),
                "ok",
            ),
            json!({"params": "", "timeout_seconds": 0, "retry_count": 0, "alarm_emails": [], "child_job_ids": []}),
        ),
        (
            every(
                "manual only",
                "billing",
                ("NONE", ""),
                ("DO_NOTHING", "LAST", "COVER_EARLY"),
                "count",
            ),
            json!({"params": "{\"n\": 1}", "timeout_seconds": 5, "retry_count": 1, "author": "wang"}),
        ),
        (
            every(
                "shell script",
                "reports",
                ("CRON", "0 0 3 * * ?"),
                ("FIRE_ONCE_NOW", "FIRST", "SERIAL_EXECUTION"),
                "GLUE_SHELL",
            ),
            json!({"glue_type": "GLUE_SHELL", "glue_source": "echo version 35", "glue_remark": "v35", "timeout_seconds": 60,
            "glue_updated_at_ms": 1_767_317_400_000_i64}),
        ),
        (
            every(
                "python script",
                "reports",
                ("NONE", ""),
                ("DO_NOTHING", "FIRST", "SERIAL_EXECUTION"),
                "GLUE_PYTHON",
            ),
            json!({"glue_type": "GLUE_PYTHON", "glue_source": "print(\"three\")", "glue_remark": "third"}),
        ),
        (
            every(
                "powershell",
                "reports",
                ("NONE", ""),
                ("DO_NOTHING", "FIRST", "SERIAL_EXECUTION"),
                "GLUE_POWERSHELL",
            ),
            json!({"glue_type": "GLUE_POWERSHELL", "glue_source": "Write-Output hi", "glue_remark": "ps"}),
        ),
        (
            every(
                "示例任务01",
                "xxl-job-executor-sample",
                ("CRON", "0 0 0 * * ? *"),
                ("DO_NOTHING", "FIRST", "SERIAL_EXECUTION"),
                "demoJobHandler",
            ),
            json!({"author": "XXL", "glue_updated_at_ms": ANY}),
        ),
        (
            every(
                "Ollama示例任务",
                "xxl-job-executor-sample-ai",
                ("NONE", ""),
                ("DO_NOTHING", "FIRST", "SERIAL_EXECUTION"),
                "ollamaJobHandler",
            ),
            json!({"author": "XXL", "glue_updated_at_ms": ANY, "params": ANY}),
        ),
        (
            every(
                "Dify示例任务",
                "xxl-job-executor-sample-ai",
                ("NONE", ""),
                ("DO_NOTHING", "FIRST", "SERIAL_EXECUTION"),
                "difyWorkflowJobHandler",
            ),
            json!({"author": "XXL", "glue_updated_at_ms": ANY, "params": ANY}),
        ),
        (
            every(
                "OpenClaw示例任务",
                "xxl-job-executor-sample-ai",
                ("NONE", ""),
                ("DO_NOTHING", "FIRST", "SERIAL_EXECUTION"),
                "openClawJobHandler",
            ),
            json!({"author": "XXL", "glue_updated_at_ms": ANY, "params": ANY}),
        ),
    ];
    for route in [
        "RANDOM",
        "CONSISTENT_HASH",
        "LEAST_FREQUENTLY_USED",
        "LEAST_RECENTLY_USED",
        "FAILOVER",
        "BUSYOVER",
        "SHARDING_BROADCAST",
    ] {
        let name = format!("route {}", route.to_ascii_lowercase());
        let fields = every(
            &name,
            "billing",
            ("CRON", "0 30 9 ? * MON-FRI"),
            ("DO_NOTHING", route, "SERIAL_EXECUTION"),
            "ok",
        );
        expected.push((fields, json!({"author": "li", "timeout_seconds": 0, "retry_count": 0, "glue_remark": "GLUE代码初始化"})));
    }
    assert_eq!(expected.len(), 17);
    let fields_checked = jobs["fixed rate"].as_object().unwrap().len() - 1; // all but the id
    for (mut fields, more) in expected {
        let fields = fields.as_object_mut().unwrap();
        fields.extend(more.as_object().unwrap().clone());
        assert_eq!(
            fields.len(),
            fields_checked,
            "every field of the job view is checked"
        );
        let name = fields["name"].as_str().unwrap().to_owned();
        let job = &jobs[&name];
        for (field, value) in fields.iter().filter(|(_, value)| **value != json!(ANY)) {
            assert_eq!(&job[field], value, "job {name:?}, field {field}: {job}");
        }
    }
    // The seed rows' JSON params, newlines and all.
    for (name, key) in [
        ("Ollama示例任务", "\"prompt\""),
        ("Dify示例任务", "\"apiKey\""),
        ("OpenClaw示例任务", "\"input\""),
    ] {
        let params = jobs[name]["params"].as_str().unwrap();
        assert!(
            params.starts_with("{\n") && params.contains(key),
            "{name}: {params}"
        );
    }
    let seed_glue = jobs["示例任务01"]["glue_updated_at_ms"].as_i64().unwrap();
    assert!(
        (seed_glue - kadence_tests::now_ms()).abs() < 3_600_000 * 24,
        "now() in the seed rows"
    );
    check_scripts_and_users(app, &jobs).await;
    jobs
}

async fn check_scripts_and_users(app: &TestApp, jobs: &HashMap<String, Value>) {
    let glue = get(
        app,
        &format!("/api/jobs/{}/glue", jobs["shell script"]["id"]),
    )
    .await;
    let sources: Vec<&str> = glue
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["source"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (6..=35)
        .rev()
        .map(|n| format!("echo version {n}"))
        .collect();
    assert_eq!(sources, expected, "the newest 30 of 35, newest first");
    // 2026-01-01 00:35:00 in Shanghai.
    assert_eq!(glue[0]["created_at_ms"], json!(1_767_198_900_000_i64));
    let glue = get(
        app,
        &format!("/api/jobs/{}/glue", jobs["python script"]["id"]),
    )
    .await;
    assert_eq!(glue.as_array().unwrap().len(), 3, "{glue}");

    let (status, users) = app.call(Method::GET, "/api/users", None).await;
    assert_eq!(status, 200);
    let users: HashMap<&str, &Value> = users
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["name"].as_str().unwrap(), u))
        .collect();
    assert_eq!(users["boss"]["role"], "ADMIN");
    assert_eq!(users["li"]["role"], "MEMBER");
    assert_eq!(
        users["li"]["grants"],
        json!([{"app": "billing", "access": "OPERATE"}, {"app": "reports", "access": "OPERATE"}])
    );
    // No password came over: nothing logs li in until the reset.
    let (status, _) = app
        .call_as(
            None,
            Method::POST,
            "/api/auth/login",
            Some(json!({"name": "li", "password": ""})),
        )
        .await;
    assert_eq!(status, 401);
}

/// An import's body may pass the API's usual 512 KiB (up to 64 MiB); a snapshot that lists a
/// job twice, or bad options, is refused naming the problem.
async fn snapshots_beyond_the_usual_body_limit_and_bad_ones(app: &TestApp) {
    let job = |id: i64, params: &str| {
        json!({"id": id, "job_group": 10, "job_desc": "big", "schedule_type": "NONE",
            "executor_route_strategy": "FIRST", "executor_handler": "ok", "glue_type": "BEAN",
            "executor_param": params})
    };
    let big = "x".repeat(600 * 1024);
    let body = |jobs: Value, options: Value| {
        json!({"source": "xxl-job:elsewhere:3306/big", "dry_run": true, "options": options,
            "snapshot": {"groups": [{"id": 10, "app_name": "billing"}], "jobs": jobs}})
    };
    let (status, report) = app
        .call(
            Method::POST,
            "/api/imports/xxl-job",
            Some(body(json!([job(1, &big)]), json!({}))),
        )
        .await;
    assert_eq!(
        status,
        200,
        "{}",
        report.to_string().chars().take(500).collect::<String>()
    );
    let row = &report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["kind"] == "JOB")
        .unwrap();
    assert_eq!(row["action"], "REFUSE");
    assert!(
        row["reason"]
            .as_str()
            .unwrap()
            .contains("params is 614400 bytes long; the limit is 65536 bytes"),
        "{row}"
    );
    let (status, answer) = app
        .call(
            Method::POST,
            "/api/imports/xxl-job",
            Some(body(json!([job(1, ""), job(1, "")]), json!({}))),
        )
        .await;
    assert_eq!(
        (status, answer["error"].clone()),
        (
            400,
            json!("the snapshot lists job 1 twice: ids are unique in XXL-JOB's tables")
        )
    );
    let (status, answer) = app
        .call(
            Method::POST,
            "/api/imports/xxl-job",
            Some(body(json!([]), json!({"time_zone": "Mars/Olympus"}))),
        )
        .await;
    assert_eq!(
        (status, answer["field"].clone()),
        (400, json!("time_zone")),
        "{answer}"
    );
}

/// The scheduled times of `kind` runs, in order, once `count` of them have a result (the
/// scheduler chose the times, whatever the results).
fn scheduled_runs(runs: &[Run], kind: TriggerType, count: usize) -> Option<Vec<i64>> {
    let of_kind: Vec<&Run> = runs.iter().filter(|run| run.trigger_type == kind).collect();
    if of_kind
        .iter()
        .filter(|run| run.handle_code.is_some())
        .count()
        < count
    {
        return None;
    }
    let mut times: Vec<i64> = of_kind.iter().map(|run| run.scheduled_at_ms).collect();
    times.sort_unstable();
    Some(times)
}

/// Started with an executor (signing with a key made for the imported app, as its operators
/// would make one), the cron job fires on even seconds and the FIX_RATE job every 3 s; a
/// weekday cron's next fire is 09:30 in Shanghai.
async fn fires_as_xxl_job_did(app: &mut TestApp, jobs: &HashMap<String, Value>) {
    app.create_executor_key("billing").await;
    app.start_executor("billing");
    let id = |name: &str| jobs[name]["id"].as_i64().unwrap();
    for name in ["every two seconds", "fixed rate", "route random"] {
        let (status, body) = app
            .call(Method::POST, &format!("/api/jobs/{}/start", id(name)), None)
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let weekday = get(app, &format!("/api/jobs/{}", id("route random"))).await;
    let next = weekday["next_fire_ms"].as_i64().unwrap();
    assert_eq!(
        next % 86_400_000,
        5_400_000,
        "09:30 in Shanghai is 01:30 UTC: {weekday}"
    );
    let cron = wait_for(Duration::from_secs(60), "three cron runs", || async {
        scheduled_runs(
            &app.runs(id("every two seconds")).await,
            TriggerType::Cron,
            3,
        )
    })
    .await;
    assert!(
        cron.iter().all(|ms| ms % 2_000 == 0),
        "even seconds: {cron:?}"
    );
    let rate = wait_for(Duration::from_secs(60), "three FIX_RATE runs", || async {
        scheduled_runs(&app.runs(id("fixed rate")).await, TriggerType::FixRate, 3)
    })
    .await;
    assert!(
        rate.windows(2).all(|pair| pair[1] - pair[0] == 3_000),
        "every 3 s: {rate:?}"
    );
    // The cron job's child fires after each success, as in XXL-JOB.
    let children = app.runs(id("fixed rate")).await;
    assert!(
        children
            .iter()
            .any(|run| run.trigger_type == TriggerType::Parent),
        "{children:?}"
    );
}

async fn redeems_a_reset_token(app: &TestApp, token: &str) {
    let reset = |password: &str| json!({"token": token, "password": password});
    let (status, body) = app
        .call_as(
            None,
            Method::POST,
            "/api/auth/password-reset",
            Some(reset("short")),
        )
        .await;
    assert_eq!(status, 400, "the password rules apply: {body}");
    let (status, body) = app
        .call_as(
            None,
            Method::POST,
            "/api/auth/password-reset",
            Some(reset("li's new password")),
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = app
        .call_as(
            None,
            Method::POST,
            "/api/auth/login",
            Some(json!({"name": "li", "password": "li's new password"})),
        )
        .await;
    assert_eq!(status, 201, "li logs in: {body}");
    let (status, body) = app
        .call_as(
            None,
            Method::POST,
            "/api/auth/password-reset",
            Some(reset("another password")),
        )
        .await;
    assert_eq!(status, 400, "a token works once: {body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("unknown, used or expired"),
        "{body}"
    );
    let (status, audit) = app
        .call(
            Method::GET,
            "/api/audit?target=/api/auth/password-reset",
            None,
        )
        .await;
    assert_eq!(status, 200);
    let statuses: Vec<i64> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].as_i64().unwrap())
        .collect();
    assert!(
        statuses.contains(&204) && statuses.contains(&400),
        "{audit}"
    );
}

/// Refused while an imported job runs; then everything the import made goes, and nothing
/// else.
async fn undoes_the_import(app: &TestApp, jobs: &HashMap<String, Value>, base: &[&str]) {
    let undo: Vec<&str> = base.iter().copied().chain(["--undo"]).collect();
    let (ok, stdout, stderr) = kadence(app, &undo).await;
    assert!(
        !ok && stderr.contains("RUNNING: stop them first"),
        "{stderr}\n{stdout}"
    );
    for name in ["every two seconds", "fixed rate", "route random"] {
        app.stop_job(jobs[name]["id"].as_i64().unwrap()).await;
    }
    let dry: Vec<&str> = undo.iter().copied().chain(["--dry-run"]).collect();
    let (ok, stdout, stderr) = kadence(app, &dry).await;
    assert!(ok, "undo dry run: {stderr}\n{stdout}");
    assert_row(&stdout, "JOB", 100, "REMOVE", "job ");
    assert_row(&stdout, "GROUP", 10, "REMOVE", "app billing");
    assert_row(&stdout, "USER", 10, "REMOVE", "user li");
    assert_eq!(
        jobs_by_name(app).await.len(),
        jobs.len() + 1,
        "a dry run removes nothing"
    );
    app.create_app("kept", 1).await;
    let mine = app
        .create_job(json!({"app": "kept", "handler": "ok", "schedule_type": "NONE"}))
        .await;
    let (ok, stdout, stderr) = kadence(app, &undo).await;
    assert!(ok, "undo: {stderr}\n{stdout}");
    assert!(
        stdout.contains("trigger topics of the apps removed stay in Kafka"),
        "{stdout}"
    );
    let left = jobs_by_name(app).await;
    assert_eq!(
        left.keys().collect::<Vec<_>>(),
        [&mine.name],
        "only the job the import did not make"
    );
    let apps = get(app, "/api/apps").await;
    assert_eq!(apps["items"].as_array().unwrap().len(), 1, "{apps}");
    let (_, users) = app.call(Method::GET, "/api/users", None).await;
    let names: Vec<&str> = users
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["admin"]);
    let (ok, _, stderr) = kadence(app, &undo).await;
    assert!(!ok && stderr.contains("nothing was imported"), "{stderr}");
}

/// Whether `token` is still good for a request.
async fn session_works(app: &TestApp, token: &str) -> bool {
    let (status, body) = app
        .call_as(Some(token), Method::GET, "/api/apps", None)
        .await;
    assert!(status == 200 || status == 401, "{status}: {body}");
    status == 200
}

/// The imported user `name` redeems their reset token and logs in; their session token.
async fn imported_user_logs_in(app: &TestApp, name: &str, reset_token: &str) -> String {
    let password = format!("{name}'s own password");
    let reset = json!({"token": reset_token, "password": password});
    let (status, body) = app
        .call_as(None, Method::POST, "/api/auth/password-reset", Some(reset))
        .await;
    assert_eq!(status, 204, "{body}");
    kadence_tests::session::login(app.api_url(), name, &password).await
}

/// `path` read with `token`.
async fn get_as(app: &TestApp, token: &str, path: &str) -> Value {
    let (status, body) = app.call_as(Some(token), Method::GET, path, None).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// The admin with `token` makes the first admin, `admin`, an `ADMIN` or a `MEMBER`.
async fn first_admin_made(app: &TestApp, token: &str, role: &str) {
    let path = "/api/users/admin/role";
    let role = Some(json!({ "role": role }));
    let (status, body) = app.call_as(Some(token), Method::PUT, path, role).await;
    assert_eq!(status, 200, "{body}");
}

/// The undo deletes the users it imported as `DELETE /api/users/{name}` does: under its
/// guards. With the imported admin `boss` the only enabled admin (the first admin demoted)
/// and undoing it, `boss` is kept as the last enabled admin, said in the report, while
/// everything else goes (the member `li` with their session at once); with the first admin
/// an admin again, `boss` is kept as the admin undoing; undone by the first admin, `boss`
/// goes and their session ends.
async fn an_undo_keeps_the_last_enabled_admin_and_the_admin_undoing(backend: Backend) {
    let xxl = XxlDatabase::create().await;
    let app = spawn_app(backend).await;
    let import = ["import", "xxl-job", "--from", xxl.url.as_str()];
    let (ok, stdout, stderr) = kadence(&app, &import).await;
    assert!(ok, "import: {stderr}\n{stdout}");
    let tokens = reset_tokens(&stdout);
    let boss = imported_user_logs_in(&app, "boss", &tokens["boss"]).await;
    let li = imported_user_logs_in(&app, "li", &tokens["li"]).await;
    first_admin_made(&app, &boss, "MEMBER").await;

    let undo: Vec<&str> = import.iter().copied().chain(["--undo"]).collect();
    let dry: Vec<&str> = undo.iter().copied().chain(["--dry-run"]).collect();
    let last_admin = "user boss is the last enabled admin and cannot be deleted";
    let (ok, stdout, stderr) = kadence_as(&app, &boss, &dry).await;
    assert!(ok, "undo dry run: {stderr}\n{stdout}");
    assert_row(&stdout, "USER", 11, "KEEP", last_admin);
    assert_row(&stdout, "USER", 10, "REMOVE", "user li");
    let (ok, stdout, stderr) = kadence_as(&app, &boss, &undo).await;
    assert!(ok, "undo: {stderr}\n{stdout}");
    assert_row(&stdout, "USER", 11, "KEEP", last_admin);
    assert_row(&stdout, "USER", 10, "REMOVE", "user li");
    assert_row(&stdout, "JOB", 100, "REMOVE", "job ");
    assert_row(&stdout, "GROUP", 10, "REMOVE", "app billing");
    let jobs = get_as(&app, &boss, "/api/jobs?limit=1000").await;
    assert_eq!(jobs["items"], json!([]), "every imported job went");
    assert_eq!(get_as(&app, &boss, "/api/apps").await["items"], json!([]));
    assert!(session_works(&app, &boss).await, "boss was kept");
    assert!(
        !session_works(&app, &li).await,
        "li's session ended with li"
    );
    let path = "/api/audit?target=/api/imports/xxl-job/undo";
    let trail = get_as(&app, &boss, path).await;
    assert_eq!(
        trail["items"][0]["details"]["users_deleted"],
        json!([{"user": "li", "role": "MEMBER", "status": "ENABLED"}]),
        "{trail}"
    );

    first_admin_made(&app, &boss, "ADMIN").await;
    let (ok, stdout, stderr) = kadence_as(&app, &boss, &undo).await;
    assert!(ok, "undo by boss: {stderr}\n{stdout}");
    assert_row(
        &stdout,
        "USER",
        11,
        "KEEP",
        "you cannot delete yourself (boss)",
    );
    assert!(session_works(&app, &boss).await, "boss was kept");

    let (ok, stdout, stderr) = kadence(&app, &undo).await;
    assert!(ok, "undo by the first admin: {stderr}\n{stdout}");
    assert_row(&stdout, "USER", 11, "REMOVE", "user boss");
    assert!(
        !session_works(&app, &boss).await,
        "boss's session ended with boss"
    );
    let (ok, _, stderr) = kadence(&app, &undo).await;
    assert!(!ok && stderr.contains("nothing was imported"), "{stderr}");
    app.shutdown().await;
}

/// The reader finds its columns by name: XXL-JOB 3.5's renamed ones (`name` for the group's
/// title and the job's description, a per-group `access_token`) and 2.2's `job_cron` (no
/// schedule type, no misfire strategy) read as 3.4's do.
async fn older_and_newer_xxl_job_schemas_are_read(backend: Backend) {
    let app = spawn_app(backend).await;
    let newer = XxlDatabase::create().await;
    newer
        .run_script(
            "ALTER TABLE xxl_job_group CHANGE `title` `name` VARCHAR(64) NOT NULL;
             ALTER TABLE xxl_job_group ADD COLUMN `access_token` VARCHAR(255) DEFAULT NULL;
             UPDATE xxl_job_group SET access_token = 'default_token' WHERE id = 10;
             ALTER TABLE xxl_job_info CHANGE `job_desc` `name` VARCHAR(255) NOT NULL;",
        )
        .await;
    let (ok, stdout, stderr) = kadence(
        &app,
        &["import", "xxl-job", "--from", &newer.url, "--dry-run"],
    )
    .await;
    assert!(ok, "3.5: {stderr}\n{stdout}");
    assert_row(&stdout, "JOB", 100, "CREATE", "every two seconds");
    assert_row(&stdout, "GROUP", 11, "CREATE", "app reports");
    assert!(stdout.contains("an executor access token"), "{stdout}");

    let older = XxlDatabase::create().await;
    older
        .run_script(
            "ALTER TABLE xxl_job_info ADD COLUMN `job_cron` VARCHAR(128) NOT NULL DEFAULT '';
             UPDATE xxl_job_info SET job_cron = schedule_conf WHERE schedule_type = 'CRON';
             DELETE FROM xxl_job_info WHERE schedule_type <> 'CRON';
             ALTER TABLE xxl_job_info DROP COLUMN `schedule_type`, DROP COLUMN `schedule_conf`,
                 DROP COLUMN `misfire_strategy`;",
        )
        .await;
    let (ok, stdout, stderr) = kadence(
        &app,
        &["import", "xxl-job", "--from", &older.url, "--dry-run"],
    )
    .await;
    assert!(ok, "2.2: {stderr}\n{stdout}");
    assert_row(&stdout, "JOB", 100, "CREATE", "every two seconds");
    assert_row(&stdout, "JOB", 115, "REFUSE", "never fires");
    let rows_of_101 = stdout.lines().filter(|line| {
        let words: Vec<&str> = line.split_whitespace().take(2).collect();
        words == ["JOB", "101"]
    });
    assert_eq!(rows_of_101.count(), 0, "the FIX_RATE job is gone: {stdout}");
    assert!(
        stdout.contains("child job 101 does not exist in XXL-JOB"),
        "{stdout}"
    );
    app.shutdown().await;
}

/// An admin issues a reset token with `kadence user reset-token`; the user redeems it in the
/// console's reset page (without a session) and logs in with the new password.
async fn a_reset_token_is_redeemed_in_the_console(backend: Backend) {
    let app = spawn_app(backend).await;
    let (status, body) = app
        .call(
            Method::POST,
            "/api/users",
            Some(json!({"name": "mei", "password": "forgotten password"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (ok, stdout, stderr) = kadence(&app, &["user", "reset-token", "mei", "--hours", "2"]).await;
    assert!(ok, "{stderr}");
    let token = stdout
        .lines()
        .find(|line| line.starts_with("kdr_"))
        .unwrap_or_else(|| panic!("no token in {stdout}"))
        .trim()
        .to_owned();
    let base = app.api_url().to_owned();
    let browser = crate::browser::Browser::start("en-US").await;
    browser.goto(&base).await;
    browser.click("#login-reset").await;
    browser.find("#reset-token").await;
    browser
        .goto(&format!("{base}/#/reset-password?token={token}"))
        .await;
    browser
        .type_into("#reset-password", "mei's new password")
        .await;
    browser.type_into("#reset-repeat", "something else").await;
    browser.click("#reset-submit").await;
    browser
        .wait_for_text("p.error", "the mismatch said", |text| {
            text.contains("differ")
        })
        .await;
    browser.screenshot("reset-password").await;
    browser
        .type_into("#reset-repeat", "mei's new password")
        .await;
    browser.click("#reset-submit").await;
    browser.find("#reset-done").await;
    browser.click("#reset-login").await;
    browser.type_into("#login-name", "mei").await;
    browser
        .type_into("#login-password", "mei's new password")
        .await;
    browser.click("#login-submit").await;
    browser.find("#logout").await;
    browser.close().await;
    let (status, _) = app
        .call_as(
            None,
            Method::POST,
            "/api/auth/password-reset",
            Some(json!({"token": token, "password": "yet another one"})),
        )
        .await;
    assert_eq!(status, 400, "the token was used up in the console");
    app.shutdown().await;
}

on_every_backend!(an_xxl_job_database_moves_over_and_back);

// The console page, the reader and the undo's guards (the store's `change_user`, tested on
// every backend in the store suite) are the subjects; the store's part is the test above's,
// on both stores.
on_sqlite_only!(
    a_reset_token_is_redeemed_in_the_console,
    an_undo_keeps_the_last_enabled_admin_and_the_admin_undoing,
    older_and_newer_xxl_job_schemas_are_read
);
