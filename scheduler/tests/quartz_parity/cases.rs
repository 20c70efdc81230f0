//! The cases: a fixed-seed set of expressions in the forms Kadence and Quartz could read
//! differently (wrap-around ranges, steps as large as a field, both day fields, names, `L`,
//! `W`, `#`, years) and the common ones, each in two of nine zones, started near the zone's
//! clock changes (seconds, hours, a day or a week before, or inside a repeated hour).

use chrono::TimeZone;
use chrono_tz::Tz;
use kadence_scheduler::domain::quartz;

/// One request: the next `count` fires of `expression` in `zone` after `after_ms`.
#[derive(Debug, Clone)]
pub struct Case {
    pub expression: String,
    pub zone: &'static str,
    pub after_ms: i64,
    pub count: usize,
}

/// The zones: no changes (UTC, Kolkata, Shanghai: XXL-JOB's most common), the European and
/// American ones, a 30-minute change (Lord Howe), changes at midnight (Santiago; São Paulo
/// until 2019).
pub const ZONES: [&str; 9] = [
    "UTC",
    "Europe/London",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Asia/Shanghai",
    "America/Santiago",
];

/// Change the seed or the sizes only together with the allow-list's counts in mind: they are
/// printed, not pinned, but every entry must keep an example.
const SEED: u64 = 0x4B41_4445_4E43_4521;
const GENERATED: usize = 3_000;
const STARTS_PER_EXPRESSION: usize = 2;
const FIRES: usize = 8;

/// Expressions as XXL-JOB users write them.
const COMMON: &[&str] = &[
    "0 0/5 * * * ?",
    "0 */1 * * * ?",
    "0 0 * * * ?",
    "0 0 0 * * ?",
    "0 0 1 * * ?",
    "0 0 2 * * ?",
    "0 30 2 * * ?",
    "0 30 1 * * ?",
    "0 0 12 * * ?",
    "0 15 10 ? * MON-FRI",
    "0 0 9 ? * 2-6",
    "0 0/30 9-17 * * ?",
    "0 0 0 1 * ?",
    "0 0 0 L * ?",
    "0 0 8 ? * MON",
    "*/5 * * * * ?",
    "0/10 * * * * ?",
    "0 0 22-2 * * ?",
    "0 0,30 1 * * ?",
    "0 0,30 2 * * ?",
    "0 0 0/2 * * ?",
    "0 0 3 ? * SUN",
    "0 15 10 L * ?",
    "0 15 10 ? * 6L",
    "0 15 10 ? * 6#3",
    "0 0 12 1/5 * ?",
    "0 11 11 11 11 ?",
    "0 0 23 L * ?",
    "0 0 1 1 * ? *",
    "0 0 10,14,16 * * ?",
    "0 0 6 * * ? 2027",
    "0 0 0 ? * MON-FRI/2",
    "0 0 9 ? * TUES",
    "0 10 0 * * ?",
    "0 5 * * * ?",
    "59 59 23 * * ?",
    "0 0 1 ? * SAT",
    "0 0 */6 * * ?",
    "0 45 1 * * ?",
    "0 0 0 15W * ?",
    "0 0 12 LW * ?",
    "0 0 0 ? * FRI-MON",
    "0 0 0 1 NOV-FEB ?",
    "0 50-10 * * * ?",
];

/// Every case, always the same ones.
pub fn cases() -> Vec<Case> {
    let mut rng = Rng(SEED);
    let changes: Vec<Vec<i64>> = ZONES.iter().map(|zone| clock_changes(zone)).collect();
    let mut cases = Vec::new();
    for index in 0..COMMON.len() + GENERATED {
        let expression = match COMMON.get(index) {
            Some(common) => (*common).to_owned(),
            None => expression(&mut rng),
        };
        for _ in 0..STARTS_PER_EXPRESSION {
            let zone = rng.below(ZONES.len() as u64) as usize;
            cases.push(Case {
                expression: expression.clone(),
                zone: ZONES[zone],
                after_ms: start(&mut rng, &changes[zone]),
                count: FIRES,
            });
        }
    }
    cases
}

