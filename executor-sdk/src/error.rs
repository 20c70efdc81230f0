//! The SDK's own errors (a failed *run* is a [`JobError`](crate::JobError), not one of these).

use rdkafka::error::KafkaError;

/// Why an executor could not be built or could not run.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    /// The builder was given an invalid or incomplete configuration.
    #[error("invalid executor configuration: {0}")]
    Config(String),
    /// A Kafka client operation failed; `operation` names it.
    #[error("Kafka error while trying to {operation}: {source}")]
    Kafka {
        /// What the executor was doing.
        operation: &'static str,
        /// The client error.
        source: KafkaError,
    },
}

impl ExecutorError {
    pub(crate) fn kafka(operation: &'static str) -> impl FnOnce(KafkaError) -> ExecutorError {
        move |source| ExecutorError::Kafka { operation, source }
    }
}
