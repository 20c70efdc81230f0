//! Fire planning, pure: given a due job's schedule, misfire strategy and next fire time, which
//! fires a pre-read scan writes and where the job's next fire moves. No I/O and no clock: the
//! store calls [`plan_job`] with data inside its scan transaction, and the tests below hold it
//! to XXL-JOB's rules.
//!
//! The three XXL-JOB cases, for a job whose next fire is `next`:
//! - `now > next + window` (missed by more than the window: the scheduler was down): apply the
//!   misfire strategy (DO_NOTHING skips, FIRE_ONCE_NOW fires once now as MISFIRE), then
//!   continue from the next fire after `now`;
//! - `next <= now + window`: fire `next` (now if it is already late), and every later fire that
//!   is also inside the window — XXL-JOB wheels only one fire per scan, which drops fires of
//!   schedules faster than its scan;
//! - later: nothing yet.
//!
//! A schedule with no future fire stops its job, as in XXL-JOB. FIX_DELAY has at most one fire
//! in flight and waits for its completion.

use chrono_tz::Tz;
use kadence_schemas::{JobId, TriggerType};

use crate::domain::schedule::{MisfireStrategy, ScheduleSpec};

/// A fire planned for one job; becomes a job-log row and a
/// [`PendingFire`](crate::domain::model::PendingFire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedFire {
    /// The scheduled time: the fire's identity (its trigger id is `{job}-{scheduled_at_ms}`).
    pub scheduled_at_ms: i64,
    /// When the wheel emits it.
    pub fire_at_ms: i64,
    /// CRON, FIX_RATE or MISFIRE.
    pub trigger_type: TriggerType,
}

/// What follows the fires a scan writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextFire {
    /// The first fire not yet written.
    At(i64),
    /// FIX_DELAY: the results consumer sets the next fire when the run just fired finishes.
    AfterCompletion,
    /// The schedule has no future fire: the job stops (as in XXL-JOB).
    Never,
}

impl NextFire {
    /// The next fire time to store, if any.
    pub fn at(self) -> Option<i64> {
        match self {
            NextFire::At(at) => Some(at),
            NextFire::AfterCompletion | NextFire::Never => None,
        }
    }
}

/// The outcome of planning one due job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobPlan {
    /// Fires to write, in time order.
    pub fires: Vec<PlannedFire>,
    /// What comes after them.
    pub next: NextFire,
    /// Whether a fire was missed by more than the window, so the misfire strategy applied.
    pub missed: bool,
}

/// A running job whose next fire falls inside the pre-read window, as the store reads it.
#[derive(Debug, Clone)]
pub struct DueJob {
    /// The job.
    pub id: JobId,
    /// Its schedule.
    pub schedule: ScheduleSpec,
    /// The zone the schedule is evaluated in.
    pub time_zone: Tz,
    /// What to do with a fire missed by more than the window.
    pub misfire_strategy: MisfireStrategy,
    /// The next fire not yet written, ms.
    pub next_fire_ms: i64,
}

/// Upper bound of fires written for one job in one scan, so a bad schedule cannot flood the
/// table. With the minimum period of one second and a 5 s window a job needs six.
const MAX_FIRES_PER_JOB_PER_SCAN: usize = 10_000;

/// Plans one due job at `now_ms` (see the module docs for the three cases).
pub fn plan_job(job: &DueJob, now_ms: i64, window_ms: i64) -> JobPlan {
    if let ScheduleSpec::FixDelay { seconds } = job.schedule {
        return plan_fix_delay(job, i64::from(seconds) * 1000, now_ms, window_ms);
    }
    let mut fires = Vec::new();
    let regular_type = match job.schedule {
        ScheduleSpec::FixRate { .. } => TriggerType::FixRate,
        _ => TriggerType::Cron,
    };
    let missed = now_ms > job.next_fire_ms + window_ms;
    let mut cursor = if missed {
        if job.misfire_strategy == MisfireStrategy::FireOnceNow {
            fires.push(PlannedFire {
                scheduled_at_ms: job.next_fire_ms,
                fire_at_ms: now_ms,
                trigger_type: TriggerType::Misfire,
            });
        }
        job.schedule.next_after(now_ms, job.time_zone)
    } else {
        Some(job.next_fire_ms)
    };
    let horizon = now_ms + window_ms;
    while let Some(at) = cursor {
        if at > horizon || fires.len() >= MAX_FIRES_PER_JOB_PER_SCAN {
            break;
        }
        fires.push(PlannedFire {
            scheduled_at_ms: at,
            fire_at_ms: at,
            trigger_type: regular_type,
        });
        cursor = job.schedule.next_after(at, job.time_zone);
    }
    JobPlan {
        fires,
        next: cursor.map_or(NextFire::Never, NextFire::At),
        missed,
    }
}

