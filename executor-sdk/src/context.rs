//! What a handler receives ([`JobContext`]) and returns ([`JobResult`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kadence_schemas::{JobId, TriggerId, TriggerRecord, TriggerType};
use tokio_util::sync::CancellationToken;

use crate::joblog::JobLogger;

/// One run of a job, as its handler sees it.
///
/// Cheap to clone. A handler that runs long should watch [`JobContext::cancelled`] (timeout,
/// kill, shutdown) and return promptly when it fires.
#[derive(Clone)]
pub struct JobContext {
    trigger: Arc<TriggerRecord>,
    cancellation: CancellationToken,
    logger: JobLogger,
    place: RunPlace,
}

impl JobContext {
    /// A context whose lines go to `logger`, for a run at `place`.
    pub(crate) fn with_logger(
        trigger: Arc<TriggerRecord>,
        cancellation: CancellationToken,
        logger: JobLogger,
        place: RunPlace,
    ) -> Self {
        JobContext {
            trigger,
            cancellation,
            logger,
            place,
        }
    }

    /// The partition of `{prefix}.triggers.{app}` this run's trigger came from: the one the
    /// job's routing strategy chose (0 for a broadcast's shard 0, and in the test worker).
    /// Most handlers never need it; an executor that fronts others (the XXL-JOB bridge) hands
    /// each partition's triggers to the one it assigned that partition to.
    pub fn partition(&self) -> i32 {
        self.place.partition
    }

    /// The job's route strategy when it chooses by the executors' state at the time:
    /// `Some("FAILOVER")` or `Some("BUSYOVER")` (the trigger's `kadence.route` header), `None`
    /// for every other strategy, which the partition alone expresses. An executor that fronts
    /// others (the XXL-JOB bridge) makes the same choice among them.
    pub fn route_strategy(&self) -> Option<&'static str> {
        self.place.route
    }

    /// Whether a shadow executor runs this (see
    /// [`ExecutorBuilder::shadow`](crate::ExecutorBuilder::shadow)): the same trigger also
    /// runs in production, and this run's result is only compared with that one. A handler
    /// with side effects outside its result (sending mail, writing to a shared store) should
    /// leave them out, or direct them elsewhere, when this is true.
    pub fn is_shadow(&self) -> bool {
        self.place.shadow
    }

    /// Appends a line to this run's log, which an operator reads while the run goes
    /// (`kadence job log <log id>`, XXL-JOB's rolling log). Lines are numbered from 1.
    pub fn log(&self, line: impl AsRef<str>) {
        self.logger.log(line);
    }

    /// This run's logger, to hand to code that writes many lines.
    pub fn logger(&self) -> &JobLogger {
        &self.logger
    }

    /// The job's parameters (XXL-JOB's `executorParam`), possibly overridden for this run.
    pub fn params(&self) -> &str {
        &self.trigger.params
    }

    /// This run's shard index, `0..shard_total` (0 unless the job is broadcast).
    pub fn shard_index(&self) -> u32 {
        self.trigger.shard_index.max(0) as u32
    }

    /// How many shards the broadcast has (1 unless the job is broadcast).
    pub fn shard_total(&self) -> u32 {
        self.trigger.shard_total.max(1) as u32
    }

    /// The deterministic trigger id: the idempotency key of this run.
    pub fn trigger_id(&self) -> &TriggerId {
        &self.trigger.trigger_id
    }

    /// The scheduler's job-log row id of this run.
    pub fn log_id(&self) -> i64 {
        self.trigger.log_id
    }

    /// The job.
    pub fn job_id(&self) -> JobId {
        self.trigger.job_id
    }

    /// 0 for the first attempt, n for the n-th retry.
    pub fn attempt(&self) -> u32 {
        self.trigger.attempt.max(0) as u32
    }

    /// Why this run was triggered (CRON, MANUAL, RETRY, …).
    pub fn trigger_type(&self) -> TriggerType {
        self.trigger.trigger_type
    }

    /// The time this run was scheduled for, ms since the Unix epoch.
    pub fn scheduled_at_ms(&self) -> i64 {
        self.trigger.scheduled_at_ms
    }

    /// The whole trigger record.
    pub fn trigger(&self) -> &TriggerRecord {
        &self.trigger
    }

    /// Fires when the run should stop: timeout, kill or executor shutdown.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    /// Resolves when the run should stop; use it in `tokio::select!`.
    pub async fn cancelled(&self) {
        self.cancellation.cancelled().await
    }

    /// Whether the run should stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled()
    }
}

impl fmt::Debug for JobContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("trigger_id", &self.trigger.trigger_id)
            .field("handler", &self.trigger.handler)
            .field("attempt", &self.trigger.attempt)
            .field("partition", &self.place.partition)
            .field("shadow", &self.place.shadow)
            .finish()
    }
}

