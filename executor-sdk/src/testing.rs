//! Testing handlers without Kafka: a [`TestWorker`] runs a handler for a trigger the way the
//! executor does, and returns the result it would publish with the lines the run logged.
//!
//! The worker resolves the handler and runs it through the executor's own runner: the same
//! result codes (200 success, 500 failure, 502 timeout), a panic as a failed run, the
//! [`JobError`](crate::JobError) message and retry hint, the same failure for an unknown
//! handler or for a script trigger on an executor with scripts off, the same init hooks and
//! log limits. What it leaves out is the executor's traffic control: a trigger runs at once
//! (no hold until `scheduled_at_ms`, no block strategy), and nothing is published.
//!
//! ```
//! use std::time::Duration;
//!
//! use kadence_executor::testing::TestWorker;
//! use kadence_executor::{Executor, JobContext, JobError, JobResult};
//!
//! async fn send_report(ctx: JobContext) -> JobResult {
//!     if ctx.params().is_empty() {
//!         return Err(JobError::retry_after("no region given", Duration::from_secs(30)));
//!     }
//!     ctx.log(format!("report sent to {}", ctx.params()));
//!     Ok(())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), kadence_executor::ExecutorError> {
//! // In a `#[tokio::test]`: the builder's handlers, hooks and settings; no brokers needed.
//! let worker = TestWorker::new(Executor::builder().handler("sendReport", send_report))?;
//!
//! let run = worker.run(TestWorker::trigger("sendReport").params("eu")).await;
//! assert_eq!(run.code(), 200);
//! assert_eq!(run.log(), ["report sent to eu"]);
//!
//! let run = worker.run(TestWorker::trigger("sendReport")).await;
//! assert_eq!(run.code(), 500);
//! assert_eq!(run.message(), Some("no region given"));
//! assert_eq!(run.retry_after(), Some(Duration::from_secs(30)));
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kadence_schemas::{AppName, BlockStrategy, JobId, TriggerId};
/// The record types a test builds and inspects, so a handler's tests need no other crate.
pub use kadence_schemas::{GlueType, ResultRecord, TriggerRecord, TriggerType};
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::context::{JobContext, JobResult, RunPlace};
use crate::error::ExecutorError;
use crate::joblog::JobLogger;
use crate::runner::{RunOutcome, StopReason, result_record, run_handler};
use crate::{Executor, ExecutorBuilder};

/// Runs handlers as the executor does, without Kafka. See the [module docs](self).
pub struct TestWorker {
    executor: Executor,
}

impl TestWorker {
    /// A worker with `builder`'s handlers, hooks and settings (executor id, log limits,
    /// scripts; with [`shadow(true)`](ExecutorBuilder::shadow) its handlers see
    /// [`JobContext::is_shadow`]). Brokers and app may be left out: a test worker never
    /// connects.
    pub fn new(builder: ExecutorBuilder) -> Result<TestWorker, ExecutorError> {
        Ok(TestWorker {
            executor: builder.build_offline()?,
        })
    }

