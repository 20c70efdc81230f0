//! Redelivery recognition: the trigger ids recently run here ([`RecentTriggers`]).
//!
//! After a rebalance or a restart the group may deliver a trigger again that this executor
//! already ran or is running. Trigger ids are deterministic, so the id says so: a trigger
//! whose id is remembered is not run twice (its offset is completed at once). A trigger that
//! did not run to a result here (handed back, or its partition moved before it started) is
//! forgotten, so that it runs if its partition comes back.

use std::collections::{HashSet, VecDeque};

use kadence_schemas::TriggerId;

/// How many recent trigger ids are remembered to recognise redeliveries.
const REMEMBERED_TRIGGERS: usize = 10_000;

/// Trigger ids recently started here, oldest forgotten first.
pub(super) struct RecentTriggers {
    seen: HashSet<TriggerId>,
    order: VecDeque<TriggerId>,
    capacity: usize,
}

impl RecentTriggers {
    pub(super) fn new() -> Self {
        Self::with_capacity(REMEMBERED_TRIGGERS)
    }

    fn with_capacity(capacity: usize) -> Self {
        RecentTriggers {
            seen: HashSet::new(),
            order: VecDeque::new(),
            capacity,
        }
    }

    /// Forgets `id` (it did not run to a result here).
    pub(super) fn forget(&mut self, id: &TriggerId) {
        if self.seen.remove(id) {
            self.order.retain(|known| known != id);
        }
    }

    /// Remembers `id`; false if it was already known.
    pub(super) fn insert(&mut self, id: &TriggerId) -> bool {
        if !self.seen.insert(id.clone()) {
            return false;
        }
        self.order.push_back(id.clone());
        if self.order.len() > self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.seen.remove(&oldest);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use kadence_schemas::JobId;

    use super::*;

    fn id(n: i64) -> TriggerId {
        TriggerId::scheduled(JobId::new(1).unwrap(), n)
    }

    #[test]
    fn a_known_id_is_a_redelivery_until_forgotten_or_evicted() {
        let mut recent = RecentTriggers::with_capacity(2);
        assert!(recent.insert(&id(1)));
        assert!(!recent.insert(&id(1)), "the same id again is a redelivery");
        recent.forget(&id(1));
        assert!(recent.insert(&id(1)), "a forgotten id runs again");
        assert!(recent.insert(&id(2)));
        assert!(recent.insert(&id(3)), "over capacity: the oldest (1) goes");
        assert!(recent.insert(&id(1)));
        assert!(!recent.insert(&id(3)));
    }
}
