//! Running one trigger: the handler with its panics caught (so a panic is a failed run, not
//! a dead executor), under the trigger's timeout, with a cancellation token, producing the
//! `ResultRecord` to publish.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use kadence_schemas::{ResultRecord, TriggerRecord, result_code};
use tokio_util::sync::CancellationToken;

use crate::context::{JobContext, RunPlace};
use crate::handler::HandlerFn;
use crate::joblog::JobLogger;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunOutcome {
    pub(crate) code: i32,
    pub(crate) message: Option<String>,
    pub(crate) retry_after_ms: Option<i64>,
    /// Cancelled with no reason to answer: the executor gave up draining (or handed the run
    /// back). Such a run gets no result and stays uncommitted, so the partition's next owner
    /// runs it (PROTOCOL.md section 7); `code` and `message` only describe it to spans.
    pub(crate) abandoned: bool,
}

impl RunOutcome {
    pub(crate) fn failure(message: impl Into<String>) -> Self {
        RunOutcome {
            code: result_code::FAILURE,
            message: Some(message.into()),
            retry_after_ms: None,
            abandoned: false,
        }
    }

    fn abandoned() -> Self {
        RunOutcome {
            abandoned: true,
            ..RunOutcome::failure("run was cancelled: the executor is shutting down")
        }
    }
}

/// Why a run was stopped from outside before it finished (block strategy, kill).
#[derive(Debug, Clone, Default)]
pub(crate) struct StopReason(Arc<std::sync::Mutex<Option<String>>>);

impl StopReason {
    /// Records why the run is being stopped; the first reason given is kept.
    pub(crate) fn set(&self, reason: String) {
        let mut slot = self.0.lock().expect("stop reason lock");
        slot.get_or_insert(reason);
    }

    fn take(&self) -> Option<String> {
        self.0.lock().expect("stop reason lock").clone()
    }
}

/// Runs `handler` for `trigger`. `cancellation` stops the run early: set a [`StopReason`]
/// first and the run fails with it; the trigger's timeout cancels it with code 502. `place`:
/// the partition and whether a shadow executor runs it.
///
/// The handler runs inside the caller's task (a run already has a task of its own), with its
/// panics caught: a second task per run would cost a spawn and a wake on every trigger for
/// nothing. A run stopped early (timeout, kill, cover, shutdown) drops the handler's future
/// at once, which is what aborting its task did.
pub(crate) async fn run_handler(
    handler: HandlerFn,
    trigger: Arc<TriggerRecord>,
    cancellation: CancellationToken,
    stop_reason: StopReason,
    logger: JobLogger,
    place: RunPlace,
) -> RunOutcome {
    let timeout = u64::try_from(trigger.timeout_ms)
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis);
    let context =
        JobContext::with_logger(Arc::clone(&trigger), cancellation.clone(), logger, place);
    let run = AssertUnwindSafe(handler(context)).catch_unwind();
    // Boxed: most triggers have no timeout, and a timer is the largest thing a run's task
    // would otherwise hold.
    let timer = timeout.map(|limit| Box::pin(tokio::time::sleep(limit)));
    let deadline = async {
        match timer {
            Some(timer) => timer.await,
            None => std::future::pending().await,
        }
    };
    let ended = tokio::select! {
        biased;
        ended = run => ended,
        _ = cancellation.cancelled() => {
            return stop_reason.take().map_or_else(RunOutcome::abandoned, RunOutcome::failure);
        }
        _ = deadline => {
            cancellation.cancel();
            let limit = timeout.unwrap_or_default();
            return RunOutcome {
                code: result_code::TIMEOUT,
                message: Some(format!("run timed out after {} and was cancelled", humanize(limit))),
                retry_after_ms: None,
                abandoned: false,
            };
        }
    };
    // A run stopped from outside (kill, COVER_EARLY) ends with the reason it was stopped for,
    // even when its handler saw the cancellation and returned first: a handler that returns
    // at once when cancelled (its own "stopped early" error, or `Ok`) is done by the time
    // this task looks again. The reason is set before the token is cancelled, so it is there
    // whenever the cancellation is.
    // Cancelled with no reason (the drain gave up, or the run was handed back): whatever the
    // handler answered on its way out, the run is not answered here.
    if cancellation.is_cancelled() {
        return stop_reason
            .take()
            .map_or_else(RunOutcome::abandoned, RunOutcome::failure);
    }
    match ended {
        Ok(Ok(())) => RunOutcome {
            code: result_code::SUCCESS,
            message: None,
            retry_after_ms: None,
            abandoned: false,
        },
        Ok(Err(error)) => RunOutcome {
            code: result_code::FAILURE,
            message: Some(error.message().to_owned()),
            retry_after_ms: error.retry_delay().map(|delay| delay.as_millis() as i64),
            abandoned: false,
        },
        Err(panic) => {
            let text = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-text panic payload".to_owned());
            RunOutcome::failure(format!("handler panicked: {text}"))
        }
    }
}

