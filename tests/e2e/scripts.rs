//! Script handlers (XXL-JOB's GLUE_* types) on the real broker: the script travels in the
//! trigger, runs with params and shard arguments, its output becomes the run's log, and its
//! whole process group dies on timeout. The executors trust the scheduler's signing key, as
//! an executor that runs scripts must.
//!
//! Run once, on SQLite: scripts run in the executor. The store only keeps the script, and
//! its versions are checked on both stores (the store suite's
//! `the_whole_job_model_round_trips_and_keeps_30_script_versions`, the e2e
//! `editing_jobs_follows_xxl_job_rules`).

use std::time::Duration;

use kadence_scheduler::domain::model::Run;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};
use kadence_tests::fixtures::{Backend, unique, wait_for};

/// Creates a script job of `glue_type` on app `scripts` with `extra` fields; triggers it once
/// and returns its finished run.
async fn run_script(app: &TestApp, glue_type: &str, source: &str, extra: Value) -> Run {
    let mut body = json!({"app": "scripts", "handler": "script", "schedule_type": "NONE",
        "glue_type": glue_type, "glue_source": source, "params": "hello"});
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    finished_run(app, body).await
}

/// Creates the job `body` describes, triggers it once and returns its finished run.
pub(crate) async fn finished_run(app: &TestApp, body: Value) -> Run {
    let job = app.create_job(body).await;
    let trigger_id = app.trigger(job.id, None).await;
    wait_for(
        Duration::from_secs(60),
        "the script run finished",
        || async {
            app.runs(job.id)
                .await
                .into_iter()
                .find(|run| run.trigger_id.as_str() == trigger_id && run.handle_code.is_some())
        },
    )
    .await
}

/// The run's whole log, once its lines have all been stored.
pub(crate) async fn log_of(app: &TestApp, run: &Run, lines: usize) -> Vec<String> {
    wait_for(Duration::from_secs(20), "the script's log", || async {
        let (status, body) = app
            .call(
                reqwest::Method::GET,
                &format!("/api/runs/{}/log", run.log_id),
                None,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let log: Vec<String> = serde_json::from_value(body["lines"].clone()).unwrap();
        (log.len() >= lines).then_some(log)
    })
    .await
}

/// Shell and Python scripts get params, shard index and shard total as arguments; their
/// stdout and stderr lines are the run's log; a non-zero exit code is a failure naming it.
/// Each runs from a file only its user may read, in a directory only its user may enter,
/// deleted when the run ends.
async fn shell_and_python_scripts_run_and_log_their_output(backend: Backend) {
    use std::os::unix::fs::PermissionsExt;
    let mut app = spawn_app(backend).await;
    app.create_app("scripts", 1).await;
    let key = app.signing_public_key().await;
    let root = tempfile::tempdir().unwrap();
    let script_dir = root.path().join("scripts");
    let dir = script_dir.clone();
    app.start_executor_with("scripts", |builder| {
        builder.scripts(true).trusted_key(key).script_dir(dir)
    });

    let shell = run_script(
        &app,
        "GLUE_SHELL",
        "echo \"params=$1 shard=$2/$3\"\necho 'to stderr' >&2\nstat -c 'mode %a' \"$0\"\n",
        json!({}),
    )
    .await;
    assert_eq!(shell.handle_code, Some(200), "{shell:?}");
    let log = log_of(&app, &shell, 4).await;
    assert!(log.contains(&"mode 600".to_owned()), "{log:?}");
    assert!(
        log[0].starts_with("[kadence] running GLUE_SHELL"),
        "{log:?}"
    );
    assert!(
        log.contains(&"params=hello shard=0/1".to_owned()),
        "{log:?}"
    );
    assert!(log.contains(&"to stderr".to_owned()), "{log:?}");

    let python = run_script(
        &app,
        "GLUE_PYTHON",
        "import sys\nprint('python', sys.argv[1:])\n",
        json!({}),
    )
    .await;
    assert_eq!(python.handle_code, Some(200), "{python:?}");
    let log = log_of(&app, &python, 2).await;
    assert_eq!(log[1], "python ['hello', '0', '1']", "{log:?}");

    let failing = run_script(
        &app,
        "GLUE_SHELL",
        "echo about to fail\nexit 3\n",
        json!({}),
    )
    .await;
    assert_eq!(
        (failing.handle_code, failing.handle_msg.as_deref()),
        (Some(500), Some("script exited with code 3"))
    );
    let mode = std::fs::metadata(&script_dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the script directory is private");
    let left: Vec<_> = std::fs::read_dir(&script_dir).unwrap().collect();
    assert!(
        left.is_empty(),
        "every script file is deleted after its run: {left:?}"
    );
    app.shutdown().await;
}

/// A timeout kills the script's whole process group, children included.
async fn a_timed_out_script_takes_its_children_with_it(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("scripts", 1).await;
    let key = app.signing_public_key().await;
    app.start_executor_with("scripts", |builder| builder.scripts(true).trusted_key(key));
    let pid_file = std::env::temp_dir().join(unique("kadence-child-pid"));
    let source = format!(
        "sleep 300 &\necho $! > {}\necho started a child\nwait\n",
        pid_file.display()
    );
    let run = run_script(&app, "GLUE_SHELL", &source, json!({"timeout_seconds": 2})).await;
    assert_eq!(run.handle_code, Some(502), "{run:?}");
    let pid = std::fs::read_to_string(&pid_file).expect("the script wrote its child's pid");
    let pid = pid.trim();
    wait_for(
        Duration::from_secs(10),
        "the child process gone",
        || async { (!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(()) },
    )
    .await;
    let _ = std::fs::remove_file(&pid_file);
    app.shutdown().await;
}

/// A missing interpreter and an executor with scripts switched off both give a failure that
/// says why.
async fn scripts_that_cannot_run_fail_clearly(backend: Backend) {
    let mut app = spawn_app(backend).await;
    app.create_app("scripts", 1).await;
    let key = app.signing_public_key().await;
    app.start_executor_with("scripts", |builder| builder.scripts(true).trusted_key(key));
    let on_path = |program: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
    };
    let missing = [("GLUE_POWERSHELL", "pwsh"), ("GLUE_PHP", "php")]
        .into_iter()
        .find(|(_, program)| !on_path(program));
    if let Some((glue_type, program)) = missing {
        let run = run_script(&app, glue_type, "echo hi\n", json!({})).await;
        assert_eq!(run.handle_code, Some(500), "{run:?}");
        let message = run.handle_msg.unwrap();
        assert!(
            message.starts_with(&format!("interpreter \"{program}\" for "))
                && message.ends_with("is not installed on this executor (not found on PATH)"),
            "{message}"
        );
    }
    app.stop_executors().await;

    // Scripts are off unless the executor says otherwise.
    app.start_executor("scripts");
    let run = run_script(&app, "GLUE_SHELL", "echo never\n", json!({})).await;
    assert_eq!(run.handle_code, Some(500), "{run:?}");
    let message = run.handle_msg.unwrap();
    assert!(
        message.ends_with("does not run scripts (GLUE_SHELL): script handlers are switched off"),
        "{message}"
    );
    app.shutdown().await;
}

on_sqlite_only!(
    shell_and_python_scripts_run_and_log_their_output,
    a_timed_out_script_takes_its_children_with_it,
    scripts_that_cannot_run_fail_clearly,
);
