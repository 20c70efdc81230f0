//! The executor's part of a run's trace (`kadence_kafka::trace` has the whole way): a
//! `kadence.consume` span from a trigger's receipt to its published result, a child of the
//! scheduler's dispatch span named by the trigger's `traceparent`; inside it a
//! `kadence.handler` span for the handler's run. The result record carries the consume span's
//! `traceparent`, so the scheduler's completion joins the same trace.
//!
//! [`RunSpans`] makes them. Without an OTLP endpoint nothing would keep a span, so only what
//! the result needs is made: the consume "span" is the trigger's trace id and flags under a
//! span id of the executor's own (what the reference Python executor does too), and there is
//! no handler span. Recording spans nobody exports cost a fifth of an executor's CPU at
//! 10 000 triggers/s (their attributes, ids and bookkeeping, for every trigger).

use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};
use std::time::SystemTime;

use kadence_kafka::{RunTracer, trace};
use kadence_schemas::{ResultRecord, TriggerRecord, result_code};
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, TraceContextExt};
use opentelemetry::{Context, KeyValue};
use rdkafka::message::{Message, OwnedMessage};

/// Makes a run's spans: recorded ones when they are exported, the ids alone otherwise.
#[derive(Clone, Debug)]
pub(crate) struct RunSpans {
    tracer: RunTracer,
    exported: bool,
}

impl RunSpans {
    /// Spans from `tracer`; `exported`: it sends them somewhere (an OTLP endpoint is set).
    pub(crate) fn new(tracer: RunTracer, exported: bool) -> RunSpans {
        RunSpans { tracer, exported }
    }

    /// Starts the consume span of `trigger`, received as `message`.
    pub(crate) fn consume(&self, message: &OwnedMessage, trigger: &TriggerRecord) -> Context {
        let parent = trace::extract(message);
        if !self.exported {
            let parent_span = parent.span();
            let parent = parent_span.span_context();
            if parent.is_valid() {
                let own = SpanContext::new(
                    parent.trace_id(),
                    new_span_id(),
                    parent.trace_flags(),
                    false,
                    parent.trace_state().clone(),
                );
                return Context::new().with_remote_span_context(own);
            }
            // No trace to continue: a new one, as an exporting executor starts it.
        }
        let attributes = || {
            vec![
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
            ]
        };
        self.tracer
            .start("kadence.consume", SpanKind::Consumer, &parent, attributes)
    }

    /// The span of running `trigger`'s handler, which began at `started`, inside the consume
    /// span `consume` (none when spans are not exported). It is made once the handler has
    /// returned, so that nothing but the handler's own work lies between a trigger's release
    /// and its start.
    pub(crate) fn handler(
        &self,
        consume: &Context,
        trigger: &TriggerRecord,
        started: SystemTime,
    ) -> Context {
        if !self.exported {
            return Context::new();
        }
        let attributes = || {
            vec![
                KeyValue::new("kadence.job_id", trigger.job_id.get()),
                KeyValue::new("kadence.trigger_id", trigger.trigger_id.to_string()),
                KeyValue::new("kadence.handler", trigger.handler.clone()),
                KeyValue::new("kadence.attempt", i64::from(trigger.attempt)),
            ]
        };
        self.tracer
            .start_at("kadence.handler", started, consume, attributes)
    }
}

/// A new span id: random, never zero. Span ids only need to be unique within their trace,
/// so a per-thread generator seeded from the standard library's random hasher keys will do.
fn new_span_id() -> SpanId {
    thread_local! {
        static STATE: Cell<u64> = Cell::new(RandomState::new().hash_one(std::thread::current().id()) | 1);
    }
    STATE.with(|state| {
        // xorshift64*: full period over the non-zero states.
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        let id = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        SpanId::from_bytes(id.max(1).to_be_bytes())
    })
}

/// Ends `span` as `record` answers its trigger: failed, with the result's message, unless
/// the code is a success.
pub(crate) fn end_with_result(span: &Context, record: &ResultRecord) {
    if !span.span().is_recording() {
        return;
    }
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
    if !span.span().is_recording() {
        return;
    }
    trace::set_attribute(span, KeyValue::new("kadence.no_result", why));
    trace::end(span);
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TraceFlags;
    use rdkafka::message::{Header, OwnedHeaders, Timestamp};

    use super::*;
    use crate::context::tests_support::trigger_record;

    fn received_with(traceparent: Option<&str>) -> OwnedMessage {
        let headers = traceparent.map(|value| {
            OwnedHeaders::new().insert(Header {
                key: kadence_schemas::headers::TRACEPARENT,
                value: Some(value.as_bytes()),
            })
        });
        OwnedMessage::new(
            None,
            None,
            "t".into(),
            Timestamp::NotAvailable,
            0,
            7,
            headers,
        )
    }

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn without_export_the_result_continues_the_triggers_trace_under_its_own_span_id() {
        let spans = RunSpans::new(RunTracer::local("test"), false);
        let consume = spans.consume(&received_with(Some(PARENT)), &trigger_record());
        let header = trace::traceparent(&consume).unwrap();
        assert!(
            header.starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
            "{header}"
        );
        assert!(header.ends_with("-01"), "{header}");
        assert!(
            !header.contains("b7ad6b7169203331"),
            "a span id of its own: {header}"
        );
        let again = spans.consume(&received_with(Some(PARENT)), &trigger_record());
        assert_ne!(trace::traceparent(&again).unwrap(), header);
        assert!(!consume.span().is_recording());
        let unsampled = PARENT.replace("-01", "-00");
        let consume = spans.consume(&received_with(Some(&unsampled)), &trigger_record());
        assert_eq!(
            consume.span().span_context().trace_flags(),
            TraceFlags::default(),
            "the trigger's flags"
        );
    }

    #[test]
    fn a_trigger_without_a_trace_starts_one_exported_or_not() {
        for exported in [false, true] {
            let spans = RunSpans::new(RunTracer::local("test"), exported);
            let consume = spans.consume(&received_with(None), &trigger_record());
            assert!(consume.span().span_context().is_valid());
        }
    }

    #[test]
    fn exported_spans_are_recorded_children_of_the_trigger() {
        let spans = RunSpans::new(RunTracer::local("test"), true);
        let consume = spans.consume(&received_with(Some(PARENT)), &trigger_record());
        assert!(consume.span().is_recording());
        let context = consume.span().span_context().clone();
        assert_eq!(
            format!("{:032x}", context.trace_id()),
            "0af7651916cd43dd8448eb211c80319c"
        );
        let handler = spans.handler(&consume, &trigger_record(), SystemTime::now());
        assert!(handler.span().is_recording());
    }

    #[test]
    fn span_ids_are_never_zero_and_do_not_repeat() {
        let ids: std::collections::HashSet<SpanId> = (0..10_000).map(|_| new_span_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(!ids.contains(&SpanId::INVALID));
    }
}
