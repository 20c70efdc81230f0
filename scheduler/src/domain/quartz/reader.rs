//! Reading an expression's text into [`Fields`], in Kadence's dialect or Quartz's, and why a
//! text is refused: the field and the rule, or the two day fields together.

use super::days::{read_day_of_month, read_day_of_week};
use super::field::{Field, Values};
use super::fields::{DayOfMonth, DayOfWeek, Fields};
use super::forms::{Dialect, Notes};
use super::terms::{expand, read_term};

/// Why an expression was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuartzError {
    /// Not 6 or 7 fields.
    #[error(
        "found {0} fields; Quartz expressions have 6 or 7: second minute hour day-of-month \
         month day-of-week [year]"
    )]
    FieldCount(usize),
    /// One field breaks a rule.
    #[error("field {} ({}) {text:?} is invalid: {reason}", .field.number(), .field.name())]
    Field {
        /// Which.
        field: Field,
        /// As written.
        text: String,
        /// The rule, and what to write instead.
        reason: String,
    },
    /// Neither day field is `?`.
    #[error(
        "day-of-month {day_of_month:?} and day-of-week {day_of_week:?} are both given: put ? in \
         one of the two (Quartz fires on the days one of them names; it cannot combine them)"
    )]
    BothDaysGiven {
        /// As written.
        day_of_month: String,
        /// As written.
        day_of_week: String,
    },
    /// croner refused the numeric pattern Kadence spelled the fields out as: a bug in Kadence,
    /// which says so rather than blame the expression.
    #[error(
        "Kadence could not evaluate it: croner refused the pattern it was given ({pattern}: \
         {reason}); this is a bug in Kadence, please report it with the expression"
    )]
    Unevaluable {
        /// What croner was given.
        pattern: String,
        /// What croner said.
        reason: String,
    },
    /// Both day fields are `?`.
    #[error(
        "day-of-month and day-of-week are both ?: put ? in one of the two only, and * (every \
         day) or the days in the other"
    )]
    NoDaysGiven,
}

/// Reads `expression` in `dialect`: its fields, and the quirks and extensions it uses.
pub(crate) fn read_fields(
    expression: &str,
    dialect: Dialect,
) -> Result<(Fields, Notes), QuartzError> {
    let texts: Vec<String> = expression
        .split_whitespace()
        .map(str::to_ascii_uppercase)
        .collect();
    if !(6..=7).contains(&texts.len()) {
        return Err(QuartzError::FieldCount(texts.len()));
    }
    let (day_of_month, day_of_week) = (texts[3].as_str(), texts[5].as_str());
    match (day_of_month == "?", day_of_week == "?") {
        (true, true) => return Err(QuartzError::NoDaysGiven),
        (false, false) => {
            // A field that is invalid on its own says so first.
            let mut notes = Notes::default();
            read_field(Field::DayOfMonth, day_of_month, dialect, &mut notes)?;
            read_field(Field::DayOfWeek, day_of_week, dialect, &mut notes)?;
            return Err(QuartzError::BothDaysGiven {
                day_of_month: day_of_month.to_owned(),
                day_of_week: day_of_week.to_owned(),
            });
        }
        _ => {}
    }
    let mut notes = Notes::default();
    let text = |field: Field| texts.get(field as usize).map_or("*", String::as_str);
    let mut read = |field: Field| read_field(field, text(field), dialect, &mut notes);
    let fields = Fields {
        second: read(Field::Second)?.values(),
        minute: read(Field::Minute)?.values(),
        hour: read(Field::Hour)?.values(),
        day_of_month: read(Field::DayOfMonth)?.day_of_month(),
        month: read(Field::Month)?.values(),
        day_of_week: read(Field::DayOfWeek)?.day_of_week(),
        // Left out: every year.
        year: read(Field::Year)?.values(),
    };
    Ok((fields, notes))
}

/// One field, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadField {
    Values(Values),
    DayOfMonth(DayOfMonth),
    DayOfWeek(DayOfWeek),
}

impl ReadField {
    fn values(self) -> Values {
        match self {
            ReadField::Values(values) => values,
            _ => Values::default(),
        }
    }

    fn day_of_month(self) -> DayOfMonth {
        match self {
            ReadField::DayOfMonth(days) => days,
            _ => DayOfMonth::Any,
        }
    }

