//! The two day fields: their special days (`L`, `LW`, `L-n`, `nW`; `L`, `nL`, `n#k`), how
//! they combine in a list, and what Quartz does with the combinations it reads oddly.

use super::field::{Field, Values};
use super::fields::{DayOfMonth, DayOfWeek};
use super::forms::{Dialect, Extension, Notes, Quirk};
use super::last_day::parse_before_last_day;
use super::terms::{Base, Term, expand, read_term};

/// The items of a list field; an empty item is refused by Kadence, ignored by Quartz.
pub(crate) fn items<'a>(
    text: &'a str,
    dialect: Dialect,
    notes: &mut Notes,
) -> Result<Vec<&'a str>, String> {
    let items: Vec<&str> = text.split(',').collect();
    if items.iter().any(|item| item.is_empty()) {
        if dialect == Dialect::Kadence || items.iter().all(|item| item.is_empty()) {
            return Err("an empty item in a list (two commas, or one at an end)".to_owned());
        }
        notes.quirk(Quirk::EmptyItem);
    }
    Ok(items.into_iter().filter(|item| !item.is_empty()).collect())
}

/// The day-of-month field (upper case), `?` excepted.
pub(crate) fn read_day_of_month(
    text: &str,
    dialect: Dialect,
    notes: &mut Notes,
) -> Result<DayOfMonth, String> {
    if text == "*" {
        return Ok(DayOfMonth::Any);
    }
    let items = items(text, dialect, notes)?;
    let mut days = Values::default();
    let mut nearest_weekday = Values::default();
    let (mut last, mut last_weekday) = (false, false);
    for item in &items {
        if let Some(before_last) = parse_before_last_day(item) {
            if items.len() > 1 {
                return Err(format!(
                    "{item}: L-n must be the whole day-of-month field, with ? as day-of-week"
                ));
            }
            return Ok(DayOfMonth::BeforeLast(before_last?));
        }
        match *item {
            "L" => last = true,
            "LW" => last_weekday = true,
            _ => {
                let term = read_term(Field::DayOfMonth, item, dialect, notes)?;
                let values = expand(Field::DayOfMonth, &term, dialect, notes)?;
                match (term.rest, term.base, term.step) {
                    ("", _, _) => days = days.union(values),
                    ("W", Base::Value(_), None) => nearest_weekday = nearest_weekday.union(values),
                    ("W", Base::Range(..), None) if dialect == Dialect::Quartz => {
                        notes.quirk(Quirk::SuffixAfterRange);
                        days = days.union(values);
                    }
                    ("W", ..) => {
                        return Err(format!(
                            "{item}: W follows a single day (15W: the weekday nearest the 15th)"
                        ));
                    }
                    (rest, ..) => return Err(unexpected(item, rest)),
                }
            }
        }
    }
    if (last || last_weekday) && items.len() > 1 {
        if dialect == Dialect::Quartz {
            return Err("L and LW stand alone in Quartz's day-of-month".to_owned());
        }
        notes.extension(Extension::LastDayBesideOtherDays);
    }
    if dialect == Dialect::Quartz && !nearest_weekday.is_empty() && items.len() > 1 {
        // Quartz keeps only the weekday nearest the list's smallest day.
        notes.quirk(Quirk::NearestWeekdayInList);
        let all = days.union(nearest_weekday);
        nearest_weekday = Values::default();
        if let Some(smallest) = all.iter(Field::DayOfMonth).next() {
            nearest_weekday.insert(Field::DayOfMonth, smallest);
        }
        days = Values::default();
    }
    Ok(DayOfMonth::Days {
        days,
        nearest_weekday,
        last,
        last_weekday,
    })
}

/// The day-of-week field (upper case), `?` excepted.
pub(crate) fn read_day_of_week(
    text: &str,
    dialect: Dialect,
    notes: &mut Notes,
) -> Result<DayOfWeek, String> {
    if text == "*" {
        return Ok(DayOfWeek::Any);
    }
    let items = items(text, dialect, notes)?;
    let mut days = Values::default();
    let mut last = Values::default();
    let mut nth: [Values; 5] = Default::default();
    let mut last_items = 0;
    for item in &items {
        // `L` alone is the last day of the week: Saturday.
        let item = match (*item, dialect) {
            ("LW", Dialect::Quartz) => {
                notes.quirk(Quirk::SuffixAfterLast);
                "L"
            }
            _ => item,
        };
        if item == "L" {
            days.insert(Field::DayOfWeek, 7);
            last_items += 1;
            continue;
        }
        let term = read_term(Field::DayOfWeek, item, dialect, notes)?;
        let values = expand(Field::DayOfWeek, &term, dialect, notes)?;
        let single = matches!((term.base, term.step), (Base::Value(_), None));
        match special_day(item, &term, single, dialect, notes)? {
            Special::None => days = days.union(values),
            Special::Last => {
                last = last.union(values);
                last_items += 1;
            }
            Special::Nth(k) => nth[k] = nth[k].union(values),
        }
    }
    let nths = DayOfWeek::nth_count(&nth);
    if last_items > 0 && items.len() > 1 {
        if dialect == Dialect::Quartz {
            return Err("L stands alone in Quartz's day-of-week".to_owned());
        }
        notes.extension(Extension::LastWeekdayBesideOtherDays);
    }
    if nths > 1 {
        if dialect == Dialect::Quartz {
            return Err("Quartz takes one # day".to_owned());
        }
        notes.extension(Extension::SeveralNthDays);
    }
    if dialect == Dialect::Quartz && nths == 1 && !days.is_empty() {
        notes.quirk(Quirk::NthBesideOtherDays);
        days = Values::default();
    }
    Ok(DayOfWeek::Days {
        days,
        last,
        nth: Box::new(nth),
    })
}