fn expression(rng: &mut Rng) -> String {
    let (day_of_month, day_of_week) = days(rng);
    // A rare day in a rare month might not fire for years: keep the month open for those.
    let month = if day_of_month.chars().any(|c| c == 'L' || c == 'W')
        || day_of_month.starts_with('3')
        || day_of_month.starts_with('2')
    {
        "*".to_owned()
    } else {
        month(rng)
    };
    let mut fields = vec![
        seconds(rng),
        minutes(rng),
        hours(rng),
        day_of_month,
        month,
        day_of_week,
    ];
    if rng.chance(15) {
        fields.push(
            rng.pick(&[
                "*",
                "2025-2030",
                "2025/2",
                "2026,2028",
                "2024-2035",
                "2026-2027",
            ])
            .to_owned(),
        );
    }
    fields.join(" ")
}

fn seconds(rng: &mut Rng) -> String {
    match rng.below(20) {
        0..=8 => "0".to_owned(),
        9 => rng.below(60).to_string(),
        10 => "*".to_owned(),
        11 => format!("*/{}", rng.pick(&[5, 10, 15, 20, 30, 59])),
        12 => format!("{}/{}", rng.below(30), rng.pick(&[10, 15, 20, 30])),
        13 => format!("{},{}", rng.below(30), 30 + rng.below(30)),
        14 => wrap_range(rng, 60, 0),
        15 => format!("{}/{}", wrap_range(rng, 60, 0), 1 + rng.below(12)),
        16 => format!("{}-{}", rng.below(30), 30 + rng.below(30)),
        _ => rng
            .pick(&[
                "*/60", "0/60", "*/0", "1-5/60", "5,,6", "5,", "30-29", "/15",
            ])
            .to_owned(),
    }
}

fn minutes(rng: &mut Rng) -> String {
    match rng.below(20) {
        0..=5 => "0".to_owned(),
        6..=7 => rng.pick(&["30", "15", "45", "59"]).to_owned(),
        8 => rng.below(60).to_string(),
        9 => "*".to_owned(),
        10 => format!("*/{}", rng.pick(&[5, 10, 15, 20, 30])),
        11 => format!("0/{}", rng.pick(&[15, 20, 30])),
        12 => "0,30".to_owned(),
        13 => format!("{},{}", rng.below(30), 30 + rng.below(30)),
        14 => wrap_range(rng, 60, 0),
        15 => format!("{}-{}", rng.below(30), 30 + rng.below(30)),
        16 => format!("{}/{}", wrap_range(rng, 60, 0), 5 + rng.below(10)),
        _ => rng.pick(&["*/60", "0/60", "10-20/60", "0,,30"]).to_owned(),
    }
}

/// Hours, mostly those the clocks change at (0 to 3).
fn hours(rng: &mut Rng) -> String {
    match rng.below(20) {
        0..=5 => rng.below(4).to_string(),
        6 => rng.below(24).to_string(),
        7 => rng
            .pick(&["1,2", "0,2,4", "2,14", "1,3", "0,1,2"])
            .to_owned(),
        8..=9 => "*".to_owned(),
        10 => rng.pick(&["*/1", "0/1", "0-23"]).to_owned(),
        11 => rng.pick(&["*/2", "1/2", "*/3", "0/6", "2/12"]).to_owned(),
        12..=13 => rng.pick(&["1-3", "0-2", "2-4", "1-2", "0-3"]).to_owned(),
        14..=15 => rng
            .pick(&["22-2", "23-1", "20-3/2", "21-1", "22-3/3"])
            .to_owned(),
        16 => wrap_range(rng, 24, 0),
        _ => rng.pick(&["*/24", "0/24", "9-17/24"]).to_owned(),
    }
}

fn days(rng: &mut Rng) -> (String, String) {
    match rng.below(20) {
        0..=5 => ("*".to_owned(), "?".to_owned()),
        6..=7 => ("?".to_owned(), "*".to_owned()),
        8..=12 => ("?".to_owned(), day_of_week(rng)),
        13..=18 => (day_of_month(rng), "?".to_owned()),
        _ => {
            let (dom, dow) = rng.pick(&[
                ("15", "MON"),
                ("*", "*"),
                ("?", "?"),
                ("1", "*"),
                ("*", "MON-FRI"),
                ("L", "6L"),
            ]);
            (dom.to_owned(), dow.to_owned())
        }
    }
}

