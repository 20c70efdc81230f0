//! The Quartz forms `croner` does not evaluate as Quartz does, handled around it.
//!
//! [`crate::schedule`] evaluates cron expressions with `croner` in its Quartz mode, which
//! covers seconds, years, `?`, names, `L`, `W` and `#`. Two Quartz forms it lacks (croner
//! 4.0.3, the newest release), each handled here before or after croner:
//!
//! - `L` alone in day-of-week is Quartz's 7, Saturday: the last day of the week. croner reads
//!   it as "the last occurrence of no weekday" and never fires, silently; it is rewritten to
//!   `7` before parsing.
//! - `L-n` in day-of-month (`L-nW`: the weekday nearest to it) is the day `n` days before the
//!   month's last (`L-2` is the 29th of a 31-day month, the 26th of February in a non-leap
//!   year). croner refuses it. croner is given instead every day that is `L-n` in some month
//!   (`28-n` to `31-n`, two more each side for `W`), and of the fires it finds only those on
//!   the day that is `L-n` in their own month are kept: croner still does the time of day,
//!   months, years and time zone.

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, TimeZone, Weekday};
use chrono_tz::Tz;
use croner::Cron;
use croner::errors::CronError;
use croner::parser::{CronParser, Seconds, Year};

/// Why a Quartz expression was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum QuartzError {
    /// croner refused the expression, rewritten.
    #[error(transparent)]
    Croner(#[from] CronError),
    /// `L-n` with an `n` that is not a whole number from 0 to 30.
    #[error("{0:?}: L-n takes a whole number of days from 0 to 30, e.g. L-2")]
    BadLastDayOffset(String),
    /// `L-n` in a list or beside a day of the week, which Quartz refuses too.
    #[error("{0:?}: L-n must be the whole day-of-month field, with ? as day-of-week")]
    LastDayOffsetCombined(String),
}

/// A parsed Quartz expression: croner's parse, and the `L-n` day filter when there is one.
pub(crate) struct QuartzCron {
    cron: Cron,
    before_last: Option<BeforeLastDay>,
}

/// `L-n` (`L-nW` with `nearest_weekday`) in day-of-month.
#[derive(Debug, Clone, Copy, PartialEq)]
struct BeforeLastDay {
    days: u32,
    nearest_weekday: bool,
}

/// Candidate days the `L-n` filter refuses before a search gives up and reports no fire.
/// A month croner finds has at most three candidates that are not its `L-n` day (seven with
/// `W`), so this allows hundreds of months whose `L-n` falls before the 1st (`L-30` in
/// February) between two fires; an expression that never fires ends here rather than at
/// croner's year 5000.
const REFUSED_DAYS_KEPT_SEARCHING: usize = 1_000;

impl QuartzCron {
    /// Parses a Quartz expression of 6 or 7 fields (the caller has counted them).
    pub(crate) fn parse(expression: &str) -> Result<QuartzCron, QuartzError> {
        let mut fields: Vec<String> = expression.split_whitespace().map(str::to_owned).collect();
        let before_last = match fields.get(3) {
            Some(day_of_month) => parse_before_last_day(day_of_month)?,
            None => None,
        };
        if let Some(before_last) = before_last {
            let day_of_week = fields.get(5).map(String::as_str).unwrap_or("?");
            if !matches!(day_of_week, "?" | "*") {
                return Err(QuartzError::LastDayOffsetCombined(fields[3].clone()));
            }
            fields[3] = before_last.candidate_days();
        }
        if let Some(day_of_week) = fields.get_mut(5) {
            *day_of_week = saturday_for_last(day_of_week);
        }
        let cron = quartz_parser().parse(&fields.join(" "))?;
        Ok(QuartzCron { cron, before_last })
    }

