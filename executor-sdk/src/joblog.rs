//! Job logs: the lines a run writes through [`JobLogger`] (and a script's output) go to
//! `{prefix}.logs` as `LogRecord`s, keyed by trigger id, numbered from 1 per run.
//!
//! Lines are buffered and shipped every [`FLUSH_INTERVAL`] while the run goes, and once more
//! when it ends — before its result is published, so a reader who sees the run finished also
//! sees all of its lines (XXL-JOB's rolling log). Shipping starts with a run's first line: a
//! run that logs nothing costs no timer and no wait (most runs of most jobs). A run keeps at most `max_log_lines` lines
//! (builder option, default 10 000) of at most [`MAX_LINE_BYTES`] each; what is cut is said
//! in a last line, never silently.
//!
//! A shadow executor's runs ([`LogSink::Tracing`]) keep their lines out of `{prefix}.logs`:
//! they are keyed by trigger id, and the same trigger's production run writes there. Their
//! lines go to the executor's own `tracing` output instead, at debug level, numbered alike.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kadence_schemas::{LogRecord, TriggerRecord};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::publisher::Publisher;

/// How often a running run's new lines are shipped.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(250);
/// Longest line kept, in bytes; longer lines are cut at a character boundary.
pub const MAX_LINE_BYTES: usize = 4096;
/// Lines a run keeps unless the builder says otherwise.
pub(crate) const DEFAULT_MAX_LOG_LINES: usize = 10_000;
/// Lines per `LogRecord` at most.
const LINES_PER_RECORD: usize = 500;

#[derive(Default)]
struct Buffer {
    /// Lines written and not shipped yet.
    pending: Vec<String>,
    /// Number of the first pending line (1-based).
    next_line: i64,
    /// Lines kept so far.
    kept: usize,
    /// Lines dropped past the limit.
    dropped: u64,
}

/// Writes lines to the run's log. Cheap to clone; every clone writes to the same log.
#[derive(Clone)]
pub struct JobLogger {
    shared: Arc<Shared>,
    max_lines: usize,
}

struct Shared {
    buffer: Mutex<Buffer>,
    /// Told when lines wait to be shipped after none did: a run that never logs never starts
    /// shipping.
    written: Notify,
}

impl JobLogger {
    pub(crate) fn new(max_lines: usize) -> JobLogger {
        JobLogger {
            shared: Arc::new(Shared {
                buffer: Mutex::new(Buffer {
                    next_line: 1,
                    ..Buffer::default()
                }),
                written: Notify::new(),
            }),
            max_lines,
        }
    }

    /// Appends `line` (several if it contains newlines) to the run's log.
    pub fn log(&self, line: impl AsRef<str>) {
        let mut buffer = self.shared.buffer.lock().expect("job log lock");
        let was_empty = buffer.pending.is_empty() && buffer.dropped == 0;
        for line in line.as_ref().lines() {
            if buffer.kept >= self.max_lines {
                buffer.dropped += 1;
                continue;
            }
            buffer.kept += 1;
            buffer.pending.push(bound_line(line));
        }
        if was_empty && !(buffer.pending.is_empty() && buffer.dropped == 0) {
            self.shared.written.notify_one();
        }
    }

    /// Resolves once lines wait to be shipped (at once if some already do).
    pub(crate) async fn written(&self) {
        if self.has_unshipped() {
            return;
        }
        self.shared.written.notified().await
    }

    /// Whether lines (or the note on dropped ones) wait to be shipped.
    pub(crate) fn has_unshipped(&self) -> bool {
        let buffer = self.shared.buffer.lock().expect("job log lock");
        !buffer.pending.is_empty() || buffer.dropped > 0
    }

    /// Every line not shipped yet, with the note on dropped lines: what the shipping of a
    /// finished run sends.
    pub(crate) fn take_all(&self) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some((_, taken)) = self.take(true) {
            lines.extend(taken);
        }
        lines
    }

    /// Takes the pending lines: (number of the first, lines).
    fn take(&self, finishing: bool) -> Option<(i64, Vec<String>)> {
        let mut buffer = self.shared.buffer.lock().expect("job log lock");
        if finishing && buffer.dropped > 0 {
            let note = format!(
                "[kadence] {} more lines were dropped: a run keeps at most {} lines",
                buffer.dropped, self.max_lines
            );
            buffer.pending.push(note);
            buffer.dropped = 0;
        }
        if buffer.pending.is_empty() {
            return None;
        }
        let take = buffer.pending.len().min(LINES_PER_RECORD);
        let lines: Vec<String> = buffer.pending.drain(..take).collect();
        let first = buffer.next_line;
        buffer.next_line += lines.len() as i64;
        Some((first, lines))
    }
}

