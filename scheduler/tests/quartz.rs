//! Quartz expressions as XXL-JOB users write them, with their next fire times worked out by
//! hand from the calendar (2026-01-01 is a Thursday; 2026 is not a leap year, 2028 is).
//! Each row: expression, time zone, the instant to start after, the expected next fires.

use chrono::{DateTime, Utc};
use kadence_scheduler::schedule::{ScheduleSpec, parse_time_zone, preview};

const NEW_YEAR: &str = "2026-01-01T00:00:00Z";

fn ms(rfc3339: &str) -> i64 {
    DateTime::parse_from_rfc3339(rfc3339)
        .unwrap()
        .with_timezone(&Utc)
        .timestamp_millis()
}

fn rfc(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[rustfmt::skip]
const TABLE: &[(&str, &str, &str, &[&str])] = &[
    // seconds, lists, ranges, steps
    ("* * * * * ?", "UTC", NEW_YEAR, &["2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"]),
    ("0 * * * * ?", "UTC", NEW_YEAR, &["2026-01-01T00:01:00Z"]),
    ("0/5 * * * * ?", "UTC", NEW_YEAR, &["2026-01-01T00:00:05Z", "2026-01-01T00:00:10Z"]),
    ("*/15 * * * * ?", "UTC", NEW_YEAR, &["2026-01-01T00:00:15Z"]),
    ("5/20 * * * * ?", "UTC", NEW_YEAR, &["2026-01-01T00:00:05Z", "2026-01-01T00:00:25Z", "2026-01-01T00:00:45Z", "2026-01-01T00:01:05Z"]),
    ("0 0/15 9-10 * * ?", "UTC", NEW_YEAR, &["2026-01-01T09:00:00Z", "2026-01-01T09:15:00Z"]),
    ("10-20 * * * * ?", "UTC", NEW_YEAR, &["2026-01-01T00:00:10Z", "2026-01-01T00:00:11Z"]),
    ("5,35 * * * * ?", "UTC", NEW_YEAR, &["2026-01-01T00:00:05Z", "2026-01-01T00:00:35Z", "2026-01-01T00:01:05Z"]),
    ("0 0 * * * ?", "UTC", NEW_YEAR, &["2026-01-01T01:00:00Z"]),
    ("0 0/30 * * * ?", "UTC", NEW_YEAR, &["2026-01-01T00:30:00Z", "2026-01-01T01:00:00Z"]),
    ("0 15 10 * * ?", "UTC", NEW_YEAR, &["2026-01-01T10:15:00Z", "2026-01-02T10:15:00Z"]),
    ("0 15 10 ? * *", "UTC", NEW_YEAR, &["2026-01-01T10:15:00Z"]),
    ("0 0 0 * * ?", "UTC", NEW_YEAR, &["2026-01-02T00:00:00Z"]),
    ("0 0 6,18 * * ?", "UTC", NEW_YEAR, &["2026-01-01T06:00:00Z", "2026-01-01T18:00:00Z"]),
    ("30 45 14 * * ? *", "UTC", NEW_YEAR, &["2026-01-01T14:45:30Z"]),
    ("59 59 23 31 12 ?", "UTC", NEW_YEAR, &["2026-12-31T23:59:59Z"]),
    // days of the week, names and Quartz numbers (1 = SUN … 7 = SAT)
    ("0 15 10 ? * MON-FRI", "UTC", NEW_YEAR, &["2026-01-01T10:15:00Z", "2026-01-02T10:15:00Z", "2026-01-05T10:15:00Z"]),
    ("0 15 10 ? * SAT,SUN", "UTC", NEW_YEAR, &["2026-01-03T10:15:00Z", "2026-01-04T10:15:00Z", "2026-01-10T10:15:00Z"]),
    ("0 0 9 ? * MON", "UTC", NEW_YEAR, &["2026-01-05T09:00:00Z", "2026-01-12T09:00:00Z"]),
    ("0 0 9 ? * 2", "UTC", NEW_YEAR, &["2026-01-05T09:00:00Z"]),
    ("0 0 9 ? * 1", "UTC", NEW_YEAR, &["2026-01-04T09:00:00Z"]),
    ("0 0 9 ? * 7", "UTC", NEW_YEAR, &["2026-01-03T09:00:00Z"]),
    ("0 30 8 ? JAN-MAR MON-FRI", "UTC", NEW_YEAR, &["2026-01-01T08:30:00Z", "2026-01-02T08:30:00Z"]),
    ("0 0 0 ? 3 SUN", "UTC", NEW_YEAR, &["2026-03-01T00:00:00Z", "2026-03-08T00:00:00Z"]),
    // days of the month, months
    ("0 15 10 15 * ?", "UTC", NEW_YEAR, &["2026-01-15T10:15:00Z", "2026-02-15T10:15:00Z"]),
    ("0 0 0 31 * ?", "UTC", NEW_YEAR, &["2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z"]),
    ("0 0 10 1 */3 ?", "UTC", NEW_YEAR, &["2026-01-01T10:00:00Z", "2026-04-01T10:00:00Z"]),
    ("0 0 10 1 2/3 ?", "UTC", NEW_YEAR, &["2026-02-01T10:00:00Z", "2026-05-01T10:00:00Z"]),
    // L: last day of the month, last given weekday
    ("0 15 10 L * ?", "UTC", NEW_YEAR, &["2026-01-31T10:15:00Z", "2026-02-28T10:15:00Z", "2026-03-31T10:15:00Z"]),
    ("0 0 0 L 2 ?", "UTC", NEW_YEAR, &["2026-02-28T00:00:00Z", "2027-02-28T00:00:00Z", "2028-02-29T00:00:00Z"]),
    ("0 15 10 ? * 6L", "UTC", NEW_YEAR, &["2026-01-30T10:15:00Z", "2026-02-27T10:15:00Z"]),
    ("0 0 12 ? * L", "UTC", NEW_YEAR, &["2026-01-03T12:00:00Z", "2026-01-10T12:00:00Z"]),
    // L-n: n days before the last day of the month (L-nW: the weekday nearest it)
    ("0 15 10 L-2 * ?", "UTC", NEW_YEAR, &["2026-01-29T10:15:00Z", "2026-02-26T10:15:00Z", "2026-03-29T10:15:00Z", "2026-04-28T10:15:00Z"]),
    ("0 15 10 L-2 2 ?", "UTC", NEW_YEAR, &["2026-02-26T10:15:00Z", "2027-02-26T10:15:00Z", "2028-02-27T10:15:00Z"]),
    ("0 0 0 L-0 * ?", "UTC", NEW_YEAR, &["2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z"]),
    ("0 0 12 L-2W * ?", "UTC", NEW_YEAR, &["2026-01-29T12:00:00Z", "2026-02-26T12:00:00Z", "2026-03-30T12:00:00Z"]),
    // #: nth weekday of the month
    ("0 15 10 ? * 6#3", "UTC", NEW_YEAR, &["2026-01-16T10:15:00Z", "2026-02-20T10:15:00Z"]),
    ("0 0 12 ? * 2#1", "UTC", NEW_YEAR, &["2026-01-05T12:00:00Z", "2026-02-02T12:00:00Z"]),
    ("0 0 12 ? * 5#5", "UTC", NEW_YEAR, &["2026-01-29T12:00:00Z", "2026-04-30T12:00:00Z"]),
    ("0 0 0 ? JUN MON#2", "UTC", NEW_YEAR, &["2026-06-08T00:00:00Z"]),
    // W: nearest weekday, never leaving the month
    ("0 0 12 15W * ?", "UTC", NEW_YEAR, &["2026-01-15T12:00:00Z", "2026-02-16T12:00:00Z"]),
    ("0 0 12 17W * ?", "UTC", NEW_YEAR, &["2026-01-16T12:00:00Z"]),
    ("0 0 12 18W * ?", "UTC", NEW_YEAR, &["2026-01-19T12:00:00Z"]),
    ("0 0 12 1W 2 ?", "UTC", NEW_YEAR, &["2026-02-02T12:00:00Z"]),
    ("0 0 12 LW * ?", "UTC", NEW_YEAR, &["2026-01-30T12:00:00Z", "2026-02-27T12:00:00Z"]),
    ("0 0 12 LW 5 ?", "UTC", NEW_YEAR, &["2026-05-29T12:00:00Z"]),
    // years
    ("0 0 0 1 JAN ? 2027", "UTC", NEW_YEAR, &["2027-01-01T00:00:00Z"]),
    ("0 0 0 1 1 ? 2027-2030", "UTC", NEW_YEAR, &["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
    ("0 0 0 29 2 ?", "UTC", NEW_YEAR, &["2028-02-29T00:00:00Z"]),
    ("0 0 0 1 1 ? 2020", "UTC", NEW_YEAR, &[]),
    // time zones: evaluated locally, stored in UTC
    ("0 0 9 * * ?", "America/New_York", NEW_YEAR, &["2026-01-01T14:00:00Z"]),
    ("0 0 9 * * ?", "Asia/Kolkata", NEW_YEAR, &["2026-01-01T03:30:00Z"]),
    ("0 0 9 ? * MON", "Asia/Tokyo", NEW_YEAR, &["2026-01-05T00:00:00Z"]),
];

#[test]
fn quartz_expressions_fire_when_quartz_would() {
    assert!(TABLE.len() >= 40);
    let mut failures = Vec::new();
    for (expression, zone, after, expected) in TABLE {
        let schedule = ScheduleSpec::parse("CRON", expression)
            .unwrap_or_else(|error| panic!("{expression}: {error}"));
        let zone = parse_time_zone(zone).unwrap();
        let fires: Vec<String> = preview(&schedule, zone, ms(after), expected.len().max(1))
            .into_iter()
            .take(expected.len())
            .map(rfc)
            .collect();
        if fires != *expected {
            failures.push(format!(
                "{expression} [{zone}] after {after}: got {fires:?}, expected {expected:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows differ:\n{}",
        failures.len(),
        TABLE.len(),
        failures.join("\n")
    );
}

/// Daylight saving in the job's zone (Europe/Berlin: clocks jump 02:00 → 03:00 on
/// 2026-03-29 and fall back 03:00 → 02:00 on 2026-10-25), as documented in the README.
#[test]
fn daylight_saving_gaps_and_overlaps() {
    let berlin = parse_time_zone("Europe/Berlin").unwrap();
    let fires = |expression: &str, after: &str, count: usize| -> Vec<String> {
        let schedule = ScheduleSpec::parse("CRON", expression).unwrap();
        preview(&schedule, berlin, ms(after), count)
            .into_iter()
            .map(rfc)
            .collect()
    };
    // Gap: 02:30 does not exist on 2026-03-29; that day's fire comes at the first instant
    // after the gap, 03:00 CEST (01:00Z), and the next day is normal again.
    assert_eq!(
        fires("0 30 2 * * ?", "2026-03-28T12:00:00Z", 2),
        vec!["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]
    );
    // Overlap: 02:30 happens twice on 2026-10-25; the job fires once, at the first (CEST).
    assert_eq!(
        fires("0 30 2 * * ?", "2026-10-24T12:00:00Z", 2),
        vec!["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
    );
    // An hourly job fires every real hour across the spring change (00:00, 01:00 UTC).
    assert_eq!(
        fires("0 0 * * * ?", "2026-03-28T23:30:00Z", 2),
        vec!["2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z"]
    );
}
