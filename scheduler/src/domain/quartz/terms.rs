//! One list item of a field: `*`, a value or a range (of numbers or names), with its step,
//! and the values it stands for. Ranges may wrap around the end of the field as in Quartz
//! (`22-2` hours are 22, 23, 0, 1, 2; `FRI-MON`; `NOV-FEB`), except years. What follows the
//! item (`W`, `L`, `#3`) is left to the day fields.

use super::field::{Field, Values};
use super::forms::{Dialect, Notes, Quirk};

/// Where an item starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Base {
    /// `*` or nothing before `/`.
    Every,
    /// One value.
    Value(u32),
    /// From the first to the second, wrapping around the field's end when the second is
    /// smaller.
    Range(u32, u32),
}

/// An item, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Term<'a> {
    pub(crate) base: Base,
    pub(crate) step: Option<u32>,
    /// What follows it, for the day fields' `W`, `L` and `#`.
    pub(crate) rest: &'a str,
}

/// Reads `item` (upper case, not empty) of `field`.
pub(crate) fn read_term<'a>(
    field: Field,
    item: &'a str,
    dialect: Dialect,
    notes: &mut Notes,
) -> Result<Term<'a>, String> {
    let first = item.chars().next().unwrap_or(' ');
    let (base, rest) = if let Some(rest) = item.strip_prefix('*') {
        (Base::Every, rest)
    } else if first == '/' {
        (Base::Every, item)
    } else if first.is_ascii_digit() {
        read_numbers(field, item)?
    } else if first.is_ascii_alphabetic() && !field.names().is_empty() {
        return read_names(field, item, dialect, notes);
    } else {
        return Err(format!(
            "unexpected {first:?}: give {} (a value, a range a-b, * or a step such as */5)",
            field.described()
        ));
    };
    let (step, rest) = read_step(rest)?;
    Ok(Term { base, step, rest })
}

/// `a` or `a-b`, and what follows.
fn read_numbers(field: Field, item: &str) -> Result<(Base, &str), String> {
    let (start, rest) = read_number(field, item)?;
    let Some(after_dash) = rest.strip_prefix('-') else {
        return Ok((Base::Value(start), rest));
    };
    if !after_dash.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!(
            "a range of numbers ends with a number ({start}-{}), not {after_dash:?}",
            field.max()
        ));
    }
    let (end, rest) = read_number(field, after_dash)?;
    Ok((Base::Range(start, end), rest))
}

/// The digits `text` starts with, as a value of `field`, and what follows.
fn read_number(field: Field, text: &str) -> Result<(u32, &str), String> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, rest) = text.split_at(digits);
    match number.parse::<u32>() {
        Ok(value) if (field.min()..=field.max()).contains(&value) => Ok((value, rest)),
        _ => Err(format!(
            "{number} is out of range: {} values are {}",
            field.name(),
            field.described()
        )),
    }
}

/// `/n` if `text` starts with it, and what follows.
fn read_step(text: &str) -> Result<(Option<u32>, &str), String> {
    let Some(after) = text.strip_prefix('/') else {
        return Ok((None, text));
    };
    let digits = after.bytes().take_while(u8::is_ascii_digit).count();
    let (number, rest) = after.split_at(digits);
    match number.parse::<u32>() {
        Ok(step) => Ok((Some(step), rest)),
        Err(_) => Err("'/' must be followed by a whole number, as in */5".to_owned()),
    }
}

