//! Small helpers of the harness's network: one value of a process's Prometheus metrics.

/// The value of metric `name` in `GET {base_url}/metrics`, of the first series whose labels
/// include each of `labels` (`key="value"`); `None` when it does not answer or has none.
pub(super) async fn metric_at(
    http: &reqwest::Client,
    base_url: &str,
    name: &str,
    labels: &[&str],
) -> Option<f64> {
    let text = http
        .get(format!("{base_url}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let series_labels = series.strip_prefix(name)?;
        let named = series_labels.is_empty() || series_labels.starts_with('{');
        (named && labels.iter().all(|label| series_labels.contains(label)))
            .then(|| value.parse().ok())
            .flatten()
    })
}
