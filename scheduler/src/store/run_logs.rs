//! Run log lines as the store takes and gives them: what an executor shipped ([`LogLines`])
//! and a stretch of a run's log ([`RunLogLines`]). Each run of a trigger keeps its own lines,
//! under when it started on its executor (see `crate::readers::logs`).

/// Consecutive log lines of one run, as an executor shipped them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLines {
    /// The run's job-log row id.
    pub log_id: i64,
    /// When this run of the trigger started on its executor, ms since the epoch (0 for lines
    /// of `LogRecord` v1, which does not say): a trigger run twice numbers both runs' lines
    /// from 1 under one log id, and this keeps them apart.
    pub run_started_at_ms: i64,
    /// Number of the first line (1-based).
    pub first_line: i64,
    /// The lines.
    pub lines: Vec<String>,
}

/// A stretch of a run's log as stored: the lines of the run of its trigger that started last.
/// A trigger runs twice when its first run is handed back in a rebalance or its executor
/// crashes; the earlier run's lines stay stored (retention drops them with the run) and are
/// not shown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunLogLines {
    /// When the run shown started on its executor, ms since the epoch; 0 for lines of
    /// `LogRecord` v1; `None` while no line of the run is stored.
    pub run_started_at_ms: Option<i64>,
    /// Earlier runs of the same trigger whose lines are stored and replaced by these.
    pub earlier_runs: u32,
    /// (line number, line), in order.
    pub lines: Vec<(i64, String)>,
}
