//! How the CLI shows times, lists and a job's status, and [`outln!`], the one way it writes
//! to standard output.
//!
//! `println!` panics when standard output is a pipe whose reader has gone
//! (`kadence job list | head -1`: Rust ignores SIGPIPE, so the write fails with EPIPE).
//! `outln!` returns that as [`OutputError::Closed`], the command stops where it is, and `main`
//! exits quietly with success, as `head` meant. The other way out, restoring SIGPIPE's default
//! action at start, needs `unsafe` (which the workspace forbids) and would also let a write
//! to a dead socket kill `kadence serve`. `#![deny(clippy::print_stdout)]` in the module keeps
//! `println!` out.

use std::io::{ErrorKind, Write as _};

use chrono::{DateTime, SecondsFormat, Utc};

use crate::http::api::JobView;

/// Why a line could not be written to standard output.
#[derive(Debug, thiserror::Error)]
pub(super) enum OutputError {
    /// The reader closed its end of the pipe: it has read all it wanted, not a failure.
    #[error("standard output was closed by its reader")]
    Closed,
    /// Any other failure, e.g. a full disk under a redirection.
    #[error("cannot write to standard output: {0}")]
    Write(#[source] std::io::Error),
}

/// `println!` that returns a closed standard output as an error instead of panicking; use it
/// with `?`.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::print::write_line(format_args!($($arg)*))
    };
}
pub(super) use outln;

/// Writes one line to standard output (the body of [`outln!`]).
pub(super) fn write_line(line: std::fmt::Arguments<'_>) -> Result<(), OutputError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_fmt(line)
        .and_then(|()| stdout.write_all(b"\n"))
        .map_err(|error| match error.kind() {
            ErrorKind::BrokenPipe => OutputError::Closed,
            _ => OutputError::Write(error),
        })
}

pub(super) fn describe_status(job: &JobView) -> String {
    match job.next_fire_ms {
        Some(next) => format!("{}, next fire {}", job.status, format_ms(Some(next))),
        None => job.status.clone(),
    }
}

pub(super) fn format_ms(ms: Option<i64>) -> String {
    ms.and_then(DateTime::<Utc>::from_timestamp_millis)
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|| "-".to_owned())
}

/// Items joined with commas, or "-" for none.
pub(super) fn join_or_dash<T: std::fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "-".to_owned();
    }
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
