//! CPU readings from `/proc`: of a process, of a run's broker and database processes, of the
//! machine; and what a run's processes spent over its window, per trigger ([`CpuSpent`]).
//!
//! CPU per trigger is the figure the fire path is judged by: unlike a rate, it does not
//! depend on how many cores the machine has or what else runs on them. Each process's own CPU
//! time is read (user + system, as `/proc/<pid>/stat` counts it), divided by the triggers of
//! the window.

use std::collections::HashMap;

use super::broker::Broker;

/// CPU ticks so far of the processes a run reports on, and of the machine.
pub struct Usage {
    /// All executor processes (0 without any).
    pub executors: u64,
    /// All scheduler processes (0 without any).
    pub scheduler: u64,
    /// The machine's `(busy, total)`, all cores ([`machine_ticks`]).
    pub machine: (u64, u64),
    /// The run's broker processes, by pid; none when the broker does not run on this machine.
    pub broker: Option<HashMap<u32, u64>>,
    /// Every `postgres` process, by pid.
    pub database: HashMap<u32, u64>,
}

impl Usage {
    /// The readings now, given the ticks so far of the run's executors and schedulers (which
    /// the caller knows how to find); `broker_pids` are the run's broker's processes
    /// ([`broker_processes`], looked up once per run).
    pub fn now(executors: u64, scheduler: u64, broker_pids: &[u32]) -> Usage {
        Usage {
            executors,
            scheduler,
            machine: machine_ticks(),
            broker: (!broker_pids.is_empty()).then(|| ticks_of(broker_pids)),
            database: ticks_of_named("postgres"),
        }
    }
}

/// The CPU a run's processes spent between two [`Usage`] readings, in seconds of one core.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuSpent {
    pub executors: f64,
    pub scheduler: f64,
    /// None when the broker's processes were not found on this machine.
    pub broker: Option<f64>,
    /// Every PostgreSQL process (a SQLite store runs inside the scheduler, and counts there).
    pub database: f64,
    /// Everyone's, all cores.
    pub machine: f64,
    /// Share of the machine's CPU time (all cores) busy, anyone's.
    pub machine_busy: f64,
}

impl CpuSpent {
    pub fn between(before: &Usage, after: &Usage) -> CpuSpent {
        let ticks = clock_ticks_per_second();
        let seconds = |ticks_spent: u64| ticks_spent as f64 / ticks;
        let broker = match (&before.broker, &after.broker) {
            (Some(before), Some(after)) => Some(seconds(ticks_between(before, after))),
            _ => None,
        };
        let (busy, total) = (
            after.machine.0 - before.machine.0,
            after.machine.1 - before.machine.1,
        );
        CpuSpent {
            executors: seconds(after.executors - before.executors),
            scheduler: seconds(after.scheduler - before.scheduler),
            broker,
            database: seconds(ticks_between(&before.database, &after.database)),
            machine: seconds(busy),
            machine_busy: busy as f64 / total.max(1) as f64,
        }
    }
}

/// `cpu_seconds` per trigger of `triggers`, in µs, for a table ("–" without triggers).
pub fn per_trigger(cpu_seconds: f64, triggers: usize) -> String {
    match triggers {
        0 => "–".to_owned(),
        triggers => format!("{:.1} µs", cpu_seconds * 1e6 / triggers as f64),
    }
}

/// CPU ticks (user + system) and peak resident memory (KiB) of a process, from `/proc`.
pub fn process_usage(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let peak_kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())?;
    Some((ticks, peak_kib))
}

/// The kernel's clock ticks per second, the unit of [`process_usage`]'s CPU figure.
pub fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

/// The processes of `broker` whose CPU a run counts, said on stderr when there are none.
pub fn broker_processes(broker: &Broker) -> Vec<u32> {
    let pids = broker.processes();
    if pids.is_empty() {
        eprintln!(
            "  broker CPU not measured: no process on this machine listens on {}",
            broker.bootstrap
        );
    }
    pids
}

/// CPU ticks so far of each of `pids` that still runs (a broker's processes, from
/// [`Broker::processes`]), by process id.
pub fn ticks_of(pids: &[u32]) -> HashMap<u32, u64> {
    pids.iter()
        .filter_map(|&pid| Some((pid, process_usage(pid)?.0)))
        .collect()
}

/// CPU ticks so far of every process whose command is `name` (the database's, `postgres`:
/// a process per connection, so they come and go), by process id.
pub fn ticks_of_named(name: &str) -> HashMap<u32, u64> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == name)
        })
        .filter_map(|pid| Some((pid, process_usage(pid)?.0)))
        .collect()
}

/// Ticks spent between two readings of [`ticks_of`] or [`ticks_of_named`]: processes that
/// started meanwhile count whole, those that ended meanwhile not at all (a database
/// connection closed during the window; the scheduler keeps its own open).
pub fn ticks_between(start: &HashMap<u32, u64>, end: &HashMap<u32, u64>) -> u64 {
    end.iter()
        .map(|(pid, ticks)| ticks.saturating_sub(start.get(pid).copied().unwrap_or(0)))
        .sum()
}

/// The machine's CPU ticks so far, all cores: `(busy, total)`, from the first line of
/// `/proc/stat` (idle and I/O wait are not busy).
pub fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|field| field.parse().ok())
        .collect();
    let total: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    (total - idle, total)
}
