//! The logs reader: stores the lines runs write, from `{prefix}.logs`, so that a person can
//! read a run's log from a given line on while it runs (XXL-JOB's rolling log:
//! `GET /api/runs/{log_id}/log?from_line=N`, `kadence job log <log id> --follow`).
//!
//! A [`LogsReader`] is a batch reader ([`crate::readers::batch`]): each batch's `LogRecord`s are
//! stored in one transaction, each record's lines as one chunk (one row; see
//! [`crate::store::LogChunk`]) and each record once, so redeliveries never duplicate a line;
//! at most `logs.max_lines_per_run` lines per run. Undecodable records go to the dead-letter
//! queue, and only then is the batch committed.
//!
//! It is history, not scheduling: before each batch it yields while scheduling falls behind
//! (see [`crate::engine::pressure`]); its records wait in their topic meanwhile.
//!
//! A trigger runs twice when its first run is handed back in a rebalance (cancelled without a
//! result) or its executor dies, and the partition's next owner, possibly the same executor,
//! runs it again: both runs number their lines from 1 under the same log id. `LogRecord` v2
//! says when the run started on its executor (`run_started_at_ms`, the run's result's
//! `started_at_ms`), and the lines are stored under it, so the runs stay apart; reading a
//! run's log shows the run that started last, the one whose result completes the run (a v1
//! record's lines count as started at 0, the oldest). Nothing is read to store a record: the
//! run start is part of the key the insert already skips repeats by. On a database or DLQ
//! error the batch is kept for the next step and nothing is committed past it.
//!
//! It joins its own group, `{prefix}.scheduler.logs`, so that a burst of log lines never
//! delays results, which have their own consumer.
//!
//! Every log record must be signed by an executor key (see [`crate::readers::executor_auth`]); a
//! record signed by one app's key for a run of another app goes to the DLQ. A run's first
//! lines may come before its row is written (milliseconds after its trigger was
//! acknowledged): those are checked against the key alone, as there is no run to compare yet.

use std::sync::Arc;

use kadence_schemas::{LogRecord, Topics};
use rdkafka::message::OwnedMessage;

use crate::readers::batch::{
    Applied, BatchReader, Offsets, ReaderError, ReaderSources, RecordReader, Signed, decode_value,
};
use crate::readers::executor_auth::app_mismatch;
use crate::store::{LogLines, Runs, StoreError};

/// Reads `{prefix}.logs` in group `{prefix}.scheduler.logs` into the store.
pub type LogsReader = BatchReader<Logs>;

impl LogsReader {
    /// Joins the group and subscribes to the logs topic; stores at most `max_lines_per_run`
    /// lines of a run.
    pub fn start(
        sources: ReaderSources<'_>,
        store: Arc<dyn Runs>,
        max_lines_per_run: i64,
    ) -> Result<LogsReader, ReaderError> {
        let logs = Logs {
            store,
            max_lines_per_run,
        };
        BatchReader::open(
            sources,
            Offsets::Committed {
                group_suffix: "logs",
            },
            logs,
        )
    }
}

/// The logs reader's own part: decoding log records and storing their lines.
pub struct Logs {
    store: Arc<dyn Runs>,
    max_lines_per_run: i64,
}

impl RecordReader for Logs {
    type Record = LogLines;
    const NAME: &'static str = "logs";
    const RECORD: &'static str = "log record";

    fn topic(topics: &Topics) -> String {
        topics.logs()
    }

    fn decode(&self, message: &OwnedMessage) -> Result<LogLines, String> {
        let record: LogRecord = decode_value(message, Self::RECORD)?;
        if record.first_line < 1 {
            return Err(format!(
                "log record of run {} starts at line {}: lines are numbered from 1",
                record.trigger_id, record.first_line
            ));
        }
        Ok(LogLines {
            log_id: record.log_id,
            // A v1 record does not say which run it belongs to: its lines are the oldest run's.
            run_started_at_ms: record.run_started_at_ms.unwrap_or(0),
            first_line: record.first_line,
            lines: record.lines,
        })
    }

    /// A log record names its run, not its app: the run's app is read in [`Self::apply`].
    fn app_of(_: &LogLines) -> Option<&str> {
        None
    }

    /// Refuses the lines signed by a key of another app than their run's, and stores the
    /// rest. Lines of a run whose row is not written yet are checked against the key alone.
    async fn apply(&mut self, records: Vec<Signed<LogLines>>) -> Result<Applied, StoreError> {
        let log_ids: Vec<i64> = (records.iter())
            .filter(|signed| signed.key_app.is_some())
            .map(|signed| signed.record.log_id)
            .collect();
        let run_apps = if log_ids.is_empty() {
            Default::default()
        } else {
            self.store.run_apps(&log_ids).await?
        };
        let mut applied = Applied::default();
        let mut lines = Vec::with_capacity(records.len());
        for signed in records {
            let mismatch = (run_apps.get(&signed.record.log_id))
                .and_then(|run_app| app_mismatch(Self::RECORD, run_app, signed.key_app.as_deref()));
            match mismatch {
                Some(reason) => applied.refused.push((signed.index, reason)),
                None => lines.push(signed.record),
            }
        }
        applied.count = (self.store)
            .append_log_lines(&lines, self.max_lines_per_run)
            .await?;
        Ok(applied)
    }
}