    /// A worker with the one handler `handler`, registered as `name`.
    ///
    /// # Panics
    /// When `name` is empty.
    pub fn for_handler<F, Fut>(name: impl Into<String>, handler: F) -> TestWorker
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        TestWorker::new(Executor::builder().handler(name, handler))
            .unwrap_or_else(|error| panic!("{error}"))
    }

    /// A trigger of `handler`, as the scheduler sends for a manual run: job 1, log id 1, no
    /// params, shard 0 of 1, no timeout, attempt 0, scheduled now. Change what the test needs
    /// with the [`TestTrigger`] methods.
    pub fn trigger(handler: impl Into<String>) -> TestTrigger {
        TestTrigger::new(handler.into())
    }

    /// Runs `trigger` at once and returns the result the executor would publish, with the
    /// lines the run logged. Needs a tokio runtime (`#[tokio::test]`).
    pub async fn run(&self, trigger: impl Into<TriggerRecord>) -> TestRun {
        let trigger = Arc::new(trigger.into());
        let clock = Clock::System;
        let logger = JobLogger::new(self.executor.settings.max_log_lines);
        let started_at_ms = clock.now_ms();
        let outcome = match self.executor.registry.resolve(&trigger) {
            Ok(handler) => {
                let cancellation = CancellationToken::new();
                let trigger = Arc::clone(&trigger);
                let stop_reason = StopReason::default();
                let place = RunPlace {
                    shadow: self.executor.settings.shadow,
                    ..RunPlace::default()
                };
                run_handler(
                    handler,
                    trigger,
                    cancellation,
                    stop_reason,
                    logger.clone(),
                    place,
                )
                .await
            }
            Err(refusal) => RunOutcome::failure(refusal),
        };
        let executor_id = &self.executor.settings.executor_id;
        TestRun {
            result: result_record(
                &trigger,
                executor_id,
                outcome,
                started_at_ms,
                clock.now_ms(),
            ),
            log: logger.take_all(),
        }
    }

    /// Runs the destroy hook of every handler whose init ran, as the executor does when it
    /// stops; returns those handlers' names.
    pub async fn shutdown(self) -> Vec<String> {
        self.executor.registry.destroy_initialized().await
    }
}

/// A trigger for a [`TestWorker`], built from [`TestWorker::trigger`]; any
/// `impl Into<TriggerRecord>` runs, so a test may also build the record itself.
#[derive(Debug, Clone)]
#[must_use]
pub struct TestTrigger {
    record: TriggerRecord,
}

impl TestTrigger {
    fn new(handler: String) -> TestTrigger {
        let job = JobId::new(1).expect("1 is a valid job id");
        let now_ms = Clock::System.now_ms();
        TestTrigger {
            record: TriggerRecord {
                trigger_id: TriggerId::fresh(job),
                log_id: 1,
                job_id: job,
                app: AppName::parse("test").expect("a valid app name"),
                handler,
                params: String::new(),
                shard_index: 0,
                shard_total: 1,
                block_strategy: BlockStrategy::SerialExecution,
                timeout_ms: 0,
                trigger_type: TriggerType::Manual,
                scheduled_at_ms: now_ms,
                emitted_at_ms: now_ms,
                attempt: 0,
                glue_type: GlueType::Bean,
                glue_source: None,
                glue_updated_at_ms: None,
                replay_of: None,
                expires_at_ms: None,
            },
        }
    }

    /// The run's parameters ([`JobContext::params`]).
    pub fn params(mut self, params: impl Into<String>) -> Self {
        self.record.params = params.into();
        self
    }

    /// The run's timeout: past it the run is cancelled with code 502.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.record.timeout_ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        self
    }

    /// Shard `index` of `total` of a broadcast.
    pub fn shard(mut self, index: u32, total: u32) -> Self {
        self.record.shard_index = i32::try_from(index).unwrap_or(i32::MAX);
        self.record.shard_total = i32::try_from(total).unwrap_or(i32::MAX);
        self
    }

    /// The attempt: 0 for the first run, n for the n-th retry.
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.record.attempt = i32::try_from(attempt).unwrap_or(i32::MAX);
        self
    }

    /// The job (and a fresh trigger id of it).
    ///
    /// # Panics
    /// When `job_id` is not a valid job id (ids start at 1).
    pub fn job(mut self, job_id: i64) -> Self {
        let job = JobId::new(job_id).unwrap_or_else(|error| panic!("{error}"));
        self.record.job_id = job;
        self.record.trigger_id = TriggerId::fresh(job);
        self
    }

    /// Why the run was triggered (default MANUAL).
    pub fn trigger_type(mut self, trigger_type: TriggerType) -> Self {
        self.record.trigger_type = trigger_type;
        self
    }

    /// A script trigger (GLUE_SHELL, GLUE_PYTHON, …) carrying `source`, version 1.
    pub fn script(mut self, glue_type: GlueType, source: impl Into<String>) -> Self {
        self.record.glue_type = glue_type;
        self.record.glue_source = Some(source.into());
        self.record.glue_updated_at_ms = Some(1);
        self
    }

    /// The trigger record.
    pub fn record(self) -> TriggerRecord {
        self.record
    }
}

