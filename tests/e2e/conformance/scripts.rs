//! Script jobs as PROTOCOL.md section 3 specifies them, on every executor that runs scripts
//! (the Rust SDK; an SDK that runs none, the reference Python executor, answers every script
//! trigger with the refusal of section 4 instead): the interpreter the glue type names, the
//! arguments `params shard_index shard_total`, the log line that opens the run and then every
//! line of standard output and standard error, the exit code's result, and the message for an
//! interpreter that is not installed. The executor trusts the scheduler's key, as one that
//! runs scripts must.

use kadence_scheduler::domain::model::Run;
use serde_json::{Value, json};

use super::{ExecutorProcess, Implementation};
use crate::helpers::{TestApp, spawn_app};
use kadence_tests::fixtures::Backend;

/// A shell script that says what it was given and fails with code 3; a PowerShell script on
/// a machine without `pwsh`.
async fn a_script_job_runs_as_the_protocol_says(executor: Implementation) {
    let app = spawn_app(Backend::Sqlite).await;
    app.create_app("glue", 1).await;
    let key = app.signing_public_key().await;
    let root = tempfile::tempdir().unwrap();
    let script_dir = root.path().join("scripts");
    let script_dir = script_dir.to_str().unwrap();
    let mut environment = vec![("KADENCE_TRUSTED_KEYS", key.as_str())];
    if executor.runs_scripts() {
        environment.extend([("KADENCE_SCRIPTS", "1"), ("KADENCE_SCRIPT_DIR", script_dir)]);
    }
    let _process =
        ExecutorProcess::start_with(executor, &app, "glue", "glue-1", &environment).await;
    app.wait_for_executors("glue", 1, 1).await;

    let shell = script_run(
        &app,
        json!({"glue_type": "GLUE_SHELL", "params": "two words",
            "glue_source": "echo \"params=$1 shard=$2/$3 args=$#\"\necho 'to stderr' >&2\nexit 3\n"}),
    )
    .await;
    if !executor.runs_scripts() {
        assert_eq!(
            (shell.handle_code, shell.handle_msg.as_deref()),
            (
                Some(500),
                Some(
                    "executor glue-1 does not run scripts (GLUE_SHELL): script handlers are \
                     switched off"
                )
            )
        );
        return app.shutdown().await;
    }
    assert_eq!(
        (shell.handle_code, shell.handle_msg.as_deref()),
        (Some(500), Some("script exited with code 3"))
    );
    let log = crate::scripts::log_of(&app, &shell, 3).await;
    assert!(
        log[0].starts_with("[kadence] running GLUE_SHELL version ")
            && log[0].ends_with(" with bash"),
        "the opening line: {log:?}"
    );
    let mut output = log[1..].to_vec();
    output.sort();
    assert_eq!(
        output,
        ["params=two words shard=0/1 args=3", "to stderr"],
        "params as one argument, then the shard's index and total; stdout and stderr: {log:?}"
    );

    // A machine with PowerShell installed runs it instead; this one checks the message.
    if on_path("pwsh") {
        return app.shutdown().await;
    }
    let missing = script_run(
        &app,
        json!({"glue_type": "GLUE_POWERSHELL", "glue_source": "Write-Output 'hello'"}),
    )
    .await;
    assert_eq!(
        missing.handle_msg.as_deref(),
        Some(
            "interpreter \"pwsh\" for GLUE_POWERSHELL is not installed on this executor (not \
             found on PATH)"
        ),
        "{missing:?}"
    );
    app.shutdown().await;
}

/// Whether `program` is found on `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Creates a script job of app `glue` with `fields`, triggers it once and returns its
/// finished run.
async fn script_run(app: &TestApp, fields: Value) -> Run {
    let mut body = json!({"app": "glue", "handler": "script", "schedule_type": "NONE"});
    for (key, value) in fields.as_object().unwrap() {
        body[key] = value.clone();
    }
    crate::scripts::finished_run(app, body).await
}

on_every_executor!(a_script_job_runs_as_the_protocol_says);
