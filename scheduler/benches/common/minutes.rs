//! A long end-to-end run minute by minute: whether the fires of the last minute start as
//! late as those of the first, and whether results and log lines reach the store within a
//! delay that stays bounded (a backlog that grows shows as a delay that grows).

use super::percentile;

/// The value at `fraction` of `sorted` in milliseconds, `–` when there is none.
pub fn ms_at(sorted: &[i64], fraction: f64) -> String {
    match sorted.is_empty() {
        true => "–".to_owned(),
        false => format!("{} ms", percentile(sorted, fraction)),
    }
}

/// What one minute of the window saw: its fires are those scheduled in it.
pub struct Minute {
    /// 1 for the window's first minute.
    pub number: usize,
    /// Fires due: jobs × seconds of the minute inside the window.
    pub due: usize,
    /// Fires without a published result.
    pub not_run: usize,
    /// Handler start − scheduled time of the fires run, sorted.
    pub lateness: Vec<i64>,
    /// Results recorded at most a second after their run ended.
    pub recorded_within_second: usize,
    /// Recorded − run end of the results recorded, sorted.
    pub result_delay: Vec<i64>,
    /// Recorded − run start of the log lines stored, sorted.
    pub line_delay: Vec<i64>,
}

/// What a run left, for [`by_minute`].
pub struct RunRecords<'a> {
    /// `(scheduled, started)` of every run the executors published.
    pub starts: &'a [(i64, i64)],
    /// `[scheduled, ended, recorded]` of every result in the store.
    pub results: &'a [[i64; 3]],
    /// `[run started, recorded]` of every log line in the store.
    pub lines: &'a [[i64; 2]],
}

/// The window `(start, end)` of a run of `jobs` every-second jobs, minute by minute (a last
/// minute cut short by the window's end is still one).
pub fn by_minute(window: (i64, i64), jobs: usize, records: &RunRecords<'_>) -> Vec<Minute> {
    let minute_of = |ms: i64| ((ms - window.0) / 60_000) as usize;
    let in_window = |ms: i64| (window.0..window.1).contains(&ms);
    let count = ((window.1 - window.0 + 59_999) / 60_000) as usize;
    let mut minutes: Vec<Minute> = (0..count)
        .map(|index| {
            let from = window.0 + index as i64 * 60_000;
            let seconds = ((window.1.min(from + 60_000) - from) / 1_000) as usize;
            Minute {
                number: index + 1,
                due: jobs * seconds,
                not_run: 0,
                lateness: Vec::new(),
                recorded_within_second: 0,
                result_delay: Vec::new(),
                line_delay: Vec::new(),
            }
        })
        .collect();
    for &(scheduled, started) in records.starts {
        if in_window(scheduled) {
            minutes[minute_of(scheduled)]
                .lateness
                .push(started - scheduled);
        }
    }
    for &[scheduled, ended, recorded] in records.results {
        if in_window(scheduled) {
            let minute = &mut minutes[minute_of(scheduled)];
            minute.result_delay.push(recorded - ended);
            if recorded - ended <= 1_000 {
                minute.recorded_within_second += 1;
            }
        }
    }
    for &[started, recorded] in records.lines {
        if in_window(started) {
            minutes[minute_of(started)]
                .line_delay
                .push(recorded - started);
        }
    }
    for minute in &mut minutes {
        minute.not_run = minute.due.saturating_sub(minute.lateness.len());
        minute.lateness.sort_unstable();
        minute.result_delay.sort_unstable();
        minute.line_delay.sort_unstable();
    }
    minutes
}

/// Prints `minutes` as a table under `title`.
pub fn print_minutes(title: &str, minutes: &[Minute]) {
    println!();
    println!("{title}, minute by minute (fires by their scheduled minute):");
    println!();
    println!(
        "| minute | fires due | not run | start late p50 | p99 | max | recorded ≤ 1 s | result delay p99 | max | log lines | line delay p99 | max |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for minute in minutes {
        let share = minute.recorded_within_second as f64 / minute.due.max(1) as f64 * 100.0;
        println!(
            "| {} | {} | {} | {} | {} | {} | {share:.1} % | {} | {} | {} | {} | {} |",
            minute.number,
            minute.due,
            minute.not_run,
            ms_at(&minute.lateness, 0.5),
            ms_at(&minute.lateness, 0.99),
            ms_at(&minute.lateness, 1.0),
            ms_at(&minute.result_delay, 0.99),
            ms_at(&minute.result_delay, 1.0),
            minute.line_delay.len(),
            ms_at(&minute.line_delay, 0.99),
            ms_at(&minute.line_delay, 1.0),
        );
    }
}