/// An item that starts with a name: `MON`, `MON-FRI`, `JAN/3`, `FRI#2`, `FRIL`.
fn read_names<'a>(
    field: Field,
    item: &'a str,
    dialect: Dialect,
    notes: &mut Notes,
) -> Result<Term<'a>, String> {
    let (start, rest) = read_name(field, item, dialect)?;
    let last_day = field == Field::DayOfWeek && is_last_day_name(item);
    if dialect == Dialect::Quartz
        && !last_day
        && rest.starts_with(|c: char| c.is_ascii_alphabetic())
    {
        // `TUES`, `TUESL`: Quartz reads the three letters and drops the rest of the item.
        notes.quirk(Quirk::TextAfterName);
        return Ok(value_term(start, ""));
    }
    let (base, rest) = match rest.strip_prefix('-') {
        Some(after_dash) => {
            let (end, rest) = read_name(field, after_dash, dialect).map_err(|_| {
                format!(
                    "a range of names ends with a name ({}-{}), not {after_dash:?}",
                    field.names()[0],
                    field.names()[field.names().len() - 1]
                )
            })?;
            (Base::Range(start, end), rest)
        }
        None => (Base::Value(start), rest),
    };
    if dialect == Dialect::Quartz {
        let ends_the_range = matches!(base, Base::Range(..));
        if ends_the_range || rest.starts_with('/') {
            // Quartz takes nothing after a range of names, nor a step after one name.
            if !rest.is_empty() {
                notes.quirk(dropped_after_name(rest));
            }
            return Ok(Term {
                base,
                step: None,
                rest: "",
            });
        }
        return Ok(Term {
            base,
            step: None,
            rest,
        });
    }
    let (step, rest) = read_step(rest)?;
    Ok(Term { base, step, rest })
}

/// Why Quartz drops `rest`, which follows a range of names or a name and a `/`.
fn dropped_after_name(rest: &str) -> Quirk {
    let step_only = rest
        .strip_prefix('/')
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
    if step_only {
        Quirk::StepAfterName
    } else if rest.starts_with(['#', 'L', 'W']) {
        Quirk::SuffixAfterRange
    } else {
        Quirk::TextAfterName
    }
}

/// `FRIL`: a day name and the `L` of its last occurrence, a word of four letters.
fn is_last_day_name(text: &str) -> bool {
    let letters = text.bytes().take_while(u8::is_ascii_alphabetic).count();
    letters == 4 && text.as_bytes()[3] == b'L'
}

fn value_term(value: u32, rest: &str) -> Term<'_> {
    Term {
        base: Base::Value(value),
        step: None,
        rest,
    }
}

/// The name `text` starts with, and what follows. A day name followed by `L` (`FRIL`, the
/// last Friday) keeps the `L` for the caller. Kadence takes exactly three letters; Quartz
/// reads the first three of any longer word (the caller drops the rest).
fn read_name(field: Field, text: &str, dialect: Dialect) -> Result<(u32, &str), String> {
    let letters = text.bytes().take_while(u8::is_ascii_alphabetic).count();
    let word = &text[..letters];
    let last_day = field == Field::DayOfWeek && is_last_day_name(text);
    let known = |name: &str| field.value_of_name(name);
    let unknown = || {
        format!(
            "{word:?} is not a {} name: use {}",
            field.name(),
            field.described()
        )
    };
    if letters < 3 {
        return Err(unknown());
    }
    let value = known(&word[..3]).ok_or_else(unknown)?;
    if letters == 3 || last_day || dialect == Dialect::Quartz {
        return Ok((value, &text[3..]));
    }
    Err(format!(
        "{word:?} is not a {} name: names are three letters ({}); Quartz reads only those and \
         ignores the rest, which Kadence refuses rather than guess",
        field.name(),
        &word[..3]
    ))
}

