//! Kafka plumbing shared by the scheduler's loops: client settings, the idempotent producer,
//! topic administration and the dead-letter queue.
//!
//! Only standard Kafka APIs are used (no transactions, no DescribeGroups), so the same code
//! runs against Apache Kafka and the Kafka-compatible broker used in development.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kadence_schemas::{ControlRecord, Topics, codec, headers};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;

/// Connection settings for every Kafka client the scheduler makes.
#[derive(Clone)]
pub struct KafkaSettings {
    /// `bootstrap.servers`.
    pub brokers: String,
    /// Raw librdkafka options applied to every client (the escape hatch: security, tuning).
    /// Never logged: it may hold credentials.
    pub options: BTreeMap<String, String>,
}

impl std::fmt::Debug for KafkaSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSettings")
            .field("brokers", &self.brokers)
            .field("options", &format_args!("<{} options>", self.options.len()))
            .finish()
    }
}

impl KafkaSettings {
    /// A client configuration with the brokers and the raw options.
    pub fn client_config(&self) -> ClientConfig {
        self.client_config_with(&[])
    }

    /// A client configuration with the brokers, Kadence's `defaults` for this client, then the
    /// raw options, which win: an operator can override any default.
    pub fn client_config_with(&self, defaults: &[(&str, &str)]) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.brokers);
        for (key, value) in defaults {
            config.set(*key, *value);
        }
        for (key, value) in &self.options {
            config.set(key, value);
        }
        config
    }

    /// An idempotent producer: retries inside librdkafka never duplicate or reorder records of
    /// a partition. `linger.ms` stays small because trigger latency matters more than batch
    /// size at the rates a scheduler produces.
    pub fn idempotent_producer(&self) -> Result<FutureProducer, KafkaError> {
        self.client_config_with(&[
            ("enable.idempotence", "true"),
            ("acks", "all"),
            ("linger.ms", "2"),
            ("message.timeout.ms", "30000"),
        ])
        .create()
    }
}

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
        let actual = self.partition_count(topic).await?;
        if actual != partitions {
            return Err(TopicError::PartitionMismatch {
                topic: topic.to_owned(),
                expected: partitions,
                actual,
            });
        }
        Ok(())
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

    /// Creates the topics every deployment shares: results, control, beats (compacted: only
    /// the latest beat per executor matters), logs and the dead-letter queue.
    pub async fn ensure_shared_topics(
        &self,
        topics: &Topics,
        results_partitions: i32,
    ) -> Result<(), TopicError> {
        self.ensure_topic(&topics.results(), results_partitions, &[])
            .await?;
        self.ensure_topic(&topics.control(), 1, &[]).await?;
        self.ensure_topic(&topics.beats(), 1, &[("cleanup.policy", "compact")])
            .await?;
        self.ensure_topic(&topics.logs(), results_partitions, &[])
            .await?;
        self.ensure_topic(&topics.dlq(), 1, &[]).await
    }
}

/// Publishes commands for executors to `{prefix}.control` (key: app).
#[derive(Clone)]
pub struct ControlChannel {
    producer: FutureProducer,
    topic: String,
}

impl ControlChannel {
    /// A channel producing to `topic`.
    pub fn new(producer: FutureProducer, topic: String) -> Self {
        ControlChannel { producer, topic }
    }

    /// Sends `command` and waits for the broker's acknowledgement.
    pub async fn send(&self, command: &ControlRecord) -> Result<(), KafkaError> {
        let payload = codec::encode(command)
            .map_err(|_| KafkaError::MessageProduction(RDKafkaErrorCode::InvalidMessage))?;
        self.producer
            .send(
                FutureRecord::to(&self.topic)
                    .key(command.app.as_str())
                    .payload(&payload),
                Timeout::After(Duration::from_secs(30)),
            )
            .await
            .map(|_| ())
            .map_err(|(error, _)| error)
    }
}

/// Where a record that could not be processed came from.
#[derive(Debug, Clone, Copy)]
pub struct RecordOrigin<'a> {
    /// Source topic.
    pub topic: &'a str,
    /// Source partition.
    pub partition: i32,
    /// Source offset.
    pub offset: i64,
}

/// Sends records that cannot be processed to `{prefix}.dlq`: original key and bytes, plus
/// headers naming the reason and the origin, so an operator can inspect and replay them.
#[derive(Clone)]
pub struct DeadLetters {
    producer: FutureProducer,
    topic: String,
}

impl DeadLetters {
    /// A dead-letter sender producing to `topic`.
    pub fn new(producer: FutureProducer, topic: String) -> Self {
        DeadLetters { producer, topic }
    }

    /// Sends a consumed record that cannot be processed, with `reason`, and waits for the
    /// broker's acknowledgement.
    pub async fn send_message(
        &self,
        message: &rdkafka::message::OwnedMessage,
        reason: &str,
    ) -> Result<(), KafkaError> {
        use rdkafka::message::Message;
        tracing::warn!(topic = message.topic(), partition = message.partition(),
            offset = message.offset(), %reason, "sending a record to the dead-letter queue");
        self.send(
            message.key(),
            message.payload(),
            RecordOrigin {
                topic: message.topic(),
                partition: message.partition(),
                offset: message.offset(),
            },
            reason,
        )
        .await
    }

    /// Sends one record and waits for the broker's acknowledgement.
    pub async fn send(
        &self,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        origin: RecordOrigin<'_>,
        reason: &str,
    ) -> Result<(), KafkaError> {
        let partition = origin.partition.to_string();
        let offset = origin.offset.to_string();
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: headers::DLQ_REASON,
                value: Some(reason),
            })
            .insert(Header {
                key: headers::DLQ_SOURCE_TOPIC,
                value: Some(origin.topic),
            })
            .insert(Header {
                key: headers::DLQ_SOURCE_PARTITION,
                value: Some(&partition),
            })
            .insert(Header {
                key: headers::DLQ_SOURCE_OFFSET,
                value: Some(&offset),
            });
        let mut record: FutureRecord<'_, [u8], [u8]> =
            FutureRecord::to(&self.topic).headers(headers);
        if let Some(key) = key {
            record = record.key(key);
        }
        if let Some(payload) = payload {
            record = record.payload(payload);
        }
        self.producer
            .send(record, Timeout::Never)
            .await
            .map(|_| ())
            .map_err(|(error, _)| error)
    }
}