    fn day_of_week(self) -> DayOfWeek {
        match self {
            ReadField::DayOfWeek(days) => days,
            _ => DayOfWeek::Any,
        }
    }

    /// The field as `fields` has it.
    pub(crate) fn of(fields: &Fields, field: Field) -> ReadField {
        match field {
            Field::DayOfMonth => ReadField::DayOfMonth(fields.day_of_month.clone()),
            Field::DayOfWeek => ReadField::DayOfWeek(fields.day_of_week.clone()),
            _ => ReadField::Values(fields.values(field).unwrap_or_default()),
        }
    }
}

/// Reads one field's text (upper case). `?` in a day field is [`DayOfMonth::Any`] or
/// [`DayOfWeek::Any`] (the caller checks that exactly one day field has it).
pub(crate) fn read_field(
    field: Field,
    text: &str,
    dialect: Dialect,
    notes: &mut Notes,
) -> Result<ReadField, QuartzError> {
    let refuse = |reason: String| QuartzError::Field {
        field,
        text: text.to_owned(),
        reason,
    };
    let question = text == "?";
    if text.contains('?') && !(question && matches!(field, Field::DayOfMonth | Field::DayOfWeek)) {
        return Err(refuse(
            "? stands alone, in day-of-month or day-of-week (the one the other decides)".into(),
        ));
    }
    match field {
        Field::DayOfMonth if question => Ok(ReadField::DayOfMonth(DayOfMonth::Any)),
        Field::DayOfWeek if question => Ok(ReadField::DayOfWeek(DayOfWeek::Any)),
        Field::DayOfMonth => read_day_of_month(text, dialect, notes)
            .map(ReadField::DayOfMonth)
            .map_err(refuse),
        Field::DayOfWeek => read_day_of_week(text, dialect, notes)
            .map(ReadField::DayOfWeek)
            .map_err(refuse),
        _ => read_values(field, text, dialect, notes)
            .map(ReadField::Values)
            .map_err(refuse),
    }
}

/// A field without special days: a list of items.
fn read_values(
    field: Field,
    text: &str,
    dialect: Dialect,
    notes: &mut Notes,
) -> Result<Values, String> {
    let mut values = Values::default();
    for item in super::days::items(text, dialect, notes)? {
        let term = read_term(field, item, dialect, notes)?;
        if !term.rest.is_empty() {
            return Err(format!("{item}: unexpected {:?}", term.rest));
        }
        values = values.union(expand(field, &term, dialect, notes)?);
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(expression: &str) -> String {
        read_fields(expression, Dialect::Kadence)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn both_day_fields_given_or_both_question_marks_are_refused() {
        for expression in [
            "0 0 12 15 * MON",
            "0 0 12 * * *",
            "0 0 12 15 * ?  ",
            "0 0 12 ? * ?",
        ] {
            let quartz = read_fields(expression, Dialect::Quartz).map(|_| ());
            let kadence = read_fields(expression, Dialect::Kadence).map(|_| ());
            assert_eq!(quartz, kadence, "{expression}");
        }
        assert_eq!(
            refusal("0 0 12 15 * MON"),
            "day-of-month \"15\" and day-of-week \"MON\" are both given: put ? in one of the two \
             (Quartz fires on the days one of them names; it cannot combine them)"
        );
        assert!(refusal("0 0 12 * * *").contains("put ? in one of the two"));
        assert!(refusal("0 0 12 ? * ?").contains("both ?: put ? in one of the two only"));
        // A field that is wrong on its own is named before the pair.
        assert!(refusal("0 0 12 32 * MON").starts_with("field 4 (day-of-month) \"32\""));
    }

    #[test]
    fn refusals_name_the_field() {
        assert!(refusal("0 61 * * * ?").starts_with("field 2 (minute) \"61\" is invalid: "));
        assert!(refusal("? * * * * ?").starts_with("field 1 (second) \"?\" is invalid: ? stands"));
        assert!(refusal("* * * * *").starts_with("found 5 fields"));
        assert!(refusal("0 0 0 ? * MON ? ").starts_with("field 7 (year)"));
        assert!(refusal("0 0 0 1 1 ? 2200").contains("year values are 1970-2199"));
    }
}
