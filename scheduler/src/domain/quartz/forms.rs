//! The forms on which Kadence's reading of an expression and Quartz's part ways: the ones
//! Quartz reads oddly ([`Quirk`], which Kadence refuses or reads as written) and the ones
//! Kadence accepts beyond Quartz ([`Extension`]). Reading an expression notes which it uses;
//! the XXL-JOB import explains a rewritten schedule with them, and the differential test
//! against Quartz allows a disagreement only when one of them explains it.

/// How an expression's text is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Kadence's: Quartz's syntax, with the forms Quartz reads oddly refused or read as
    /// written, and a few extensions. Every schedule Kadence stores is read this way.
    Kadence,
    /// Quartz 2.3.2's own (XXL-JOB evaluates cron with a copy of it), quirks included, as
    /// found by running it: the import reads XXL-JOB's schedules this way to keep what they
    /// meant there.
    Quartz,
}

/// A form Quartz accepts and reads otherwise than it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quirk {
    /// `MON-FRI/2`, `JAN/3`: Quartz ignores a step after a name (every weekday); Kadence
    /// applies it, as after numbers (`2-6/2`: Monday, Wednesday, Friday).
    StepAfterName,
    /// `TUES`, `MONDAY`, `TUES-FRI`, `MON-FRI/X`: Quartz reads a name's first three letters
    /// and ignores the rest of the item (`TUES-FRI` is Tuesday alone); Kadence refuses it.
    TextAfterName,
    /// `5,,6`, `5,`: Quartz ignores an empty list item; Kadence refuses it.
    EmptyItem,
    /// `*/0` is every value to Quartz, `5/0` and `5-9/0` just 5; Kadence refuses a step of 0.
    ZeroStep,
    /// `1-5/60`: Quartz bounds a step only after `*` or a single start; after a range, a step
    /// as large as the field gives the range's start alone. Kadence refuses it.
    StepBeyondField,
    /// `1-5W`, `6-7L`, `2-3#1`: Quartz ignores `W`, `L` or `#` after a range; Kadence refuses
    /// it.
    SuffixAfterRange,
    /// `6L/2`, `6L-2`, `6LW`, `LW` as day-of-week: Quartz ignores what follows an `L` of the
    /// day of the week; Kadence refuses it.
    SuffixAfterLast,
    /// `1,15W`: with `W` on one day of a list, Quartz fires only on the weekday nearest the
    /// list's smallest day (the 1st); Kadence reads each day as written (the 1st, and the
    /// weekday nearest the 15th).
    NearestWeekdayInList,
    /// `3,2#1`: with one `#` day in a list, Quartz fires only on it (the first Monday);
    /// Kadence reads each day as written (every Tuesday, and the first Monday).
    NthBesideOtherDays,
}

impl Quirk {
    /// What Quartz (XXL-JOB) does with the form, for the import's report.
    pub fn quartz_reading(self) -> &'static str {
        match self {
            Quirk::StepAfterName => "ignores a step after a name (MON-FRI/2 is every weekday)",
            Quirk::TextAfterName => {
                "reads a name's first three letters and ignores the rest of the item (TUES is \
                 TUE, TUES-FRI is TUE alone)"
            }
            Quirk::EmptyItem => "ignores an empty list item (5,,6 is 5,6)",
            Quirk::ZeroStep => "reads */0 as every value and 5/0 or 5-9/0 as 5 alone",
            Quirk::StepBeyondField => {
                "reads a range with a step as large as the field as its start"
            }
            Quirk::SuffixAfterRange => "ignores W, L or # after a range (1-5W is 1-5)",
            Quirk::SuffixAfterLast => "ignores what follows L in the day of the week (6L/2 is 6L)",
            Quirk::NearestWeekdayInList => {
                "fires only on the weekday nearest the smallest day of a list holding a W \
                 (1,15W is 1W)"
            }
            Quirk::NthBesideOtherDays => {
                "fires only on the # day of a list holding one (3,2#1 is 2#1)"
            }
        }
    }
}

/// A form Kadence accepts and Quartz refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Extension {
    /// `L,15`, `LW,1`: the last day (or last weekday) of the month beside other days.
    LastDayBesideOtherDays,
    /// `5L,3`, `2,L`: a last day of the week (`nL`, or `L` for Saturday) beside other days.
    LastWeekdayBesideOtherDays,
    /// `2#1,3#2`: several `#` days.
    SeveralNthDays,
}

/// What reading one expression noted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Notes {
    pub(crate) quirks: Vec<Quirk>,
    pub(crate) extensions: Vec<Extension>,
}

impl Notes {
    pub(crate) fn quirk(&mut self, quirk: Quirk) {
        if !self.quirks.contains(&quirk) {
            self.quirks.push(quirk);
        }
    }

    pub(crate) fn extension(&mut self, extension: Extension) {
        if !self.extensions.contains(&extension) {
            self.extensions.push(extension);
        }
    }
}
