//! Topic and consumer-group names, and Kafka header names, in one place.

use crate::ids::{AppName, IdError};

/// The topic prefix used when none is configured.
pub const DEFAULT_PREFIX: &str = "kadence";

/// Names of Kadence's topics and groups under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topics {
    prefix: String,
}

impl Default for Topics {
    fn default() -> Self {
        Topics {
            prefix: DEFAULT_PREFIX.to_owned(),
        }
    }
}

impl Topics {
    /// Names under `prefix`: 1–64 of `A-Z a-z 0-9 . _ -`.
    pub fn new(prefix: &str) -> Result<Topics, IdError> {
        let valid = (1..=64).contains(&prefix.len())
            && prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if valid {
            Ok(Topics {
                prefix: prefix.to_owned(),
            })
        } else {
            Err(IdError::TopicPrefix(prefix.to_owned()))
        }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `{prefix}.triggers.{app}`: trigger records for one app's executors.
    pub fn triggers(&self, app: &AppName) -> String {
        format!("{}.triggers.{app}", self.prefix)
    }

    /// `{prefix}.results`: result records for the scheduler.
    pub fn results(&self) -> String {
        format!("{}.results", self.prefix)
    }

    /// `{prefix}.control`: commands (kill, …) for executors.
    pub fn control(&self) -> String {
        format!("{}.control", self.prefix)
    }

    /// `{prefix}.beats`: executor heartbeats (compacted).
    pub fn beats(&self) -> String {
        format!("{}.beats", self.prefix)
    }

    /// `{prefix}.logs`: job log lines.
    pub fn logs(&self) -> String {
        format!("{}.logs", self.prefix)
    }

    /// `{prefix}.dlq`: records that could not be processed, with the reason in headers.
    pub fn dlq(&self) -> String {
        format!("{}.dlq", self.prefix)
    }

    /// `{prefix}.shadow-results`: results of shadow runs (candidate handler versions run on
    /// a copy of the triggers), which complete nothing; the scheduler keeps them for the
    /// shadow diff report.
    pub fn shadow_results(&self) -> String {
        format!("{}.shadow-results", self.prefix)
    }

    /// `{prefix}.shadow.{app}`: the consumer group of one app's shadow executors, beside the
    /// production group on the same trigger topic.
    pub fn shadow_group(&self, app: &AppName) -> String {
        format!("{}.shadow.{app}", self.prefix)
    }

    /// `{prefix}.executor.{app}`: the consumer group of one app's executors.
    pub fn executor_group(&self, app: &AppName) -> String {
        format!("{}.executor.{app}", self.prefix)
    }

    /// `{prefix}.scheduler`: the schedulers' consumer group on the results topic.
    pub fn scheduler_group(&self) -> String {
        format!("{}.scheduler", self.prefix)
    }
}

/// Kafka header names Kadence writes.
pub mod headers {
    /// W3C trace context of the operation that produced the record.
    pub const TRACEPARENT: &str = "traceparent";
    /// Why a record was sent to the dead-letter queue.
    pub const DLQ_REASON: &str = "kadence.dlq.reason";
    /// The topic a dead-lettered record came from.
    pub const DLQ_SOURCE_TOPIC: &str = "kadence.dlq.topic";
    /// The partition a dead-lettered record came from.
    pub const DLQ_SOURCE_PARTITION: &str = "kadence.dlq.partition";
    /// The offset a dead-lettered record came from.
    pub const DLQ_SOURCE_OFFSET: &str = "kadence.dlq.offset";
    /// The job's route strategy on a FAILOVER or BUSYOVER trigger (`FAILOVER`, `BUSYOVER`):
    /// the scheduler chose the partition by it, and an executor that fronts others (the
    /// XXL-JOB bridge) chooses among them by it too. Informational and not signed; every
    /// other executor ignores it.
    pub const ROUTE: &str = "kadence.route";
    /// The id of the scheduler key that signed a trigger or control record (16 hex digits:
    /// the first 8 bytes of the SHA-256 of its Ed25519 public key).
    pub const SIGNATURE_KEY: &str = "kadence.signature.key";
    /// The Ed25519 signature of a trigger or control record, base64 (standard, padded), over
    /// `kadence-trigger-v1\n{topic}\n{value bytes}`.
    pub const SIGNATURE: &str = "kadence.signature";
    /// The signature of the dispatch round a trigger was signed in, 104 bytes: the round's
    /// size (u64, big-endian), its Merkle root (32 bytes) and the Ed25519 signature (64 bytes)
    /// over `kadence-trigger-round-v1\n{size}{root}`.
    pub const ROUND_SIGNATURE: &str = "kadence.signature.round";
    /// A round-signed trigger's place in its round: its index (u64, big-endian), then the
    /// hashes of its Merkle inclusion proof (RFC 9162), 32 bytes each.
    pub const ROUND_PROOF: &str = "kadence.signature.proof";
    /// The id of the executor key that signed a record an executor wrote (result, shadow
    /// result, log record, beat, dead letter): 16 lowercase hex digits.
    pub const EXECUTOR_KEY: &str = "kadence.executor.key";
    /// The HMAC-SHA256 of a record an executor wrote, base64 (standard, padded), keyed with
    /// the executor key's secret, over `kadence-executor-v1\n{topic}\n{value bytes}`.
    pub const EXECUTOR_SIGNATURE: &str = "kadence.executor.signature";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_under_a_prefix() {
        let topics = Topics::new("acme.prod").unwrap();
        let app = AppName::parse("billing").unwrap();
        assert_eq!(topics.triggers(&app), "acme.prod.triggers.billing");
        assert_eq!(topics.results(), "acme.prod.results");
        assert_eq!(topics.control(), "acme.prod.control");
        assert_eq!(topics.beats(), "acme.prod.beats");
        assert_eq!(topics.logs(), "acme.prod.logs");
        assert_eq!(topics.dlq(), "acme.prod.dlq");
        assert_eq!(topics.executor_group(&app), "acme.prod.executor.billing");
        assert_eq!(topics.scheduler_group(), "acme.prod.scheduler");
        assert_eq!(topics.shadow_results(), "acme.prod.shadow-results");
        assert_eq!(topics.shadow_group(&app), "acme.prod.shadow.billing");
        assert_eq!(Topics::default().prefix(), "kadence");
        assert_eq!(Topics::default(), Topics::new(DEFAULT_PREFIX).unwrap());
        assert_eq!(Topics::default().triggers(&app), "kadence.triggers.billing");
        assert!(Topics::new(&"p".repeat(64)).is_ok());
        for bad in ["", "a/b", "a b", "kädence", &"p".repeat(65)] {
            assert!(Topics::new(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            Topics::new("a/b").unwrap_err().to_string(),
            "invalid topic prefix \"a/b\": use 1 to 64 characters from A-Z a-z 0-9 . _ -"
        );
    }
}