impl From<TestTrigger> for TriggerRecord {
    fn from(trigger: TestTrigger) -> TriggerRecord {
        trigger.record
    }
}

/// What a [`TestWorker`] run produced.
#[derive(Debug, Clone)]
pub struct TestRun {
    result: ResultRecord,
    log: Vec<String>,
}

impl TestRun {
    /// The result record, exactly as the executor would publish it to `{prefix}.results`.
    pub fn result(&self) -> &ResultRecord {
        &self.result
    }

    /// The result code: 200 success, 500 failure, 502 timeout.
    pub fn code(&self) -> i32 {
        self.result.code
    }

    /// The failure message stored on the run (`None` on success).
    pub fn message(&self) -> Option<&str> {
        self.result.message.as_deref()
    }

    /// The handler's retry hint ([`JobError::retry_after`](crate::JobError::retry_after)).
    pub fn retry_after(&self) -> Option<Duration> {
        let millis = self.result.retry_after_ms?;
        Some(Duration::from_millis(u64::try_from(millis).unwrap_or(0)))
    }

    /// The lines the run logged, as the executor ships them to `{prefix}.logs` (bounded per
    /// run, a last line saying what was cut).
    pub fn log(&self) -> &[String] {
        &self.log
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobError;

    async fn report(ctx: JobContext) -> JobResult {
        ctx.log(format!("report for {}", ctx.params()));
        ctx.log(format!(
            "shard {} of {}",
            ctx.shard_index(),
            ctx.shard_total()
        ));
        match ctx.params() {
            "" => Err(JobError::retry_after("no region", Duration::from_secs(30))),
            _ => Ok(()),
        }
    }

    fn worker(builder: ExecutorBuilder) -> TestWorker {
        TestWorker::new(builder.executor_id("e-test")).unwrap()
    }

    #[tokio::test]
    async fn the_result_is_the_record_the_executor_publishes_with_the_runs_log() {
        let worker = worker(Executor::builder().handler("report", report));
        let trigger = TestWorker::trigger("report")
            .params("eu")
            .job(7)
            .shard(2, 4)
            .attempt(1)
            .record();
        let run = worker.run(trigger.clone()).await;
        let result = run.result();
        assert_eq!((run.code(), run.message()), (200, None));
        assert_eq!(result.trigger_id, trigger.trigger_id);
        assert_eq!((result.job_id.get(), result.log_id), (7, 1));
        assert_eq!((result.executor_id.as_str(), result.attempt), ("e-test", 1));
        assert!(result.started_at_ms <= result.finished_at_ms);
        assert_eq!(run.log(), ["report for eu", "shard 2 of 4"]);
        let failed = worker.run(TestWorker::trigger("report")).await;
        assert_eq!((failed.code(), failed.message()), (500, Some("no region")));
        assert_eq!(failed.retry_after(), Some(Duration::from_secs(30)));
        assert_eq!(failed.result().retry_after_ms, Some(30_000));
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_past_its_timeout_is_cancelled_with_code_502() {
        let worker = TestWorker::for_handler("stuck", |ctx: JobContext| async move {
            ctx.log("waiting");
            ctx.cancelled().await;
            Ok(())
        });
        let trigger = TestWorker::trigger("stuck").timeout(Duration::from_millis(1_500));
        let run = worker.run(trigger).await;
        assert_eq!(
            (run.code(), run.message()),
            (502, Some("run timed out after 1500 ms and was cancelled"))
        );
        assert_eq!(
            run.log(),
            ["waiting"],
            "lines written before the timeout stay"
        );
    }

    #[tokio::test]
    async fn an_unknown_handler_fails_naming_the_handlers_there_are() {
        let worker = worker(
            Executor::builder()
                .handler("report", report)
                .handler("archive", report),
        );
        let run = worker.run(TestWorker::trigger("nope")).await;
        assert_eq!(run.code(), 500);
        assert_eq!(
            run.message(),
            Some("executor e-test has no handler named \"nope\" (it has: archive, report)")
        );
        assert!(run.log().is_empty());
    }

    #[tokio::test]
    async fn script_triggers_run_or_are_refused_as_the_executor_is_set_up() {
        let script = TestWorker::trigger("").script(GlueType::GlueShell, "echo \"hello $1\"");
        let off = worker(Executor::builder().handler("report", report));
        let refused = off.run(script.clone().params("world")).await;
        assert_eq!(
            (refused.code(), refused.message()),
            (
                500,
                Some(
                    "executor e-test does not run scripts (GLUE_SHELL): script handlers are \
                     switched off"
                )
            )
        );
        let dir = std::env::temp_dir().join(format!("kadence-test-worker-{}", std::process::id()));
        let on = worker(
            Executor::builder()
                .handler("report", report)
                .scripts(true)
                .script_dir(&dir),
        );
        let ran = on.run(script.params("world")).await;
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!((ran.code(), ran.message()), (200, None));
        assert_eq!(
            ran.log(),
            [
                "[kadence] running GLUE_SHELL version 1 with bash",
                "hello world"
            ]
        );
    }

    #[tokio::test]
    async fn a_fallback_handler_runs_the_names_nothing_registered_and_a_script_runner_the_scripts()
    {
        async fn forwarded(ctx: JobContext) -> JobResult {
            Err(JobError::new(format!(
                "forwarded {}",
                ctx.trigger().handler
            )))
        }
        async fn handed_on(ctx: JobContext) -> JobResult {
            Err(JobError::new(format!(
                "handed on {}",
                ctx.trigger().glue_type
            )))
        }
        let fronting = worker(
            Executor::builder()
                .handler("report", report)
                .fallback_handler(forwarded)
                .script_runner(handed_on),
        );
        assert_eq!(
            fronting
                .run(TestWorker::trigger("report").params("eu"))
                .await
                .code(),
            200
        );
        let unknown = fronting.run(TestWorker::trigger("legacyJob")).await;
        assert_eq!(unknown.message(), Some("forwarded legacyJob"));
        let script = TestWorker::trigger("").script(GlueType::GlueShell, "echo hi");
        let script = fronting.run(script).await;
        assert_eq!(script.message(), Some("handed on GLUE_SHELL"));
        // A fallback alone is enough to build, and scripts stay off without a runner.
        let only = worker(Executor::builder().fallback_handler(forwarded));
        let script = TestWorker::trigger("").script(GlueType::GlueShell, "echo hi");
        assert!(
            (only.run(script).await.message().unwrap()).contains("does not run scripts"),
            "scripts are off unless switched on"
        );
    }

    #[tokio::test]
    async fn handlers_of_a_shadow_builder_know_they_run_in_the_shadow() {
        async fn which(ctx: JobContext) -> JobResult {
            match ctx.is_shadow() {
                true => Err(JobError::new("shadow")),
                false => Ok(()),
            }
        }
        let production = worker(Executor::builder().handler("which", which));
        let shadow = worker(Executor::builder().shadow(true).handler("which", which));
        assert_eq!(
            production.run(TestWorker::trigger("which")).await.code(),
            200
        );
        let run = shadow.run(TestWorker::trigger("which")).await;
        assert_eq!((run.code(), run.message()), (500, Some("shadow")));
    }

    #[tokio::test]
    async fn the_log_is_bounded_as_the_executor_bounds_it() {
        let worker = worker(Executor::builder().max_log_lines(2).handler(
            "chatty",
            |ctx: JobContext| async move {
                ctx.log("one\ntwo\nthree\nfour");
                Ok(())
            },
        ));
        let run = worker.run(TestWorker::trigger("chatty")).await;
        assert_eq!(
            run.log(),
            [
                "one",
                "two",
                "[kadence] 2 more lines were dropped: a run keeps at most 2 lines"
            ]
        );
    }
}
