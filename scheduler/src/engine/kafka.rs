//! The scheduler's own Kafka clients: topic administration (creating and checking the trigger
//! and shared topics) and the control channel to executors, whose records are signed like
//! triggers ([`SignedProducer`]). Plumbing shared with executors
//! (client settings, the idempotent producer, retries, dead letters, batch consumers) is in
//! the `kadence-kafka` crate.
//!
//! Only standard Kafka APIs are used (no transactions, no DescribeGroups), so the same code
//! runs against Apache Kafka and the Kafka-compatible broker used in development.

use std::sync::Arc;
use std::time::Duration;

use kadence_kafka::KafkaSettings;
use kadence_schemas::{ControlRecord, Topics, codec};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::util::Timeout;

use crate::engine::signer::SignedProducer;

/// A topic exists with a partition count other than the one Kadence expects.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    /// The admin request failed.
    #[error("cannot create or inspect topic {topic}: {source}")]
    Admin {
        /// The topic.
        topic: String,
        /// The client error.
        source: KafkaError,
    },
    /// The topic was created (or existed) but the brokers' metadata did not show its
    /// partitions in time: on a busy cluster a new topic takes a moment to reach every
    /// broker. Nothing is wrong with it; asking again later succeeds.
    #[error(
        "topic {topic} exists, but the brokers' metadata did not show its partitions within \
         {} s; the cluster is slow to spread it: try again",
        waited.as_secs()
    )]
    NotVisible {
        /// The topic.
        topic: String,
        /// How long it was looked for.
        waited: Duration,
    },
    /// The topic exists with another partition count.
    #[error(
        "topic {topic} exists with {actual} partitions but Kadence expects {expected}; \
         fix the app's partition count or the topic (Kadence never guesses which is right)"
    )]
    PartitionMismatch {
        /// The topic.
        topic: String,
        /// Partitions configured in Kadence.
        expected: i32,
        /// Partitions on the broker.
        actual: i32,
    },
}

/// Creates and verifies topics.
pub struct TopicAdmin {
    admin: Arc<AdminClient<DefaultClientContext>>,
    timeout: Duration,
}

impl TopicAdmin {
    /// An admin client for `settings`.
    pub fn new(settings: &KafkaSettings) -> Result<TopicAdmin, KafkaError> {
        Ok(TopicAdmin {
            admin: Arc::new(settings.client_config().create()?),
            timeout: Duration::from_secs(15),
        })
    }

    /// Creates `topic` with `partitions` unless it exists; if it exists, checks its partition
    /// count. Idempotent, and safe when several schedulers race to create it.
    pub async fn ensure_topic(
        &self,
        topic: &str,
        partitions: i32,
        config: &[(&str, &str)],
    ) -> Result<(), TopicError> {
        let admin_error = |source| TopicError::Admin {
            topic: topic.to_owned(),
            source,
        };
        let mut new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(-1));
        for (key, value) in config {
            new_topic = new_topic.set(key, value);
        }
        let options = AdminOptions::new().operation_timeout(Some(self.timeout));
        let results = self
            .admin
            .create_topics([&new_topic], &options)
            .await
            .map_err(admin_error)?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, code)) => return Err(admin_error(KafkaError::AdminOp(code))),
            }
        }
        let actual = self.visible_partition_count(topic).await?;
        if actual != partitions {
            return Err(TopicError::PartitionMismatch {
                topic: topic.to_owned(),
                expected: partitions,
                actual,
            });
        }
        Ok(())
    }

    /// The partition count of `topic`, which exists: looked for until the admin timeout,
    /// because a topic just created can be missing from a busy cluster's metadata for
    /// seconds (seen on Apache Kafka with its brokers short of CPU), and a count of 0 then
    /// means "not yet", never "another count".
    async fn visible_partition_count(&self, topic: &str) -> Result<i32, TopicError> {
        let started = std::time::Instant::now();
        loop {
            let count = self.partition_count(topic).await?;
            if count > 0 {
                return Ok(count);
            }
            if started.elapsed() >= self.timeout {
                return Err(TopicError::NotVisible {
                    topic: topic.to_owned(),
                    waited: started.elapsed(),
                });
            }
        }
    }

    /// The partition count the broker reports for `topic` (0 if it does not exist).
    pub async fn partition_count(&self, topic: &str) -> Result<i32, TopicError> {
        let topic_name = topic.to_owned();
        let timeout = self.timeout;
        // Metadata requests block; keep them off the async workers. A freshly created topic
        // can take a moment to appear in metadata, so poll briefly.
        for _ in 0..50 {
            let admin = Arc::clone(&self.admin);
            let wanted = topic_name.clone();
            let metadata = tokio::task::spawn_blocking(move || {
                admin
                    .inner()
                    .fetch_metadata(Some(&wanted), Timeout::After(timeout))
            })
            .await
            .unwrap_or(Err(KafkaError::Canceled))
            .map_err(|source| TopicError::Admin {
                topic: topic_name.clone(),
                source,
            })?;
            if let Some(found) = metadata.topics().iter().find(|t| t.name() == topic_name)
                && found.error().is_none()
                && !found.partitions().is_empty()
            {
                return Ok(found.partitions().len() as i32);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(0)
    }

    /// Creates the topics every deployment shares: results, shadow results, control, beats
    /// (compacted: only the latest beat per executor matters), logs and the dead-letter
    /// queue.
    pub async fn ensure_shared_topics(
        &self,
        topics: &Topics,
        results_partitions: i32,
    ) -> Result<(), TopicError> {
        self.ensure_topic(&topics.results(), results_partitions, &[])
            .await?;
        self.ensure_topic(&topics.shadow_results(), results_partitions, &[])
            .await?;
        self.ensure_topic(&topics.control(), 1, &[]).await?;
        self.ensure_topic(&topics.beats(), 1, &[("cleanup.policy", "compact")])
            .await?;
        self.ensure_topic(&topics.logs(), results_partitions, &[])
            .await?;
        self.ensure_topic(&topics.dlq(), 1, &[]).await
    }
}

/// Publishes signed commands for executors to `{prefix}.control` (key: app).
#[derive(Clone)]
pub struct ControlChannel {
    producer: SignedProducer,
    topic: String,
}

impl ControlChannel {
    /// A channel producing to `topic`.
    pub fn new(producer: SignedProducer, topic: String) -> Self {
        ControlChannel { producer, topic }
    }

    /// Sends `command` and waits for the broker's acknowledgement.
    pub async fn send(&self, command: &ControlRecord) -> Result<(), KafkaError> {
        let payload = codec::encode(command)
            .map_err(|_| KafkaError::MessageProduction(RDKafkaErrorCode::InvalidMessage))?;
        self.producer
            .send(
                &self.topic,
                command.app.as_str(),
                &payload,
                Duration::from_secs(30),
            )
            .await
    }
}
