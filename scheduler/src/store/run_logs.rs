//! Run log lines as the store takes and gives them: what an executor shipped ([`LogLines`])
//! and a stretch of a run's log ([`RunLogLines`]). Each run of a trigger keeps its own lines,
//! under when it started on its executor (see `crate::readers::logs`).
//!
//! The store keeps a record's lines as it came, one chunk per record ([`LogChunk`]): the
//! lines' texts as one JSON array, under the record's first line. A short run ships its lines
//! in one record, so it costs one row and one index entry rather than one per line. A record
//! delivered again is the same chunk; chunks that overlap (a record shipped again from an
//! earlier line) are read as one log, each line once ([`LogChunk::merge`]).

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

/// The lines of one record as stored: `first_line..=last_line`, their texts a JSON array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogChunk {
    pub first_line: i64,
    pub last_line: i64,
    /// The lines, `["text of first_line", …]`.
    pub texts: String,
}

impl LogLines {
    /// The chunk to store of these lines when a run keeps at most `max_lines_per_run`: the
    /// lines numbered past it are left out; `None` when none is left.
    pub fn chunk(&self, max_lines_per_run: i64) -> Option<LogChunk> {
        let kept = (max_lines_per_run - self.first_line + 1).clamp(0, self.lines.len() as i64);
        if self.first_line < 1 || kept == 0 {
            return None;
        }
        let lines = &self.lines[..kept as usize];
        Some(LogChunk {
            first_line: self.first_line,
            last_line: self.first_line + kept - 1,
            texts: serde_json::to_string(lines).expect("strings always encode"),
        })
    }
}

impl LogChunk {
    /// The numbered lines of `chunks` (in order of their first line) from `from_line` on, at
    /// most `limit`, each line once: where chunks overlap, the one stored first by number
    /// wins, as a repeated line was dropped when lines were stored one by one.
    pub fn merge(
        chunks: impl IntoIterator<Item = (i64, String)>,
        from_line: i64,
        limit: usize,
    ) -> Result<Vec<(i64, String)>, String> {
        let mut merged: Vec<(i64, String)> = Vec::new();
        let mut next = from_line;
        for (first_line, texts) in chunks {
            let texts: Vec<String> = serde_json::from_str(&texts)
                .map_err(|error| format!("the lines from line {first_line}: {error}"))?;
            for (line_no, text) in (first_line..).zip(texts) {
                if merged.len() == limit {
                    return Ok(merged);
                }
                if line_no >= next {
                    merged.push((line_no, text));
                    next = line_no + 1;
                }
            }
        }
        Ok(merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(first_line: i64, texts: &[&str]) -> LogLines {
        LogLines {
            log_id: 1,
            run_started_at_ms: 0,
            first_line,
            lines: texts.iter().map(|text| text.to_string()).collect(),
        }
    }

    #[test]
    fn a_chunk_keeps_the_lines_within_the_limit() {
        let chunk = lines(3, &["c", "d\n\"quoted\"", "e"]).chunk(4).unwrap();
        assert_eq!((chunk.first_line, chunk.last_line), (3, 4));
        assert_eq!(chunk.texts, r#"["c","d\n\"quoted\""]"#);
        assert_eq!(lines(5, &["e"]).chunk(4), None, "past the limit");
        assert_eq!(lines(1, &[]).chunk(4), None, "nothing to keep");
    }

    #[test]
    fn overlapping_chunks_read_as_one_log_each_line_once() {
        let chunk = |first: i64, texts: &[&str]| {
            let chunk = lines(first, texts).chunk(100).unwrap();
            (chunk.first_line, chunk.texts)
        };
        let chunks = [
            chunk(1, &["a", "b", "c"]),
            chunk(3, &["C", "d"]),
            chunk(6, &["f"]),
        ];
        let merged = LogChunk::merge(chunks.clone(), 2, 10).unwrap();
        let numbers: Vec<(i64, &str)> = (merged.iter())
            .map(|(n, text)| (*n, text.as_str()))
            .collect();
        assert_eq!(numbers, [(2, "b"), (3, "c"), (4, "d"), (6, "f")]);
        assert_eq!(LogChunk::merge(chunks, 1, 2).unwrap().len(), 2);
        let broken = LogChunk::merge([(1, "not json".to_owned())], 1, 10);
        assert!(broken.unwrap_err().contains("from line 1"));
    }
}
