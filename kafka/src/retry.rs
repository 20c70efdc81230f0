//! When to try a Kafka operation again, and how long to wait before it.

use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// Whether a produce error may succeed if tried again (broker down, leader moving, queue
/// full) rather than never (record too large, authorisation, bad configuration).
pub fn is_retriable(error: &KafkaError) -> bool {
    use RDKafkaErrorCode::*;
    match error.rdkafka_error_code() {
        Some(code) => matches!(
            code,
            MessageTimedOut
                | QueueFull
                | BrokerTransportFailure
                | AllBrokersDown
                | RequestTimedOut
                | NetworkException
                | LeaderNotAvailable
                | NotLeaderForPartition
                | NotEnoughReplicas
                | NotEnoughReplicasAfterAppend
                | UnknownTopicOrPartition
                | UnknownPartition
                | UnknownTopic
                | OutOfOrderSequenceNumber
                | InvalidProducerEpoch
                | CoordinatorLoadInProgress
                | CoordinatorNotAvailable
                | NotCoordinator
        ),
        None => matches!(error, KafkaError::Canceled),
    }
}

/// Exponential backoff between tries: doubles from `initial` up to `max`, back to `initial`
/// after a success. Every retry loop of Kadence waits through one of these, so a broker or
/// database that comes back is found quickly and one that stays away is not hammered.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// A backoff starting at `initial` and doubling up to `max`.
    pub const fn new(initial: Duration, max: Duration) -> Backoff {
        let max = if max.as_nanos() < initial.as_nanos() {
            initial
        } else {
            max
        };
        Backoff {
            initial,
            max,
            next: initial,
        }
    }

    /// Kadence's usual retry pace: 50 ms, doubling to 5 s.
    pub const fn standard() -> Backoff {
        Backoff::new(Duration::from_millis(50), Duration::from_secs(5))
    }

    /// The wait before the next try; each call doubles the one after it, up to the maximum.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }

    /// The wait before try number `attempt + 1` when the tries are counted elsewhere (one
    /// record among many, each with its own count): `initial` doubled `attempt` times, capped.
    pub fn delay_after(&self, attempt: u32) -> Duration {
        self.initial
            .saturating_mul(1u32 << attempt.min(20))
            .min(self.max)
    }

    /// Starts again from the initial wait (after a success).
    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap_and_resets() {
        let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(35));
        let delays: Vec<u128> = (0..4).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(delays, [10, 20, 35, 35]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_millis(10));
        assert_eq!(backoff.delay_after(0), Duration::from_millis(10));
        assert_eq!(backoff.delay_after(1), Duration::from_millis(20));
        assert_eq!(backoff.delay_after(40), Duration::from_millis(35));
    }

    #[test]
    fn timeouts_and_leader_moves_are_retried_but_oversized_records_are_not() {
        let produce = |code| KafkaError::MessageProduction(code);
        assert!(is_retriable(&produce(RDKafkaErrorCode::MessageTimedOut)));
        assert!(is_retriable(&produce(
            RDKafkaErrorCode::NotLeaderForPartition
        )));
        assert!(is_retriable(&KafkaError::Canceled));
        assert!(!is_retriable(&produce(
            RDKafkaErrorCode::MessageSizeTooLarge
        )));
        assert!(!is_retriable(&produce(
            RDKafkaErrorCode::TopicAuthorizationFailed
        )));
    }
}
