//! Script handlers: XXL-JOB's GLUE_SHELL, GLUE_PYTHON, GLUE_NODEJS, GLUE_PHP and
//! GLUE_POWERSHELL. The script travels in the trigger (`glue_source`, versioned by
//! `glue_updated_at_ms`); no handler is registered for it.
//!
//! A run writes the source to a file of its own, `{script_dir}/{job id}_{version}_{run}.{ext}`
//! (XXL-JOB's naming, plus a random part: concurrent runs never share or half-read a file),
//! readable by this user only (0600) and deleted when the run ends, then runs `interpreter
//! file params shard_index shard_total` — XXL-JOB's arguments — in a **process group of its
//! own**. The script directory is private ([`prepare_script_dir`], checked when the executor
//! is built): a directory another local user made in advance, or one open to others, could
//! let them read, swap or plant the scripts the executor runs, so the executor refuses it. Every line the script writes to stdout or stderr goes to the
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
    let file = ScriptFile(script_dir.join(format!(
        "{}_{}_{}.{extension}",
        trigger.job_id,
        trigger.glue_updated_at_ms.unwrap_or(0),
        uuid::Uuid::new_v4().simple()
    )));
    write_script(&file.0, source).await.map_err(|error| {
        JobError::new(format!(
            "cannot write the script to {}: {error}",
            file.0.display()
        ))
    })?;
    let mut command = Command::new(program);
    command
        .arg(&file.0)
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

/// Writes `source` to `file`, a new file (never one that exists: a name planted there is
/// refused, not followed) readable and writable by this user only.
async fn write_script(file: &Path, source: &str) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut written = options.open(file).await?;
    written.write_all(source.as_bytes()).await?;
    written.flush().await
}

/// A run's script file, deleted when the run ends however it ends (the run's task is
/// aborted on timeout and kill, which drops it).
struct ScriptFile(PathBuf);

impl Drop for ScriptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Makes `dir` the executor's private script directory, or says why it cannot be. A missing
/// directory is created with mode 0700 (its parents as usual). One that exists must be a
/// directory, not a symbolic link, owned by this process's user and closed to everyone else
/// (no group or other permission bits): otherwise another local user could read the scripts
/// (which may hold credentials), or replace one between its writing and its run.
pub(crate) fn prepare_script_dir(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match builder.create(dir) {
        Ok(()) => return Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => {
            return Err(format!(
                "cannot create the script directory {shown}: {error}"
            ));
        }
    }
    let found = std::fs::symlink_metadata(dir)
        .map_err(|error| format!("cannot inspect the script directory {shown}: {error}"))?;
    if !found.file_type().is_dir() {
        return Err(format!(
            "the script directory {shown} is not a directory (a symbolic link or a file is \
             there): remove it, or choose another with script_dir"
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let me = nix::unistd::geteuid().as_raw();
        if found.uid() != me {
            return Err(format!(
                "the script directory {shown} belongs to user id {}, not to this executor's \
                 ({me}): another user made it, so it cannot hold the scripts this executor \
                 runs; remove it, or choose another with script_dir",
                found.uid()
            ));
        }
        let mode = found.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "the script directory {shown} is open to other users (mode {mode:o}): make it \
                 0700 (chmod 700), or choose another with script_dir"
            ));
        }
    }
    Ok(())
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

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_missing_script_directory_is_made_private() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("nested").join("scripts");
        prepare_script_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        prepare_script_dir(&dir).expect("a private one of ours is taken as it is");
    }

    #[test]
    fn a_script_directory_open_to_others_or_a_link_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refusal = prepare_script_dir(&open).unwrap_err();
        assert!(
            refusal.contains("open to other users (mode 777)"),
            "{refusal}"
        );

        let private = root.path().join("private");
        prepare_script_dir(&private).unwrap();
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&private, &link).unwrap();
        let refusal = prepare_script_dir(&link).unwrap_err();
        assert!(refusal.contains("not a directory"), "{refusal}");
    }

    #[tokio::test]
    async fn a_script_file_is_new_and_private_and_gone_after_its_run() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("1_0_x.sh");
        {
            let file = ScriptFile(path.clone());
            write_script(&file.0, "echo hi\n").await.unwrap();
            assert_eq!(mode(&path), 0o600);
            let again = write_script(&file.0, "echo planted\n").await.unwrap_err();
            assert_eq!(again.kind(), std::io::ErrorKind::AlreadyExists);
        }
        assert!(!path.exists(), "deleted when the run ends");
    }
}