fn humanize(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

/// The result record of `trigger` run by `executor_id` from `started_at_ms` to
/// `finished_at_ms`.
pub(crate) fn result_record(
    trigger: &TriggerRecord,
    executor_id: &str,
    outcome: RunOutcome,
    started_at_ms: i64,
    finished_at_ms: i64,
) -> ResultRecord {
    ResultRecord {
        trigger_id: trigger.trigger_id.clone(),
        log_id: trigger.log_id,
        job_id: trigger.job_id,
        app: trigger.app.clone(),
        executor_id: executor_id.to_owned(),
        code: outcome.code,
        message: outcome.message,
        started_at_ms,
        finished_at_ms,
        attempt: trigger.attempt,
        retry_after_ms: outcome.retry_after_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::JobError;
    use crate::testing::TestWorker;

    fn trigger(timeout_ms: i64) -> Arc<TriggerRecord> {
        Arc::new(TriggerRecord {
            timeout_ms,
            ..crate::context::tests_support::trigger_record()
        })
    }

    use crate::handler::erase;

    #[tokio::test]
    async fn success_failure_and_panic_map_to_codes() {
        let worker = TestWorker::new(
            crate::Executor::builder()
                .handler("ok", |_: JobContext| async { Ok(()) })
                .handler("fail", |ctx: JobContext| async move {
                    Err(JobError::new(format!("bad params {}", ctx.params())))
                })
                .handler("panic", |_: JobContext| async { panic!("boom") }),
        )
        .unwrap();
        let ok = worker.run(TestWorker::trigger("ok")).await;
        assert_eq!((ok.code(), ok.message()), (200, None));
        let failed = worker.run(TestWorker::trigger("fail").params("p")).await;
        assert_eq!(
            (failed.code(), failed.message()),
            (500, Some("bad params p"))
        );
        let panicked = worker.run(TestWorker::trigger("panic")).await;
        assert_eq!(
            (panicked.code(), panicked.message()),
            (500, Some("handler panicked: boom"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn timeout_cancels_the_run_with_code_502() {
        let token = CancellationToken::new();
        let outcome = run_handler(
            erase(|ctx: JobContext| async move {
                ctx.cancelled().await;
                Ok(())
            }),
            trigger(1_500),
            token.clone(),
            StopReason::default(),
            JobLogger::new(100),
            RunPlace::default(),
        )
        .await;
        assert_eq!(outcome.code, 502);
        assert_eq!(
            outcome.message.as_deref(),
            Some("run timed out after 1500 ms and was cancelled")
        );
        assert!(token.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_run_fails_with_its_reason() {
        let token = CancellationToken::new();
        let reason = StopReason::default();
        let stopper = {
            let (token, reason) = (token.clone(), reason.clone());
            async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                reason.set("covered by trigger 3-2000 (COVER_EARLY)".to_owned());
                token.cancel();
            }
        };
        let (outcome, ()) = tokio::join!(
            run_handler(
                erase(|_| async {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Ok(())
                }),
                trigger(0),
                token,
                reason,
                JobLogger::new(100),
                RunPlace::default(),
            ),
            stopper
        );
        assert_eq!(
            outcome,
            RunOutcome::failure("covered by trigger 3-2000 (COVER_EARLY)")
        );
    }

    /// A handler that watches its cancellation and returns its own error at once still ends
    /// with the kill's reason, however the handler's task and the runner are scheduled (on a
    /// multi-threaded runtime both wake on the same `cancel()`; before, the handler's own
    /// message won about half the time).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_run_ends_with_the_kill_even_when_its_handler_returns_first() {
        for _ in 0..200 {
            let token = CancellationToken::new();
            let reason = StopReason::default();
            let started = Arc::new(tokio::sync::Notify::new());
            let handler = {
                let started = Arc::clone(&started);
                erase(move |ctx: JobContext| {
                    let started = Arc::clone(&started);
                    async move {
                        started.notify_one();
                        ctx.cancelled().await;
                        Err(JobError::new("stopped early"))
                    }
                })
            };
            let run = tokio::spawn(run_handler(
                handler,
                trigger(0),
                token.clone(),
                reason.clone(),
                JobLogger::new(100),
                RunPlace::default(),
            ));
            started.notified().await;
            reason.set("killed: stuck on a lock".to_owned());
            token.cancel();
            let outcome = run.await.unwrap();
            assert_eq!(outcome, RunOutcome::failure("killed: stuck on a lock"));
        }
    }
}
