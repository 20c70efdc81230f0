//! Schedule maths: parsing a schedule (type + configuration) and computing fire times.
//!
//! CRON expressions use Quartz syntax as XXL-JOB users write it: seconds first, an optional
//! year, `?`, names, `L` (`L-n`), `W` and `#`. `crate::domain::quartz` reads them as Quartz does
//! (wrap-around ranges, Quartz's step bounds, `?` in exactly one day field) and evaluates them
//! with the `croner` crate on wall-clock time, then in the job's IANA time zone with Kadence's
//! rule for the days the clocks change; the result is stored and compared as UTC
//! milliseconds. `croner` rather than `cron`: `cron` cannot express `L`, `W` or `#`, which
//! XXL-JOB users rely on.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::domain::enums::{ModelError, string_enum};
use crate::domain::quartz::{Dialect, Reading};
use chrono::TimeZone;
use chrono_tz::Tz;

string_enum!(
    /// The kind of schedule a job has.
    ScheduleType, "schedule type", {
        /// A Quartz cron expression.
        Cron => "CRON",
        /// Every N seconds, counted from the previous scheduled time.
        FixRate => "FIX_RATE",
        /// N seconds after the previous run finished.
        FixDelay => "FIX_DELAY",
        /// Never on its own: manual, API and child triggers only.
        None => "NONE",
    }
);

string_enum!(
    /// What the pre-read loop does with a fire missed by more than the pre-read window
    /// (scheduler down, database unreachable): XXL-JOB's misfire strategies.
    MisfireStrategy, "misfire strategy", {
        /// Skip the missed fires; continue from the next fire after now.
        DoNothing => "DO_NOTHING",
        /// Fire once now (trigger type MISFIRE), then continue from the next fire after now.
        FireOnceNow => "FIRE_ONCE_NOW",
    }
);

/// Why a schedule was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// The schedule type is unknown.
    #[error(transparent)]
    UnknownType(#[from] ModelError),
    /// The cron expression does not parse.
    #[error("invalid cron expression {expression:?}: {reason}")]
    InvalidCron {
        /// The expression as given.
        expression: String,
        /// What the parser objected to.
        reason: String,
    },
    /// A FIX_RATE or FIX_DELAY configuration is not a positive number of seconds.
    #[error("invalid {kind} interval {value:?}: give a whole number of seconds, at least 1")]
    InvalidRate {
        /// FIX_RATE or FIX_DELAY.
        kind: &'static str,
        /// The configuration as given.
        value: String,
    },
    /// The time zone is not an IANA zone name.
    #[error("unknown time zone {0:?}: use an IANA name such as UTC or Europe/Berlin")]
    UnknownTimeZone(String),
}

/// A parsed Quartz cron expression. The parsed form is large and immutable, so it is shared.
#[derive(Clone)]
pub struct CronSpec {
    expression: String,
    cron: Arc<Reading>,
}

impl CronSpec {
    /// Parses a Quartz expression: 6 or 7 fields (seconds first, optional year), read as
    /// Kadence reads them ([`Dialect::Kadence`]).
    pub fn parse(expression: &str) -> Result<CronSpec, ScheduleError> {
        let expression = expression.trim();
        if let Some(cron) = parsed_crons()
            .lock()
            .ok()
            .and_then(|mut cache| cache.get(expression).cloned())
        {
            return Ok(CronSpec {
                expression: expression.to_owned(),
                cron,
            });
        }
        let cron = Reading::read(expression, Dialect::Kadence).map_err(|error| {
            ScheduleError::InvalidCron {
                expression: expression.to_owned(),
                reason: error.to_string(),
            }
        })?;
        let cron = Arc::new(cron);
        if let Ok(mut cache) = parsed_crons().lock() {
            cache.insert(expression.to_owned(), Arc::clone(&cron));
        }
        Ok(CronSpec {
            expression: expression.to_owned(),
            cron,
        })
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.expression
    }

    /// The expression, read.
    pub fn reading(&self) -> &Reading {
        &self.cron
    }