/// Where a run takes place, as its handler sees it: the partition its trigger came from
/// ([`JobContext::partition`]), the route strategy its trigger names
/// ([`JobContext::route_strategy`]) and whether a shadow executor runs it
/// ([`JobContext::is_shadow`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RunPlace {
    pub(crate) partition: i32,
    pub(crate) route: Option<&'static str>,
    pub(crate) shadow: bool,
}

/// The route strategy a trigger's `kadence.route` header names, when it is one the scheduler
/// writes there (`FAILOVER`, `BUSYOVER`).
pub(crate) fn route_of(message: &impl rdkafka::Message) -> Option<&'static str> {
    use rdkafka::message::Headers as _;
    let headers = message.headers()?;
    let value = (headers.iter())
        .filter(|header| header.key == kadence_schemas::headers::ROUTE)
        .last()?
        .value?;
    match value {
        b"FAILOVER" => Some("FAILOVER"),
        b"BUSYOVER" => Some("BUSYOVER"),
        _ => None,
    }
}

/// What a handler returns: `Ok(())` for success (code 200), a [`JobError`] for failure
/// (code 500, with its message stored on the run).
pub type JobResult = Result<(), JobError>;

/// A failed run: a message for the operator and, optionally, when a retry makes sense.
///
/// Any error type converts with `?`, so handlers can use their own errors:
///
/// ```
/// use kadence_executor::{JobContext, JobResult};
///
/// async fn parse_count(ctx: JobContext) -> JobResult {
///     let count: u32 = ctx.params().trim().parse()?; // a ParseIntError becomes a JobError
///     println!("count = {count}");
///     Ok(())
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobError {
    message: String,
    retry_after: Option<Duration>,
}

impl JobError {
    /// A failure with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        JobError {
            message: message.into(),
            retry_after: None,
        }
    }

    /// A failure that is worth retrying after `delay` (e.g. a downstream rate limit). The
    /// scheduler's retry policy decides whether a retry happens; this is a hint.
    pub fn retry_after(message: impl Into<String>, delay: Duration) -> Self {
        JobError {
            message: message.into(),
            retry_after: Some(delay),
        }
    }

    /// The message stored on the run.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The retry hint, if any.
    pub fn retry_delay(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Any error becomes a [`JobError`] carrying its message and its causes, so `?` works in
/// handlers. (`JobError` itself is not a `std::error::Error`, which is what makes this
/// blanket conversion possible, as with `anyhow::Error`.)
impl<E: std::error::Error> From<E> for JobError {
    fn from(error: E) -> Self {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        JobError::new(message)
    }
}

/// Contexts for unit tests of the crate.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;
    use kadence_schemas::{AppName, BlockStrategy, GlueType};

    /// A plain trigger of job 1 with params `"p"` and no timeout.
    pub(crate) fn trigger_record() -> TriggerRecord {
        let job = JobId::new(1).unwrap();
        TriggerRecord {
            trigger_id: TriggerId::scheduled(job, 1_000),
            log_id: 1,
            job_id: job,
            app: AppName::parse("demo").unwrap(),
            handler: "h".into(),
            params: "p".into(),
            shard_index: 0,
            shard_total: 1,
            block_strategy: BlockStrategy::SerialExecution,
            timeout_ms: 0,
            trigger_type: TriggerType::Manual,
            scheduled_at_ms: 1_000,
            emitted_at_ms: 1_001,
            attempt: 0,
            glue_type: GlueType::Bean,
            glue_source: None,
            glue_updated_at_ms: None,
            replay_of: None,
            expires_at_ms: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_header_names_failover_and_busyover_only() {
        use rdkafka::message::{Header, OwnedHeaders, OwnedMessage};
        let with = |value: Option<&str>| {
            let headers = value.map(|value| {
                OwnedHeaders::new().insert(Header {
                    key: kadence_schemas::headers::ROUTE,
                    value: Some(value),
                })
            });
            OwnedMessage::new(
                None,
                None,
                "t".into(),
                rdkafka::Timestamp::NotAvailable,
                0,
                0,
                headers,
            )
        };
        assert_eq!(route_of(&with(Some("BUSYOVER"))), Some("BUSYOVER"));
        assert_eq!(route_of(&with(Some("FAILOVER"))), Some("FAILOVER"));
        assert_eq!(route_of(&with(Some("ROUND"))), None);
        assert_eq!(route_of(&with(None)), None);
    }

    #[test]
    fn errors_convert_with_their_message() {
        let parsed: Result<u32, JobError> = "x".parse::<u32>().map_err(JobError::from);
        assert_eq!(
            parsed.unwrap_err().message(),
            "invalid digit found in string"
        );
        let later = JobError::retry_after("rate limited", Duration::from_secs(30));
        assert_eq!(later.retry_delay(), Some(Duration::from_secs(30)));
        assert_eq!(later.to_string(), "rate limited");
    }
}