/// What follows a day of the week.
enum Special {
    None,
    /// `nL`.
    Last,
    /// `n#k`, as the index k − 1.
    Nth(usize),
}

fn special_day(
    item: &str,
    term: &Term<'_>,
    single: bool,
    dialect: Dialect,
    notes: &mut Notes,
) -> Result<Special, String> {
    let quartz = dialect == Dialect::Quartz;
    if term.rest.is_empty() {
        return Ok(Special::None);
    }
    if !single {
        if quartz && term.step.is_none() && term.rest.starts_with(['L', '#']) {
            notes.quirk(Quirk::SuffixAfterRange);
            return Ok(Special::None);
        }
        return Err(format!(
            "{item}: L and # follow a single day of the week (6L: the last Friday; 6#3: the \
             third Friday)"
        ));
    }
    if let Some(after) = term.rest.strip_prefix('L') {
        if !after.is_empty() {
            if !quartz {
                return Err(unexpected(item, after));
            }
            notes.quirk(Quirk::SuffixAfterLast);
        }
        return Ok(Special::Last);
    }
    if let Some(after) = term.rest.strip_prefix('#') {
        return match after.parse::<usize>() {
            Ok(k @ 1..=5) if after.bytes().all(|b| b.is_ascii_digit()) => Ok(Special::Nth(k - 1)),
            _ => Err(format!(
                "{item}: # takes which occurrence in the month, 1 to 5 (6#3: the third Friday)"
            )),
        };
    }
    Err(unexpected(item, term.rest))
}

fn unexpected(item: &str, rest: &str) -> String {
    format!("{item}: unexpected {rest:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_days(text: &str, dialect: Dialect) -> (Result<DayOfMonth, String>, Notes) {
        let mut notes = Notes::default();
        (read_day_of_month(text, dialect, &mut notes), notes)
    }

    fn read_weekdays(text: &str, dialect: Dialect) -> (Result<DayOfWeek, String>, Notes) {
        let mut notes = Notes::default();
        (read_day_of_week(text, dialect, &mut notes), notes)
    }

    #[test]
    fn nearest_weekday_in_a_list_is_the_smallest_day_s_to_quartz() {
        let (kadence, notes) = read_days("1,15W", Dialect::Kadence);
        assert_eq!(
            kadence.unwrap(),
            DayOfMonth::Days {
                days: Values::of(Field::DayOfMonth, &[1]),
                nearest_weekday: Values::of(Field::DayOfMonth, &[15]),
                last: false,
                last_weekday: false
            }
        );
        assert!(notes.quirks.is_empty());
        let (quartz, notes) = read_days("20,15W", Dialect::Quartz);
        assert_eq!(
            quartz.unwrap(),
            DayOfMonth::Days {
                days: Values::default(),
                nearest_weekday: Values::of(Field::DayOfMonth, &[15]),
                last: false,
                last_weekday: false
            }
        );
        assert_eq!(notes.quirks, [Quirk::NearestWeekdayInList]);
        assert!(read_days("1-5W", Dialect::Kadence).0.is_err());
        assert!(read_days("1-5W", Dialect::Quartz).0.is_ok());
    }

    #[test]
    fn the_last_day_beside_others_is_an_extension() {
        let (read, notes) = read_days("L,15", Dialect::Kadence);
        assert!(read.is_ok());
        assert_eq!(notes.extensions, [Extension::LastDayBesideOtherDays]);
        assert!(read_days("L,15", Dialect::Quartz).0.is_err());
        let err = read_days("1,L-2", Dialect::Kadence).0.unwrap_err();
        assert!(err.contains("whole day-of-month field"), "{err}");
    }

    #[test]
    fn days_of_the_week_with_l_and_hash() {
        let (read, notes) = read_weekdays("5L,3", Dialect::Kadence);
        assert!(read.is_ok());
        assert_eq!(notes.extensions, [Extension::LastWeekdayBesideOtherDays]);
        let (read, notes) = read_weekdays("2#1,3#2", Dialect::Kadence);
        assert!(read.is_ok());
        assert_eq!(notes.extensions, [Extension::SeveralNthDays]);
        assert!(read_weekdays("2#1,3#2", Dialect::Quartz).0.is_err());
        let (quartz, notes) = read_weekdays("3,MON#1", Dialect::Quartz);
        let mut first_monday: [Values; 5] = Default::default();
        first_monday[0] = Values::of(Field::DayOfWeek, &[2]);
        assert_eq!(
            quartz.unwrap(),
            DayOfWeek::Days {
                days: Values::default(),
                last: Values::default(),
                nth: Box::new(first_monday)
            }
        );
        assert_eq!(notes.quirks, [Quirk::NthBesideOtherDays]);
        assert!(read_weekdays("FRIL", Dialect::Kadence).0.is_ok());
        assert!(read_weekdays("6-7L", Dialect::Kadence).0.is_err());
        assert!(read_weekdays("6#6", Dialect::Kadence).0.is_err());
        let (quartz, notes) = read_weekdays("6L/2", Dialect::Quartz);
        assert!(quartz.is_ok());
        assert_eq!(notes.quirks, [Quirk::SuffixAfterLast]);
    }

    #[test]
    fn empty_items_are_refused_by_kadence_and_ignored_by_quartz() {
        let mut notes = Notes::default();
        assert!(items("5,,6", Dialect::Kadence, &mut notes).is_err());
        assert_eq!(
            items("5,,6", Dialect::Quartz, &mut notes).unwrap(),
            ["5", "6"]
        );
        assert_eq!(notes.quirks, [Quirk::EmptyItem]);
    }
}
