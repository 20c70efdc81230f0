//! The API's HTTP server: HTTP/1.1 on the node's listener, one hyper connection per client,
//! until shutdown.
//!
//! Why not `axum::serve`: it gives no way to set hyper's header read timeout, and without one
//! a client that sends its request head a byte at a time (or opens a connection and says
//! nothing) keeps its connection and task for as long as it likes. Here a request head must
//! arrive within `api.header_read_timeout`, which also closes keep-alive connections idle for
//! that long: a client that pools connections should let them go sooner (the test clients
//! after 5 s), or its request may meet a connection the server is closing. Bodies have their own deadline in the router (`limits`), where the slow
//! client can be answered 408.
//!
//! Each request carries the connection's peer address (`ConnectInfo`), from which
//! `client` tells who the client is.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::Service;

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting, lets the
/// requests in flight finish and returns once every connection is closed.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let mut with_peer = router.into_make_service_with_connect_info::<SocketAddr>();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let connections = GracefulShutdown::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    pause_after(error).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(service) = with_peer.call(peer).await;
        let connection =
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
        let connection = connections.watch(connection);
        tokio::spawn(async move {
            // A client that hangs up or is too slow with its head ends here; nothing to do.
            if let Err(error) = connection.await {
                tracing::debug!(%error, %peer, "API connection ended");
            }
        });
    }
    drop(listener);
    connections.shutdown().await;
}

/// After a failed accept: a connection the peer gave up on is nothing, but running out of
/// file descriptors would fail every accept at once, so wait a moment before the next (as
/// `axum::serve` does).
async fn pause_after(error: io::Error) {
    let gone = matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    );
    if !gone {
        tracing::error!(%error, "the API cannot accept a connection");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
