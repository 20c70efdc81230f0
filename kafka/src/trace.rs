//! One trace per run, across Kafka: the W3C trace context a record carries in its
//! `traceparent` header ([`headers::TRACEPARENT`]), and the [`RunTracer`] each process starts
//! its spans with.
//!
//! The way of a run's trace:
//! - the scheduler starts it when it dispatches the trigger (`kadence.dispatch`, a producer
//!   span ending at the broker's acknowledgement) and puts that span's context on the trigger
//!   record;
//! - the executor continues it: `kadence.consume` (from receipt to the published result) and
//!   inside it `kadence.handler` (the handler's run), and puts the consume span's context on
//!   the result record;
//! - the scheduler's `kadence.complete` (applying the result to the run's row) closes it.
//!
//! Spans are exported over OTLP/HTTP (protobuf, what every collector accepts first) when an
//! endpoint is configured; that is the one setting. Without one, spans still get their ids, so
//! records still carry a `traceparent` linking trigger and result (an executor in another
//! language can export its own part), but nothing is kept when they end. Sampling follows
//! the standard `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` variables (the SDK reads
//! them); the default records every run.
//!
//! Each component owns its tracer (no process-global provider): a test process runs several
//! schedulers and executors, each exporting where its own configuration says.

use std::time::{Duration, SystemTime};