    /// The first fire strictly after `after_ms`, evaluated in `zone` with Kadence's rule for
    /// the days the clocks change.
    pub fn next_after(&self, after_ms: i64, zone: Tz) -> Option<i64> {
        let after = zone.timestamp_millis_opt(after_ms).single()?;
        self.cron
            .next_after(&after, self.cron.clocks())
            .map(|next| next.timestamp_millis())
    }
}

/// Distinct expressions whose parsed form is kept: far more than a deployment usually has
/// (most jobs share a handful of expressions), small enough to bound memory.
const PARSED_CRONS_KEPT: usize = 4_096;

/// Parsed expressions by text. Every pre-read scan turns each due job row back into a
/// [`ScheduleSpec`]; at 100 000 fires/s parsing the same few expressions again was a tenth of
/// the scheduler's CPU (measured with `perf`, see the book's benchmarks page, `docs/src/measurements/benchmarks.md`).
fn parsed_crons() -> &'static std::sync::Mutex<hashlink::LruCache<String, Arc<Reading>>> {
    static PARSED: std::sync::LazyLock<std::sync::Mutex<hashlink::LruCache<String, Arc<Reading>>>> =
        std::sync::LazyLock::new(|| {
            std::sync::Mutex::new(hashlink::LruCache::new(PARSED_CRONS_KEPT))
        });
    &PARSED
}

impl fmt::Debug for CronSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CronSpec").field(&self.expression).finish()
    }
}

impl PartialEq for CronSpec {
    fn eq(&self, other: &Self) -> bool {
        self.expression == other.expression
    }
}

/// A job's schedule, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleSpec {
    /// Quartz cron.
    Cron(CronSpec),
    /// Every `seconds` seconds from the previous scheduled time.
    FixRate {
        /// Interval in seconds.
        seconds: u32,
    },
    /// `seconds` seconds after the previous run finished: the pre-read loop fires one run,
    /// then the job waits until the results consumer records that run's end.
    FixDelay {
        /// Delay in seconds.
        seconds: u32,
    },
    /// Manual, API and child triggers only.
    None,
}

impl ScheduleSpec {
    /// Parses a schedule from its type and configuration, as stored and as typed by users.
    pub fn parse(schedule_type: &str, conf: &str) -> Result<ScheduleSpec, ScheduleError> {
        let seconds = |kind: &'static str| match conf.trim().parse::<u32>() {
            Ok(seconds) if seconds > 0 => Ok(seconds),
            _ => Err(ScheduleError::InvalidRate {
                kind,
                value: conf.to_owned(),
            }),
        };
        match ScheduleType::from_str(schedule_type)? {
            ScheduleType::Cron => Ok(ScheduleSpec::Cron(CronSpec::parse(conf)?)),
            ScheduleType::FixRate => Ok(ScheduleSpec::FixRate {
                seconds: seconds("FIX_RATE")?,
            }),
            ScheduleType::FixDelay => Ok(ScheduleSpec::FixDelay {
                seconds: seconds("FIX_DELAY")?,
            }),
            ScheduleType::None => Ok(ScheduleSpec::None),
        }
    }

    /// The schedule type.
    pub fn schedule_type(&self) -> ScheduleType {
        match self {
            ScheduleSpec::Cron(_) => ScheduleType::Cron,
            ScheduleSpec::FixRate { .. } => ScheduleType::FixRate,
            ScheduleSpec::FixDelay { .. } => ScheduleType::FixDelay,
            ScheduleSpec::None => ScheduleType::None,
        }
    }

    /// The configuration string as stored (cron expression, seconds, or empty).
    pub fn conf(&self) -> String {
        match self {
            ScheduleSpec::Cron(cron) => cron.as_str().to_owned(),
            ScheduleSpec::FixRate { seconds } | ScheduleSpec::FixDelay { seconds } => {
                seconds.to_string()
            }
            ScheduleSpec::None => String::new(),
        }
    }

    /// The next fire strictly after `after_ms`, or `None` when the schedule has no future fire.
    /// For FIX_DELAY, `after_ms` is the end of the previous run.
    pub fn next_after(&self, after_ms: i64, zone: Tz) -> Option<i64> {
        match self {
            ScheduleSpec::Cron(cron) => cron.next_after(after_ms, zone),
            ScheduleSpec::FixRate { seconds } | ScheduleSpec::FixDelay { seconds } => {
                Some(after_ms + i64::from(*seconds) * 1000)
            }
            ScheduleSpec::None => None,
        }
    }
}

