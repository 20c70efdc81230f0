//! The node's HTTP side: the API (with the console and, when configured, the book) on the
//! node's listener, and `/metrics` on an address of its own when `metrics.listen` is set.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;

use super::{FirePath, Node};
use crate::clock::millis;
use crate::engine::kafka::ControlChannel;
use crate::http::api::{
    ApiLimits, ApiState, CredentialPolicy, MetricsAccess, RefusalTally, metrics_router, router,
    serve,
};
use crate::http::book::Book;
use crate::monitors::webhook_target::WebhookTargets;
use crate::operations::jobs::{JobOperations, JobTiming};
use crate::operations::replay::Replayer;

impl Node {
    /// Serves the API (and `book` under `/docs/`) on `listener` with its own pool, until
    /// shutdown, and the metrics on an address of their own when configured; returns both.
    pub(super) fn serve_api(
        &self,
        listener: TcpListener,
        fire_path: FirePath,
        book: Option<Book>,
    ) -> anyhow::Result<(SocketAddr, Option<SocketAddr>)> {
        let schedule = &self.config.schedule;
        let api_store = Arc::clone(&self.pools.api);
        let api_intake = fire_path.intake.using(Arc::clone(&api_store));
        let state = Arc::new(ApiState {
            intake: api_intake.clone(),
            store: Arc::clone(&api_store),
            admin: Arc::clone(&self.admin),
            topics: self.topics.clone(),
            partitions: Arc::clone(&self.partitions),
            jobs: JobOperations::new(
                Arc::clone(&api_store),
                (fire_path.cancelled, fire_path.pre_read_waker),
                Arc::clone(&self.clock),
                JobTiming {
                    pre_read_window_ms: millis(schedule.pre_read_window),
                    change_settle_ms: millis(schedule.emit_lead + schedule.cancel_poll_interval),
                },
                WebhookTargets::new(self.config.alarm.webhook_allowed_networks.clone()),
            ),
            control: ControlChannel::new(self.signed.clone(), self.topics.control()),
            registry: Arc::clone(&self.registry),
            clock: Arc::clone(&self.clock),
            credentials: CredentialPolicy::new(&self.config.auth),
            refusals: RefusalTally::default(),
            database: Arc::clone(&self.database),
            metrics_access: MetricsAccess::new(&self.config.metrics),
            replayer: Arc::new(
                Replayer::new(
                    (Arc::clone(&self.pools.api), api_intake),
                    Arc::clone(&self.partitions),
                    (self.topics.clone(), self.kafka.clone()),
                    Arc::clone(&self.clock),
                    self.config.replay.clone(),
                )
                .settling_after(schedule.pre_read_window + schedule.lease + schedule.emit_lead),
            ),
        });
        let api_limits = ApiLimits::from(&self.config.api);
        let api_addr = listener.local_addr().context("reading the API address")?;
        let api_shutdown = self.shutdown.clone().cancelled_owned();
        let header_read_timeout = self.config.api.header_read_timeout;
        let metrics_addr = self.serve_metrics(&state, api_addr)?;
        let api = router(state, api_limits, book);
        self.tasks
            .spawn(serve(listener, api, header_read_timeout, api_shutdown));
        Ok((api_addr, metrics_addr))
    }

    /// Serves `/metrics` on `metrics.listen` when that is set (returning where), and warns when
    /// the API at `api_addr` shows it to anyone beyond loopback.
    fn serve_metrics(
        &self,
        state: &Arc<ApiState>,
        api_addr: SocketAddr,
    ) -> anyhow::Result<Option<SocketAddr>> {
        let config = &self.config.metrics;
        if config.open_beyond_loopback(api_addr) {
            tracing::warn!(%api_addr,
                "/metrics names every app and executor to anyone who reaches the API: set \
                 metrics.listen (an internal address) or metrics.token");
        }
        let Some(listen) = config.listen else {
            return Ok(None);
        };
        let listener = std::net::TcpListener::bind(listen)
            .and_then(|listener| {
                listener.set_nonblocking(true)?;
                TcpListener::from_std(listener)
            })
            .with_context(|| format!("binding metrics.listen {listen}"))?;
        let metrics_addr = listener
            .local_addr()
            .context("reading the metrics address")?;
        self.tasks.spawn(serve(
            listener,
            metrics_router(Arc::clone(state)),
            self.config.api.header_read_timeout,
            self.shutdown.clone().cancelled_owned(),
        ));
        tracing::info!(%metrics_addr, "serving /metrics on its own address");
        Ok(Some(metrics_addr))
    }
}
