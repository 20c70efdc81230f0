//! Closing a consumer never holds the runtime: librdkafka's close runs the rebalance callback
//! and waits for the group coordinator with no deadline of its own, so Kadence closes its
//! consumers on a thread of their own ([`close_consumer`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use kadence_kafka::close_consumer;
use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance, StreamConsumer};

use crate::helpers::create_topic;
use kadence_tests::fixtures::{Watchdog, brokers, unique, wait_for};

/// How long the revocation callback below takes: far longer than the close is allowed.
const SLOW_REVOCATION: Duration = Duration::from_secs(3);

/// A consumer context whose revocation blocks its thread, as the executor's does while the
/// runs of revoked partitions finish.
struct SlowRevocation {
    revoked: Arc<AtomicBool>,
}

impl ClientContext for SlowRevocation {}

impl ConsumerContext for SlowRevocation {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(_) = rebalance {
            std::thread::sleep(SLOW_REVOCATION);
            self.revoked.store(true, Ordering::SeqCst);
        }
    }
}

/// On a current-thread runtime (the worst case: one thread for everything), a consumer whose
/// close blocks in its revocation callback is closed beside the runtime: other tasks keep
/// running, the caller goes on after the limit, and the close still completes.
#[tokio::test(flavor = "current_thread")]
async fn a_slow_close_leaves_the_runtime_running() {
    let _watchdog = Watchdog::arm("a_slow_close_leaves_the_runtime_running");
    let topic = unique("kclose.");
    create_topic(&topic, 1).await;
    let revoked = Arc::new(AtomicBool::new(false));
    let consumer: StreamConsumer<SlowRevocation> = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .set("group.id", format!("{topic}.group"))
        .create_with_context(SlowRevocation {
            revoked: Arc::clone(&revoked),
        })
        .expect("consumer");
    consumer.subscribe(&[&topic]).expect("subscribe");
    // The group assigns the partition during polls.
    wait_for(
        Duration::from_secs(30),
        "the partition assigned",
        || async {
            let _ = tokio::time::timeout(Duration::from_millis(100), consumer.recv()).await;
            let assigned = consumer.assignment().expect("assignment").count();
            (assigned > 0).then_some(())
        },
    )
    .await;

    let ticks = Arc::new(AtomicUsize::new(0));
    let ticker = tokio::spawn({
        let ticks = Arc::clone(&ticks);
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                ticks.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    close_consumer(consumer, "slow", Duration::from_millis(500)).await;
    assert!(
        !revoked.load(Ordering::SeqCst),
        "close_consumer waited for the whole close instead of its limit"
    );
    assert!(
        ticks.load(Ordering::SeqCst) >= 10,
        "other tasks did not run while the consumer closed: {} ticks",
        ticks.load(Ordering::SeqCst)
    );
    ticker.abort();
    // The close goes on without us and completes.
    wait_for(
        SLOW_REVOCATION + Duration::from_secs(10),
        "the revocation to complete",
        || async { revoked.load(Ordering::SeqCst).then_some(()) },
    )
    .await;
}
