//! The executor's part of a run's trace (`kadence_kafka::trace` has the whole way): a
//! `kadence.consume` span from a trigger's receipt to its published result, a child of the
//! scheduler's dispatch span named by the trigger's `traceparent`; inside it a
//! `kadence.handler` span for the handler's run. The result record carries the consume span's
//! `traceparent`, so the scheduler's completion joins the same trace.

use std::time::SystemTime;

use kadence_kafka::{RunTracer, trace};
use kadence_schemas::{ResultRecord, TriggerRecord, result_code};
use opentelemetry::trace::SpanKind;
use opentelemetry::{Context, KeyValue};
use rdkafka::message::{Message, OwnedMessage};

/// Starts the consume span of `trigger`, received as `message`.
pub(crate) fn consume_span(
    tracer: &RunTracer,
    message: &OwnedMessage,
    trigger: &TriggerRecord,
) -> Context {
    let parent = trace::extract(message);
    let attributes = vec![
        KeyValue::new("kadence.job_id", trigger.job_id.get()),
        KeyValue::new("kadence.trigger_id", trigger.trigger_id.to_string()),
        KeyValue::new("kadence.handler", trigger.handler.clone()),
        KeyValue::new("messaging.system", "kafka"),
        KeyValue::new("messaging.operation.type", "process"),
        KeyValue::new("messaging.destination.name", message.topic().to_owned()),
        KeyValue::new(
            "messaging.destination.partition.id",
            message.partition().to_string(),
        ),
        KeyValue::new("messaging.kafka.offset", message.offset()),
    ];
    tracer.start("kadence.consume", SpanKind::Consumer, &parent, attributes)
}

/// The span of running `trigger`'s handler, which began at `started`, inside the consume
/// span `consume`. It is made once the handler has returned, so that nothing but the
/// handler's own work lies between a trigger's release and its start.
pub(crate) fn handler_span(
    tracer: &RunTracer,
    consume: &Context,
    trigger: &TriggerRecord,
    started: SystemTime,
) -> Context {
    let attributes = vec![
        KeyValue::new("kadence.job_id", trigger.job_id.get()),
        KeyValue::new("kadence.trigger_id", trigger.trigger_id.to_string()),
        KeyValue::new("kadence.handler", trigger.handler.clone()),
        KeyValue::new("kadence.attempt", i64::from(trigger.attempt)),
    ];
    tracer.start_at("kadence.handler", started, consume, attributes)
}

/// Ends `span` as `record` answers its trigger: failed, with the result's message, unless
/// the code is a success.
pub(crate) fn end_with_result(span: &Context, record: &ResultRecord) {
    trace::set_attribute(
        span,
        KeyValue::new("kadence.result_code", i64::from(record.code)),
    );
    if record.code == result_code::SUCCESS {
        trace::end(span);
    } else {
        let message = record.message.clone().unwrap_or_default();
        trace::end_with_error(span, message);
    }
}

/// Ends `span` of a trigger that gets no result here, saying why.
pub(crate) fn end_without_result(span: &Context, why: &'static str) {
    trace::set_attribute(span, KeyValue::new("kadence.no_result", why));
    trace::end(span);
}
