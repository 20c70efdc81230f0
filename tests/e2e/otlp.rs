//! A stand-in OTLP/HTTP trace receiver: what a collector would get from the scheduler and
//! executors that export to it. Decodes the protobuf requests with the OpenTelemetry
//! project's own message types and keeps every span for the test to look through.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use prost::Message;

use kadence_tests::fixtures::wait_for;

/// One exported span, with its ids in hex as `traceparent` writes them.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// The exporting process's `service.name`.
    pub service: String,
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub attributes: HashMap<String, String>,
    /// The status message of a span marked failed.
    pub error: Option<String>,
}

impl ReceivedSpan {
    /// The attribute `key`, as text.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// A receiver listening on a free loopback port until dropped.
pub struct TraceReceiver {
    /// The base URL to give exporters (`/v1/traces` is added by them).
    pub endpoint: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    server: tokio::task::JoinHandle<()>,
}

impl TraceReceiver {
    pub async fn start() -> TraceReceiver {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/v1/traces", post(receive))
            .with_state(Arc::clone(&spans));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .await
                .expect("OTLP receiver serves");
        });
        TraceReceiver {
            endpoint,
            spans,
            server,
        }
    }

    /// Waits (exporters send in batches, every few seconds) until `found` finds what it
    /// looks for among the spans received so far.
    pub async fn wait_for<T>(&self, what: &str, found: impl Fn(&[ReceivedSpan]) -> Option<T>) -> T {
        wait_for(Duration::from_secs(45), what, || async {
            found(&self.spans.lock().unwrap())
        })
        .await
    }
}

impl Drop for TraceReceiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn receive(State(spans): State<Arc<Mutex<Vec<ReceivedSpan>>>>, body: Bytes) -> Vec<u8> {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf request");
    let mut received = spans.lock().unwrap();
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.unwrap_or_default();
        let service = attributes(&resource.attributes)
            .remove("service.name")
            .unwrap_or_default();
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                let status = span.status.unwrap_or_default();
                received.push(ReceivedSpan {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex::encode(span.trace_id),
                    span_id: hex::encode(span.span_id),
                    parent_span_id: hex::encode(span.parent_span_id),
                    attributes: attributes(&span.attributes),
                    error: (status.code == StatusCode::Error as i32).then_some(status.message),
                });
            }
        }
    }
    // An empty ExportTraceServiceResponse: everything accepted.
    Vec::new()
}

fn attributes(pairs: &[KeyValue]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|pair| {
            let value = match pair
                .value
                .as_ref()
                .and_then(|AnyValue { value }| value.as_ref())
            {
                Some(any_value::Value::StringValue(text)) => text.clone(),
                Some(any_value::Value::IntValue(number)) => number.to_string(),
                Some(any_value::Value::BoolValue(flag)) => flag.to_string(),
                Some(other) => format!("{other:?}"),
                None => String::new(),
            };
            (pair.key.clone(), value)
        })
        .collect()
}
