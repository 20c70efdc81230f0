//! Imports from XXL-JOB: `kadence import xxl-job --from mysql://…` moves an XXL-JOB 2.x/3.x
//! installation's definitions into Kadence in one command, reversibly, and never drops
//! anything without saying so.
//!
//! How it flows: the CLI reads XXL-JOB's tables read-only (`crate::cli::xxl_reader`, a
//! read-only transaction through sqlx's MySQL driver) into an [`XxlSnapshot`] and posts it to
//! `POST /api/imports/xxl-job` (admin only); the server [`plan`]s the mapping (pure, this
//! module), checks each job with the job API's own rules, and writes everything in one
//! transaction ([`Imports::write_import`](crate::store::Imports)), audited; the answer is an
//! [`ImportReport`]: the mapping table, every difference in behaviour known, the reset tokens.
//! A dry run answers the same report and writes nothing. XXL-JOB's database is never written.
//!
//! - [`snapshot`]: the rows read and the command's options; [`mapping`]: the plan ([`planned`]
//!   holds its parts), with the jobs' part (`groups` and `users` plan the others, `chains` the child links); [`jobs`]:
//!   one job's settings and their differences (`schedules` reads its cron expression both as
//!   XXL-JOB and as Kadence read it); [`general`]: the differences of every import;
//!   [`report`]: the answer.
//!
//! Decisions, as an XXL-JOB user moving to Kafka would expect them:
//!
//! - **Nothing fires twice.** Every job is imported STOPPED unless `--keep-state`, because
//!   both schedulers run side by side during a move. Start jobs in Kadence as you stop them in
//!   XXL-JOB.
//! - **Partitions: 3 per new app** (`--partitions`). A partition is the unit of parallelism
//!   of an app's trigger topic: at most that many executors share its triggers, and a
//!   SHARDING_BROADCAST job runs one shard per partition. Three lets a typical XXL-JOB
//!   executor cluster (two or three nodes) keep its size, and costs the broker little; the
//!   count cannot shrink later, so the default stays small. An app that exists in Kadence
//!   already (made by hand, e.g. with the partition count you want) is reused as it is.
//! - **Time zone.** XXL-JOB evaluates cron in its JVM's zone and stores local times; the
//!   import reads both in `--time-zone` (default UTC) and says so.
//! - **XXL-JOB's meaning of a schedule.** A cron expression Kadence would read otherwise than
//!   XXL-JOB's Quartz (`MON-FRI/2`: Quartz ignores the step) or refuse (`TUES`) is imported
//!   rewritten to what it meant in XXL-JOB, and the report shows both readings and the next
//!   fires under each; so is a job that fires otherwise around the zone's clock changes
//!   (`schedules`).
//! - **Refused, never bent.** A job Kadence cannot run as XXL-JOB does — GLUE_GROOVY, Python
//!   2, a cron expression Kadence refuses even in XXL-JOB's reading or that never fires
//!   again, an unknown route — is refused with the reason, and so is every job whose child
//!   is refused (its chain would differ) and every job on a cycle of children. Unknown
//!   misfire and block strategies become XXL-JOB's own fallbacks (DO_NOTHING,
//!   SERIAL_EXECUTION), said per job.
//! - **Sizes: refused, never cut.** A job with a field over Kadence's limit (see
//!   [`crate::domain::model::limits`]: a script over 256 KiB, more than 20 alarm addresses or 50
//!   children, a description over 255 characters…) is refused with the job API's message,
//!   which names the field, its size and the limit; the rest of the import goes on. Cutting
//!   would store a script that no longer runs, or a list missing whom to alarm, without
//!   anyone reading the report noticing. A group whose title is too long for a new app is
//!   refused the same way (with its jobs). An old script version over a limit is history, not
//!   what runs: it is left out, and the report says so.
//! - **Users without passwords.** XXL-JOB's hashes (unsalted MD5 in 2.x, SHA-256 in 3.x) are
//!   not worth carrying over: each imported user gets a one-time reset token, valid
//!   `reset_token_hours` (168, a week: time to hand it over), shown once in the answer.
//!   `role` 1 is ADMIN; a normal user's `permission` (group ids) becomes a grant of
//!   `--member-access` (OPERATE by default: XXL-JOB lets them edit GLUE source, which in
//!   Kadence is the separate SCRIPTS grant). A user whose name exists in Kadence (XXL-JOB's
//!   `admin`, typically) is refused, not merged.
//! - **Idempotent.** `imported_ids` remembers each source row (by the source's name, derived
//!   from the URL: `host:port/database`) with the Kadence id and a fingerprint. A second run
//!   creates only what is new in XXL-JOB; a row imported before is skipped even when it
//!   changed in XXL-JOB since (the report says it changed): Kadence may have been edited
//!   meanwhile, and an import never overwrites. To take a changed job over again, undo and
//!   import again (or edit it in Kadence).
//! - **Reversible.** The undo (`kadence import xxl-job --undo`) removes what `imported_ids`
//!   lists: jobs (refused as a whole while any of them is RUNNING: stop them first), each
//!   with its runs as `DELETE /api/jobs/{id}` does, then the apps it created if no other job
//!   is in them (their trigger topics stay: delete them with your Kafka tools), then the
//!   users. It forgets each row as it goes, so an interrupted undo is finished by running it
//!   again. XXL-JOB itself was never changed, so going back is starting its jobs there again.

mod chains;
pub mod general;
mod groups;
pub mod jobs;
pub mod mapping;
pub mod planned;
pub mod report;
mod schedules;
pub mod snapshot;
mod users;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_groups_users;
#[cfg(test)]
mod tests_limits;
#[cfg(test)]
mod tests_schedules;

pub use mapping::plan;
pub use planned::{ChildRef, Known, Plan, PlannedApp, PlannedJob, PlannedUser};
pub use report::{Action, Difference, ImportReport, IssuedResetToken, MappingRow, SourceKind};
pub use snapshot::{
    DEFAULT_PARTITIONS, DEFAULT_RESET_TOKEN_HOURS, ImportOptions, XxlGlueVersion, XxlGroup, XxlJob,
    XxlSnapshot, XxlUser,
};

/// The name of a source, as `imported_ids` keys it: `xxl-job:` and where its database is,
/// without credentials (`mysql://user:secret@db:3306/xxl_job` → `xxl-job:db:3306/xxl_job`).
pub fn source_name(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let rest = rest.split_once('?').map_or(rest, |(path, _)| path);
    let (host, database) = rest.split_once('/').unwrap_or((rest, ""));
    let host = if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:3306")
    };
    format!("xxl-job:{host}/{database}")
}
