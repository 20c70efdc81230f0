//! Job logs: the lines a run writes through [`JobLogger`] (and a script's output) go to
//! `{prefix}.logs` as `LogRecord`s, keyed by trigger id, numbered from 1 per run.
//!
//! Lines are buffered and shipped every [`FLUSH_INTERVAL`] while the run goes (the first time
//! an interval after its first line, so a short run's lines are one record), and once more
//! when it ends — before its result is published, so a reader who sees the run finished also
//! sees all of its lines (XXL-JOB's rolling log). "Before" means acknowledged: each shipping
//! hands every record it makes to the producer at once and waits for the broker's answer to
//! all of them, so the result is produced only after every line record of the run is on the
//! broker. A record the producer could not deliver within its own retries (its delivery
//! timeout) is dropped, logged and counted (`kadence_executor_log_records_dropped_total`):
//! the lines are lost, and the result waits no longer than that timeout. Shipping starts
//! with a run's first line: a run that logs nothing costs no timer and no wait (most runs of
//! most jobs). A run keeps at most `max_log_lines` lines (builder option, default 10 000) of
//! at most [`MAX_LINE_BYTES`] each; what is cut is said in a last line, never silently.
//!
//! A record holds at most 500 lines and at most [`MAX_RECORD_LINE_BYTES`] (256 KiB) of line
//! text, whichever comes first: 500 lines of 4 KiB would make a 2 MB record, over Kafka's
//! default limits of 1 MB (the broker's `message.max.bytes`, the producer's
//! `max.request.size`), which the producer refuses. Each record names its run: the trigger,
//! and when this run of it started (`run_started_at_ms`, the result's `started_at_ms`), so
//! that the lines of a trigger run twice (handed back in a rebalance, its executor crashed)
//! stay apart in the scheduler.
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
/// Line text per `LogRecord` at most, in UTF-8 bytes (see the module docs): with the other
/// fields and the Avro overhead a record stays far below Kafka's default 1 MB limits.
pub const MAX_RECORD_LINE_BYTES: usize = 256 * 1024;

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
        let mut bytes = 0;
        let take = (buffer.pending.iter().take(LINES_PER_RECORD))
            .take_while(|line| {
                bytes += line.len();
                bytes <= MAX_RECORD_LINE_BYTES
            })
            .count()
            // A line is far shorter than a record's text, but a record never holds nothing.
            .max(1);
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
    /// When this run started, ms since the epoch: names the run in its records.
    run_started_at_ms: i64,
    sink: LogSink,
    give_up: CancellationToken,
    /// The consumer loop's clock, which dates each record.
    clock: Clock,
}

impl LogShipper {
    pub(crate) fn new(
        logger: JobLogger,
        trigger: Arc<TriggerRecord>,
        executor_id: String,
        run_started_at_ms: i64,
        (sink, clock): (LogSink, Clock),
        give_up: CancellationToken,
    ) -> LogShipper {
        LogShipper {
            logger,
            trigger,
            executor_id,
            run_started_at_ms,
            sink,
            give_up,
            clock,
        }
    }

    /// Ships what is pending, and returns once the broker acknowledged every record of it;
    /// `finishing` adds the dropped-lines note. A record that cannot be delivered is logged,
    /// counted and lost (a log is not worth holding the run's result).
    pub(crate) async fn flush(&self, finishing: bool) {
        let publisher = match &self.sink {
            LogSink::Topic(publisher) => publisher,
            LogSink::Tracing => {
                while let Some((first_line, lines)) = self.logger.take(finishing) {
                    self.trace(first_line, &lines);
                }
                return;
            }
        };
        // Every record is enqueued before any is waited for: the producer sends them in
        // few requests, in order (one key, one partition, an idempotent producer), and the
        // wait is one delivery timeout at most, however many records.
        let mut deliveries = Vec::new();
        while let Some((first_line, lines)) = self.logger.take(finishing) {
            let record = self.record(first_line, lines);
            match publisher.enqueue_log(&record, &self.give_up).await {
                Ok(delivery) => deliveries.push((record, delivery)),
                Err(error) => publisher.log_dropped(&record, &error),
            }
        }
        for (record, delivery) in deliveries {
            let delivered = tokio::select! {
                delivered = delivery => delivered,
                () = self.give_up.cancelled() => {
                    publisher.log_dropped(&record, &"the executor stopped waiting (hard stop)");
                    continue;
                }
            };
            match delivered {
                Ok(Ok(_)) => {}
                Ok(Err((error, _))) => publisher.log_dropped(&record, &error),
                Err(_) => publisher.log_dropped(&record, &"the producer was dropped"),
            }
        }
    }

