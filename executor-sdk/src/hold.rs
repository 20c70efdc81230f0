//! Triggers that arrived before their scheduled time wait here until it comes.
//!
//! The scheduler may produce a trigger ahead of its time (`schedule.emit_lead`), so that a
//! burst of thousands of triggers due on the same second is already at the executors when
//! the second begins instead of queueing at the broker. An executor must therefore never
//! start a run before its `scheduled_at_ms`: the consumer holds such a trigger here, and
//! releases it to its job's block strategy at that millisecond. A held trigger counts as
//! queued (beats report its job), can be killed, and keeps its offset uncommitted.
//!
//! "Now" comes from the [`Clock`] the hold is built with: the system clock in production, one
//! that follows tokio's paused time in tests, so "not a millisecond early" is tested exactly.

use std::collections::BTreeMap;

use kadence_schemas::{JobId, TriggerId};

use crate::clock::Clock;

/// Held triggers in release order (time, then arrival), released by `clock`.
pub(crate) struct Held<P> {
    by_time: BTreeMap<(i64, u64), (JobId, TriggerId, P)>,
    arrivals: u64,
    clock: Clock,
}

impl<P> Held<P> {
    pub(crate) fn new(clock: Clock) -> Self {
        Held {
            by_time: BTreeMap::new(),
            arrivals: 0,
            clock,
        }
    }

    /// Holds `pending` (the trigger `trigger_id` of `job`) until `release_at_ms`, or hands it
    /// back when that moment has come already: it may start at once.
    pub(crate) fn hold(
        &mut self,
        release_at_ms: i64,
        job: JobId,
        trigger_id: TriggerId,
        pending: P,
    ) -> Option<P> {
        if release_at_ms <= self.clock.now_ms() {
            return Some(pending);
        }
        self.arrivals += 1;
        self.by_time
            .insert((release_at_ms, self.arrivals), (job, trigger_id, pending));
        None
    }

    /// How many triggers are held.
    pub(crate) fn len(&self) -> usize {
        self.by_time.len()
    }

    /// When the next held trigger is due, if any.
    pub(crate) fn next_release_ms(&self) -> Option<i64> {
        self.by_time.keys().next().map(|(at, _)| *at)
    }

    /// Resolves when the next held trigger is due; never when none is held.
    #[cfg(test)]
    pub(crate) async fn due(&self) {
        match self.next_release_ms() {
            Some(at_ms) => self.clock.sleep_until_ms(at_ms).await,
            None => std::future::pending().await,
        }
    }

    /// Every trigger due now, in order.
    pub(crate) fn release_due(&mut self) -> Vec<P> {
        self.release(self.clock.now_ms())
    }

    /// Every trigger due at `now_ms`, in order.
    fn release(&mut self, now_ms: i64) -> Vec<P> {
        let later = self.by_time.split_off(&(now_ms + 1, 0));
        let due = std::mem::replace(&mut self.by_time, later);
        due.into_values().map(|(_, _, pending)| pending).collect()
    }

    /// Removes and returns every held trigger of `job` (a kill).
    pub(crate) fn take_job(&mut self, job: JobId) -> Vec<P> {
        let keys: Vec<(i64, u64)> = self
            .by_time
            .iter()
            .filter(|(_, (held_job, _, _))| *held_job == job)
            .map(|(key, _)| *key)
            .collect();
        keys.into_iter()
            .filter_map(|key| self.by_time.remove(&key))
            .map(|(_, _, pending)| pending)
            .collect()
    }

    /// Removes and returns the held trigger `trigger_id`, if held.
    pub(crate) fn take_trigger(&mut self, trigger_id: &TriggerId) -> Option<P> {
        let key = self
            .by_time
            .iter()
            .find(|(_, (_, held, _))| held == trigger_id)
            .map(|(key, _)| *key)?;
        self.by_time.remove(&key).map(|(_, _, pending)| pending)
    }

    /// How many held triggers `matches` says yes to.
    pub(crate) fn count_matching(&self, matches: impl Fn(&P) -> bool) -> usize {
        self.by_time
            .values()
            .filter(|(_, _, pending)| matches(pending))
            .count()
    }

    /// The jobs with a held trigger (for beats).
    pub(crate) fn jobs(&self) -> impl Iterator<Item = JobId> + '_ {
        self.by_time.values().map(|(job, _, _)| *job)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::FutureExt;

    use super::*;

    fn job(id: i64) -> JobId {
        JobId::new(id).unwrap()
    }

    fn trigger(job_id: i64, at: i64) -> TriggerId {
        TriggerId::scheduled(job(job_id), at)
    }

    /// A clock at 0 ms, following tokio's paused time.
    fn held<P>() -> Held<P> {
        Held::new(Clock::following_tokio(0))
    }

    #[tokio::test(start_paused = true)]
    async fn releases_in_time_then_arrival_order_at_the_millisecond() {
        let mut held = held();
        assert_eq!(held.hold(2_000, job(1), trigger(1, 2_000), "b"), None);
        assert_eq!(held.hold(1_000, job(2), trigger(2, 1_000), "a"), None);
        assert_eq!(held.hold(2_000, job(3), trigger(3, 2_000), "c"), None);
        assert_eq!(held.next_release_ms(), Some(1_000));
        assert!(held.release(999).is_empty());
        assert_eq!(held.release(1_000), vec!["a"]);
        assert_eq!(held.release(1_999), Vec::<&str>::new());
        assert_eq!(held.release(2_000), vec!["b", "c"]);
        assert_eq!(held.next_release_ms(), None);
        assert!(
            held.due().now_or_never().is_none(),
            "nothing held: never due"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_trigger_is_not_released_before_its_millisecond_and_is_at_it() {
        let clock = Clock::following_tokio(0);
        let mut held = Held::new(clock);
        assert_eq!(held.hold(1_500, job(1), trigger(1, 1_500), "one"), None);
        tokio::time::advance(Duration::from_millis(1_499)).await;
        assert!(held.release_due().is_empty(), "one millisecond early");
        assert!(
            held.due().now_or_never().is_none(),
            "not due one millisecond early"
        );
        // Waiting wakes exactly on the millisecond (tokio's paused time jumps to it).
        held.due().await;
        assert_eq!(clock.now_ms(), 1_500);
        assert_eq!(held.release_due(), vec!["one"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_trigger_already_due_is_handed_back_at_once() {
        let mut held = Held::new(Clock::following_tokio(5_000));
        assert_eq!(
            held.hold(5_000, job(1), trigger(1, 5_000), "now"),
            Some("now")
        );
        assert_eq!(
            held.hold(4_000, job(1), trigger(1, 4_000), "late"),
            Some("late")
        );
        assert_eq!(held.jobs().count(), 0, "nothing was held");
    }

    #[tokio::test(start_paused = true)]
    async fn a_kill_takes_held_triggers_out() {
        let mut held = held();
        held.hold(5_000, job(1), trigger(1, 5_000), "one");
        held.hold(6_000, job(1), trigger(1, 6_000), "two");
        held.hold(5_000, job(2), trigger(2, 5_000), "other");
        assert_eq!(held.jobs().collect::<Vec<_>>().len(), 3);
        assert_eq!(held.take_trigger(&trigger(1, 6_000)), Some("two"));
        assert_eq!(held.take_job(job(1)), vec!["one"]);
        assert_eq!(held.release(10_000), vec!["other"]);
    }
}
