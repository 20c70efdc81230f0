//! The wall-clock times an expression names, found by croner on naive local times: which
//! instants they are when the clocks change is [`super::clocks`]' business, so croner never
//! sees a time zone.

use chrono::{Duration, NaiveDateTime, NaiveTime};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use super::fields::{DayOfMonth, Fields};
use super::last_day::BeforeLastDay;
use super::reader::QuartzError;
use super::render::croner_pattern;

/// Candidate days the `L-n` filter refuses before a search gives up and reports no fire.
/// A month croner finds has at most three candidates that are not its `L-n` day (seven with
/// `W`), so this allows hundreds of months whose `L-n` falls before the 1st (`L-30` in
/// February) between two fires; an expression that never fires ends here rather than at
/// croner's year 5000.
const REFUSED_DAYS_KEPT_SEARCHING: usize = 1_000;

/// An expression's wall-clock times.
#[derive(Debug)]
pub(crate) struct Matcher {
    cron: Cron,
    before_last: Option<BeforeLastDay>,
}

impl Matcher {
    /// The matcher of `fields`.
    pub(crate) fn new(fields: &Fields) -> Result<Matcher, QuartzError> {
        let pattern = croner_pattern(fields);
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Optional)
            .alternative_weekdays(true)
            .build()
            .parse(&pattern)
            .map_err(|error| QuartzError::Unevaluable {
                pattern: pattern.clone(),
                reason: error.to_string(),
            })?;
        let before_last = match fields.day_of_month {
            DayOfMonth::BeforeLast(before_last) => Some(before_last),
            _ => None,
        };
        Ok(Matcher { cron, before_last })
    }

    /// The first wall-clock time after `after` (at or after it when `inclusive`).
    pub(crate) fn next(&self, after: NaiveDateTime, inclusive: bool) -> Option<NaiveDateTime> {
        let mut next = self.cron.find_next_occurrence(&after, inclusive).ok()?;
        let Some(before_last) = self.before_last else {
            return Some(next);
        };
        for _ in 0..REFUSED_DAYS_KEPT_SEARCHING {
            if before_last.is_day(next.date()) {
                return Some(next);
            }
            // Every other time that day is on the wrong day too.
            let tomorrow = next.date().succ_opt()?.and_time(NaiveTime::MIN);
            next = self.cron.find_next_occurrence(&tomorrow, true).ok()?;
        }
        None
    }
}

/// `at` plus `seconds`.
pub(crate) fn later(at: NaiveDateTime, seconds: i64) -> NaiveDateTime {
    at + Duration::seconds(seconds)
}
