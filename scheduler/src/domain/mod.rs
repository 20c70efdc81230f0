//! The domain model: the nouns and rules every layer shares, with no I/O of its own.
//!
//! - [`model`]: apps, jobs, runs (job-log rows), pending fires, executors, reports, audit
//!   entries, users, and the limits on what users may type;
//! - [`enums`]: the enumerations users type (route, block and misfire strategies, …) and the
//!   error naming the accepted values;
//! - [`schedule`]: Quartz cron, fixed rate and manual-only schedules, per-job time zone;
//! - [`quartz`]: cron expressions read as Kadence and as Quartz (XXL-JOB) read them, and their
//!   fires when the clocks change;
//! - [`planning`]: pure fire planning: which fires of a due job a scan writes, and misfires.

pub mod enums;
pub mod model;
pub mod planning;
pub mod quartz;
pub mod schedule;