/// The next `count` fires of `schedule` strictly after `after_ms`, evaluated in `zone`
/// (fewer when the schedule runs out).
pub fn preview(schedule: &ScheduleSpec, zone: Tz, after_ms: i64, count: usize) -> Vec<i64> {
    let mut fires = Vec::with_capacity(count);
    let mut cursor = after_ms;
    while fires.len() < count {
        match schedule.next_after(cursor, zone) {
            Some(next) => {
                fires.push(next);
                cursor = next;
            }
            None => break,
        }
    }
    fires
}

/// Why a preview of `count` fires after `after_ms` found only `fires`, or `None` when it found
/// them all. No fire at all means the schedule never fires (after `after_ms`): a job cannot be
/// saved with a cron expression that never fires again.
pub fn preview_shortfall(
    schedule: &ScheduleSpec,
    zone: Tz,
    after_ms: i64,
    fires: &[i64],
    count: usize,
) -> Option<String> {
    if fires.len() >= count {
        return None;
    }
    let note = match (schedule, fires.last()) {
        (ScheduleSpec::None, _) => {
            "schedule type NONE never fires on its own: manual, API and child triggers only"
                .to_owned()
        }
        (ScheduleSpec::Cron(cron), None) => format!(
            "{:?} never fires after {}: a day no month has (such as 30 in February) or only \
             past years",
            cron.as_str(),
            format_in_zone(after_ms, zone)
        ),
        (_, Some(&last)) => format!("no fire after {}", format_in_zone(last, zone)),
        // Fixed rates and delays always have a next fire.
        (_, None) => format!("no fire after {}", format_in_zone(after_ms, zone)),
    };
    Some(note)
}

/// `ms` as RFC 3339 with the offset `zone` has at that instant (e.g.
/// `2026-01-05T09:30:00+01:00`).
pub fn format_in_zone(ms: i64, zone: Tz) -> String {
    zone.timestamp_millis_opt(ms)
        .single()
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, false))
        .unwrap_or_else(|| ms.to_string())
}

