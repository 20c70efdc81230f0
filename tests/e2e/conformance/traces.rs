//! Trace context as the protocol defines it: a result carries the `traceparent` of the trace
//! its trigger started, so one run is one trace from the scheduler's dispatch through the
//! executor and back to the scheduler's completion. The scheduler exports its spans to a
//! stand-in OTLP receiver; the Rust executor exports its own there too, so its whole part of
//! the tree is checked; an executor that does not export (the Python one) is checked by the
//! link it must keep: the completion sits in the dispatch's trace, under a span of the
//! executor's own.

use serde_json::json;

use super::{ExecutorProcess, Implementation, results};
use crate::helpers::spawn_app_with;
use crate::otlp::{ReceivedSpan, TraceReceiver};
use kadence_tests::fixtures::Backend;

/// A successful and a failed run each make one trace: dispatch → (consume → handler) →
/// completion, the failure marked on the executor's spans.
async fn a_run_is_one_trace(executor: Implementation) {
    one_trace(executor, true).await
}

/// The Rust executor without an OTLP endpoint makes no spans, only the ids its results
/// carry: the completion still sits in the dispatch's trace, under a span id of its own.
async fn a_run_keeps_its_trace_when_the_executor_exports_nothing(executor: Implementation) {
    one_trace(executor, false).await
}

/// The scenario; `executor_exports`: the executor is given the OTLP endpoint too (the
/// Python executor never exports).
async fn one_trace(executor: Implementation, executor_exports: bool) {
    let receiver = TraceReceiver::start().await;
    let endpoint = receiver.endpoint.clone();
    let app = spawn_app_with(Backend::Sqlite, move |config| {
        config.telemetry.otlp_endpoint = Some(endpoint)
    })
    .await;
    app.create_app("traced", 1).await;
    let environment = [("KADENCE_OTLP_ENDPOINT", receiver.endpoint.as_str())];
    let environment = if executor_exports {
        &environment[..]
    } else {
        &[]
    };
    let _process =
        ExecutorProcess::start_with(executor, &app, "traced", "traced-1", environment).await;
    app.wait_for_executors("traced", 1, 1).await;
    let mut runs = Vec::new();
    for (handler, failed) in [("ok", false), ("fail", true)] {
        let job = app
            .create_job(json!({"app": "traced", "handler": handler, "schedule_type": "NONE"}))
            .await;
        let trigger_id = app.trigger(job.id, None).await;
        runs.push((job.id, trigger_id, failed));
    }
    for (job, trigger_id, failed) in runs {
        results(&app, job, 1).await;
        let [dispatch, complete] = run_spans(
            &receiver,
            &trigger_id,
            ["kadence.dispatch", "kadence.complete"],
        )
        .await;
        assert_eq!(dispatch.service, "kadence-scheduler");
        assert_eq!(dispatch.parent_span_id, "", "dispatch starts the trace");
        assert_eq!(
            dispatch.attribute("messaging.destination.name"),
            Some(format!("{}.triggers.traced", app.prefix).as_str())
        );
        assert_eq!(
            complete.trace_id, dispatch.trace_id,
            "the result carried its trigger's trace"
        );
        assert_ne!(complete.parent_span_id, dispatch.span_id);
        assert!(
            complete.parent_span_id.len() == 16 && complete.parent_span_id != "0".repeat(16),
            "the result names a span of the executor's own: {complete:?}"
        );
        if executor == Implementation::Rust && executor_exports {
            let [consume, handler] = run_spans(
                &receiver,
                &trigger_id,
                ["kadence.consume", "kadence.handler"],
            )
            .await;
            assert_eq!(consume.service, "traced", "executors name their app");
            assert_eq!(consume.trace_id, dispatch.trace_id);
            assert_eq!(consume.parent_span_id, dispatch.span_id);
            assert_eq!(handler.parent_span_id, consume.span_id);
            assert_eq!(complete.parent_span_id, consume.span_id);
            assert_eq!(consume.error.is_some(), failed, "{consume:?}");
            assert_eq!(handler.error.is_some(), failed, "{handler:?}");
        }
    }
    app.shutdown().await;
}

/// The spans named `names` of the run `trigger_id`, once all have arrived.
async fn run_spans<const N: usize>(
    receiver: &TraceReceiver,
    trigger_id: &str,
    names: [&str; N],
) -> [ReceivedSpan; N] {
    receiver
        .wait_for(&format!("spans {names:?} of {trigger_id}"), |spans| {
            let find = |name: &str| {
                spans
                    .iter()
                    .find(|span| {
                        span.name == name
                            && span.attribute("kadence.trigger_id") == Some(trigger_id)
                    })
                    .cloned()
            };
            let found: Option<Vec<ReceivedSpan>> = names.iter().map(|name| find(name)).collect();
            found.and_then(|found| found.try_into().ok())
        })
        .await
}

on_every_executor!(a_run_is_one_trace);
executor_tests!(
    rust_exporting_nothing,
    Rust,
    a_run_keeps_its_trace_when_the_executor_exports_nothing
);