    /// The record of `lines`, numbered from `first_line`.
    fn record(&self, first_line: i64, lines: Vec<String>) -> LogRecord {
        LogRecord {
            trigger_id: self.trigger.trigger_id.clone(),
            log_id: self.trigger.log_id,
            job_id: self.trigger.job_id,
            executor_id: self.executor_id.clone(),
            first_line,
            lines,
            emitted_at_ms: self.clock.now_ms(),
            run_started_at_ms: Some(self.run_started_at_ms),
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

    /// 1 000 lines of 4 000 bytes: a record carries at most 256 KiB of them (65 lines), not
    /// 500 (2 MB, over Kafka's default 1 MB limits); every line ships once, in order.
    #[test]
    fn a_record_holds_at_most_256_kib_of_line_text() {
        let logger = JobLogger::new(DEFAULT_MAX_LOG_LINES);
        for number in 1..=1_000 {
            logger.log(format!("line {number} {}", "x".repeat(3_990)));
        }
        let mut next = 1;
        while let Some((first, lines)) = logger.take(true) {
            assert_eq!(first, next, "records follow each other without gaps");
            let bytes: usize = lines.iter().map(String::len).sum();
            assert!(bytes <= MAX_RECORD_LINE_BYTES, "{bytes} bytes of lines");
            assert!(lines.len() == 65 || next + lines.len() as i64 == 1_001);
            for (number, line) in (first..).zip(&lines) {
                assert!(line.starts_with(&format!("line {number} ")));
            }
            next += lines.len() as i64;
        }
        assert_eq!(next, 1_001);
        // Short lines: 500 to a record.
        for _ in 0..501 {
            logger.log("short");
        }
        assert_eq!(logger.take(false).map(|(_, lines)| lines.len()), Some(500));
        assert_eq!(logger.take(false).map(|(_, lines)| lines.len()), Some(1));
    }

    /// Each record names its run: its trigger and when this run of it started, the result's
    /// `started_at_ms`, so that two runs of one trigger stay apart.
    #[test]
    fn records_name_the_run_they_belong_to() {
        let trigger = Arc::new(crate::testing::TestWorker::trigger("h").record());
        let shipper = LogShipper::new(
            JobLogger::new(10),
            Arc::clone(&trigger),
            "exec-1".into(),
            1_767_225_600_123,
            (LogSink::Tracing, Clock::System),
            CancellationToken::new(),
        );
        let record = shipper.record(3, vec!["three".into()]);
        assert_eq!(record.run_started_at_ms, Some(1_767_225_600_123));
        assert_eq!(
            (&record.trigger_id, record.log_id, record.first_line),
            (&trigger.trigger_id, trigger.log_id, 3)
        );
        assert_eq!(record.executor_id, "exec-1");
    }

    #[test]
    fn long_lines_are_cut_at_a_character_boundary() {
        let line = "é".repeat(MAX_LINE_BYTES);
        let cut = bound_line(&line);
        assert!(cut.starts_with(&"é".repeat(MAX_LINE_BYTES / 2)));
        assert!(cut.ends_with(&format!("[cut at {MAX_LINE_BYTES} bytes]")));
    }
}