/// The values `term` stands for (without its `rest`).
pub(crate) fn expand(
    field: Field,
    term: &Term<'_>,
    dialect: Dialect,
    notes: &mut Notes,
) -> Result<Values, String> {
    let mut values = Values::default();
    let step = match term.step {
        None => 1,
        Some(0) if dialect == Dialect::Kadence => {
            return Err("a step of 0 never moves: give at least 1 (*/1 is every value)".into());
        }
        Some(0) => {
            notes.quirk(Quirk::ZeroStep);
            match term.base {
                Base::Every => return Ok(Values::all(field)),
                Base::Value(start) | Base::Range(start, _) => {
                    values.insert(field, start);
                    return Ok(values);
                }
            }
        }
        Some(step) if step > field.largest_step() => {
            let ranged = matches!(term.base, Base::Range(..));
            if !ranged || dialect == Dialect::Kadence {
                return Err(step_too_large(field, step));
            }
            notes.quirk(Quirk::StepBeyondField);
            step
        }
        Some(step) => step,
    };
    let (start, end) = match term.base {
        Base::Every => (field.min(), field.max()),
        Base::Value(value) if term.step.is_none() => (value, value),
        Base::Value(value) => (value, field.max()),
        Base::Range(start, end) if start > end && field == Field::Year => {
            return Err(format!(
                "a range of years goes forward ({end}-{start}, not {start}-{end})"
            ));
        }
        Base::Range(start, end) if start > end => (start, end + field.size()),
        Base::Range(start, end) => (start, end),
    };
    let mut at = start;
    while at <= end {
        values.insert(field, (at - field.min()) % field.size() + field.min());
        at += step;
    }
    Ok(values)
}

