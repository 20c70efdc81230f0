//! `L-n` in day-of-month (`L-nW`: the weekday nearest it): the day `n` days before the
//! month's last (`L-2` is the 29th of a 31-day month, the 26th of February in a non-leap
//! year). croner refuses it. croner is given instead every day that is `L-n` in some month
//! (`28-n` to `31-n`, two more each side for `W`), and of the days it finds only the one that
//! is `L-n` in its own month is kept ([`super::matcher`]): croner still does the time of day,
//! months and years.

use chrono::{Datelike, NaiveDate, Weekday};

/// `L-n` (`L-nW` with `nearest_weekday`) in day-of-month.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct BeforeLastDay {
    pub(crate) days: u32,
    pub(crate) nearest_weekday: bool,
}

/// `L-n` or `L-nW` (upper case) as a day-of-month item, `None` for any other item.
pub(crate) fn parse_before_last_day(item: &str) -> Option<Result<BeforeLastDay, String>> {
    let offset = item.strip_prefix("L-")?;
    let (digits, nearest_weekday) = match offset.strip_suffix('W') {
        Some(digits) => (digits, true),
        None => (offset, false),
    };
    Some(match digits.parse::<u32>() {
        Ok(days) if days <= 30 && digits.bytes().all(|b| b.is_ascii_digit()) => Ok(BeforeLastDay {
            days,
            nearest_weekday,
        }),
        _ => Err("L-n takes a whole number of days from 0 to 30, e.g. L-2".to_owned()),
    })
}

impl BeforeLastDay {
    /// The days of the month that are this day in some month, as a croner day-of-month
    /// range: `28-n` (February) to `31-n`, widened by the two days `W` may move it.
    pub(crate) fn candidate_days(self) -> String {
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
    pub(crate) fn is_day(self, date: NaiveDate) -> bool {
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

    /// As written: `L-2`, `L-2W`.
    pub(crate) fn text(self) -> String {
        let w = if self.nearest_weekday { "W" } else { "" };
        format!("L-{}{w}", self.days)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn date(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn before_last_day_parses_quartz_offsets_and_refuses_the_rest() {
        let parsed = |item: &str| parse_before_last_day(item).map(|read| read.map(|at| at.text()));
        assert_eq!(parsed("L-2"), Some(Ok("L-2".to_owned())));
        assert_eq!(parsed("L-30W"), Some(Ok("L-30W".to_owned())));
        assert_eq!(parsed("L"), None);
        assert_eq!(parsed("LW"), None);
        assert_eq!(parsed("15"), None);
        for bad in ["L-31", "L-X", "L-+2", "L-"] {
            assert!(
                parsed(bad).unwrap().unwrap_err().contains("from 0 to 30"),
                "{bad}"
            );
        }
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
}
