//! Quartz cron expressions: reading them as Kadence does and as Quartz 2.3.2 (XXL-JOB) does,
//! and their fires in a time zone, including when the clocks change.
//!
//! How an expression flows: [`Reading::read`] reads the text ([`reader`]: each field's items
//! in [`terms`], the day fields' `L`, `W` and `#` in [`days`]) into [`fields`]' plain sets of
//! values, noting the [`forms`] it uses that Quartz reads oddly or refuses; [`render`] spells
//! the sets out as a plain numeric pattern, which `croner` evaluates on naive wall-clock time
//! ([`matcher`], with [`last_day`] for `L-n`); [`clocks`] turns wall-clock times into
//! instants in the job's zone, where the clocks change.
//!
//! Why not `croner` alone (4.0.3, the newest release): it evaluates `L`, `W`, `#`, years and
//! Quartz's weekday numbers as Quartz does, so it finds the wall-clock times. Around it,
//! where it does not do what Quartz does:
//!
//! - **Reading.** croner refuses ranges that wrap around the field's end (`22-2` hours,
//!   `FRI-MON`, `NOV-FEB`), which Quartz fires; accepts `*/60` seconds and `*/24` hours,
//!   which Quartz refuses; fires on the day-of-month *or* the day-of-week when both are given
//!   (`0 0 12 15 * MON`), which Quartz refuses; replaces names inside the text (`TUES` becomes
//!   `3S`); reads `L` alone as day-of-week as no day at all (Quartz: Saturday); and has no
//!   `L-n`. Kadence reads every field itself, Quartz's way, and gives croner only numbers.
//! - **Clocks.** croner fires a time the clocks repeat twice and drops most times they skip;
//!   Quartz fires the first once and drops the second. Kadence's rule is in [`clocks`].
//!
//! What Kadence reads otherwise than Quartz, deliberately (the differential test against
//! Quartz, `scheduler/tests/quartz_parity/`, allows exactly these):
//!
//! - It refuses the forms Quartz reads oddly, rather than guess, except three it reads as
//!   written: a step after a name (`MON-FRI/2`), `W` on one day of a list (`1,15W`), one `#`
//!   day beside plain days (`3,2#1`). Each is a [`Quirk`].
//! - It accepts three forms Quartz refuses ([`Extension`]): `L`/`LW` beside other days of the
//!   month (`L,15`), a last weekday beside other days of the week (`5L,3`, `2,L`), several
//!   `#` days (`2#1,3#2`).
//! - `nW` for a day a month lacks (`31W` in April, `30W` in February) fires no day that
//!   month. Quartz takes the weekday nearest the day after the month's end, and fires when it
//!   falls inside the month (`29W`: Friday 28 February 2031).
//! - The clocks rule ([`clocks`]): a skipped time fires at the end of the gap, a job of every
//!   hour keeps the repeated hour, a start inside the first pass still sees the second.
//!
//! The XXL-JOB import reads each schedule in both dialects ([`Dialect`]) and keeps XXL-JOB's
//! meaning where they differ (`crate::operations::import::schedules`).

mod clocks;
mod days;
mod field;
mod fields;
mod forms;
mod last_day;
mod matcher;
mod reader;
mod reading;
mod render;
mod terms;

pub use clocks::{Clocks, Repeated, Search, Skipped, clock_changes};
pub use field::Field;
pub use forms::{Dialect, Extension, Quirk};
pub use reader::QuartzError;
pub use reading::Reading;
