//! Routing = partition choice. In XXL-JOB the route strategy picks an executor address; here it
//! picks a partition of `{prefix}.triggers.{app}`, and the executors' consumer group decides
//! which executor owns that partition. A trigger for an app with no live executor therefore
//! waits in its partition until one joins, instead of failing.

use rand::Rng;

use crate::model::RouteStrategy;

/// Picks the partition for one trigger of a job among `partitions` (≥ 1).
pub fn choose_partition(strategy: RouteStrategy, partitions: i32) -> i32 {
    let partitions = partitions.max(1);
    match strategy {
        RouteStrategy::First => 0,
        RouteStrategy::Last => partitions - 1,
        RouteStrategy::Random => rand::rng().random_range(0..partitions),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_and_last_are_fixed() {
        assert_eq!(choose_partition(RouteStrategy::First, 6), 0);
        assert_eq!(choose_partition(RouteStrategy::Last, 6), 5);
        assert_eq!(choose_partition(RouteStrategy::Last, 1), 0);
    }

    #[test]
    fn random_covers_every_partition_and_stays_in_range() {
        let mut seen = [0u32; 4];
        for _ in 0..4_000 {
            let partition = choose_partition(RouteStrategy::Random, 4);
            seen[partition as usize] += 1;
        }
        // Each partition expects 1000 hits; 700 is more than 9 standard deviations below.
        assert!(seen.iter().all(|&hits| hits > 700), "{seen:?}");
    }
}
