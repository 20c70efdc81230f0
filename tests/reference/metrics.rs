//! The metrics reference (`docs/src/reference/metrics.md`), from the metric definitions
//! themselves: `kadence_scheduler::app::metric_catalogue()` and
//! `kadence_executor::metric_catalogue()` hand over every collector a scheduler node or an
//! executor registers, and each collector describes itself (name, help, labels) and says its
//! type when collected, series or none.

use std::fmt::Write as _;

use expect_test::expect_file;
use prometheus::core::Collector;
use prometheus::proto::MetricType;

use crate::markdown::page_opening;

#[test]
fn the_metrics_page_matches_the_registries() {
    expect_file!["../../docs/src/reference/metrics.md"].assert_eq(&render());
}

/// One metric as the page lists it.
struct Metric {
    name: String,
    kind: &'static str,
    labels: Vec<String>,
    help: String,
}

fn metrics_of(collectors: Vec<Box<dyn Collector>>) -> Vec<Metric> {
    let mut metrics: Vec<Metric> = collectors
        .iter()
        .flat_map(|collector| {
            let kinds: Vec<MetricType> = collector
                .collect()
                .iter()
                .map(|family| family.get_field_type())
                .collect();
            collector
                .desc()
                .into_iter()
                .zip(kinds)
                .map(|(desc, kind)| Metric {
                    name: desc.fq_name.clone(),
                    kind: kind_name(kind),
                    labels: desc.variable_labels.clone(),
                    help: desc.help.clone(),
                })
                .collect::<Vec<_>>()
        })
        .collect();
    metrics.sort_by(|a, b| a.name.cmp(&b.name));
    metrics
}

fn kind_name(kind: MetricType) -> &'static str {
    match kind {
        MetricType::COUNTER => "counter",
        MetricType::GAUGE => "gauge",
        MetricType::HISTOGRAM => "histogram",
        MetricType::SUMMARY => "summary",
        MetricType::UNTYPED => "untyped",
    }
}

fn render() -> String {
    let mut page = page_opening(
        "Metrics",
        "operators building dashboards and alert rules, and anyone reading a `/metrics` page",
        "find every metric a scheduler node or an executor exports: its type, its labels and \
         what it counts",
        "the metric definitions (`scheduler/src/metrics/`, `executor-sdk/src/metrics.rs`)",
    );
    page.push_str(
        "Names follow Prometheus's conventions: a `kadence_scheduler_` or `kadence_executor_` \
         prefix, base units (`_seconds`), counters ending in `_total`. A histogram `h` is \
         exported as `h_bucket`, `h_sum` and `h_count`. Every label's values are bounded (no \
         job ids, except on the per-job metrics of the jobs `telemetry.job_metrics` lists); \
         [Metrics, dashboards and traces](../guides/observability.md) says what to watch \
         first.\n",
    );
    section(
        &mut page,
        "Scheduler nodes",
        "scheduler",
        "Served by every node on `GET /metrics` (on the API's address, or on `metrics.listen`; \
         see [`[metrics]`](configuration.md#metrics)).",
        metrics_of(kadence_scheduler::app::metric_catalogue()),
    );
    section(
        &mut page,
        "Executors",
        "executor",
        "Served by an executor given a metrics address (the Rust SDK's \
         `ExecutorBuilder::metrics_address`). Every series also carries the label `app`, and \
         a shadow executor's `shadow=\"true\"`.",
        metrics_of(kadence_executor::metric_catalogue()),
    );
    page
}

fn section(page: &mut String, title: &str, id: &str, about: &str, metrics: Vec<Metric>) {
    let _ = write!(
        page,
        "\n## {title} {{#{id}}}\n\n{about}\n\n| metric | type | labels | meaning |\n|---|---|---|---|\n"
    );
    for metric in metrics {
        let labels = if metric.labels.is_empty() {
            "—".to_string()
        } else {
            metric
                .labels
                .iter()
                .map(|label| format!("`{label}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            page,
            "| `{}` | {} | {} | {} |",
            metric.name,
            metric.kind,
            labels,
            metric.help.replace('|', "\\|")
        );
    }
}
