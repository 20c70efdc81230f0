//! The differences of the whole import: what Kadence does differently from XXL-JOB for
//! every job, and what the import does not take over.

use chrono_tz::Tz;

use super::report::Difference;
use super::snapshot::{ImportOptions, XxlSnapshot};
use crate::domain::model::Access;

/// The differences that hold for every import of `snapshot` with `options`.
pub(super) fn general_differences(
    snapshot: &XxlSnapshot,
    options: &ImportOptions,
    zone: Tz,
) -> Vec<Difference> {
    let crons = snapshot
        .jobs
        .iter()
        .filter(|job| {
            job.schedule_type
                .as_deref()
                .is_some_and(|kind| kind.trim().eq_ignore_ascii_case("CRON"))
        })
        .count();
    let n = options.partitions;
    let mut notes = vec![
        format!(
            "time zone {zone}: the {crons} cron expressions and XXL-JOB's local times (script \
             versions) are read in {zone}; XXL-JOB evaluates cron in its server JVM's zone: give \
             that zone with --time-zone if it is not {zone}"
        ),
        if options.keep_state {
            "--keep-state: jobs RUNNING in XXL-JOB are started in Kadence; stop them in XXL-JOB \
             first, or both schedulers fire them"
                .to_owned()
        } else {
            "every job is imported STOPPED (XXL-JOB's state is listed per job), so nothing fires \
             twice while both schedulers run; --keep-state starts those RUNNING in XXL-JOB"
                .to_owned()
        },
        format!(
            "each new app gets {n} partitions (--partitions): at most {n} executors share its \
             triggers, and a SHARDING_BROADCAST job runs {n} shards"
        ),
        "routing picks a partition of the app's trigger topic, and the consumer group decides \
         which executor owns it; a trigger of an app with no live executor waits in its \
         partition and runs when one joins (XXL-JOB fails it)"
            .to_owned(),
        "executors move: XXL-JOB's Java executors do not read Kafka; run Kadence executors of \
         each app whose handlers keep the names of XXL-JOB's @XxlJob(\"name\") handlers"
            .to_owned(),
        "passwords are not imported (XXL-JOB keeps unsalted MD5 or SHA-256 hashes): each \
         imported user gets a one-time reset token, shown once in this answer, to set a password \
         with (console, or POST /api/auth/password-reset)"
            .to_owned(),
        "not imported: run history and daily reports (xxl_job_log, xxl_job_log_report), \
         executor registrations (xxl_job_registry): executors register by beating"
            .to_owned(),
        "names: an executor group is an app (its AppName the app's name, its trigger topic \
         {prefix}.triggers.{app}), job_desc is the job's name, GLUE jobs are script jobs, the \
         scheduling log is the runs list, a trigger's executor address is a partition"
            .to_owned(),
        "alarm e-mails are sent only once the scheduler has alarm.smtp_* settings; timeouts \
         become milliseconds (XXL-JOB's seconds × 1000); retries run at once, as in XXL-JOB"
            .to_owned(),
    ];
    if options.member_access != Access::Scripts {
        notes.push(format!(
            "an XXL-JOB user's permission on a group lets them edit its jobs, GLUE source \
             included; the import grants {} on the group's app, which does not let them write \
             script source (--member-access SCRIPTS does)",
            options.member_access
        ));
    }
    notes.into_iter().map(Difference::general).collect()
}
