//! An XXL-JOB cron expression as the import takes it. XXL-JOB evaluates cron with a copy of
//! Quartz's `CronExpression`, and Kadence reads a few forms otherwise (`crate::domain::quartz`), so
//! the import reads each expression both ways:
//!
//! - **The same reading**: imported as written.
//! - **Read otherwise, or refused, by Kadence** (a step after a name, `MON-FRI/2`, which
//!   Quartz ignores; `W` or `#` in a list; a long name, `TUES`; an empty list item; a step of
//!   0): imported **rewritten to XXL-JOB's meaning**, only the fields that differ, in
//!   Kadence's syntax (`MON-FRI/2` becomes `MON-FRI`). A job being moved should go on doing
//!   what it did; the report names the expression as written, both readings, and the next
//!   fires under each, so whoever meant the other reading sees it and can edit the job.
//! - **The clocks** (`crate::domain::quartz`'s rule for the days they change, deliberately not
//!   Quartz's: a time in a spring gap fires at its end, a job of every hour keeps the
//!   repeated autumn hour): for a job that fires otherwise than in XXL-JOB around a change
//!   of the import's zone within a year, the report lists both around it. It is not
//!   rewritten: no expression says what Quartz does there.
//! - **`29W` to `31W`**: in a month without that day Kadence does not fire; XXL-JOB sometimes
//!   does, on a weekday near the month's end. Noted.

use std::collections::HashMap;

use chrono::{DateTime, Duration, TimeZone};
use chrono_tz::Tz;

use crate::domain::quartz::{Clocks, Dialect, Reading, clock_changes};
use crate::domain::schedule::format_in_zone;

/// Fires listed under each reading.
const FIRES_SHOWN: usize = 3;

/// How far ahead clock changes are looked at: a year holds every kind a zone has.
const CHANGES_AHEAD_DAYS: i64 = 366;

/// Either side of a clock change, the stretch where the two rules may part.
const AROUND_A_CHANGE: Duration = Duration::hours(2);

/// Fires compared around one change before the rules are taken to agree there (a job every
/// second has 14 400 in the four hours).
const FIRES_COMPARED: usize = 15_000;

/// What the import knows to read a plan's cron expressions: the zone, now, the zone's clock
/// changes in the coming year, and each distinct expression's outcome.
pub(super) struct CronImport {
    zone: Tz,
    now: DateTime<Tz>,
    changes: Vec<DateTime<Tz>>,
    read: HashMap<String, ImportedCron>,
}

/// An expression as imported, and what the report says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ImportedCron {
    /// What Kadence stores.
    pub(super) conf: String,
    /// The differences, one line each.
    pub(super) notes: Vec<String>,
}

impl CronImport {
    /// For an import in `zone` planned at `now_ms`.
    pub(super) fn new(zone: Tz, now_ms: i64) -> CronImport {
        let now = zone
            .timestamp_millis_opt(now_ms)
            .single()
            .unwrap_or_else(|| zone.timestamp_millis_opt(0).unwrap());
        let changes = clock_changes(zone, &now, &(now + Duration::days(CHANGES_AHEAD_DAYS)));
        CronImport {
            zone,
            now,
            changes,
            read: HashMap::new(),
        }
    }

    /// The import's zone.
    pub(super) fn zone(&self) -> Tz {
        self.zone
    }

    /// `conf` as imported (see the module docs).
    pub(super) fn import(&mut self, conf: &str) -> ImportedCron {
        if let Some(known) = self.read.get(conf) {
            return known.clone();
        }
        let imported = self.read_both_ways(conf);
        self.read.insert(conf.to_owned(), imported.clone());
        imported
    }