/// Cuts `line` to [`MAX_LINE_BYTES`] at a character boundary.
fn bound_line(line: &str) -> String {
    if line.len() <= MAX_LINE_BYTES {
        return line.to_owned();
    }
    let mut end = MAX_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [cut at {MAX_LINE_BYTES} bytes]", &line[..end])
}

/// Where a run's lines go.
#[derive(Clone)]
pub(crate) enum LogSink {
    /// `{prefix}.logs`, through the executor's publisher.
    Topic(Publisher),
    /// The executor's own `tracing` output, at debug level: a shadow executor's runs.
    Tracing,
}

/// Ships one run's lines.
pub(crate) struct LogShipper {
    logger: JobLogger,
    trigger: Arc<TriggerRecord>,
    executor_id: String,
    sink: LogSink,
    give_up: CancellationToken,
}

impl LogShipper {
    pub(crate) fn new(
        logger: JobLogger,
        trigger: Arc<TriggerRecord>,
        executor_id: String,
        sink: LogSink,
        give_up: CancellationToken,
    ) -> LogShipper {
        LogShipper {
            logger,
            trigger,
            executor_id,
            sink,
            give_up,
        }
    }

    /// Ships what is pending; `finishing` adds the dropped-lines note. A line that cannot be
    /// shipped is logged here and lost (a log is not worth holding the run's result).
    pub(crate) async fn flush(&self, finishing: bool) {
        while let Some((first_line, lines)) = self.logger.take(finishing) {
            let publisher = match &self.sink {
                LogSink::Topic(publisher) => publisher,
                LogSink::Tracing => {
                    self.trace(first_line, &lines);
                    continue;
                }
            };
            let record = LogRecord {
                trigger_id: self.trigger.trigger_id.clone(),
                log_id: self.trigger.log_id,
                job_id: self.trigger.job_id,
                executor_id: self.executor_id.clone(),
                first_line,
                lines,
                emitted_at_ms: Clock::System.now_ms(),
            };
            if let Err(error) = publisher.publish_log(&record, &self.give_up).await {
                tracing::warn!(trigger_id = %record.trigger_id, %error, first_line,
                    "cannot ship job log lines; they are lost");
            }
        }
    }

    /// Writes `lines`, numbered from `first_line`, to this executor's `tracing` output.
    fn trace(&self, first_line: i64, lines: &[String]) {
        let trigger_id = &self.trigger.trigger_id;
        for (number, line) in (first_line..).zip(lines) {
            tracing::debug!(%trigger_id, line = number, "shadow run log: {line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[tokio::test]
    async fn shipping_is_due_from_the_first_line_only() {
        let logger = JobLogger::new(1);
        assert!(!logger.has_unshipped());
        assert!(
            logger.written().now_or_never().is_none(),
            "a run that logs nothing never ships"
        );
        let waiting = tokio::spawn({
            let logger = logger.clone();
            async move { logger.written().await }
        });
        logger.log("one");
        waiting.await.unwrap();
        assert!(logger.has_unshipped());
        assert_eq!(logger.take(false), Some((1, vec!["one".to_owned()])));
        logger.log("two");
        assert!(
            logger.has_unshipped(),
            "a line past the limit leaves its note to ship"
        );
        assert!(logger.written().now_or_never().is_some());
    }

    #[test]
    fn lines_are_numbered_bounded_and_the_cut_is_said() {
        let logger = JobLogger::new(3);
        logger.log("one\ntwo");
        assert_eq!(
            logger.take(false),
            Some((1, vec!["one".to_owned(), "two".to_owned()]))
        );
        logger.log("three");
        logger.log("four");
        logger.log("five");
        assert_eq!(
            logger.take(true),
            Some((
                3,
                vec![
                    "three".to_owned(),
                    "[kadence] 2 more lines were dropped: a run keeps at most 3 lines".to_owned()
                ]
            ))
        );
        assert_eq!(logger.take(true), None);
    }

    #[test]
    fn long_lines_are_cut_at_a_character_boundary() {
        let line = "é".repeat(MAX_LINE_BYTES);
        let cut = bound_line(&line);
        assert!(cut.starts_with(&"é".repeat(MAX_LINE_BYTES / 2)));
        assert!(cut.ends_with(&format!("[cut at {MAX_LINE_BYTES} bytes]")));
    }
}
