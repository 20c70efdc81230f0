//! Script handlers: XXL-JOB's GLUE_SHELL, GLUE_PYTHON, GLUE_NODEJS, GLUE_PHP and
//! GLUE_POWERSHELL. The script travels in the trigger (`glue_source`, versioned by
//! `glue_updated_at_ms`); no handler is registered for it.
//!
//! A run writes the source to `{script_dir}/{job id}_{version}.{ext}` (XXL-JOB's naming;
//! written to a temporary name and renamed, so concurrent runs never read half a file), then
//! runs `interpreter file params shard_index shard_total` — XXL-JOB's arguments — in a
//! **process group of its own**. Every line the script writes to stdout or stderr goes to the
//! run's log. Exit code 0 is success; any other code, or death by a signal, is a failure that
//! says which.
//!
//! The run owns its process group: on timeout, kill, shutdown *and* when the script exits, the
//! whole group is killed with SIGKILL, so a child the script left behind (`sleep 300 &`) never
//! outlives the run nor holds its output open. An interpreter that is not installed is a
//! failure naming it. Executors that must not run code carried by triggers switch scripts off
//! with [`ExecutorBuilder::scripts`](crate::ExecutorBuilder::scripts).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kadence_schemas::GlueType;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;

use crate::context::{JobContext, JobError, JobResult};
use crate::handler::HandlerFn;

/// How long output is still read after the script exited (its group is killed first).
const OUTPUT_GRACE: Duration = Duration::from_secs(1);

/// How each glue type is run: interpreter and file extension.
pub(crate) fn interpreter(glue_type: GlueType) -> Option<(&'static str, &'static str)> {
    match glue_type {
        GlueType::Bean => None,
        GlueType::GlueShell => Some(("bash", "sh")),
        GlueType::GluePython => Some(("python3", "py")),
        GlueType::GlueNodejs => Some(("node", "js")),
        GlueType::GluePhp => Some(("php", "php")),
        GlueType::GluePowershell => Some(("pwsh", "ps1")),
    }
}

/// The handler that runs every script trigger, writing scripts under `script_dir`.
pub(crate) fn script_handler(script_dir: PathBuf) -> HandlerFn {
    let script_dir = Arc::new(script_dir);
    Arc::new(move |ctx| run_script(ctx, Arc::clone(&script_dir)).boxed())
}

async fn run_script(ctx: JobContext, script_dir: Arc<PathBuf>) -> JobResult {
    let trigger = ctx.trigger();
    let (program, extension) = interpreter(trigger.glue_type).ok_or_else(|| {
        JobError::new("a BEAN trigger is not a script; it needs a registered handler")
    })?;
    let source = trigger.glue_source.as_deref().ok_or_else(|| {
        JobError::new(format!(
            "{} trigger carries no script source (glue_source is empty)",
            trigger.glue_type
        ))
    })?;
    let file = script_dir.join(format!(
        "{}_{}.{extension}",
        trigger.job_id,
        trigger.glue_updated_at_ms.unwrap_or(0)
    ));
    write_script(&file, source).await.map_err(|error| {
        JobError::new(format!(
            "cannot write the script to {}: {error}",
            file.display()
        ))
    })?;
    let mut command = Command::new(program);
    command
        .arg(&file)
        .arg(ctx.params())
        .arg(ctx.shard_index().to_string())
        .arg(ctx.shard_total().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command.spawn().map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            JobError::new(format!(
                "interpreter {program:?} for {} is not installed on this executor (not found \
                 on PATH)",
                trigger.glue_type
            ))
        } else {
            JobError::new(format!("cannot start {program}: {error}"))
        }
    })?;
    let leader = child.id();
    // Dropped on every way out of this function — timeout and kill abort the run's task —
    // and kills the whole group.
    let _group = ProcessGroup(leader);
    ctx.log(format!(
        "[kadence] running {} version {} with {program}",
        trigger.glue_type,
        trigger.glue_updated_at_ms.unwrap_or(0)
    ));
    let stdout = forward_lines(child.stdout.take(), ctx.clone());
    let stderr = forward_lines(child.stderr.take(), ctx.clone());
    let status = child
        .wait()
        .await
        .map_err(|error| JobError::new(format!("cannot wait for the script: {error}")))?;
    // The script is done; whatever it left running in its group goes with it, so that no
    // leftover holds the output open.
    kill_group(leader);
    let _ = tokio::time::timeout(OUTPUT_GRACE, futures::future::join(stdout, stderr)).await;
    if status.success() {
        return Ok(());
    }
    match status.code() {
        Some(code) => Err(JobError::new(format!("script exited with code {code}"))),
        None => Err(JobError::new(format!(
            "script was stopped by a signal ({status})"
        ))),
    }
}

/// Writes `source` to `file` through a temporary name, so a concurrent run never reads a
/// partly written script.
async fn write_script(file: &Path, source: &str) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    let temporary = file.with_extension(format!("{}.tmp", uuid::Uuid::new_v4().simple()));
    tokio::fs::write(&temporary, source).await?;
    tokio::fs::rename(&temporary, file).await
}

/// Sends every line of `output` to the run's log.
async fn forward_lines(output: Option<impl AsyncRead + Unpin>, ctx: JobContext) {
    let Some(output) = output else { return };
    let mut lines = BufReader::new(output).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        ctx.log(line);
    }
}

/// A script's process group, killed when dropped.
struct ProcessGroup(Option<u32>);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// Sends SIGKILL to the process group led by `leader` (gone already is fine).
fn kill_group(leader: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = leader.and_then(|pid| i32::try_from(pid).ok()) {
        use nix::sys::signal::{Signal, killpg};
        use nix::unistd::Pid;
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
    #[cfg(not(unix))]
    let _ = leader;
}
