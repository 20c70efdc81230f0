//! Quartz expressions as XXL-JOB users write them, with their next fire times worked out by
//! hand from the calendar (2026-01-01 is a Thursday; 2026 is not a leap year, 2028 is).
//! Each row: expression, time zone, the instant to start after, the expected next fires.

use chrono::{DateTime, Utc};
use kadence_scheduler::domain::schedule::{ScheduleSpec, parse_time_zone, preview};

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
    // ranges over the end of a field, as Quartz reads them: 22, 23, 0, 1, 2
    ("0 0 22-2 * * ?", "UTC", NEW_YEAR, &["2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z", "2026-01-01T22:00:00Z", "2026-01-01T23:00:00Z", "2026-01-02T00:00:00Z"]),
    ("50-10 * * * * ?", "UTC", "2026-01-01T00:00:09Z", &["2026-01-01T00:00:10Z", "2026-01-01T00:00:50Z"]),
    ("0 50-10 * * * ?", "UTC", "2026-01-01T00:09:00Z", &["2026-01-01T00:10:00Z", "2026-01-01T00:50:00Z"]),
    ("0 0 12 ? * FRI-MON", "UTC", NEW_YEAR, &["2026-01-02T12:00:00Z", "2026-01-03T12:00:00Z", "2026-01-04T12:00:00Z", "2026-01-05T12:00:00Z", "2026-01-09T12:00:00Z"]),
    ("0 0 0 1 NOV-FEB ?", "UTC", NEW_YEAR, &["2026-02-01T00:00:00Z", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"]),
    ("0 0 0 28-3/2 * ?", "UTC", NEW_YEAR, &["2026-01-03T00:00:00Z", "2026-01-28T00:00:00Z", "2026-01-30T00:00:00Z", "2026-02-01T00:00:00Z"]),
    // what Kadence accepts beyond Quartz: L beside other days, several last or nth weekdays
    ("0 0 12 L,15 * ?", "UTC", NEW_YEAR, &["2026-01-15T12:00:00Z", "2026-01-31T12:00:00Z", "2026-02-15T12:00:00Z", "2026-02-28T12:00:00Z"]),
    ("0 0 12 ? * 5L,3", "UTC", "2026-01-26T00:00:00Z", &["2026-01-27T12:00:00Z", "2026-01-29T12:00:00Z", "2026-02-03T12:00:00Z"]),
    ("0 0 12 ? * 2#1,3#2", "UTC", NEW_YEAR, &["2026-01-05T12:00:00Z", "2026-01-13T12:00:00Z", "2026-02-02T12:00:00Z"]),
    // a step after a name steps, as after numbers (Quartz ignores it: the import keeps that)
    ("0 0 9 ? * MON-FRI/2", "UTC", NEW_YEAR, &["2026-01-02T09:00:00Z", "2026-01-05T09:00:00Z", "2026-01-07T09:00:00Z"]),
    // nW for a day the month lacks: no fire that month (April, June)
    ("0 0 12 31W * ?", "UTC", "2026-03-01T00:00:00Z", &["2026-03-31T12:00:00Z", "2026-05-29T12:00:00Z", "2026-07-31T12:00:00Z"]),
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

fn fires_in(zone: &str, expression: &str, after: &str, count: usize) -> Vec<String> {
    let schedule = ScheduleSpec::parse("CRON", expression)
        .unwrap_or_else(|error| panic!("{expression}: {error}"));
    preview(&schedule, parse_time_zone(zone).unwrap(), ms(after), count)
        .into_iter()
        .map(rfc)
        .collect()
}

/// Europe/London goes back from 02:00 BST to 01:00 GMT on 2027-10-31: 01:00–01:59 happens
/// twice, at 00:00Z–00:59Z (BST) and 01:00Z–01:59Z (GMT). A job at times of day fires each
/// of them once, at the second, as Quartz does, whatever the shape of its fields.
#[test]
fn the_repeated_autumn_hour_fires_each_time_once() {
    let london =
        |expression, count| fires_in("Europe/London", expression, "2027-10-30T12:00:00Z", count);
    assert_eq!(
        london("0 0,30 1 * * ?", 3),
        [
            "2027-10-31T01:00:00Z",
            "2027-10-31T01:30:00Z",
            "2027-11-01T01:00:00Z"
        ]
    );
    assert_eq!(
        london("0 30 1 * * ?", 2),
        ["2027-10-31T01:30:00Z", "2027-11-01T01:30:00Z"]
    );
    assert_eq!(
        london("0 */20 1 * * ?", 4),
        [
            "2027-10-31T01:00:00Z",
            "2027-10-31T01:20:00Z",
            "2027-10-31T01:40:00Z",
            "2027-11-01T01:00:00Z"
        ]
    );
    assert_eq!(
        london("0,30 59 1 * * ?", 3),
        [
            "2027-10-31T01:59:00Z",
            "2027-10-31T01:59:30Z",
            "2027-11-01T01:59:00Z"
        ]
    );
    let every_minute = london("0 * 1 * * ?", 61);
    assert_eq!(every_minute[0], "2027-10-31T01:00:00Z");
    assert_eq!(every_minute[59], "2027-10-31T01:59:00Z");
    assert_eq!(every_minute[60], "2027-11-01T01:00:00Z");
    assert_eq!(
        london("0 30 1,2 * * ?", 3),
        [
            "2027-10-31T01:30:00Z",
            "2027-10-31T02:30:00Z",
            "2027-11-01T01:30:00Z"
        ]
    );
    assert_eq!(
        london("0 0 0-2 * * ?", 4),
        [
            "2027-10-30T23:00:00Z",
            "2027-10-31T01:00:00Z",
            "2027-10-31T02:00:00Z",
            "2027-11-01T00:00:00Z"
        ]
    );
    // Started inside the first pass (01:10 BST), the second pass is still ahead.
    assert_eq!(
        fires_in("Europe/London", "0 30 1 * * ?", "2027-10-31T00:45:00Z", 1),
        ["2027-10-31T01:30:00Z"]
    );
}

/// Europe/Berlin jumps from 02:00 to 03:00 CEST on 2026-03-29 (01:00Z). A job at times of
/// day fires once at the end of the gap (03:00 CEST), however many of its times the gap
/// holds; Quartz would leave the day out.
#[test]
fn the_spring_gap_moves_its_fires_to_the_gap_s_end() {
    let berlin =
        |expression, count| fires_in("Europe/Berlin", expression, "2026-03-28T12:00:00Z", count);
    assert_eq!(
        berlin("0 30 2 * * ?", 2),
        ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]
    );
    assert_eq!(
        berlin("0 0,30 2 * * ?", 3),
        [
            "2026-03-29T01:00:00Z",
            "2026-03-30T00:00:00Z",
            "2026-03-30T00:30:00Z"
        ]
    );
    assert_eq!(
        berlin("0 */20 2 * * ?", 2),
        ["2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"]
    );
    assert_eq!(
        berlin("*/10 * 2 * * ?", 2),
        ["2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"]
    );
    assert_eq!(
        berlin("0 30 2-3 * * ?", 3),
        [
            "2026-03-29T01:00:00Z",
            "2026-03-29T01:30:00Z",
            "2026-03-30T00:30:00Z"
        ]
    );
    // A time at the gap's end fires once, with what moved there.
    assert_eq!(
        berlin("0 0 2,3 * * ?", 2),
        ["2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"]
    );
    // America/Santiago springs forward at midnight on 2026-09-06: that day starts at 01:00.
    assert_eq!(
        fires_in("America/Santiago", "0 0 0 * * ?", "2026-09-05T12:00:00Z", 2),
        ["2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z"]
    );
}

/// A job of every hour runs by the clock's real hours: in both passes of a repeated hour, and
/// nothing for the hour the clocks skip.
#[test]
fn jobs_of_every_hour_follow_the_real_hours() {
    assert_eq!(
        fires_in("Europe/London", "0 0 * * * ?", "2027-10-30T22:30:00Z", 4),
        [
            "2027-10-30T23:00:00Z",
            "2027-10-31T00:00:00Z",
            "2027-10-31T01:00:00Z",
            "2027-10-31T02:00:00Z"
        ]
    );
    assert_eq!(
        fires_in("Europe/Berlin", "0 30 * * * ?", "2026-03-28T23:45:00Z", 2),
        ["2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z"]
    );
    assert_eq!(
        fires_in("Europe/Berlin", "0 0 * * * ?", "2026-03-28T23:30:00Z", 2),
        ["2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z"]
    );
}

fn refusal(expression: &str) -> String {
    match ScheduleSpec::parse("CRON", expression) {
        Ok(spec) => panic!("{expression} was accepted: {spec:?}"),
        Err(error) => error.to_string(),
    }
}

/// Quartz fires on the days one day field names, the other being `?`; both given (or both
/// `?`) is refused, as Quartz refuses it, rather than read as "either".
#[test]
fn both_day_fields_given_or_neither_is_refused() {
    for expression in [
        "0 0 12 15 * MON",
        "0 0 12 * * *",
        "* * * * * *",
        "0 0 12 L * 6L",
    ] {
        let message = refusal(expression);
        assert!(
            message.contains("are both given: put ? in one of the two"),
            "{message}"
        );
    }
    let message = refusal("0 0 12 ? * ?");
    assert!(
        message.contains("both ?: put ? in one of the two only"),
        "{message}"
    );
}

/// A step as large as the field can only ever give its start (`*/60` seconds is second 0):
/// refused with Quartz's bounds, which let a step as large as a field counted from 1 pass.
#[test]
fn a_step_as_large_as_the_field_is_refused() {
    for (expression, field, largest) in [
        ("*/60 * * * * ?", "field 1 (second) \"*/60\"", 59),
        ("0/60 * * * * ?", "field 1 (second) \"0/60\"", 59),
        ("0 */60 * * * ?", "field 2 (minute) \"*/60\"", 59),
        ("0 0 */24 * * ?", "field 3 (hour) \"*/24\"", 23),
        ("0 0 0 */32 * ?", "field 4 (day-of-month) \"*/32\"", 31),
        ("0 0 0 1 */13 ?", "field 5 (month) \"*/13\"", 12),
        ("0 0 0 ? * */8", "field 6 (day-of-week) \"*/8\"", 7),
        ("1-5/60 * * * * ?", "field 1 (second) \"1-5/60\"", 59),
    ] {
        let message = refusal(expression);
        assert!(message.contains(field), "{message}");
        assert!(
            message.contains(&format!("the largest step is {largest}")),
            "{message}"
        );
    }
    assert!(refusal("*/60 * * * * ?").contains("for once a minute write 0"));
    for accepted in [
        "*/59 * * * * ?",
        "0 0 */23 * * ?",
        "0 0 0 */31 * ?",
        "0 0 0 1 */12 ?",
        "0 0 0 ? * */7",
    ] {
        assert!(ScheduleSpec::parse("CRON", accepted).is_ok(), "{accepted}");
    }
}

/// Forms Quartz reads oddly are refused with what to write instead (the XXL-JOB import
/// rewrites them to what they meant there).
#[test]
fn forms_quartz_reads_oddly_are_refused_with_a_reason() {
    for (expression, reason) in [
        ("0 0 9 ? * TUES", "names are three letters (TUE)"),
        ("0 0 9 1 JANUARY ?", "names are three letters (JAN)"),
        ("5,,6 * * * * ?", "an empty item in a list"),
        ("*/0 * * * * ?", "a step of 0 never moves"),
        ("0 0 12 1-5W * ?", "W follows a single day"),
        ("0 0 12 ? * 6-7L", "L and # follow a single day of the week"),
        ("0 0 0 1 1 ? 2030-2027", "a range of years goes forward"),
    ] {
        let message = refusal(expression);
        assert!(message.contains(reason), "{expression}: {message}");
    }
}
