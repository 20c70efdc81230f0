//! Small helpers of the harness's network: a free loopback port, and one value of a
//! process's Prometheus metrics.

/// A free port on the loopback interface.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

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
