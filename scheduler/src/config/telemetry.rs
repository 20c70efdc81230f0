//! The `[telemetry]` section: where traces go, and which jobs get metrics of their own.

use serde::{Deserialize, Serialize};

/// Where traces go and which jobs get metrics of their own (`[telemetry]`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP endpoint spans are exported to, e.g. `http://127.0.0.1:4318` (a
    /// collector, Jaeger or Tempo). Unset (the default): nothing is exported, but trigger
    /// and result records still carry their `traceparent`.
    pub otlp_endpoint: Option<String>,
    /// Jobs whose fires and results are also counted per job, with a `job` label, for the
    /// per-job dashboard. Empty by default: a label per job would grow without bound.
    pub job_metrics: Vec<i64>,
}