/// FIX_DELAY has at most one fire in flight: fire the due one (late or within the window)
/// and wait for its completion. A fire missed by more than the window follows the misfire
/// strategy: FIRE_ONCE_NOW fires it now; DO_NOTHING skips it and counts the delay from now.
fn plan_fix_delay(job: &DueJob, delay_ms: i64, now_ms: i64, window_ms: i64) -> JobPlan {
    if job.next_fire_ms > now_ms + window_ms {
        return JobPlan {
            fires: Vec::new(),
            next: NextFire::At(job.next_fire_ms),
            missed: false,
        };
    }
    let missed = now_ms > job.next_fire_ms + window_ms;
    let fire = match (missed, job.misfire_strategy) {
        (false, _) => PlannedFire {
            scheduled_at_ms: job.next_fire_ms,
            fire_at_ms: job.next_fire_ms,
            trigger_type: TriggerType::FixDelay,
        },
        (true, MisfireStrategy::FireOnceNow) => PlannedFire {
            scheduled_at_ms: job.next_fire_ms,
            fire_at_ms: now_ms,
            trigger_type: TriggerType::Misfire,
        },
        (true, MisfireStrategy::DoNothing) => {
            return JobPlan {
                fires: Vec::new(),
                next: NextFire::At(now_ms + delay_ms),
                missed: true,
            };
        }
    };
    JobPlan {
        fires: vec![fire],
        next: NextFire::AfterCompletion,
        missed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::schedule::ScheduleSpec;

    const WINDOW: i64 = 5_000;

    fn every_second(next_fire_ms: i64, misfire: MisfireStrategy) -> DueJob {
        DueJob {
            id: JobId::new(7).unwrap(),
            schedule: ScheduleSpec::parse("CRON", "* * * * * ?").unwrap(),
            time_zone: Tz::UTC,
            misfire_strategy: misfire,
            next_fire_ms,
        }
    }

    fn scheduled(plan: &JobPlan) -> Vec<i64> {
        plan.fires.iter().map(|f| f.scheduled_at_ms).collect()
    }

    #[test]
    fn future_fires_inside_the_window_are_all_planned() {
        let now = 1_000_000_000_500;
        let plan = plan_job(
            &every_second(1_000_000_001_000, MisfireStrategy::DoNothing),
            now,
            WINDOW,
        );
        assert_eq!(
            scheduled(&plan),
            vec![
                1_000_000_001_000,
                1_000_000_002_000,
                1_000_000_003_000,
                1_000_000_004_000,
                1_000_000_005_000
            ]
        );
        assert_eq!(plan.next, NextFire::At(1_000_000_006_000));
        assert!(
            plan.fires
                .iter()
                .all(|f| f.trigger_type == TriggerType::Cron)
        );
    }

    #[test]
    fn late_by_less_than_the_window_fires_at_its_scheduled_time() {
        let now = 1_000_000_004_000;
        let plan = plan_job(
            &every_second(1_000_000_000_000, MisfireStrategy::DoNothing),
            now,
            WINDOW,
        );
        assert_eq!(plan.fires[0].scheduled_at_ms, 1_000_000_000_000);
        assert_eq!(plan.fires.len(), 10); // 0..=9 s: late ones fire now, the rest are wheeled
    }

    #[test]
    fn missed_by_more_than_the_window_applies_the_misfire_strategy() {
        let next = 1_000_000_000_000;
        let now = next + WINDOW + 1;
        let skip = plan_job(&every_second(next, MisfireStrategy::DoNothing), now, WINDOW);
        assert!(skip.fires.iter().all(|f| f.scheduled_at_ms > now));
        let once = plan_job(
            &every_second(next, MisfireStrategy::FireOnceNow),
            now,
            WINDOW,
        );
        assert_eq!(
            once.fires[0],
            PlannedFire {
                scheduled_at_ms: next,
                fire_at_ms: now,
                trigger_type: TriggerType::Misfire
            }
        );
        assert!(once.fires[1..].iter().all(|f| f.scheduled_at_ms > now));
        // Exactly at the window edge is still "late by less".
        let edge = plan_job(
            &every_second(next, MisfireStrategy::FireOnceNow),
            next + WINDOW,
            WINDOW,
        );
        assert_eq!(edge.fires[0].trigger_type, TriggerType::Cron);
        assert_eq!(edge.fires[0].scheduled_at_ms, next);
    }

    fn job_with(schedule: &str, conf: &str, next_fire_ms: i64, misfire: MisfireStrategy) -> DueJob {
        DueJob {
            schedule: ScheduleSpec::parse(schedule, conf).unwrap(),
            ..every_second(next_fire_ms, misfire)
        }
    }

    #[test]
    fn window_edges_for_every_schedule_type() {
        let next = 2_000_000_000_000;
        for (schedule, conf) in [
            ("CRON", "* * * * * ?"),
            ("FIX_RATE", "1"),
            ("FIX_DELAY", "1"),
        ] {
            for misfire in [MisfireStrategy::DoNothing, MisfireStrategy::FireOnceNow] {
                let job = job_with(schedule, conf, next, misfire);
                // One ms before the fire enters the window: nothing is due.
                let early = plan_job(&job, next - WINDOW - 1, WINDOW);
                assert!(early.fires.is_empty(), "{schedule} early");
                // Exactly at the window edge, and one ms inside: the fire is written on time.
                for now in [next - WINDOW, next - WINDOW + 1, next, next + WINDOW] {
                    let plan = plan_job(&job, now, WINDOW);
                    assert_eq!(plan.fires[0].scheduled_at_ms, next, "{schedule} at {now}");
                    assert_eq!(plan.fires[0].fire_at_ms, next, "{schedule} at {now}");
                    assert_ne!(plan.fires[0].trigger_type, TriggerType::Misfire);
                }
                // One ms past "late by the window": a misfire.
                let late = plan_job(&job, next + WINDOW + 1, WINDOW);
                match misfire {
                    MisfireStrategy::FireOnceNow => {
                        assert_eq!(
                            late.fires[0].trigger_type,
                            TriggerType::Misfire,
                            "{schedule}"
                        );
                        assert_eq!(late.fires[0].fire_at_ms, next + WINDOW + 1);
                    }
                    MisfireStrategy::DoNothing => assert!(
                        late.fires
                            .iter()
                            .all(|fire| fire.scheduled_at_ms > next + WINDOW + 1),
                        "{schedule} skipped the missed fire"
                    ),
                }
            }
        }
    }

    #[test]
    fn fix_rate_counts_from_the_previous_scheduled_time() {
        let plan = plan_job(
            &job_with("FIX_RATE", "2", 10_000, MisfireStrategy::DoNothing),
            9_000,
            WINDOW,
        );
        assert_eq!(scheduled(&plan), vec![10_000, 12_000, 14_000]);
        assert!(
            plan.fires
                .iter()
                .all(|fire| fire.trigger_type == TriggerType::FixRate)
        );
        assert_eq!(plan.next, NextFire::At(16_000));
    }

    #[test]
    fn fix_delay_fires_once_and_waits_for_completion() {
        let plan = plan_job(
            &job_with("FIX_DELAY", "2", 10_000, MisfireStrategy::DoNothing),
            9_000,
            WINDOW,
        );
        assert_eq!(scheduled(&plan), vec![10_000]);
        assert_eq!(plan.fires[0].trigger_type, TriggerType::FixDelay);
        assert_eq!(plan.next, NextFire::AfterCompletion);
        // Missed by more than the window, DO_NOTHING: no fire, the delay counts from now.
        let skipped = plan_job(
            &job_with("FIX_DELAY", "2", 10_000, MisfireStrategy::DoNothing),
            60_000,
            WINDOW,
        );
        assert!(skipped.fires.is_empty());
        assert_eq!(skipped.next, NextFire::At(62_000));
    }

    #[test]
    fn a_schedule_without_future_fires_stops_its_job() {
        let past_year = DueJob {
            schedule: ScheduleSpec::parse("CRON", "0 0 0 1 1 ? 2020").unwrap(),
            ..every_second(1_577_836_800_000, MisfireStrategy::DoNothing)
        };
        let plan = plan_job(&past_year, 1_577_836_800_000, WINDOW);
        assert_eq!(scheduled(&plan), vec![1_577_836_800_000]);
        assert_eq!(plan.next, NextFire::Never);
    }
}