fn day_of_week(rng: &mut Rng) -> String {
    const FORMS: &[&str] = &[
        "MON-FRI",
        "2-6",
        "SAT,SUN",
        "1,7",
        "MON",
        "2",
        "FRI-MON",
        "6-2",
        "SAT-SUN",
        "7-1",
        "6L",
        "FRIL",
        "2L",
        "6#3",
        "MON#1",
        "1#5",
        "L",
        "*/2",
        "2/2",
        "6-2/2",
        "1-7",
        "MON-FRI/2",
        "TUE/2",
        "TUES",
        "MONDAY",
        "TUES-FRI",
        "mon-wed",
        "2#1,3",
        "3,MON#1",
        "2#1,3#2",
        "5L,3",
        "2,L",
        "6-7L",
        "6L/2",
        "2-3#1",
        "LW",
        "SUN,WED,FRI",
        "TUE-THU",
        "7",
        "1",
        "SAT-MON/2",
        "JAN",
    ];
    match rng.below(4) {
        0 => (1 + rng.below(7)).to_string(),
        _ => rng.pick(FORMS).to_owned(),
    }
}

fn day_of_month(rng: &mut Rng) -> String {
    const FORMS: &[&str] = &[
        "1", "15", "1,15", "L", "LW", "15W", "1W", "31W", "30W", "29W", "L-2", "L-3W", "L-0",
        "L,15", "LW,1", "1,15W", "20,15W", "1-5W", "25-5", "28-3/2", "*/10", "5/10", "31", "10-20",
        "1-7", "L-30", "30-2/2", "0",
    ];
    match rng.below(3) {
        0 => (1 + rng.below(28)).to_string(),
        _ => rng.pick(FORMS).to_owned(),
    }
}

fn month(rng: &mut Rng) -> String {
    const FORMS: &[&str] = &[
        "JAN-MAR", "1-3", "NOV-FEB", "11-2", "*/3", "3,10", "MAR,OCT", "OCT-MAR", "JAN/3",
        "JANUARY", "3-11/2", "4,9", "3/6", "MAR", "oct", "10-4/2",
    ];
    match rng.below(3) {
        0 => rng.pick(FORMS).to_owned(),
        _ => "*".to_owned(),
    }
}

/// `a-b` with `b < a`: a range over the end of a field of `size` values from `min`.
fn wrap_range(rng: &mut Rng, size: u64, min: u64) -> String {
    let start = min + size / 2 + rng.below(size / 2);
    let end = min + rng.below(size / 2);
    format!("{start}-{end}")
}

/// A start near one of `changes` (or anywhere in 2025–2028 when the zone has none).
fn start(rng: &mut Rng, changes: &[i64]) -> i64 {
    let seconds = if changes.is_empty() || rng.chance(10) {
        1_735_689_600 + rng.below(4 * 365 * 86_400) as i64
    } else {
        let change = rng.pick(changes);
        let offset = match rng.below(6) {
            0 => -(1 + rng.below(120) as i64),
            1 => -(1 + rng.below(3 * 3600) as i64),
            2 => -(1 + rng.below(27 * 3600) as i64),
            3 => rng.below(3600) as i64,
            4 => -(rng.below(7 * 86_400) as i64),
            _ => -(rng.below(90) as i64 * 60),
        };
        change + offset
    };
    let millis = if rng.chance(20) { rng.below(1000) } else { 0 };
    seconds * 1000 + millis as i64
}

/// The instants (seconds) `zone` changed its offset from UTC, 2017–2028.
fn clock_changes(zone: &str) -> Vec<i64> {
    let zone: Tz = zone.parse().expect("a zone");
    let at = |seconds| zone.timestamp_opt(seconds, 0).unwrap();
    quartz::clock_changes(zone, &at(1_483_228_800), &at(1_861_920_000))
        .iter()
        .map(|change| change.timestamp())
        .collect()
}

/// splitmix64: small, and the same numbers on every machine and Rust version.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}