/// Why a step is refused, with what to write instead.
fn step_too_large(field: Field, step: u32) -> String {
    let instead = match field {
        Field::Second => "; for once a minute write 0",
        Field::Minute => "; for once an hour write 0",
        Field::Hour => "; for once a day write 0",
        _ => "",
    };
    format!(
        "a step of {step} is as large as the {} field itself ({}): it could only ever give its \
         start; the largest step is {}{instead}",
        field.name(),
        field.described(),
        field.largest_step()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(field: Field, item: &str, dialect: Dialect) -> Result<Vec<u32>, String> {
        let mut notes = Notes::default();
        let term = read_term(field, item, dialect, &mut notes)?;
        assert_eq!(term.rest, "", "{item}");
        Ok(expand(field, &term, dialect, &mut notes)?
            .iter(field)
            .collect())
    }

    #[test]
    fn ranges_wrap_around_the_end_of_the_field_as_in_quartz() {
        let kadence = |field, item| values(field, item, Dialect::Kadence).unwrap();
        assert_eq!(kadence(Field::Hour, "22-2"), [0, 1, 2, 22, 23]);
        assert_eq!(kadence(Field::Second, "50-10/5"), [0, 5, 10, 50, 55]);
        assert_eq!(
            kadence(Field::Minute, "50-10"),
            [
                0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59
            ]
        );
        assert_eq!(kadence(Field::DayOfWeek, "FRI-MON"), [1, 2, 6, 7]);
        assert_eq!(kadence(Field::Month, "NOV-FEB"), [1, 2, 11, 12]);
        // Quartz carries a step on across the end: 28, 30, 32 = 1, 34 = 3.
        assert_eq!(kadence(Field::DayOfMonth, "28-3/2"), [1, 3, 28, 30]);
        assert_eq!(kadence(Field::Hour, "22-2/3"), [1, 22]);
        assert_eq!(kadence(Field::Second, "30-29").len(), 60);
        assert_eq!(kadence(Field::Hour, "5-5"), [5]);
        let err = values(Field::Year, "2030-2027", Dialect::Kadence).unwrap_err();
        assert!(err.contains("a range of years goes forward"), "{err}");
    }

    #[test]
    fn a_step_as_large_as_the_field_is_refused() {
        for (field, item, largest) in [
            (Field::Second, "*/60", "59"),
            (Field::Second, "0/60", "59"),
            (Field::Minute, "*/60", "59"),
            (Field::Hour, "*/24", "23"),
            (Field::Hour, "0/25", "23"),
            (Field::DayOfMonth, "*/32", "31"),
            (Field::Month, "*/13", "12"),
            (Field::DayOfWeek, "*/8", "7"),
            (Field::Second, "1-5/60", "59"),
        ] {
            let err = values(field, item, Dialect::Kadence).unwrap_err();
            assert!(
                err.contains(&format!("the largest step is {largest}")),
                "{field:?} {item}: {err}"
            );
        }
        let err = values(Field::Second, "*/60", Dialect::Kadence).unwrap_err();
        assert!(err.contains("for once a minute write 0"), "{err}");
        // Quartz's own bounds: a step as large as a field counted from 1 still passes.
        assert_eq!(
            values(Field::Second, "*/59", Dialect::Kadence).unwrap(),
            [0, 59]
        );
        assert_eq!(
            values(Field::Hour, "*/23", Dialect::Kadence).unwrap(),
            [0, 23]
        );
        assert_eq!(
            values(Field::DayOfMonth, "*/31", Dialect::Kadence).unwrap(),
            [1]
        );
        assert_eq!(values(Field::Month, "1/12", Dialect::Kadence).unwrap(), [1]);
        assert_eq!(
            values(Field::DayOfWeek, "*/7", Dialect::Kadence).unwrap(),
            [1]
        );
        // Quartz itself refuses the same after `*` or one start, and reads a range's start.
        assert!(values(Field::Second, "*/60", Dialect::Quartz).is_err());
        assert_eq!(
            values(Field::Second, "1-5/60", Dialect::Quartz).unwrap(),
            [1]
        );
    }

    #[test]
    fn names_are_three_letters_in_kadence_and_a_prefix_in_quartz() {
        let err = values(Field::DayOfWeek, "TUES", Dialect::Kadence).unwrap_err();
        assert!(err.contains("names are three letters (TUE)"), "{err}");
        assert!(values(Field::Month, "JANUARY", Dialect::Kadence).is_err());
        assert_eq!(
            values(Field::DayOfWeek, "TUES", Dialect::Quartz).unwrap(),
            [3]
        );
        assert_eq!(
            values(Field::DayOfWeek, "TUES-FRI", Dialect::Quartz).unwrap(),
            [3]
        );
        assert_eq!(
            values(Field::DayOfWeek, "MON-FRIDAY", Dialect::Quartz).unwrap(),
            [2, 3, 4, 5, 6]
        );
        assert!(values(Field::DayOfWeek, "FOO", Dialect::Quartz).is_err());
        let err = values(Field::DayOfWeek, "1-MON", Dialect::Kadence).unwrap_err();
        assert!(err.contains("ends with a number"), "{err}");
    }

    #[test]
    fn a_step_after_a_name_is_applied_by_kadence_and_ignored_by_quartz() {
        assert_eq!(
            values(Field::DayOfWeek, "MON-FRI/2", Dialect::Kadence).unwrap(),
            [2, 4, 6]
        );
        assert_eq!(
            values(Field::DayOfWeek, "MON-FRI/2", Dialect::Quartz).unwrap(),
            [2, 3, 4, 5, 6]
        );
        assert_eq!(
            values(Field::Month, "JAN/3", Dialect::Kadence).unwrap(),
            [1, 4, 7, 10]
        );
        assert_eq!(values(Field::Month, "JAN/3", Dialect::Quartz).unwrap(), [1]);
        let mut notes = Notes::default();
        let term = read_term(Field::DayOfWeek, "MON-FRI/2", Dialect::Quartz, &mut notes).unwrap();
        assert_eq!(term.step, None);
        assert_eq!(notes.quirks, [Quirk::StepAfterName]);
    }

    #[test]
    fn a_step_of_zero_is_refused_and_quartz_reads_it_oddly() {
        let err = values(Field::Second, "*/0", Dialect::Kadence).unwrap_err();
        assert!(err.contains("a step of 0"), "{err}");
        assert_eq!(
            values(Field::Second, "*/0", Dialect::Quartz).unwrap().len(),
            60
        );
        assert_eq!(
            values(Field::Second, "5-9/0", Dialect::Quartz).unwrap(),
            [5]
        );
    }
}
