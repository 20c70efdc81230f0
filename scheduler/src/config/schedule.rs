//! The `[schedule]` section: the engine's loops (pre-read, wheel, dispatch, claims, cancellations).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default of `run_row_hold` on PostgreSQL (unless half the lease is shorter): the default
/// emit lead (1 s) and a second for the handler and the result's way back.
pub const DEFAULT_RUN_ROW_HOLD: Duration = Duration::from_secs(2);

/// The shortest default `release_round`: with no emit lead, how late a trigger may leave.
const SHORTEST_DEFAULT_ROUND: Duration = Duration::from_millis(20);

/// The longest default `release_round`: past it longer rounds saved little CPU (benchmarks,
/// "Rounds of a quarter of the lead"), and each round's records reach the broker and the
/// executors as one burst.
const LONGEST_DEFAULT_ROUND: Duration = Duration::from_millis(250);

/// The scheduling loops.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScheduleConfig {
    /// This node's id, owner of the fires it writes. Default: host name, process id and a
    /// random suffix, so a restarted process never mistakes its predecessor's fires for its own.
    pub node_id: Option<String>,
    /// How far ahead the pre-read loop writes fires. Default `5s` (XXL-JOB's value).
    #[serde(with = "humantime_serde")]
    pub pre_read_window: Duration,
    /// Pause between pre-read scans. Default `1s`.
    #[serde(with = "humantime_serde")]
    pub pre_read_interval: Duration,
    /// Jobs read per scan at most. Default 1000.
    pub batch_size: u32,
    /// Schedule shards the jobs are spread over (see the `shards` module): nodes share them
    /// evenly, each scanning only its own. Read when the first node starts on a database and
    /// fixed from then on (a node configured otherwise logs a warning and uses the
    /// database's number). More shards than nodes you will ever run; 1 to 1024. Default 16.
    pub shards: u32,
    /// How long after its fire time a pending fire stays owned by the node that wrote it before
    /// another node may claim it. Default `10s`: long enough to ride out a broker hiccup
    /// without duplicates, short enough that a crash delays fires by seconds, not minutes.
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
    /// How long a node owns its schedule shards unrenewed (it renews every third of it): a
    /// dead node's shards are taken over within 4/3 of it, its fires then late by at most
    /// that minus the read-ahead, never missed (`shards::check_shard_lease`). Default `5s`.
    #[serde(with = "humantime_serde")]
    pub shard_lease: Duration,
    /// Pause between claim passes. Default `2s`.
    #[serde(with = "humantime_serde")]
    pub claim_interval: Duration,
    /// Trigger deliveries awaiting broker acknowledgement at most. Default 10000.
    pub max_in_flight: usize,
    /// How long shutdown waits for deliveries in flight. Default `10s`.
    #[serde(with = "humantime_serde")]
    pub drain_timeout: Duration,
    /// How long before its fire time a trigger is produced; executors hold it until its
    /// scheduled time, so runs start on their millisecond even when thousands are due on the
    /// same second (see the book's benchmarks page). Default `1s`. `0s` produces at the fire
    /// time, for executors that do not hold early triggers (every Kadence SDK does).
    #[serde(with = "humantime_serde")]
    pub emit_lead: Duration,
    /// The wheel releases fires in rounds at most this often, each round taking every fire
    /// whose release instant (`emit_lead` before its time) has come: one wake-up, one signing
    /// pass, one produce request and one acknowledgement write for all of them, however the
    /// fires are spread over the second. A fire never leaves before its release instant and
    /// at most this much after it. Default: a quarter of `emit_lead`, at least `20ms` and at
    /// most `250ms`; so `250ms` at the default lead, where a trigger still reaches the broker
    /// 750 ms or more before its time and executors hold it until then, and `20ms` with
    /// `emit_lead = 0s`, where this is how late a trigger may leave. Longer rounds cost less
    /// per trigger (measured at 1 000 fires a second spread over it: 73 µs of scheduler CPU
    /// per trigger with `20ms`, 40 with `100ms`, 28 with `250ms`; the broker 70, 23 and 11)
    /// and gain little past a quarter of a second. With `emit_lead = 0s` set `1ms` if each
    /// trigger must leave on its millisecond (at several times the CPU per trigger when fires
    /// are spread over the second).
    #[serde(with = "humantime_serde")]
    pub release_round: Option<Duration>,
    /// How often every node reads the fires that stops and schedule edits on other nodes
    /// cancelled, so that it does not emit its copies of them. A fire planned before a stop
    /// and due later than `emit_lead` + this after it is never emitted. Default `250ms`.
    #[serde(with = "humantime_serde")]
    pub cancel_poll_interval: Duration,
    /// How long the row of a run whose trigger the broker acknowledged waits for the run's
    /// result before it is written. A result that comes within it has the row written once,
    /// already finished, where a later one costs an insert and then an update: on
    /// PostgreSQL that update is never done in place and was half of what history cost the
    /// database (measured: half the database's CPU per run at 10 000 runs a second). While
    /// the node's results consumer is behind, a row is held that much longer (the age of the
    /// oldest result it last received), up to half of `lease`: otherwise the results would
    /// miss their rows exactly when the database has the least to spare. A run shows in the
    /// API and the console that much later at most; if the node dies meanwhile its trigger
    /// is emitted again under the same id. Held only while the node
    /// reads every partition of the results topic (one scheduler node, or the only one
    /// reading results): another node's results could not use the held row. Default on
    /// PostgreSQL `2s` (the default `emit_lead` and a second for a short handler), or half
    /// of `lease` when that is shorter; on SQLite and MySQL `0s`, rows written at once
    /// (their updates touch only the indexes of the columns they change, and on SQLite the
    /// held inserts measured slower, on the results writer's path). At most half of
    /// `lease`.
    #[serde(with = "humantime_serde")]
    pub run_row_hold: Option<Duration>,
    /// How long a history writer (the logs reader, retention, the report refresh) waits at
    /// most, before each of its steps, while scheduling falls behind: while the pre-read
    /// plans fires with less slack than a scan that keeps up leaves (with the defaults
    /// 1.5 s: `emit_lead` and half a `pre_read_interval`), or the broker acknowledges
    /// triggers late. History then goes on one step (one batch of log
    /// records) per this long, its records waiting in their topic, and catches up once
    /// scheduling does; fires are never the ones that wait. `0s`: history never yields.
    /// Default `2s`.
    #[serde(with = "humantime_serde")]
    pub history_yield: Duration,
}