    fn read_both_ways(&self, conf: &str) -> ImportedCron {
        let as_is = |notes| ImportedCron {
            conf: conf.to_owned(),
            notes,
        };
        // Quartz refuses it too (or it holds a form the import does not know Quartz's reading
        // of): the job API's checks decide, with Kadence's message.
        let Ok(quartz) = Reading::read(conf, Dialect::Quartz) else {
            return as_is(Vec::new());
        };
        let kadence = Reading::read(conf, Dialect::Kadence);
        let mut notes = Vec::new();
        let conf = match &kadence {
            Ok(kadence) if kadence.same_schedule(&quartz) => conf.to_owned(),
            _ => {
                let rewritten = quartz.rewrite(conf);
                notes.push(self.rewritten(conf, &rewritten, &quartz, &kadence));
                rewritten
            }
        };
        notes.extend(self.clock_notes(&conf, &quartz));
        if quartz.has_nearest_weekday_of_a_missing_day() {
            notes.push(format!(
                "cron {conf:?}: in a month without the day of its W (29W to 31W) Kadence does \
                 not fire; XXL-JOB sometimes does, on a weekday near the month's end"
            ));
        }
        ImportedCron { conf, notes }
    }

    fn rewritten(
        &self,
        conf: &str,
        rewritten: &str,
        quartz: &Reading,
        kadence: &Result<Reading, crate::domain::quartz::QuartzError>,
    ) -> String {
        let how: Vec<&str> = quartz
            .quirks()
            .iter()
            .map(|quirk| quirk.quartz_reading())
            .collect();
        let xxl_job = self.fires(quartz, &self.now, Clocks::QUARTZ, FIRES_SHOWN);
        let kadence = match kadence {
            Ok(kadence) => format!(
                "as Kadence reads {conf:?}: {}",
                self.fires(kadence, &self.now, kadence.clocks(), FIRES_SHOWN)
            ),
            Err(error) => format!("Kadence refuses {conf:?} as written: {error}"),
        };
        format!(
            "cron {conf:?} is imported as {rewritten:?}, XXL-JOB's meaning: XXL-JOB (Quartz) {}. \
             Next fires ({}) in XXL-JOB and as imported: {xxl_job}; {kadence}",
            how.join("; "),
            self.zone.name()
        )
    }

    /// A note for each clock change of the coming year around which Kadence fires `conf`
    /// otherwise than XXL-JOB.
    fn clock_notes(&self, conf: &str, reading: &Reading) -> Vec<String> {
        let rule = if reading.clocks() == Clocks::kadence(true) {
            "a job of every hour fires in both passes of a repeated hour, where XXL-JOB fires \
             only in the second"
        } else {
            "a time the clocks skip fires at the end of the gap, where XXL-JOB does not fire it"
        };
        self.changes
            .iter()
            .filter_map(|change| {
                let from = self.parting(reading, change)?;
                Some(format!(
                    "cron {conf:?} fires otherwise than in XXL-JOB when the clocks change in {} \
                     on {} (Kadence: {rule}). From {}: XXL-JOB {}; Kadence {}",
                    self.zone.name(),
                    change.date_naive(),
                    from.to_rfc3339(),
                    self.fires(reading, &from, Clocks::QUARTZ, FIRES_SHOWN),
                    self.fires(reading, &from, reading.clocks(), FIRES_SHOWN)
                ))
            })
            .collect()
    }

    /// The last instant both rules agree up to around `change`, if they part there.
    fn parting(&self, reading: &Reading, change: &DateTime<Tz>) -> Option<DateTime<Tz>> {
        let (mut at, until) = (*change - AROUND_A_CHANGE, *change + AROUND_A_CHANGE);
        for _ in 0..FIRES_COMPARED {
            let ours = reading.next_after(&at, reading.clocks());
            if ours != reading.next_after(&at, Clocks::QUARTZ) {
                return Some(at);
            }
            at = ours.filter(|next| *next <= until)?;
        }
        None
    }

