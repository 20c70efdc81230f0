//! The allow-list: the only ways Kadence may answer otherwise than Quartz, each a deliberate
//! decision (documented in `scheduler/src/domain/quartz/` and the book's cron page, `docs/src/concepts/cron.md`), and the check that a
//! disagreement is one of them.
//!
//! A disagreement is not allowed on a label: it is explained. Kadence's answer is worked out
//! again with the decision undone (Quartz's reading of the text, Quartz's rule for the clocks)
//! and must then be Quartz's answer exactly. The same model of Quartz — its reading and its
//! clocks, which the import uses to show XXL-JOB's fires — must reproduce every answer Quartz
//! gives, agreement or not.

use chrono::{Datelike, TimeZone};
use chrono_tz::Tz;
use kadence_scheduler::domain::quartz::{
    Clocks, Dialect, Extension, Quirk, Reading, Repeated, Search, Skipped,
};
use kadence_scheduler::domain::schedule::ScheduleSpec;

use crate::cases::Case;
use crate::quartz::Answer;

/// A deliberate difference from Quartz.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Allowance {
    /// Kadence accepts a form Quartz refuses: `L,15`, `5L,3`, `2,L`, `2#1,3#2`.
    Extension(ExtensionKind),
    /// Quartz reads a form otherwise than it is written (`MON-FRI/2`, `1,15W`, `3,2#1`) or
    /// oddly (`TUES`, `5,,6`, `*/0`, `1-5/60`, `1-5W`, `6L/2`): Kadence reads it as written
    /// or refuses it; the import rewrites it to XXL-JOB's meaning.
    Quirk(QuirkKind),
    /// A time the clocks skip fires at the end of the gap; Quartz drops it.
    SkippedTimeFiresAtGapEnd,
    /// A job of every hour fires in both passes of a repeated hour; Quartz only in the
    /// second, leaving the job silent for an hour.
    RepeatedHourKept,
    /// From a start inside the first pass of a repeated hour, the next fire is the next in
    /// real time; Quartz searches from the wall clock and skips what the second pass holds.
    StartOnFirstPass,
    /// `nW` for a day a month lacks (`31W` in April) fires no day that month; Quartz takes
    /// the weekday nearest the day after the month's end when it falls inside the month.
    NearestWeekdayOfMissingDay,
}

/// [`Extension`], orderable for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExtensionKind(pub &'static str);

/// [`Quirk`], orderable for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QuirkKind(pub &'static str);

/// Every allowance the generated cases must show at least once: an entry no case needs is
/// not a difference Kadence has, and comes off the list.
pub fn expected() -> Vec<Allowance> {
    let mut all: Vec<Allowance> = [
        Extension::LastDayBesideOtherDays,
        Extension::LastWeekdayBesideOtherDays,
        Extension::SeveralNthDays,
    ]
    .into_iter()
    .map(|extension| Allowance::Extension(extension_kind(extension)))
    .collect();
    all.extend(
        [
            Quirk::StepAfterName,
            Quirk::TextAfterName,
            Quirk::EmptyItem,
            Quirk::ZeroStep,
            Quirk::StepBeyondField,
            Quirk::SuffixAfterRange,
            Quirk::SuffixAfterLast,
            Quirk::NearestWeekdayInList,
            Quirk::NthBesideOtherDays,
        ]
        .into_iter()
        .map(|quirk| Allowance::Quirk(quirk_kind(quirk))),
    );
    all.extend([
        Allowance::SkippedTimeFiresAtGapEnd,
        Allowance::RepeatedHourKept,
        Allowance::StartOnFirstPass,
        Allowance::NearestWeekdayOfMissingDay,
    ]);
    all
}

fn extension_kind(extension: Extension) -> ExtensionKind {
    ExtensionKind(match extension {
        Extension::LastDayBesideOtherDays => "L beside other days of the month (L,15)",
        Extension::LastWeekdayBesideOtherDays => "L beside other days of the week (5L,3)",
        Extension::SeveralNthDays => "several # days (2#1,3#2)",
    })
}

fn quirk_kind(quirk: Quirk) -> QuirkKind {
    QuirkKind(match quirk {
        Quirk::StepAfterName => "a step after a name (MON-FRI/2)",
        Quirk::TextAfterName => "letters after a name (TUES)",
        Quirk::EmptyItem => "an empty list item (5,,6)",
        Quirk::ZeroStep => "a step of 0 (*/0)",
        Quirk::StepBeyondField => "a step beyond the field after a range (1-5/60)",
        Quirk::SuffixAfterRange => "W, L or # after a range (1-5W)",
        Quirk::SuffixAfterLast => "text after a weekday's L (6L/2)",
        Quirk::NearestWeekdayInList => "W in a list (1,15W)",
        Quirk::NthBesideOtherDays => "# beside plain days (3,2#1)",
    })
}

/// How Kadence's answer to a case compares with Quartz's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The same answer.
    Agree,
    /// A different answer, explained by these deliberate differences.
    Allowed(Vec<Allowance>),
    /// A difference nothing on the list explains: a bug to fix, or a decision to document.
    Unexplained(String),
}

