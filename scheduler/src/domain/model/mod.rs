//! The scheduler's domain nouns: apps, jobs, runs (job-log rows), pending fires and
//! executors, one file per noun:
//! - [`job`]: apps, jobs and their strategies, retries, scripts (GLUE) and children;
//! - [`run`]: pending fires, runs, completions, alarm status, daily reports;
//! - [`executor`]: executors as the registry knows them;
//! - [`user`]: users, their role, status and grants per app, and their tokens;
//! - [`audit`]: the audit trail's entries, one per write through the API;
//! - [`limits`]: how long each text and list a user writes may be, and why.
//!
//! Enumerations that users type (strategies, statuses) are parsed at the boundary: an
//! unknown value is a [`ModelError`] that lists the accepted values, never a silent default
//! (see [`crate::domain::enums`]). Every noun is re-exported here: `crate::domain::model::Job`.

pub mod audit;
pub mod executor;
pub mod job;
pub mod limits;
pub mod run;
pub mod user;

pub use crate::domain::enums::ModelError;
pub use audit::{AuditEntry, NewAuditEntry};
pub use executor::{ExecutorEntry, ExecutorStatus};
pub use job::{
    App, ChildTriggerMode, Glue, GlueVersion, HistoryPolicy, Job, JobStatus, NewJob, RetryBackoff,
    RetryPolicy, RouteStrategy,
};
pub use run::{
    AlarmStatus, Completion, CompletionOutcome, DailyReport, PendingFire, Run, RunState,
};
pub use user::{Access, AppGrant, Role, TokenInfo, TokenKind, User, UserStatus};

#[cfg(test)]
mod tests {
    use kadence_schemas::{JobId, TriggerId};

    use super::*;

    #[test]
    fn enumerations_parse_case_insensitively_and_reject_unknown_values() {
        assert_eq!("first".parse::<RouteStrategy>(), Ok(RouteStrategy::First));
        assert_eq!(
            " RANDOM ".parse::<RouteStrategy>(),
            Ok(RouteStrategy::Random)
        );
        let err = "BUSY".parse::<RouteStrategy>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown route strategy \"BUSY\": expected one of FIRST, LAST, RANDOM, ROUND, \
             CONSISTENT_HASH, LEAST_FREQUENTLY_USED, LEAST_RECENTLY_USED, FAILOVER, BUSYOVER, \
             SHARDING_BROADCAST"
        );
        assert_eq!("stopped".parse::<JobStatus>(), Ok(JobStatus::Stopped));
        assert!("paused".parse::<JobStatus>().is_err());
        assert_eq!(RunState::Dispatched.to_string(), "DISPATCHED");
    }

    fn broadcast_fire(route_partitions: Option<Vec<i32>>) -> PendingFire {
        PendingFire {
            route_strategy: RouteStrategy::ShardingBroadcast,
            route_partitions,
            ..PendingFire::for_test(7, 5_000)
        }
    }

    #[test]
    fn a_broadcast_fire_becomes_one_shard_per_partition() {
        let shards = broadcast_fire(None).into_shards(3);
        let job = JobId::new(7).unwrap();
        let summary: Vec<_> = shards
            .iter()
            .map(|s| {
                (
                    s.trigger_id.clone(),
                    s.shard_index,
                    s.shard_total,
                    s.route_partitions.clone(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            (0..3)
                .map(|p| (TriggerId::shard(job, 5_000, p as u32), p, 3, Some(vec![p])))
                .collect::<Vec<_>>()
        );
        // Named partitions: shards over those only, indexed by position (XXL-JOB's address list).
        let named = broadcast_fire(Some(vec![2, 5])).into_shards(6);
        let summary: Vec<_> = named
            .iter()
            .map(|s| (s.shard_index, s.shard_total, s.route_partitions.clone()))
            .collect();
        assert_eq!(summary, vec![(0, 2, Some(vec![2])), (1, 2, Some(vec![5]))]);
        // A shard (e.g. a retry of one) and any other strategy stay as they are.
        assert_eq!(shards[1].clone().into_shards(3), vec![shards[1].clone()]);
        let mut single = broadcast_fire(None);
        single.route_strategy = RouteStrategy::First;
        assert_eq!(single.clone().into_shards(3), vec![single]);
    }

    #[test]
    fn retry_backoff_is_none_fixed_or_exponential_with_a_cap() {
        assert_eq!(RetryBackoff::None.delay_before(3), 0);
        assert_eq!(RetryBackoff::Fixed { delay_ms: 500 }.delay_before(1), 500);
        assert_eq!(RetryBackoff::Fixed { delay_ms: 500 }.delay_before(9), 500);
        let exponential = RetryBackoff::Exponential {
            base_ms: 1_000,
            cap_ms: 5_000,
        };
        let delays: Vec<i64> = (1..=5)
            .map(|retry| exponential.delay_before(retry))
            .collect();
        assert_eq!(delays, vec![1_000, 2_000, 4_000, 5_000, 5_000]);
        assert_eq!(exponential.delay_before(200), 5_000, "no overflow");
    }
}
