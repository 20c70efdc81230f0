//! Wall-clock times to instants when the clocks change: the rule for a time the clocks skip
//! (spring forward) and a time they repeat (autumn).
//!
//! Quartz 2.3.2, run in nine zones around their changes (the differential test), does this:
//! a skipped time does not fire; a repeated time fires once, at its second occurrence (the
//! one after the clocks went back); the first pass of a repeated hour fires nothing at all,
//! so an hourly or every-minute job is silent for that hour; and the search for the next
//! fire goes by the wall clock, so from a start inside the first pass it skips what is
//! still ahead in the second pass (01:45 on the first pass, next 01:30: the next day's).
//!
//! Kadence decides one rule by the job's shape, consistent across both changes:
//!
//! - **A job at times of day** (any hour field but every hour: `0 30 2 * * ?`,
//!   `0 0,30 1 * * ?`, `0 */15 1-3 * * ?`): each of its wall-clock times fires once a day. A
//!   repeated time fires once, at its second occurrence, as in Quartz. A skipped time fires
//!   at the end of the gap (02:30 in Berlin on 2026-03-29 fires at 03:00 CEST), once however
//!   many of its times fall in the gap; Quartz drops them, so a job at 02:30 would miss that
//!   day entirely.
//! - **A job of every hour** (`*`, `0/1`, `0-23`: `0 0 * * * ?`, `0 */5 * * * ?`): it runs by
//!   the clock's real hours. It fires in both passes of a repeated hour, where Quartz leaves
//!   the first out and the job silent for an hour; and nothing in a skipped hour, as in
//!   Quartz (that hour never happened: its next fire is the first after the gap).
//! - **The next fire after an instant** is the first one after it in real time: from a start
//!   inside the first pass of a repeated hour, the second pass still lies ahead.
//!
//! [`Clocks::QUARTZ`] is Quartz's rule, which the import uses to list a schedule's fires as
//! XXL-JOB has them.

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeZone};
use chrono_tz::Tz;

use super::matcher::{Matcher, later};

/// What happens to wall-clock times when the clocks change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clocks {
    /// A time the clocks skip.
    pub skipped: Skipped,
    /// A time the clocks repeat.
    pub repeated: Repeated,
    /// Where the search for the next fire starts.
    pub search: Search,
}

/// A wall-clock time that does not exist (spring forward).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// It fires at the first instant after the gap.
    MovesToGapEnd,
    /// It does not fire.
    DoesNotFire,
}

/// A wall-clock time that happens twice (autumn).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeated {
    /// It fires at its second occurrence only.
    SecondOnly,
    /// It fires at both.
    Both,
}

/// Where the next fire after an instant is searched from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// From the instant: a start inside the first pass of a repeated hour still has the
    /// second pass ahead.
    FromInstant,
    /// From the instant's wall-clock time, as Quartz does.
    FromWallClock,
}

impl Clocks {
    /// Quartz 2.3.2's (XXL-JOB's).
    pub const QUARTZ: Clocks = Clocks {
        skipped: Skipped::DoesNotFire,
        repeated: Repeated::SecondOnly,
        search: Search::FromWallClock,
    };

    /// Kadence's for a job at times of day (`every_hour` false) or of every hour.
    pub fn kadence(every_hour: bool) -> Clocks {
        if every_hour {
            Clocks {
                skipped: Skipped::DoesNotFire,
                repeated: Repeated::Both,
                search: Search::FromInstant,
            }
        } else {
            Clocks {
                skipped: Skipped::MovesToGapEnd,
                repeated: Repeated::SecondOnly,
                search: Search::FromInstant,
            }
        }
    }
}

/// The first fire of `matcher` strictly after `after`, in `after`'s zone, under `clocks`.
pub(crate) fn next_fire(
    matcher: &Matcher,
    after: &DateTime<Tz>,
    clocks: Clocks,
) -> Option<DateTime<Tz>> {
    let zone = after.timezone();
    let from_wall_clock = first_fire(matcher, zone, after, after.naive_local(), false, clocks);
    // A start on the first pass of a repeated hour: the second pass, from its first time,
    // is still ahead (its fires are later than any on the first pass, so this only wins when
    // the first pass has no fire left).
    let second_pass = match (clocks.search, repeat_start(zone, after)) {
        (Search::FromInstant, Some(start)) => first_fire(matcher, zone, after, start, true, clocks),
        _ => None,
    };
    match (from_wall_clock, second_pass) {
        (Some(one), Some(other)) => Some(one.min(other)),
        (one, other) => one.or(other),
    }
}

/// The first fire after `after` of the wall-clock times from `cursor` on.
fn first_fire(
    matcher: &Matcher,
    zone: Tz,
    after: &DateTime<Tz>,
    mut cursor: NaiveDateTime,
    mut inclusive: bool,
    clocks: Clocks,
) -> Option<DateTime<Tz>> {
    loop {
        let time = matcher.next(cursor, inclusive)?;
        (cursor, inclusive) = (time, false);
        let fire = match zone.from_local_datetime(&time) {
            LocalResult::Single(at) => at,
            LocalResult::Ambiguous(first, second) => {
                if clocks.repeated == Repeated::Both && first > *after {
                    first
                } else {
                    second
                }
            }
            LocalResult::None => {
                let end = gap_end(zone, time)?;
                match clocks.skipped {
                    Skipped::MovesToGapEnd => end,
                    Skipped::DoesNotFire => {
                        // Nothing in the gap fires: go on from its end.
                        (cursor, inclusive) = (end.naive_local(), true);
                        continue;
                    }
                }
            }
        };
        if fire > *after {
            return Some(fire);
        }
    }
}

