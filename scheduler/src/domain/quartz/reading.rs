//! [`Reading`]: an expression read in one dialect, ready to give its fires.

use chrono::DateTime;
use chrono_tz::Tz;

use super::clocks::{Clocks, next_fire};
use super::field::Field;
use super::fields::Fields;
use super::forms::{Dialect, Extension, Notes, Quirk};
use super::matcher::Matcher;
use super::reader::{QuartzError, ReadField, read_field, read_fields};
use super::render::field_text;

/// An expression, read: what it says, the quirks and extensions it uses, and its fires.
#[derive(Debug)]
pub struct Reading {
    fields: Fields,
    notes: Notes,
    matcher: Matcher,
}

impl Reading {
    /// Reads `expression` (6 or 7 fields) in `dialect`.
    pub fn read(expression: &str, dialect: Dialect) -> Result<Reading, QuartzError> {
        let (fields, notes) = read_fields(expression, dialect)?;
        let matcher = Matcher::new(&fields)?;
        Ok(Reading {
            fields,
            notes,
            matcher,
        })
    }

    /// The first fire strictly after `after`, in `after`'s zone, under `clocks`.
    pub fn next_after(&self, after: &DateTime<Tz>, clocks: Clocks) -> Option<DateTime<Tz>> {
        next_fire(&self.matcher, after, clocks)
    }

    /// Kadence's rule for this expression when the clocks change: by the clock's real hours
    /// when it fires every hour, else once per wall-clock time (see [`super::clocks`]).
    pub fn clocks(&self) -> Clocks {
        Clocks::kadence(self.fields.every_hour())
    }

    /// The forms Quartz reads oddly that this reading met (only ever in Quartz's dialect:
    /// Kadence's refuses them or reads them as written).
    pub fn quirks(&self) -> &[Quirk] {
        &self.notes.quirks
    }

    /// The forms beyond Quartz this reading accepted (only ever in Kadence's dialect).
    pub fn extensions(&self) -> &[Extension] {
        &self.notes.extensions
    }

    /// Whether `other` says the same, field by field.
    pub fn same_schedule(&self, other: &Reading) -> bool {
        self.fields == other.fields
    }

    /// Whether the expression has a `W` day of the month that some months lack (`29W` to
    /// `31W`): Kadence fires no such month; Quartz may fire on a weekday near the day after
    /// the month's end.
    pub fn has_nearest_weekday_of_a_missing_day(&self) -> bool {
        match &self.fields.day_of_month {
            super::fields::DayOfMonth::Days {
                nearest_weekday, ..
            } => nearest_weekday.iter(Field::DayOfMonth).any(|day| day >= 29),
            _ => false,
        }
    }

    /// `original` (the text this was read from, in another dialect) with every field that
    /// Kadence reads otherwise than this reading written so that Kadence reads it as this
    /// reading does; the fields it reads the same stay as written.
    pub fn rewrite(&self, original: &str) -> String {
        let texts: Vec<&str> = original.split_whitespace().collect();
        Field::ALL
            .into_iter()
            .zip(texts.iter().copied())
            .map(|(field, text)| {
                let mut notes = Notes::default();
                let upper = text.to_ascii_uppercase();
                let kadence = read_field(field, &upper, Dialect::Kadence, &mut notes);
                match kadence {
                    Ok(read) if read == ReadField::of(&self.fields, field) => text.to_owned(),
                    _ => field_text(&self.fields, field),
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}
