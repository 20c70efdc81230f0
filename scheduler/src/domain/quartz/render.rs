//! [`Fields`] back to text: the plain numeric pattern croner is given (every range and step
//! already spelled out, so croner's own reading of names, ranges and steps never matters),
//! and a Kadence expression for a field the import rewrites to XXL-JOB's meaning.

use super::field::{Field, Values};
use super::fields::{DayOfMonth, DayOfWeek, Fields};

/// The pattern croner evaluates, in its Quartz mode (seconds, year, 1 = Sunday). `L-n` is
/// given as its candidate days ([`super::last_day`]).
pub(crate) fn croner_pattern(fields: &Fields) -> String {
    let numbers = |field: Field, values: Values| list(field, values, false);
    let day_of_month = match &fields.day_of_month {
        DayOfMonth::BeforeLast(before_last) => before_last.candidate_days(),
        days => day_of_month_text(days, false),
    };
    [
        numbers(Field::Second, fields.second),
        numbers(Field::Minute, fields.minute),
        numbers(Field::Hour, fields.hour),
        day_of_month,
        numbers(Field::Month, fields.month),
        day_of_week_text(&fields.day_of_week, false),
        numbers(Field::Year, fields.year),
    ]
    .join(" ")
}

/// `field` of `fields` as Kadence reads it back to the same: names for months and days of
/// the week, `*/n` and `a/n` for steps that run to the field's end, ranges for runs.
pub(crate) fn field_text(fields: &Fields, field: Field) -> String {
    match field {
        Field::DayOfMonth => match &fields.day_of_month {
            DayOfMonth::Any if fields.day_of_week == DayOfWeek::Any => "*".to_owned(),
            DayOfMonth::Any => "?".to_owned(),
            DayOfMonth::BeforeLast(before_last) => before_last.text(),
            days => day_of_month_text(days, true),
        },
        Field::DayOfWeek => match &fields.day_of_week {
            DayOfWeek::Any if fields.day_of_month == DayOfMonth::Any => "?".to_owned(),
            days => day_of_week_text(days, true),
        },
        _ => list(field, fields.values(field).unwrap_or_default(), true),
    }
}

/// `written`: as a person writes it (`a/n` steps, which croner would refuse, and names).
fn day_of_month_text(days: &DayOfMonth, written: bool) -> String {
    let DayOfMonth::Days {
        days,
        nearest_weekday,
        last,
        last_weekday,
    } = days
    else {
        return "*".to_owned();
    };
    let mut items = Vec::new();
    if !days.is_empty() {
        items.push(list(Field::DayOfMonth, *days, written));
    }
    items.extend(
        nearest_weekday
            .iter(Field::DayOfMonth)
            .map(|day| format!("{day}W")),
    );
    if *last {
        items.push("L".to_owned());
    }
    if *last_weekday {
        items.push("LW".to_owned());
    }
    items.join(",")
}

fn day_of_week_text(days: &DayOfWeek, written: bool) -> String {
    let DayOfWeek::Days { days, last, nth } = days else {
        return "*".to_owned();
    };
    let name = |day: u32| value_text(Field::DayOfWeek, day, written);
    let mut items = Vec::new();
    if !days.is_empty() {
        items.push(list(Field::DayOfWeek, *days, written));
    }
    items.extend(
        last.iter(Field::DayOfWeek)
            .map(|day| format!("{}L", name(day))),
    );
    for (index, days) in nth.iter().enumerate() {
        items.extend(
            days.iter(Field::DayOfWeek)
                .map(|day| format!("{}#{}", name(day), index + 1)),
        );
    }
    items.join(",")
}

fn value_text(field: Field, value: u32, written: bool) -> String {
    match field.names() {
        names if written && !names.is_empty() => names[(value - field.min()) as usize].to_owned(),
        _ => value.to_string(),
    }
}

/// `values` as a list: `*` for all, `a/n` (`*/n`) for a step that runs to the field's end,
/// else runs of three or more as ranges.
fn list(field: Field, values: Values, written: bool) -> String {
    if values.is_all(field) {
        return "*".to_owned();
    }
    let all: Vec<u32> = values.iter(field).collect();
    let text = |value: u32| value_text(field, value, written);
    if written && let Some(step) = step_to_the_end(field, &all) {
        let start = if all[0] == field.min() {
            "*".to_owned()
        } else {
            text(all[0])
        };
        return format!("{start}/{step}");
    }
    let mut items = Vec::new();
    let mut run_start = 0;
    for at in 0..all.len() {
        let run_ends = at + 1 == all.len() || all[at + 1] != all[at] + 1;
        if !run_ends {
            continue;
        }
        match at - run_start {
            0 => items.push(text(all[at])),
            1 => items.extend([text(all[run_start]), text(all[at])]),
            _ => items.push(format!("{}-{}", text(all[run_start]), text(all[at]))),
        }
        run_start = at + 1;
    }
    items.join(",")
}

/// The step `n` when `values` are `a, a+n, …` up to the last that fits in the field, with
/// `n` at least 2 and at least three values.
fn step_to_the_end(field: Field, values: &[u32]) -> Option<u32> {
    let [first, second, ..] = *values else {
        return None;
    };
    let step = second - first;
    let regular = values.len() >= 3
        && step >= 2
        && values.windows(2).all(|pair| pair[1] - pair[0] == step)
        && values[values.len() - 1] + step > field.max();
    regular.then_some(step)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_come_out_short() {
        let text = |field, values: &[u32]| list(field, Values::of(field, values), true);
        assert_eq!(text(Field::Second, &[0, 15, 30, 45]), "*/15");
        assert_eq!(text(Field::Second, &[5, 35]), "5,35");
        assert_eq!(text(Field::Minute, &[5, 25, 45]), "5/20");
        assert_eq!(text(Field::Hour, &[0, 1, 2, 22, 23]), "0-2,22,23");
        assert_eq!(text(Field::DayOfWeek, &[2, 3, 4, 5, 6]), "MON-FRI");
        assert_eq!(text(Field::DayOfWeek, &[1, 4, 7]), "*/3");
        assert_eq!(text(Field::Month, &[1, 2, 11, 12]), "JAN,FEB,NOV,DEC");
        assert_eq!(
            list(Field::Month, Values::of(Field::Month, &[1, 2, 3]), false),
            "1-3"
        );
        assert_eq!(text(Field::Year, &[2027]), "2027");
    }
}