/// Parses an IANA time zone name.
pub fn parse_time_zone(name: &str) -> Result<Tz, ScheduleError> {
    name.trim()
        .parse::<Tz>()
        .map_err(|_| ScheduleError::UnknownTimeZone(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};

    fn ms(rfc3339: &str) -> i64 {
        DateTime::parse_from_rfc3339(rfc3339)
            .unwrap()
            .with_timezone(&Utc)
            .timestamp_millis()
    }

    #[test]
    fn every_second_cron_fires_on_each_second_boundary() {
        let spec = ScheduleSpec::parse("CRON", "* * * * * ?").unwrap();
        let start = ms("2026-01-01T00:00:00.250Z");
        let first = spec.next_after(start, Tz::UTC).unwrap();
        assert_eq!(first, ms("2026-01-01T00:00:01Z"));
        assert_eq!(
            spec.next_after(first, Tz::UTC).unwrap(),
            ms("2026-01-01T00:00:02Z")
        );
    }

    #[test]
    fn cron_is_evaluated_in_the_job_time_zone() {
        let spec = ScheduleSpec::parse("cron", "0 30 9 ? * MON-FRI").unwrap();
        let zone = parse_time_zone("Europe/Berlin").unwrap();
        // Friday 2026-01-02 10:00 Berlin → next is Monday 2026-01-05 09:30 Berlin = 08:30 UTC.
        let next = spec
            .next_after(ms("2026-01-02T09:00:00Z"), zone)
            .expect("a next fire");
        assert_eq!(next, ms("2026-01-05T08:30:00Z"));
    }

    #[test]
    fn quartz_weekday_numbers_start_on_sunday() {
        // Quartz: 1 = SUN, so "6#3" is the third Friday of the month.
        let spec = ScheduleSpec::parse("CRON", "0 0 12 ? * 6#3").unwrap();
        let next = spec
            .next_after(ms("2026-01-01T00:00:00Z"), Tz::UTC)
            .unwrap();
        assert_eq!(next, ms("2026-01-16T12:00:00Z"));
    }

    fn fires(expression: &str, after: &str, count: usize) -> Vec<i64> {
        let spec = ScheduleSpec::parse("CRON", expression).unwrap();
        preview(&spec, Tz::UTC, ms(after), count)
    }

    #[test]
    fn l_alone_as_day_of_week_is_saturday() {
        // Quartz: L in day-of-week is 7, Saturday. 2026-01-01 is a Thursday.
        assert_eq!(
            fires("0 0 12 ? * L", "2026-01-01T00:00:00Z", 3),
            vec![
                ms("2026-01-03T12:00:00Z"),
                ms("2026-01-10T12:00:00Z"),
                ms("2026-01-17T12:00:00Z")
            ]
        );
        // In a list too, and the last Friday (6L) keeps its meaning beside it.
        assert_eq!(
            fires("0 0 12 ? * 2,l", "2026-01-01T00:00:00Z", 2),
            vec![ms("2026-01-03T12:00:00Z"), ms("2026-01-05T12:00:00Z")]
        );
        assert_eq!(
            fires("0 0 12 ? * 6L", "2026-01-01T00:00:00Z", 1),
            vec![ms("2026-01-30T12:00:00Z")]
        );
    }

    #[test]
    fn l_minus_n_is_n_days_before_the_last_day_of_the_month() {
        // 31, 28 (2026 is not a leap year), 31, 30 days.
        assert_eq!(
            fires("0 15 10 L-2 * ?", "2026-01-01T00:00:00Z", 4),
            vec![
                ms("2026-01-29T10:15:00Z"),
                ms("2026-02-26T10:15:00Z"),
                ms("2026-03-29T10:15:00Z"),
                ms("2026-04-28T10:15:00Z")
            ]
        );
        // February of a leap year has 29 days.
        assert_eq!(
            fires("0 15 10 L-2 * ?", "2028-02-01T00:00:00Z", 1),
            vec![ms("2028-02-27T10:15:00Z")]
        );
        // Later the same day, then the next month's.
        assert_eq!(
            fires("0 15 10 L-2 * ?", "2026-01-29T10:15:00Z", 1),
            vec![ms("2026-02-26T10:15:00Z")]
        );
        // Every second of that day, and none of the day before.
        assert_eq!(
            fires("* * * L-2 * ?", "2026-02-25T23:59:58Z", 2),
            vec![ms("2026-02-26T00:00:00Z"), ms("2026-02-26T00:00:01Z")]
        );
        // L-30 only exists in 31-day months; L-28 in February only in leap years.
        assert_eq!(
            fires("0 0 0 L-30 * ?", "2026-01-01T00:00:00Z", 2),
            vec![ms("2026-03-01T00:00:00Z"), ms("2026-05-01T00:00:00Z")]
        );
        assert_eq!(
            fires("0 0 0 L-28 2 ?", "2026-01-01T00:00:00Z", 2),
            vec![ms("2028-02-01T00:00:00Z"), ms("2032-02-01T00:00:00Z")]
        );
        // L-nW: the weekday nearest it. 2026-05-29 is a Friday, 2026-03-29 a Sunday.
        assert_eq!(
            fires("0 0 9 L-2W 3 ?", "2026-01-01T00:00:00Z", 1),
            vec![ms("2026-03-30T09:00:00Z")]
        );
    }

    #[test]
    fn l_minus_n_is_refused_where_quartz_refuses_it() {
        for (expression, problem) in [
            ("0 0 0 L-31 * ?", "from 0 to 30"),
            ("0 0 0 1,L-2 * ?", "whole day-of-month field"),
            ("0 0 0 L-2 * MON", "put ? in one of the two"),
        ] {
            let err = ScheduleSpec::parse("CRON", expression).unwrap_err();
            assert!(err.to_string().contains(problem), "{expression}: {err}");
        }
        let err = ScheduleSpec::parse("CRON", "0 0 0 L-31 * ?").unwrap_err();
        assert!(
            err.to_string().contains("field 4 (day-of-month) \"L-31\""),
            "{err}"
        );
    }

    #[test]
    fn a_schedule_that_never_fires_says_so() {
        let after = ms("2026-01-01T00:00:00Z");
        for expression in ["0 0 0 30 2 ?", "0 0 0 L-30 2 ?", "0 0 0 1 1 ? 2020"] {
            let spec = ScheduleSpec::parse("CRON", expression).unwrap();
            let started = std::time::Instant::now();
            assert_eq!(spec.next_after(after, Tz::UTC), None, "{expression}");
            assert!(
                started.elapsed() < std::time::Duration::from_secs(2),
                "{expression} took {:?} to give up",
                started.elapsed()
            );
            let note = preview_shortfall(&spec, Tz::UTC, after, &[], 5).unwrap();
            assert!(
                note.starts_with(&format!(
                    "{expression:?} never fires after 2026-01-01T00:00:00+00:00"
                )),
                "{note}"
            );
        }
        let once = ScheduleSpec::parse("CRON", "0 0 0 1 1 ? 2027").unwrap();
        let fires = preview(&once, Tz::UTC, after, 3);
        assert_eq!(
            preview_shortfall(&once, Tz::UTC, after, &fires, 3).as_deref(),
            Some("no fire after 2027-01-01T00:00:00+00:00")
        );
        assert_eq!(preview_shortfall(&once, Tz::UTC, after, &fires, 1), None);
        let manual = preview_shortfall(&ScheduleSpec::None, Tz::UTC, after, &[], 1).unwrap();
        assert!(manual.contains("NONE never fires on its own"), "{manual}");
    }

    #[test]
    fn invalid_cron_names_the_problem() {
        let err = ScheduleSpec::parse("CRON", "0 61 * * * ?").unwrap_err();
        assert!(
            err.to_string().starts_with(
                "invalid cron expression \"0 61 * * * ?\": field 2 (minute) \"61\" is invalid"
            ),
            "{err}"
        );
        let err = ScheduleSpec::parse("CRON", "0 0 12 ? * FOO").unwrap_err();
        assert!(
            err.to_string().contains("field 6 (day-of-week) \"FOO\""),
            "{err}"
        );
        let err = ScheduleSpec::parse("CRON", "* * * * *").unwrap_err();
        assert!(err.to_string().contains("found 5 fields"), "{err}");
    }

    #[test]
    fn fix_rate_and_none() {
        let rate = ScheduleSpec::parse("FIX_RATE", "30").unwrap();
        assert_eq!(rate.next_after(1_000, Tz::UTC), Some(31_000));
        assert!(ScheduleSpec::parse("FIX_RATE", "0").is_err());
        assert!(ScheduleSpec::parse("FIX_RATE", "abc").is_err());
        assert_eq!(
            ScheduleSpec::parse("NONE", "")
                .unwrap()
                .next_after(0, Tz::UTC),
            None
        );
        let err = ScheduleSpec::parse("HOURLY", "").unwrap_err();
        assert!(
            err.to_string()
                .contains("expected one of CRON, FIX_RATE, FIX_DELAY, NONE"),
            "{err}"
        );
        let delay = ScheduleSpec::parse("FIX_DELAY", "5").unwrap();
        assert_eq!(delay.next_after(1_000, Tz::UTC), Some(6_000));
        let err = ScheduleSpec::parse("FIX_DELAY", "-1").unwrap_err();
        assert!(
            err.to_string().contains("invalid FIX_DELAY interval"),
            "{err}"
        );
    }

    #[test]
    fn unknown_time_zone_is_refused() {
        assert!(parse_time_zone("Mars/Olympus").is_err());
        assert_eq!(parse_time_zone("UTC").unwrap(), Tz::UTC);
    }
}