/// When `after` is on the first pass of a repeated stretch of wall-clock time: the stretch's
/// first wall-clock time.
fn repeat_start(zone: Tz, after: &DateTime<Tz>) -> Option<NaiveDateTime> {
    match zone.from_local_datetime(&after.naive_local()) {
        LocalResult::Ambiguous(_, second) if *after < second => {
            Some(change_after(zone, after, &second)?.naive_local())
        }
        _ => None,
    }
}

/// The first instant after the gap `time` falls in (the transition itself).
fn gap_end(zone: Tz, time: NaiveDateTime) -> Option<DateTime<Tz>> {
    // The first minute after `time` that exists is less than a minute past the gap's end.
    let exists = (1..=48 * 60)
        .map(|minutes| later(time, minutes * 60))
        .find_map(|probe| zone.from_local_datetime(&probe).earliest())?;
    let before = zone.timestamp_opt(exists.timestamp() - 60, 0).single()?;
    change_after(zone, &before, &exists)
}

/// The instants `zone` changes its offset from UTC, from `from` up to `to`: its clock changes.
pub fn clock_changes(zone: Tz, from: &DateTime<Tz>, to: &DateTime<Tz>) -> Vec<DateTime<Tz>> {
    const DAY: i64 = 86_400;
    let at = |seconds: i64| zone.timestamp_opt(seconds, 0).single();
    let mut changes = Vec::new();
    let mut day = from.timestamp();
    while day < to.timestamp() {
        let (Some(start), Some(end)) = (at(day), at(day + DAY)) else {
            break;
        };
        if start.offset().fix() != end.offset().fix()
            && let Some(change) = change_after(zone, &start, &end)
        {
            changes.push(change);
        }
        day += DAY;
    }
    changes
}

/// The first whole second after `from`, up to `to`, whose offset from UTC differs from
/// `from`'s (the caller knows `to`'s does).
fn change_after(zone: Tz, from: &DateTime<Tz>, to: &DateTime<Tz>) -> Option<DateTime<Tz>> {
    let offset = |seconds: i64| {
        zone.timestamp_opt(seconds, 0)
            .single()
            .map(|at| at.offset().fix())
    };
    let (mut low, mut high) = (from.timestamp(), to.timestamp());
    let before = offset(low)?;
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if offset(middle)? == before {
            low = middle;
        } else {
            high = middle;
        }
    }
    zone.timestamp_opt(high, 0).single()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::quartz::{Dialect, Reading};

    fn at(zone: &str, utc: &str) -> DateTime<Tz> {
        let zone: Tz = zone.parse().unwrap();
        let utc = chrono::DateTime::parse_from_rfc3339(utc).unwrap();
        utc.with_timezone(&zone)
    }

    fn next(expression: &str, after: &DateTime<Tz>, clocks: Clocks) -> String {
        let reading = Reading::read(expression, Dialect::Kadence).unwrap();
        let next = reading.next_after(after, clocks).unwrap();
        next.to_rfc3339()
    }

    /// The next fire under Kadence's rule for a job at times of day, and under Quartz's.
    fn ours_and_quartz(expression: &str, after: &DateTime<Tz>) -> [String; 2] {
        [Clocks::kadence(false), Clocks::QUARTZ].map(|clocks| next(expression, after, clocks))
    }

    #[test]
    fn a_half_hour_change_moves_a_fire_to_the_half_hour() {
        // Lord Howe goes from 02:00 (+10:30) to 02:30 (+11:00) on 2026-10-04.
        let before = at("Australia/Lord_Howe", "2026-10-03T15:00:00Z");
        assert_eq!(
            ours_and_quartz("0 15 2 * * ?", &before),
            ["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"]
        );
    }

    #[test]
    fn the_search_from_the_first_pass_sees_the_second() {
        // 01:45 BST on 2027-10-31, the first pass of 01:00–02:00 in London.
        let first_pass = at("Europe/London", "2027-10-31T00:45:00Z");
        let start = repeat_start(first_pass.timezone(), &first_pass).unwrap();
        assert_eq!(start.to_string(), "2027-10-31 01:00:00");
        assert_eq!(
            ours_and_quartz("0 30 1 * * ?", &first_pass),
            ["2027-10-31T01:30:00+00:00", "2027-11-01T01:30:00+00:00"]
        );
        // A job of every hour goes on through the first pass, then the second.
        let every_hour = Clocks::kadence(true);
        assert_eq!(
            next("0 50 * * * ?", &first_pass, every_hour),
            "2027-10-31T01:50:00+01:00"
        );
    }

    #[test]
    fn clock_changes_are_found_to_the_second() {
        let zone: Tz = "Europe/Berlin".parse().unwrap();
        let year = (
            at("UTC", "2026-01-01T00:00:00Z"),
            at("UTC", "2027-01-01T00:00:00Z"),
        );
        let changes: Vec<String> = clock_changes(
            zone,
            &year.0.with_timezone(&zone),
            &year.1.with_timezone(&zone),
        )
        .iter()
        .map(|change| change.to_rfc3339())
        .collect();
        assert_eq!(
            changes,
            ["2026-03-29T03:00:00+02:00", "2026-10-25T02:00:00+01:00"]
        );
        let gap =
            NaiveDateTime::parse_from_str("2026-03-29 02:30:00", "%Y-%m-%d %H:%M:%S").unwrap();
        assert_eq!(
            gap_end(zone, gap).unwrap().to_rfc3339(),
            "2026-03-29T03:00:00+02:00"
        );
    }
}
