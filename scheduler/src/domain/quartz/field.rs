//! The seven fields of a Quartz expression, their bounds, names and largest steps, and the
//! set of values one field holds.

/// A field of a Quartz expression, in the order they are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// 0–59.
    Second,
    /// 0–59.
    Minute,
    /// 0–23.
    Hour,
    /// 1–31, `?`, `L`, `W`.
    DayOfMonth,
    /// 1–12 or `JAN`–`DEC`.
    Month,
    /// 1–7 or `SUN`–`SAT` (1 = Sunday), `?`, `L`, `#`.
    DayOfWeek,
    /// 1970–2199, optional.
    Year,
}

/// Month names, January first: Quartz reads these three letters.
const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];

/// Day names, Sunday first (Quartz numbers the days of the week 1 = Sunday to 7 = Saturday).
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

impl Field {
    /// Every field, in order.
    pub const ALL: [Field; 7] = [
        Field::Second,
        Field::Minute,
        Field::Hour,
        Field::DayOfMonth,
        Field::Month,
        Field::DayOfWeek,
        Field::Year,
    ];

    /// Its name in messages: `second`, …, `day-of-month`, …
    pub fn name(self) -> &'static str {
        match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
            Field::Year => "year",
        }
    }

    /// Its position, from 1 (seconds) to 7 (year).
    pub fn number(self) -> usize {
        self as usize + 1
    }

    /// Its smallest value.
    pub(crate) fn min(self) -> u32 {
        match self {
            Field::Second | Field::Minute | Field::Hour => 0,
            Field::DayOfMonth | Field::Month | Field::DayOfWeek => 1,
            Field::Year => 1970,
        }
    }

    /// Its largest value. Quartz takes any year and never fires in one before 1970 or more
    /// than a century ahead; Kadence refuses a year outside 1970–2199 instead of saving a
    /// job that cannot fire.
    pub(crate) fn max(self) -> u32 {
        match self {
            Field::Second | Field::Minute => 59,
            Field::Hour => 23,
            Field::DayOfMonth => 31,
            Field::Month => 12,
            Field::DayOfWeek => 7,
            Field::Year => 2199,
        }
    }

    /// How many values it has.
    pub(crate) fn size(self) -> u32 {
        self.max() - self.min() + 1
    }

    /// The largest step Quartz takes after `*` or a single start (`*/59` seconds, `0/23` hours,
    /// `1/31` days): the field's largest value. A larger one (`*/60` seconds, `*/24` hours,
    /// `*/32` days, `*/13` months, `*/8` days of the week) could only ever give its start, and
    /// Quartz refuses it. Years have no bound.
    pub(crate) fn largest_step(self) -> u32 {
        match self {
            Field::Year => u32::MAX,
            _ => self.max(),
        }
    }

    /// The names of its values, if it has names (months and days of the week).
    pub(crate) fn names(self) -> &'static [&'static str] {
        match self {
            Field::Month => &MONTHS,
            Field::DayOfWeek => &DAYS,
            _ => &[],
        }
    }

    /// The value a three-letter name stands for.
    pub(crate) fn value_of_name(self, name: &str) -> Option<u32> {
        let at = self.names().iter().position(|known| *known == name)?;
        Some(self.min() + u32::try_from(at).ok()?)
    }

    /// What its values are, for messages: `0-59`, `1-12 or JAN-DEC`.
    pub(crate) fn described(self) -> String {
        match self.names() {
            [] => format!("{}-{}", self.min(), self.max()),
            names => format!(
                "{}-{} or {}-{}",
                self.min(),
                self.max(),
                names[0],
                names[names.len() - 1]
            ),
        }
    }
}

/// A set of values of one field, as bits counted from the field's smallest value (years
/// need 230 of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub(crate) struct Values([u64; 4]);

impl Values {
    /// Every value of `field`.
    pub(crate) fn all(field: Field) -> Values {
        let mut values = Values::default();
        for value in field.min()..=field.max() {
            values.insert(field, value);
        }
        values
    }

    /// `values` of `field`.
    #[cfg(test)]
    pub(crate) fn of(field: Field, values: &[u32]) -> Values {
        let mut set = Values::default();
        for value in values {
            set.insert(field, *value);
        }
        set
    }

    /// Adds `value`, which the caller has checked is within `field`'s bounds.
    pub(crate) fn insert(&mut self, field: Field, value: u32) {
        let bit = value - field.min();
        self.0[(bit / 64) as usize] |= 1 << (bit % 64);
    }

    pub(crate) fn contains(&self, field: Field, value: u32) -> bool {
        match value.checked_sub(field.min()) {
            Some(bit) if bit < 256 => self.0[(bit / 64) as usize] & (1 << (bit % 64)) != 0,
            _ => false,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.iter().all(|word| *word == 0)
    }

    pub(crate) fn len(&self) -> u32 {
        self.0.iter().map(|word| word.count_ones()).sum()
    }

    pub(crate) fn union(self, other: Values) -> Values {
        let mut words = self.0;
        for (word, more) in words.iter_mut().zip(other.0) {
            *word |= more;
        }
        Values(words)
    }

    /// The values, smallest first.
    pub(crate) fn iter(self, field: Field) -> impl Iterator<Item = u32> {
        (field.min()..=field.max()).filter(move |value| self.contains(field, *value))
    }

    /// Whether it holds every value of `field`.
    pub(crate) fn is_all(&self, field: Field) -> bool {
        *self == Values::all(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_hold_each_field_s_whole_range() {
        for field in Field::ALL {
            let all = Values::all(field);
            assert_eq!(all.len(), field.size(), "{field:?}");
            assert!(all.contains(field, field.min()) && all.contains(field, field.max()));
            assert!(!all.contains(field, field.max() + 1));
            assert_eq!(all.iter(field).next(), Some(field.min()));
        }
        let mut some = Values::default();
        some.insert(Field::Year, 2199);
        assert!(some.contains(Field::Year, 2199) && !some.contains(Field::Year, 1970));
    }

    #[test]
    fn names_are_three_letters_from_the_first_value() {
        assert_eq!(Field::DayOfWeek.value_of_name("SUN"), Some(1));
        assert_eq!(Field::DayOfWeek.value_of_name("SAT"), Some(7));
        assert_eq!(Field::Month.value_of_name("DEC"), Some(12));
        assert_eq!(Field::Month.value_of_name("TUE"), None);
        assert_eq!(Field::Hour.value_of_name("MON"), None);
        assert_eq!(Field::Month.described(), "1-12 or JAN-DEC");
    }
}
