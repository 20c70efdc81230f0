//! What an expression says once read, field by field: the values of each field and the
//! special days (`L`, `W`, `#`). Two texts that read the same here fire the same.

use super::field::{Field, Values};
use super::last_day::BeforeLastDay;

/// A whole expression, read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Fields {
    pub(crate) second: Values,
    pub(crate) minute: Values,
    pub(crate) hour: Values,
    pub(crate) day_of_month: DayOfMonth,
    pub(crate) month: Values,
    pub(crate) day_of_week: DayOfWeek,
    /// Every year when the field is left out.
    pub(crate) year: Values,
}

/// The day-of-month field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum DayOfMonth {
    /// `?` (the day of the week decides) or `*`.
    Any,
    /// Days of the month.
    Days {
        /// Plain days: `1,15`, `1-5`, `*/10`.
        days: Values,
        /// `nW`: the weekday nearest day n, within its month.
        nearest_weekday: Values,
        /// `L`: the last day.
        last: bool,
        /// `LW`: the last weekday.
        last_weekday: bool,
    },
    /// `L-n` (`L-nW`): n days before the last, alone in the field.
    BeforeLast(BeforeLastDay),
}

/// The day-of-week field (1 = Sunday … 7 = Saturday).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum DayOfWeek {
    /// `?` (the day of the month decides) or `*`.
    Any,
    /// Days of the week.
    Days {
        /// Plain days: `MON-FRI`, `1,7`.
        days: Values,
        /// `nL`: the last such day of the month.
        last: Values,
        /// `n#k`: the k-th such day of the month; index k − 1 (boxed: seldom used, and the
        /// largest part of the field).
        nth: Box<[Values; 5]>,
    },
}

impl Fields {
    /// The values of a field without special days (not the two day fields).
    pub(crate) fn values(&self, field: Field) -> Option<Values> {
        match field {
            Field::Second => Some(self.second),
            Field::Minute => Some(self.minute),
            Field::Hour => Some(self.hour),
            Field::Month => Some(self.month),
            Field::Year => Some(self.year),
            Field::DayOfMonth | Field::DayOfWeek => None,
        }
    }

    /// Whether the job fires in every hour of the day (`*`, `0/1`, `0-23`): such a job runs by
    /// the clock's real hours when the clocks change (see [`super::clocks`]).
    pub(crate) fn every_hour(&self) -> bool {
        self.hour.is_all(Field::Hour)
    }
}

impl DayOfWeek {
    /// How many `#` days it names.
    pub(crate) fn nth_count(nth: &[Values; 5]) -> u32 {
        nth.iter().map(Values::len).sum()
    }
}