impl ScheduleConfig {
    /// The hold of run rows in effect (see `run_row_hold`), on PostgreSQL or not.
    pub fn run_row_hold(&self, on_postgres: bool) -> Duration {
        let default = if on_postgres {
            DEFAULT_RUN_ROW_HOLD.min(self.lease / 2)
        } else {
            Duration::ZERO
        };
        self.run_row_hold.unwrap_or(default)
    }

    /// How often at most the wheel releases a round of fires (see `release_round`).
    pub fn release_round(&self) -> Duration {
        self.release_round.unwrap_or_else(|| {
            (self.emit_lead / 4).clamp(SHORTEST_DEFAULT_ROUND, LONGEST_DEFAULT_ROUND)
        })
    }

    /// The longest a run row is held, however far the results lag: half of `lease` (see
    /// [`crate::engine::held_runs::HeldRuns::hold_now`]).
    pub fn longest_run_row_hold(&self) -> Duration {
        self.lease / 2
    }

    /// Checks that a run row held for `run_row_hold` leaves its batch's lease far from its
    /// end: a held fire keeps its batch open, and a batch whose lease ends is claimed and
    /// emitted again by another node. At most half the lease.
    pub fn check_run_row_hold(&self) -> anyhow::Result<()> {
        // PostgreSQL's default is the longest; a configured hold is the same on every backend.
        let (hold, lease) = (self.run_row_hold(true), self.lease);
        anyhow::ensure!(
            hold <= self.longest_run_row_hold(),
            "schedule.run_row_hold ({hold:?}) must be at most half of schedule.lease \
             ({lease:?}): a fire whose row is held keeps its batch open, and a batch whose \
             lease ends is emitted again by another node"
        );
        Ok(())
    }
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            node_id: None,
            pre_read_window: Duration::from_secs(5),
            pre_read_interval: Duration::from_secs(1),
            batch_size: 1000,
            shards: 16,
            lease: Duration::from_secs(10),
            shard_lease: Duration::from_secs(5),
            claim_interval: Duration::from_secs(2),
            max_in_flight: 10_000,
            drain_timeout: Duration::from_secs(10),
            emit_lead: Duration::from_secs(1),
            release_round: None,
            cancel_poll_interval: Duration::from_millis(250),
            run_row_hold: None,
            history_yield: Duration::from_secs(2),
        }
    }
}