/// Judges one case: see the module docs.
pub fn verdict(case: &Case, quartz: &Answer) -> Verdict {
    let judged = compare(case, quartz);
    if judged == Verdict::Agree {
        return judged;
    }
    if let Err(why) = fields_explained(&case.expression) {
        return Verdict::Unexplained(why);
    }
    judged
}

/// What the import stores for an XXL-JOB schedule (the text rewritten to Quartz's reading
/// where Kadence reads it otherwise) must read, in Kadence, as Quartz reads the original.
pub fn rewrite_keeps_quartz_reading(expression: &str) -> Result<(), String> {
    let Ok(quartz) = Reading::read(expression, Dialect::Quartz) else {
        return Ok(());
    };
    let rewritten = quartz.rewrite(expression);
    match Reading::read(&rewritten, Dialect::Kadence) {
        Ok(kadence) if kadence.same_schedule(&quartz) => Ok(()),
        Ok(_) => Err(format!(
            "rewritten as {rewritten:?}, which Kadence reads otherwise"
        )),
        Err(error) => Err(format!(
            "rewritten as {rewritten:?}, which Kadence refuses: {error}"
        )),
    }
}

/// Each field alone (the others plain): where Kadence refuses it or reads it otherwise than
/// Quartz, Quartz must read it with a quirk, or Kadence with an extension. A field on which
/// they part for any other reason is a difference no decision explains, even when another
/// field's quirk explains the whole expression's.
fn fields_explained(expression: &str) -> Result<(), String> {
    let texts: Vec<&str> = expression.split_whitespace().collect();
    if !(6..=7).contains(&texts.len()) {
        return Ok(());
    }
    for (index, text) in texts.iter().enumerate() {
        let probe = match (index, *text) {
            (3 | 5, "?") => continue,
            (0, _) => format!("{text} 0 0 * * ?"),
            (1, _) => format!("0 {text} 0 * * ?"),
            (2, _) => format!("0 0 {text} * * ?"),
            (3, _) => format!("0 0 0 {text} * ?"),
            (4, _) => format!("0 0 0 * {text} ?"),
            (5, _) => format!("0 0 0 ? * {text}"),
            _ => format!("0 0 0 * * ? {text}"),
        };
        let kadence = Reading::read(&probe, Dialect::Kadence);
        let quartz = Reading::read(&probe, Dialect::Quartz);
        match (&kadence, &quartz) {
            (_, Ok(quartz)) if !quartz.quirks().is_empty() => {}
            (Ok(kadence), Ok(quartz)) if kadence.same_schedule(quartz) => {}
            (Ok(kadence), Err(_)) if !kadence.extensions().is_empty() => {}
            (Err(_), Err(_)) => {}
            _ => {
                return Err(format!(
                    "field {} {text:?} alone: Kadence {}, Quartz {}",
                    index + 1,
                    kadence
                        .as_ref()
                        .map_or_else(|e| e.to_string(), |_| "reads it".into()),
                    quartz
                        .as_ref()
                        .map_or_else(|e| e.to_string(), |_| "reads it".into()),
                ));
            }
        }
    }
    Ok(())
}

fn compare(case: &Case, quartz: &Answer) -> Verdict {
    let zone: Tz = case.zone.parse().expect("a zone");
    let fires = |reading: &Reading, clocks: Clocks| fires(reading, zone, case, clocks);
    let kadence = ScheduleSpec::parse("CRON", &case.expression);
    let kadence = match &kadence {
        Ok(ScheduleSpec::Cron(cron)) => Ok(cron.reading()),
        Ok(other) => panic!("CRON parsed as {other:?}"),
        Err(error) => Err(error.to_string()),
    };
    if let Err(why) = rewrite_keeps_quartz_reading(&case.expression) {
        return Verdict::Unexplained(why);
    }
    let model = Reading::read(&case.expression, Dialect::Quartz);
    let model_fires = model
        .as_ref()
        .ok()
        .map(|model| fires(model, Clocks::QUARTZ));
    let quartz_fires = match quartz {
        Answer::Hang => return Verdict::Unexplained("Quartz did not answer".into()),
        Answer::Refused(message) => {
            if model_fires.is_some() {
                return Verdict::Unexplained(format!(
                    "Quartz refuses it ({message}); the model of Quartz does not"
                ));
            }
            return match kadence {
                Err(_) => Verdict::Agree,
                Ok(reading) if !reading.extensions().is_empty() => Verdict::Allowed(
                    reading
                        .extensions()
                        .iter()
                        .map(|extension| Allowance::Extension(extension_kind(*extension)))
                        .collect(),
                ),
                Ok(reading) => Verdict::Unexplained(format!(
                    "Quartz refuses it ({message}); Kadence fires {}",
                    shown(&fires(reading, reading.clocks()), zone)
                )),
            };
        }
        Answer::Fires(fires) => fires,
    };
    if let Some(model_fires) = &model_fires
        && model_fires != quartz_fires
        && !model
            .as_ref()
            .is_ok_and(|model| missing_day(model, zone, quartz_fires, model_fires))
    {
        return Verdict::Unexplained(format!(
            "the model of Quartz fires {}, Quartz {}",
            shown(model_fires, zone),
            shown(quartz_fires, zone)
        ));
    }
    let kadence = match kadence {
        Ok(reading) => reading,
        Err(refusal) => {
            return match &model {
                Ok(model) if !model.quirks().is_empty() && model_fires.is_some() => quirks(model),
                _ => Verdict::Unexplained(format!(
                    "Kadence refuses it ({refusal}); Quartz fires {}",
                    shown(quartz_fires, zone)
                )),
            };
        }
    };
    let kadence_fires = fires(kadence, kadence.clocks());
    if kadence_fires == *quartz_fires {
        return Verdict::Agree;
    }
    let unexplained = || {
        Verdict::Unexplained(format!(
            "Kadence fires {}, Quartz {}",
            shown(&kadence_fires, zone),
            shown(quartz_fires, zone)
        ))
    };
    let Ok(model) = &model else {
        return unexplained();
    };
    if !kadence.same_schedule(model) {
        return match model.quirks().is_empty() {
            true => unexplained(),
            false => quirks(model),
        };
    }
    if missing_day(kadence, zone, quartz_fires, &kadence_fires) {
        return Verdict::Allowed(vec![Allowance::NearestWeekdayOfMissingDay]);
    }
    if fires(kadence, Clocks::QUARTZ) != *quartz_fires {
        return unexplained();
    }
    daylight(kadence, &kadence_fires, fires)
}

