//! The scheduler's spans of a run's trace ([`kadence_kafka::trace`] has the whole way):
//! `kadence.dispatch` per trigger (its context goes out in the trigger's `traceparent`),
//! `kadence.complete` per result (a child of the `traceparent` the result came with), and
//! `kadence.pre_read` per scan that found due jobs (a trace of its own: a scan plans fires of
//! many runs). Also
//! [`TelemetryConfig`], the `[telemetry]` section that turns export on.

use std::time::SystemTime;

use kadence_kafka::{RunTracer, trace};
use kadence_schemas::{JobId, TriggerId};
use opentelemetry::trace::SpanKind;
use opentelemetry::{Context, KeyValue};
use rdkafka::message::{Message, OwnedMessage};

use crate::config::TelemetryConfig;
use crate::domain::model::PendingFire;

/// The tracer of a node: service `kadence-scheduler`, exporting where `config` says.
pub fn node_tracer(config: &TelemetryConfig) -> Result<RunTracer, kadence_kafka::TraceError> {
    let endpoint = config.otlp_endpoint.as_deref().map(str::trim);
    RunTracer::new(
        "kadence-scheduler",
        endpoint.filter(|given| !given.is_empty()),
    )
}

/// Starts the root span of `fire`'s run: its trigger's production to `topic`/`partition`.
pub fn dispatch_span(
    tracer: &RunTracer,
    fire: &PendingFire,
    topic: &str,
    partition: i32,
) -> Context {
    let attributes = || {
        let mut attributes = run_attributes(fire.job_id, &fire.trigger_id);
        attributes.extend([
            KeyValue::new("kadence.app", fire.app.to_string()),
            KeyValue::new("kadence.trigger_type", fire.trigger_type.to_string()),
            KeyValue::new("messaging.system", "kafka"),
            KeyValue::new("messaging.operation.type", "send"),
            KeyValue::new("messaging.destination.name", topic.to_owned()),
            KeyValue::new("messaging.destination.partition.id", partition.to_string()),
        ]);
        attributes
    };
    tracer.start(
        "kadence.dispatch",
        SpanKind::Producer,
        &Context::new(),
        attributes,
    )
}

/// Starts the span of writing the result `message` carries for run `trigger_id` of `job_id`,
/// in the trace its `traceparent` names.
pub fn completion_span(
    tracer: &RunTracer,
    message: &OwnedMessage,
    job_id: JobId,
    trigger_id: &TriggerId,
) -> Context {
    let parent = kadence_kafka::trace::extract(message);
    let attributes = || {
        let mut attributes = run_attributes(job_id, trigger_id);
        attributes.extend([
            KeyValue::new("messaging.system", "kafka"),
            KeyValue::new("messaging.operation.type", "process"),
            KeyValue::new("messaging.destination.name", message.topic().to_owned()),
            KeyValue::new("messaging.kafka.offset", message.offset()),
        ]);
        attributes
    };
    tracer.start("kadence.complete", SpanKind::Consumer, &parent, attributes)
}

/// Records the span of a pre-read scan that began at `started` at `now_ms` and read
/// `jobs_read` due jobs, writing `fires_written` fires (or failed with `error`). Scans that
/// found nothing due leave no span: at one a second per node they would bury the rest.
pub fn record_pre_read(
    tracer: &RunTracer,
    started: SystemTime,
    now_ms: i64,
    outcome: Result<(usize, usize), String>,
) {
    let attributes = || vec![KeyValue::new("kadence.now_ms", now_ms)];
    match outcome {
        Ok((0, _)) => {}
        Ok((jobs_read, fires_written)) => {
            let span = tracer.start_at("kadence.pre_read", started, &Context::new(), attributes);
            trace::set_attribute(&span, KeyValue::new("kadence.jobs_read", jobs_read as i64));
            trace::set_attribute(
                &span,
                KeyValue::new("kadence.fires_written", fires_written as i64),
            );
            trace::end(&span);
        }
        Err(error) => {
            let span = tracer.start_at("kadence.pre_read", started, &Context::new(), attributes);
            trace::end_with_error(&span, error);
        }
    }
}

fn run_attributes(job_id: JobId, trigger_id: &TriggerId) -> Vec<KeyValue> {
    vec![
        KeyValue::new("kadence.job_id", job_id.get()),
        KeyValue::new("kadence.trigger_id", trigger_id.to_string()),
    ]
}
