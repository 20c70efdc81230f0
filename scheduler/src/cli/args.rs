//! The command line: subcommands and their flags (clap).

use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand};
use kadence_schemas::BlockStrategy;

use crate::domain::model::{ChildTriggerMode, HistoryPolicy, RouteStrategy};
use crate::domain::schedule::MisfireStrategy;
use crate::http::api::DEFAULT_PAGE_SIZE;

mod keys;
pub(super) use keys::{ExecutorKeyCommand, KeyCommand};

pub(super) use super::bridge::BridgeCommand;
pub(super) use super::imports::ImportCommand;
pub(super) use super::replays::{ReplayArgs, ShadowCommand};

/// The values a flag accepts, taken from the enum itself so that `--help` lists them all and
/// cannot fall behind it; any case, as the API takes them.
fn one_of<T: Copy>(all: &'static [T], name: fn(T) -> &'static str) -> PossibleValuesParser {
    PossibleValuesParser::new(all.iter().map(|&value| name(value)))
}

/// Kadence: a distributed job scheduler on Kafka.
#[derive(Debug, Parser)]
#[command(name = "kadence", version, about)]
pub struct Cli {
    /// Base URL of a scheduler's HTTP API (client subcommands).
    #[arg(
        long,
        global = true,
        env = "KADENCE_API_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub(super) api: String,
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Debug, Subcommand)]
pub(super) enum Command {
    /// Run a scheduler node (configuration: --config file, then KADENCE_<SECTION>__<FIELD>).
    Serve {
        /// TOML configuration file.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Executor apps (XXL-JOB's executor groups).
    #[command(subcommand)]
    App(AppCommand),
    /// Jobs.
    #[command(subcommand)]
    Job(JobCommand),
    /// Executors known from their beats.
    #[command(subcommand)]
    Executor(ExecutorCommand),
    /// Log in: asks for the password and keeps a session token in the user's config file
    /// (mode 0600) for the other subcommands. KADENCE_TOKEN, if set, is used instead.
    Login {
        /// User name.
        #[arg(long, default_value = "admin")]
        user: String,
        /// Read the password from the first line of standard input instead of asking.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Log out: revoke the saved session token and forget it.
    Logout,
    /// Users and their grants per app (admin; anyone may change their own password).
    #[command(subcommand)]
    User(UserCommand),
    /// Your API tokens, for automation (send one as KADENCE_TOKEN).
    #[command(subcommand)]
    Token(TokenCommand),
    /// The keys triggers and control records are signed with (executors trust their public
    /// halves).
    #[command(subcommand)]
    Key(KeyCommand),
    /// The keys an app's executors sign their results, log lines, beats and dead letters
    /// with (the scheduler refuses what is not signed by a key of its app).
    #[command(subcommand, name = "executor-key")]
    ExecutorKey(ExecutorKeyCommand),
    /// The audit trail: every write through the API, newest first.
    Audit {
        /// Only this app's entries.
        #[arg(long)]
        app: Option<String>,
        /// Only this user's entries.
        #[arg(long)]
        user: Option<String>,
        /// Only entries on this API path or below it, e.g. /api/jobs/12.
        #[arg(long)]
        target: Option<String>,
        /// Entries per page (at most 1000).
        #[arg(long, default_value_t = DEFAULT_PAGE_SIZE)]
        limit: u32,
        /// Only entries older than this id (the hint under a full page gives it).
        #[arg(long)]
        after: Option<String>,
    },
    /// Replay past triggers of an app's trigger topic (by time or offsets, filtered), or
    /// list and show replays and backfills. `--dry-run` counts and changes nothing.
    Replay(ReplayArgs),
    /// Emit the fires a job's schedule had in a past range that never fired (after an
    /// outage with misfire DO_NOTHING). `--dry-run` lists them and changes nothing.
    Backfill {
        /// The job.
        #[arg(long)]
        job: i64,
        /// Start of the range: RFC 3339 instant or ms since the epoch (inclusive).
        #[arg(long)]
        from: String,
        /// End of the range (exclusive).
        #[arg(long)]
        to: String,
        /// Triggers per second (default: the scheduler's replay.rate_per_second).
        #[arg(long)]
        rate: Option<u32>,
        /// Only list what would be backfilled.
        #[arg(long)]
        dry_run: bool,
    },
    /// Shadow runs: candidate handler versions run beside production.
    #[command(subcommand)]
    Shadow(ShadowCommand),
    /// Import definitions from another scheduler (XXL-JOB), or undo an import (admin).
    #[command(subcommand)]
    Import(ImportCommand),
    /// Run another scheduler's executors from Kadence's triggers (XXL-JOB's, unmodified).
    #[command(subcommand)]
    Bridge(BridgeCommand),
    /// Print the API's OpenAPI 3 document (JSON), as a node serves it at /api/openapi.json
    /// (no server needed).
    Openapi,
    /// Print the next fire times of a schedule, one RFC 3339 instant per line (no server
    /// needed). Exits non-zero with a message naming the bad field for an invalid expression.
    Preview {
        /// Quartz cron expression, seconds first.
        #[arg(
            long,
            conflicts_with = "fix_rate",
            required_unless_present = "fix_rate"
        )]
        cron: Option<String>,
        /// Every N seconds.
        #[arg(long)]
        fix_rate: Option<u32>,
        /// IANA time zone the schedule is evaluated in; instants are printed in its offset.
        #[arg(long, default_value = "UTC")]
        time_zone: String,
        /// Fires strictly after this RFC 3339 instant (default: now).
        #[arg(long)]
        from: Option<String>,
        /// How many fire times.
        #[arg(long, default_value_t = 5)]
        count: usize,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum ExecutorCommand {
    /// List executors with their state, partitions, handlers and running jobs.
    List {
        /// Only this app's executors.
        #[arg(long)]
        app: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum UserCommand {
    /// Create a user (asks for their password).
    Add {
        /// Login name: 1–64 of A-Z a-z 0-9 . _ - @.
        name: String,
        /// Make them an admin (everything, everywhere) instead of a member.
        #[arg(long)]
        admin: bool,
        /// Read the password from the first line of standard input instead of asking.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Set a user's password (your own: asks for the present one first).
    Passwd {
        /// Login name.
        name: String,
        /// Read the passwords from standard input instead of asking: the new one on the
        /// first line, the present one on the second (when changing your own).
        #[arg(long)]
        password_stdin: bool,
    },
    /// Grant a member VIEW, OPERATE or SCRIPTS on an app (replacing an earlier grant there).
    Grant {
        /// Login name.
        name: String,
        /// App.
        app: String,
        /// VIEW (read), OPERATE (change and run jobs) or SCRIPTS (also write script source).
        access: String,
    },
    /// Take back a member's grant on an app.
    Revoke {
        /// Login name.
        name: String,
        /// App.
        app: String,
    },
    /// List users with their roles, status and grants.
    List,
    /// Make a user an ADMIN or a MEMBER; it counts from their next request. Not your own
    /// role, nor the last enabled admin's.
    Role {
        /// Login name.
        name: String,
        /// ADMIN (everything, everywhere) or MEMBER (only the apps granted).
        role: String,
    },
    /// Disable a user: their logins are refused and every token of theirs, sessions
    /// included, is revoked at once. Not yourself, nor the last enabled admin.
    Disable {
        /// Login name.
        name: String,
    },
    /// Enable a disabled user: they may log in again (the tokens revoked stay revoked).
    Enable {
        /// Login name.
        name: String,
    },
    /// Delete a user with their grants and tokens; the audit trail keeps their entries. Not
    /// yourself, nor the last enabled admin.
    Delete {
        /// Login name.
        name: String,
    },
    /// Issue a one-time password reset token for a user (printed once; their earlier unused
    /// ones stop working): they set a password with it in the console or through
    /// POST /api/auth/password-reset.
    ResetToken {
        /// Login name.
        name: String,
        /// Hours the token works (1 to 720).
        #[arg(long, default_value_t = crate::http::api::DEFAULT_RESET_TOKEN_HOURS)]
        hours: u32,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum TokenCommand {
    /// Make an API token (printed once: keep it somewhere safe).
    Create {
        /// What it is for, e.g. "deploy pipeline".
        name: String,
        /// Days until it expires (default 90).
        #[arg(long)]
        days: Option<u32>,
    },
    /// List your tokens, sessions included (or, for an admin, another user's).
    List {
        /// Another user's tokens (admin).
        #[arg(long)]
        user: Option<String>,
    },
    /// Revoke one of your tokens (or, for an admin, another user's).
    Revoke {
        /// Token id (from `token list`).
        id: i64,
        /// The user the token belongs to, if not you (admin).
        #[arg(long)]
        user: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum AppCommand {
    /// Create an app and its trigger topic.
    Add {
        /// App name: 1–64 of A-Z a-z 0-9 _ -.
        name: String,
        /// Partitions of its trigger topic: the most executors that share its triggers.
        #[arg(long)]
        partitions: i32,
        /// Human-readable title.
        #[arg(long, default_value = "")]
        title: String,
    },
    /// List apps.
    List,
}

#[derive(Debug, Subcommand)]
pub(super) enum JobCommand {
    /// Create a job (stopped unless --start).
    Add(Box<AddJob>),
    /// List jobs, a page at a time.
    List {
        /// Only this app's jobs.
        #[arg(long)]
        app: Option<String>,
        /// Only RUNNING or only STOPPED jobs.
        #[arg(long)]
        status: Option<String>,
        /// Jobs per page (at most 1000).
        #[arg(long, default_value_t = DEFAULT_PAGE_SIZE)]
        limit: u32,
        /// Start after this job id (the hint under a full page gives it).
        #[arg(long)]
        after: Option<String>,
    },
    /// Show one job.
    Show {
        /// Job id.
        id: String,
    },
    /// Change a job: give the fields to change as JSON, in the shape of the job's JSON
    /// (`kadence job show`), e.g. `--set '{"params": "x", "schedule_conf": "0 0 * * * ?"}'`.
    /// A running job whose schedule changes gets its next fire recomputed.
    Edit {
        /// Job id.
        id: String,
        /// The fields to change, as a JSON object.
        #[arg(long)]
        set: String,
    },
    /// Start scheduling a job.
    Start {
        /// Job id.
        id: String,
    },
    /// Stop scheduling a job.
    Stop {
        /// Job id.
        id: String,
    },
    /// Fire a job once now.
    Trigger {
        /// Job id.
        id: String,
        /// Parameters for this run only (default: the job's).
        #[arg(long)]
        params: Option<String>,
        /// Route only among these partitions, comma separated (XXL-JOB's address override);
        /// a broadcast job sends one shard to each.
        #[arg(long, value_delimiter = ',')]
        partitions: Option<Vec<i32>>,
    },
    /// Stop a job's running and queued runs on every executor.
    Kill {
        /// Job id.
        id: String,
        /// Why; shown on the killed runs.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Stop one run: running, queued, or not yet at an executor.
    KillRun {
        /// The run's log id, as `kadence job runs` shows it.
        log_id: i64,
        /// Why; shown on the killed run.
        #[arg(long)]
        reason: Option<String>,
    },
    /// List a job's newest runs with their result codes and messages; a full page ends with
    /// the command for older ones.
    Runs {
        /// Job id.
        id: String,
        /// How many runs, newest first (at most 1000).
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Only runs older than this log id (the hint under a full page gives it).
        #[arg(long)]
        after: Option<String>,
    },
    /// Print a run's log (its log id is in `job runs`), from a line on; --follow keeps
    /// printing new lines until the run has finished.
    Log {
        /// The run's log id.
        log_id: i64,
        /// First line to print (1-based).
        #[arg(long, default_value_t = 1)]
        from: i64,
        /// Keep printing lines as they arrive, until the run has finished.
        #[arg(long)]
        follow: bool,
    },
}

#[derive(Debug, Args)]
pub(super) struct AddJob {
    /// Executor app.
    #[arg(long)]
    pub(super) app: String,
    /// Handler name on the executors.
    #[arg(long)]
    pub(super) handler: String,
    /// Quartz cron expression, seconds first (e.g. "0 */5 * * * ?").
    #[arg(long, conflicts_with_all = ["fix_rate", "fix_delay", "manual"])]
    pub(super) cron: Option<String>,
    /// Fire every N seconds.
    #[arg(long, conflicts_with_all = ["fix_delay", "manual"])]
    pub(super) fix_rate: Option<u32>,
    /// Fire N seconds after the previous run finished.
    #[arg(long, conflicts_with = "manual")]
    pub(super) fix_delay: Option<u32>,
    /// No schedule: manual and API triggers only.
    #[arg(long)]
    pub(super) manual: bool,
    /// Display name (default: the handler).
    #[arg(long)]
    pub(super) name: Option<String>,
    /// Handler parameters.
    #[arg(long)]
    pub(super) params: Option<String>,
    /// IANA time zone of the schedule.
    #[arg(long, default_value = "UTC")]
    pub(super) time_zone: String,
    /// What to do with fires missed while the schedulers were down (default DO_NOTHING).
    #[arg(long, value_parser = one_of(MisfireStrategy::ALL, MisfireStrategy::as_str), ignore_case = true)]
    pub(super) misfire: Option<String>,
    /// How the partition, hence the executor, is picked (default FIRST).
    #[arg(long, value_parser = one_of(RouteStrategy::ALL, RouteStrategy::as_str), ignore_case = true)]
    pub(super) route: Option<String>,
    /// What an executor does with a trigger while the job still runs (default
    /// SERIAL_EXECUTION).
    #[arg(long, value_parser = one_of(BlockStrategy::ALL, BlockStrategy::as_str), ignore_case = true)]
    pub(super) block: Option<String>,
    /// Timeout in seconds (0: none).
    #[arg(long)]
    pub(super) timeout: Option<u32>,
    /// Owner, for people.
    #[arg(long)]
    pub(super) author: Option<String>,
    /// E-mail address for failure alarms (repeat for several).
    #[arg(long = "alarm-email")]
    pub(super) alarm_emails: Vec<String>,
    /// URL POSTed on failure alarms.
    #[arg(long)]
    pub(super) alarm_webhook: Option<String>,
    /// Retries of a failed run.
    #[arg(long)]
    pub(super) retry: Option<u32>,
    /// Job fired when this one succeeds (repeat for several).
    #[arg(long = "child")]
    pub(super) child_job_ids: Vec<i64>,
    /// For a sharded job: EACH_SHARD (default) or ALL_SHARDS (children once all shards
    /// succeeded).
    #[arg(long, value_parser = one_of(ChildTriggerMode::ALL, ChildTriggerMode::as_str), ignore_case = true)]
    pub(super) child_trigger_mode: Option<String>,
    /// Which finished runs keep their rows: ALL (default), FAILURES, or NONE (counted only).
    #[arg(long, value_parser = one_of(HistoryPolicy::ALL, HistoryPolicy::as_str), ignore_case = true)]
    pub(super) history: Option<String>,
    /// Script type (GLUE_SHELL, GLUE_PYTHON, …) for a script job; needs --glue-file.
    #[arg(long, requires = "glue_file")]
    pub(super) glue_type: Option<String>,
    /// File holding the script of a script job.
    #[arg(long, requires = "glue_type")]
    pub(super) glue_file: Option<PathBuf>,
    /// Start it right away.
    #[arg(long)]
    pub(super) start: bool,
}