    /// The first fire strictly after `after`.
    pub(crate) fn next_after(&self, after: &DateTime<Tz>) -> Option<DateTime<Tz>> {
        let mut next = self.cron.find_next_occurrence(after, false).ok()?;
        let Some(before_last) = self.before_last else {
            return Some(next);
        };
        for _ in 0..REFUSED_DAYS_KEPT_SEARCHING {
            if before_last.is_day(next.date_naive()) {
                return Some(next);
            }
            // Every other fire that day is on the wrong day too.
            next = self
                .cron
                .find_next_occurrence(&start_of_next_day(&next)?, true)
                .ok()?;
        }
        None
    }
}

fn quartz_parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Required)
        .year(Year::Optional)
        .alternative_weekdays(true)
        // Quartz's `X/N` (start at X, every N: XXL-JOB's ubiquitous `0/5`), which croner
        // rejects by default.
        .sloppy_ranges(true)
        .build()
}

/// The day-of-week field with each `L` standing alone (Quartz: Saturday) written as `7`,
/// which croner's Quartz numbering reads as Saturday. `6L` (the last Friday) stays.
fn saturday_for_last(day_of_week: &str) -> String {
    day_of_week
        .split(',')
        .map(|item| {
            if item.eq_ignore_ascii_case("L") {
                "7"
            } else {
                item
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `L-n` or `L-nW` as the day-of-month field, `None` for any other field.
fn parse_before_last_day(field: &str) -> Result<Option<BeforeLastDay>, QuartzError> {
    let upper = field.to_ascii_uppercase();
    let Some(at) = upper.find("L-") else {
        return Ok(None);
    };
    if at != 0 || upper.contains(',') {
        return Err(QuartzError::LastDayOffsetCombined(field.to_owned()));
    }
    let offset = &upper[2..];
    let (digits, nearest_weekday) = match offset.strip_suffix('W') {
        Some(digits) => (digits, true),
        None => (offset, false),
    };
    match digits.parse::<u32>() {
        Ok(days) if days <= 30 && digits.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(Some(BeforeLastDay {
                days,
                nearest_weekday,
            }))
        }
        _ => Err(QuartzError::BadLastDayOffset(field.to_owned())),
    }
}

impl BeforeLastDay {
    /// The days of the month that are this day in some month, as a croner day-of-month
    /// range: `28-n` (February) to `31-n`, widened by the two days `W` may move it.
    fn candidate_days(self) -> String {
        let widen = if self.nearest_weekday { 2 } else { 0 };
        let first = (28 - i64::from(self.days) - widen).max(1);
        let last = (31 - i64::from(self.days) + widen).min(31);
        if first == last {
            first.to_string()
        } else {
            format!("{first}-{last}")
        }
    }

    /// Whether `date` is this day of its month. A month shorter than `n + 1` days has none.
    fn is_day(self, date: NaiveDate) -> bool {
        let length = u32::from(date.num_days_in_month());
        let Some(target) = length.checked_sub(self.days).filter(|&day| day >= 1) else {
            return false;
        };
        let day = if self.nearest_weekday {
            nearest_weekday(date.with_day(target).unwrap_or(date), length)
        } else {
            target
        };
        date.day() == day
    }
}

/// Quartz's `W`: the weekday (Monday to Friday) nearest `date`, without leaving its month.
fn nearest_weekday(date: NaiveDate, month_length: u32) -> u32 {
    let day = date.day();
    match date.weekday() {
        Weekday::Sat if day == 1 => 3,
        Weekday::Sat => day - 1,
        Weekday::Sun if day == month_length => day - 2,
        Weekday::Sun => day + 1,
        _ => day,
    }
}

/// The first instant of the local day after `at`'s. Where the clocks spring forward at
/// midnight that day has no 00:00 and starts at the end of the gap: the first minute after
/// midnight that exists.
fn start_of_next_day(at: &DateTime<Tz>) -> Option<DateTime<Tz>> {
    let zone = at.timezone();
    let midnight = at.date_naive().succ_opt()?.and_time(NaiveTime::MIN);
    (0..24 * 60).find_map(|minute| {
        zone.from_local_datetime(&(midnight + chrono::Duration::minutes(minute)))
            .earliest()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn l_alone_in_day_of_week_is_saturday_and_nth_last_weekdays_stay() {
        assert_eq!(saturday_for_last("L"), "7");
        assert_eq!(saturday_for_last("l"), "7");
        assert_eq!(saturday_for_last("2,L"), "2,7");
        assert_eq!(saturday_for_last("6L"), "6L");
        assert_eq!(saturday_for_last("?"), "?");
    }

    #[test]
    fn before_last_day_parses_quartz_offsets_and_refuses_the_rest() {
        let parsed = |field: &str| parse_before_last_day(field).map_err(|e| e.to_string());
        assert_eq!(
            parsed("L-2"),
            Ok(Some(BeforeLastDay {
                days: 2,
                nearest_weekday: false
            }))
        );
        assert_eq!(
            parsed("l-30w"),
            Ok(Some(BeforeLastDay {
                days: 30,
                nearest_weekday: true
            }))
        );
        assert_eq!(parsed("L"), Ok(None));
        assert_eq!(parsed("LW"), Ok(None));
        assert_eq!(parsed("15"), Ok(None));
        assert!(parsed("L-31").unwrap_err().contains("from 0 to 30"));
        assert!(parsed("L-x").unwrap_err().contains("from 0 to 30"));
        assert!(parsed("L-+2").unwrap_err().contains("from 0 to 30"));
        assert!(parsed("1,L-2").unwrap_err().contains("whole day-of-month"));
    }

    #[test]
    fn candidate_days_cover_every_month_length() {
        let days = |days, nearest_weekday| {
            BeforeLastDay {
                days,
                nearest_weekday,
            }
            .candidate_days()
        };
        assert_eq!(days(0, false), "28-31");
        assert_eq!(days(2, false), "26-29");
        assert_eq!(days(2, true), "24-31");
        assert_eq!(days(29, false), "1-2");
        assert_eq!(days(30, false), "1");
        assert_eq!(days(30, true), "1-3");
    }

    #[test]
    fn the_day_before_last_depends_on_the_month_and_leap_years() {
        let two = BeforeLastDay {
            days: 2,
            nearest_weekday: false,
        };
        assert!(two.is_day(date("2026-01-29")));
        assert!(two.is_day(date("2026-02-26")));
        assert!(two.is_day(date("2028-02-27")));
        assert!(!two.is_day(date("2026-02-27")));
        assert!(two.is_day(date("2026-04-28")));
        let thirty = BeforeLastDay {
            days: 30,
            nearest_weekday: false,
        };
        assert!(thirty.is_day(date("2026-01-01")));
        assert!(!thirty.is_day(date("2026-04-01")), "April has no L-30");
        // 2026-05-29 (L-2) is a Friday; 2026-02-28 (L-0) a Saturday, 2026-03-29 (L-2) a
        // Sunday; 2026-08-01 (L-30) a Saturday, whose nearest weekday in August is Monday 3rd.
        let weekday = |days| BeforeLastDay {
            days,
            nearest_weekday: true,
        };
        assert!(weekday(2).is_day(date("2026-05-29")));
        assert!(weekday(0).is_day(date("2026-02-27")));
        assert!(weekday(2).is_day(date("2026-03-30")));
        assert!(weekday(30).is_day(date("2026-08-03")));
    }

    #[test]
    fn the_next_day_starts_after_a_gap_at_midnight() {
        // America/Santiago springs forward at 24:00 on 2026-09-05: 2026-09-06 starts at 01:00.
        let santiago: Tz = "America/Santiago".parse().unwrap();
        let evening = santiago
            .with_ymd_and_hms(2026, 9, 5, 20, 0, 0)
            .single()
            .unwrap();
        let next = start_of_next_day(&evening).unwrap();
        assert_eq!(next.date_naive(), date("2026-09-06"));
        assert_eq!(next.time(), NaiveTime::from_hms_opt(1, 0, 0).unwrap());
    }
}