use kadence_schemas::headers;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{
    Span as _, SpanBuilder, SpanKind, Status, TraceContextExt, Tracer, TracerProvider,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use rdkafka::Message;
use rdkafka::message::{Header, Headers, OwnedHeaders};

/// The path OTLP/HTTP receivers take traces on, added to an endpoint given without it.
const TRACES_PATH: &str = "/v1/traces";

/// How long a stopping process waits for its last spans to be exported.
const EXPORT_ON_SHUTDOWN: Duration = Duration::from_secs(5);

/// Why a tracer could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot export traces to {endpoint}: {reason}")]
pub struct TraceError {
    endpoint: String,
    reason: String,
}

/// The tracer of one component (a scheduler node or an executor).
#[derive(Clone)]
pub struct RunTracer {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    /// An exporter is configured: only then are a span's attributes built (see
    /// [`start`](RunTracer::start)).
    exports: bool,
}

impl RunTracer {
    /// A tracer naming its spans' service `service`, exporting to `otlp_endpoint` (an
    /// OTLP/HTTP base such as `http://127.0.0.1:4318`, or the full traces URL) when given.
    pub fn new(service: &str, otlp_endpoint: Option<&str>) -> Result<RunTracer, TraceError> {
        let resource = Resource::builder()
            .with_service_name(service.to_owned())
            .build();
        let mut builder = SdkTracerProvider::builder().with_resource(resource);
        let exports = otlp_endpoint.is_some();
        if let Some(endpoint) = otlp_endpoint {
            let url = traces_url(endpoint);
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(url.clone())
                .build()
                .map_err(|error| TraceError {
                    endpoint: url,
                    reason: error.to_string(),
                })?;
            builder = builder.with_batch_exporter(exporter);
        }
        let provider = builder.build();
        let tracer = provider.tracer("kadence");
        Ok(RunTracer {
            provider,
            tracer,
            exports,
        })
    }

    /// A tracer that exports nothing: spans get ids, for the headers, and are dropped.
    pub fn local(service: &str) -> RunTracer {
        RunTracer::new(service, None).expect("a tracer without an exporter always builds")
    }

    /// Starts span `name` of `kind` as a child of `parent` (a root when `parent` holds no
    /// span); the returned context holds it. End it with [`end`] or [`end_with_error`].
    ///
    /// `attributes` are built only for a span that is recorded and exported: a trigger's
    /// span is started for every trigger, and building its attributes (a dozen strings) for
    /// a span the sampler dropped, or that no exporter sends anywhere, was a measurable part
    /// of a trigger's cost. The sampler therefore decides without them, which the samplers
    /// `OTEL_TRACES_SAMPLER` names (by trace id, or by the parent) all do.
    pub fn start(
        &self,
        name: &'static str,
        kind: SpanKind,
        parent: &Context,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Context {
        let builder = self.tracer.span_builder(name).with_kind(kind);
        self.begin(builder, parent, attributes)
    }

    /// [`start`](Self::start) for a span that began at `started`: one recorded only once
    /// it is known to be worth keeping.
    pub fn start_at(
        &self,
        name: &'static str,
        started: SystemTime,
        parent: &Context,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Context {
        let builder = self.tracer.span_builder(name).with_start_time(started);
        self.begin(builder, parent, attributes)
    }

    /// Whether spans are sent anywhere (an OTLP endpoint is configured).
    pub fn exports(&self) -> bool {
        self.exports
    }

    /// Starts the span `builder` describes as a child of `parent`, with `attributes` when it
    /// is kept.
    fn begin(
        &self,
        builder: SpanBuilder,
        parent: &Context,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Context {
        let mut span = builder.start_with_context(&self.tracer, parent);
        if self.exports && span.is_recording() {
            span.set_attributes(attributes());
        }
        parent.with_span(span)
    }

    /// Exports the spans not yet sent and stops the exporter (at most a few seconds). Blocks:
    /// call it from a blocking thread, when the component stops.
    pub fn shutdown(&self) {
        if let Err(error) = self.provider.shutdown_with_timeout(EXPORT_ON_SHUTDOWN) {
            tracing::warn!(%error, "traces not all exported at shutdown");
        }
    }
}

impl std::fmt::Debug for RunTracer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("RunTracer")
    }
}

/// `endpoint` with the OTLP traces path, unless it already names it.
fn traces_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    if trimmed.ends_with(TRACES_PATH) {
        trimmed.to_owned()
    } else {
        format!("{trimmed}{TRACES_PATH}")
    }
}

/// Ends the span `context` holds.
pub fn end(context: &Context) {
    context.span().end();
}

/// Ends the span `context` holds, marked failed with `message`.
pub fn end_with_error(context: &Context, message: impl Into<String>) {
    let span = context.span();
    span.set_status(Status::error(message.into()));
    span.end();
}

/// Whether the span `context` holds is recorded (an attribute set on one that is not is
/// dropped: worth checking before building an expensive one).
pub fn is_recording(context: &Context) -> bool {
    context.span().is_recording()
}

/// Sets `attribute` on the span `context` holds.
pub fn set_attribute(context: &Context, attribute: KeyValue) {
    context.span().set_attribute(attribute);
}

/// The `traceparent` value of the span `context` holds; `None` when it holds none.
pub fn traceparent(context: &Context) -> Option<String> {
    let mut carrier = TraceparentCarrier(None);
    TraceContextPropagator::new().inject_context(context, &mut carrier);
    carrier.0
}

/// `headers` with the `traceparent` of `context` added (unchanged when it holds no span).
pub fn inject(context: &Context, headers: OwnedHeaders) -> OwnedHeaders {
    match traceparent(context) {
        Some(value) => headers.insert(Header {
            key: headers::TRACEPARENT,
            value: Some(value.as_bytes()),
        }),
        None => headers,
    }
}

/// The trace context `record`'s headers carry: empty (a new trace starts) when it has no
/// valid `traceparent`.
pub fn extract<M: Message>(record: &M) -> Context {
    let value = record.headers().and_then(|record_headers| {
        record_headers
            .iter()
            .find(|header| header.key == headers::TRACEPARENT)
            .and_then(|header| header.value)
            .and_then(|value| std::str::from_utf8(value).ok())
            .map(str::to_owned)
    });
    TraceContextPropagator::new().extract(&TraceparentCarrier(value))
}

/// The W3C propagator's carrier, holding just the `traceparent` (Kadence sends no
/// `tracestate`).
struct TraceparentCarrier(Option<String>);

impl Injector for TraceparentCarrier {
    fn set(&mut self, key: &str, value: String) {
        if key == headers::TRACEPARENT {
            self.0 = Some(value);
        }
    }
}

impl Extractor for TraceparentCarrier {
    fn get(&self, key: &str) -> Option<&str> {
        (key == headers::TRACEPARENT)
            .then_some(self.0.as_deref())
            .flatten()
    }

    fn keys(&self) -> Vec<&str> {
        vec![headers::TRACEPARENT]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt;
    use rdkafka::message::{OwnedMessage, Timestamp};

    fn record_with(headers: Option<OwnedHeaders>) -> OwnedMessage {
        OwnedMessage::new(
            None,
            None,
            "t".into(),
            Timestamp::NotAvailable,
            0,
            0,
            headers,
        )
    }

    #[test]
    fn a_child_span_continues_the_trace_its_record_carries() {
        let tracer = RunTracer::local("test");
        let dispatch = tracer.start("dispatch", SpanKind::Producer, &Context::new(), Vec::new);
        let header = traceparent(&dispatch).unwrap();
        assert_eq!(header.len(), 55, "{header}");
        assert!(
            header.starts_with("00-") && header.ends_with("-01"),
            "{header}"
        );
        let record = record_with(Some(inject(&dispatch, OwnedHeaders::new())));
        let parent = extract(&record);
        let consume = tracer.start("consume", SpanKind::Consumer, &parent, Vec::new);
        let (dispatched, consumed) = (dispatch.span(), consume.span());
        assert_eq!(
            consumed.span_context().trace_id(),
            dispatched.span_context().trace_id()
        );
        assert_ne!(
            consumed.span_context().span_id(),
            dispatched.span_context().span_id()
        );
    }

    #[test]
    fn a_record_without_a_valid_traceparent_starts_a_new_trace() {
        assert!(!extract(&record_with(None)).has_active_span());
        let garbage = OwnedHeaders::new().insert(Header {
            key: headers::TRACEPARENT,
            value: Some("00-not-a-trace".as_bytes()),
        });
        let record = record_with(Some(garbage));
        assert!(!extract(&record).span().span_context().is_valid());
        assert_eq!(traceparent(&Context::new()), None);
    }

    #[test]
    fn the_endpoint_gets_the_traces_path_once() {
        assert_eq!(
            traces_url("http://collector:4318"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/v1/traces/"),
            "http://collector:4318/v1/traces"
        );
    }
}