    fn fires(
        &self,
        reading: &Reading,
        from: &DateTime<Tz>,
        clocks: Clocks,
        count: usize,
    ) -> String {
        let mut fires = Vec::with_capacity(count);
        let mut at = *from;
        while fires.len() < count {
            let Some(next) = reading.next_after(&at, clocks) else {
                break;
            };
            fires.push(format_in_zone(next.timestamp_millis(), self.zone));
            at = next;
        }
        if fires.is_empty() {
            "none".to_owned()
        } else {
            fires.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-01-01T00:00:00Z, a Thursday.
    const NEW_YEAR_MS: i64 = 1_767_225_600_000;

    fn import(conf: &str, zone: &str) -> ImportedCron {
        CronImport::new(zone.parse().unwrap(), NEW_YEAR_MS).import(conf)
    }

    #[test]
    fn a_step_after_a_name_is_imported_with_xxl_job_s_meaning() {
        let imported = import("0 0 9 ? * MON-FRI/2", "Asia/Shanghai");
        assert_eq!(imported.conf, "0 0 9 ? * MON-FRI");
        assert_eq!(imported.notes.len(), 1, "{:?}", imported.notes);
        let note = &imported.notes[0];
        assert!(
            note.starts_with(
                "cron \"0 0 9 ? * MON-FRI/2\" is imported as \"0 0 9 ? * MON-FRI\", XXL-JOB's \
                 meaning: XXL-JOB (Quartz) ignores a step after a name"
            ),
            "{note}"
        );
        // Thursday 1st, Friday 2nd, Monday 5th in XXL-JOB; Kadence would skip the Thursday.
        assert!(
            note.contains(
                "in XXL-JOB and as imported: 2026-01-01T09:00:00+08:00, \
                 2026-01-02T09:00:00+08:00, 2026-01-05T09:00:00+08:00; as Kadence reads \
                 \"0 0 9 ? * MON-FRI/2\": 2026-01-02T09:00:00+08:00, \
                 2026-01-05T09:00:00+08:00, 2026-01-07T09:00:00+08:00"
            ),
            "{note}"
        );
    }

    #[test]
    fn a_long_name_kadence_refuses_is_imported_as_its_three_letters() {
        let imported = import("0 30 8 ? * TUES", "UTC");
        assert_eq!(imported.conf, "0 30 8 ? * TUE");
        assert!(
            imported.notes[0].contains("Kadence refuses \"0 30 8 ? * TUES\" as written"),
            "{:?}",
            imported.notes
        );
        let imported = import("0,,30 0 12 1,15W * ?", "UTC");
        assert_eq!(imported.conf, "0,30 0 12 1W * ?");
    }

    #[test]
    fn the_same_reading_is_imported_as_written() {
        for conf in [
            "0 0 2 * * ?",
            "0 30 9 ? * MON-FRI",
            "0 0 22-2 * * ?",
            "0 15 10 L-2 * ?",
        ] {
            let imported = import(conf, "Asia/Shanghai");
            assert_eq!(imported.conf, conf);
            assert!(imported.notes.is_empty(), "{conf}: {:?}", imported.notes);
        }
        // Refused by both: left to the job API's checks.
        assert_eq!(import("0 0 12 15 * MON", "UTC").conf, "0 0 12 15 * MON");
    }

    #[test]
    fn jobs_the_clocks_change_for_are_listed_with_both_fires() {
        // Berlin springs forward on 2026-03-29 (02:00 → 03:00) and falls back on 2026-10-25.
        let at_half_past_two = import("0 30 2 * * ?", "Europe/Berlin");
        assert_eq!(at_half_past_two.conf, "0 30 2 * * ?");
        assert_eq!(
            at_half_past_two.notes.len(),
            1,
            "{:?}",
            at_half_past_two.notes
        );
        let note = &at_half_past_two.notes[0];
        assert!(
            note.contains("on 2026-03-29 (Kadence: a time the clocks skip"),
            "{note}"
        );
        assert!(
            note.contains(
                "XXL-JOB 2026-03-30T02:30:00+02:00, 2026-03-31T02:30:00+02:00, \
                 2026-04-01T02:30:00+02:00; Kadence 2026-03-29T03:00:00+02:00, \
                 2026-03-30T02:30:00+02:00, 2026-03-31T02:30:00+02:00"
            ),
            "{note}"
        );
        let hourly = import("0 0 * * * ?", "Europe/Berlin");
        assert_eq!(hourly.notes.len(), 1, "{:?}", hourly.notes);
        assert!(hourly.notes[0].contains("on 2026-10-25 (Kadence: a job of every hour"));
        assert!(
            hourly.notes[0]
                .contains("Kadence 2026-10-25T02:00:00+02:00, 2026-10-25T02:00:00+01:00"),
            "{}",
            hourly.notes[0]
        );
        // A job away from the changed hours fires the same.
        assert!(import("0 0 12 * * ?", "Europe/Berlin").notes.is_empty());
    }
}