fn quirks(model: &Reading) -> Verdict {
    Verdict::Allowed(
        model
            .quirks()
            .iter()
            .map(|quirk| Allowance::Quirk(quirk_kind(*quirk)))
            .collect(),
    )
}

/// Which of Kadence's clock rules make the difference: each one undone alone changes
/// Kadence's answer (and all undone give Quartz's, checked by the caller).
fn daylight(
    reading: &Reading,
    kadence_fires: &[i64],
    fires: impl Fn(&Reading, Clocks) -> Vec<i64>,
) -> Verdict {
    let ours = reading.clocks();
    let mut allowed = Vec::new();
    let undone = [
        (
            ours.skipped != Skipped::DoesNotFire,
            Clocks {
                skipped: Skipped::DoesNotFire,
                ..ours
            },
            Allowance::SkippedTimeFiresAtGapEnd,
        ),
        (
            ours.repeated != Repeated::SecondOnly,
            Clocks {
                repeated: Repeated::SecondOnly,
                ..ours
            },
            Allowance::RepeatedHourKept,
        ),
        (
            ours.search != Search::FromWallClock,
            Clocks {
                search: Search::FromWallClock,
                ..ours
            },
            Allowance::StartOnFirstPass,
        ),
    ];
    for (differs, clocks, allowance) in undone {
        if differs && fires(reading, clocks) != kadence_fires {
            allowed.push(allowance);
        }
    }
    if allowed.is_empty() {
        Verdict::Unexplained("only the clocks rule differs, but none of its parts alone".into())
    } else {
        Verdict::Allowed(allowed)
    }
}

/// Whether the answers part at a fire Quartz gives in a month that lacks the day of a `W`
/// (`31W` in April): the one place Kadence's `nW` differs.
fn missing_day(reading: &Reading, zone: Tz, quartz_fires: &[i64], other: &[i64]) -> bool {
    if !reading.has_nearest_weekday_of_a_missing_day() {
        return false;
    }
    let parted = quartz_fires
        .iter()
        .zip(other)
        .position(|(one, two)| one != two)
        .unwrap_or(quartz_fires.len().min(other.len()));
    quartz_fires.get(parted).is_some_and(|fire| {
        let day = zone.timestamp_millis_opt(*fire).unwrap().date_naive();
        day.num_days_in_month() < 31 && day.day() + 3 >= u32::from(day.num_days_in_month())
    })
}

/// The case's fires of `reading` under `clocks`.
pub fn fires(reading: &Reading, zone: Tz, case: &Case, clocks: Clocks) -> Vec<i64> {
    let mut fires = Vec::with_capacity(case.count);
    let mut after = zone.timestamp_millis_opt(case.after_ms).unwrap();
    while fires.len() < case.count {
        let Some(next) = reading.next_after(&after, clocks) else {
            break;
        };
        fires.push(next.timestamp_millis());
        after = next;
    }
    fires
}

/// Fires as local times with their offsets, for reading a failure.
pub fn shown(fires: &[i64], zone: Tz) -> String {
    let times: Vec<String> = fires
        .iter()
        .map(|ms| {
            zone.timestamp_millis_opt(*ms)
                .unwrap()
                .format("%Y-%m-%dT%H:%M:%S%:z")
                .to_string()
        })
        .collect();
    format!("[{}]", times.join(", "))
}
