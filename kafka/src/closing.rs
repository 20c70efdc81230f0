//! Closing a consumer without stalling the runtime.

use std::time::Duration;

use rdkafka::consumer::{ConsumerContext, StreamConsumer};

/// Closes `consumer` on a thread of its own, waiting for it at most `limit`.
///
/// Dropping an rdkafka consumer closes it: it revokes the assignment (through the rebalance
/// callback), commits, leaves the group, and polls until librdkafka reports it closed, with
/// no deadline of its own (rust-rdkafka issues 509 and 611: a close can wait for a group
/// coordinator that never answers). Dropped on a tokio worker it blocks that worker meanwhile,
/// and the runtime's timers with it once every worker is blocked, so nothing measured by the
/// runtime, not even a shutdown deadline, could end the wait. On its own thread the close
/// keeps the runtime free; past `limit` the caller goes on without it, logging why, and
/// the thread finishes the close on its own or ends with the process. `what` names the
/// consumer in the log and in the thread's name.
pub async fn close_consumer<C>(consumer: StreamConsumer<C>, what: &'static str, limit: Duration)
where
    C: ConsumerContext + 'static,
{
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    let closing = std::thread::Builder::new()
        .name(format!("kadence-close-{what}"))
        .spawn(move || {
            drop(consumer);
            let _ = closed_tx.send(());
        });
    if let Err(error) = closing {
        // The closure, and the consumer in it, were dropped on this thread instead.
        tracing::warn!(what, %error, "cannot start a thread to close the consumer; closed it here");
        return;
    }
    if tokio::time::timeout(limit, closed_rx).await.is_err() {
        tracing::warn!(
            what,
            ?limit,
            "the Kafka consumer did not close in time (group coordinator not answering?); \
             stopping without waiting for it"
        );
    }
}
