//! Schedule shards: the first node owns them all, later nodes take an even share from it, a
//! dead node's shards are taken over after its lease with a new fence, and a scan under an
//! old fence writes nothing.

use std::collections::BTreeSet;

use kadence_scheduler::domain::model::JobStatus;
use kadence_scheduler::domain::schedule::MisfireStrategy;
use kadence_scheduler::store::{Acquisition, ShardLease, ShardLeaseRequest, Store};
use kadence_schemas::JobId;

use super::{SHARDS, T0, demo_app, every_second_job, scan_request, store_on};
use kadence_tests::fixtures::{Backend, TestDatabase};

const LEASE_MS: i64 = 10_000;

async fn step(store: &dyn Store, node: &str, now_ms: i64) -> ShardLease {
    store
        .lease_shards(&ShardLeaseRequest {
            node_id: node.into(),
            now_ms,
            lease_ms: LEASE_MS,
        })
        .await
        .expect("lease step")
}

fn shard_numbers(lease: &ShardLease) -> Vec<u32> {
    lease.owned.iter().map(|owned| owned.shard).collect()
}

/// `count` jobs firing every second from T0 + 1 s.
async fn running_jobs(store: &dyn Store, count: usize) -> Vec<JobId> {
    let mut jobs = Vec::new();
    for _ in 0..count {
        let job = store
            .create_job(&every_second_job(MisfireStrategy::DoNothing), T0)
            .await
            .unwrap();
        store
            .set_job_status(job.id, JobStatus::Running, Some(T0 + 1_000), T0, T0)
            .await
            .unwrap();
        jobs.push(job.id);
    }
    jobs
}

/// The jobs a scan by `node` of what it holds at `now_ms` planned fires for.
async fn scanned_jobs(
    store: &dyn Store,
    node: &str,
    lease: &ShardLease,
    now_ms: i64,
) -> BTreeSet<i64> {
    let outcome = store
        .pre_read(&scan_request(now_ms, node, lease.owned.clone()))
        .await
        .expect("pre-read");
    assert!(outcome.fenced_out.is_empty(), "{:?}", outcome.fenced_out);
    outcome.fires.iter().map(|fire| fire.job_id.get()).collect()
}

async fn nodes_share_the_shards_evenly_and_scan_only_their_own(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    store.create_app(&demo_app()).await.unwrap();
    // Jobs made before the shards exist get theirs when the first node creates them; later
    // ones when they are made.
    let mut jobs = running_jobs(store.as_ref(), 4).await;
    assert_eq!(store.ensure_shards(SHARDS).await.unwrap(), SHARDS);
    assert_eq!(
        store.ensure_shards(SHARDS * 2).await.unwrap(),
        SHARDS,
        "fixed by the first start"
    );
    jobs.extend(running_jobs(store.as_ref(), 4).await);

    let a = step(store.as_ref(), "node-a", T0).await;
    assert_eq!(shard_numbers(&a), [0, 1, 2, 3], "one node owns everything");
    assert!(
        a.acquired
            .iter()
            .all(|taken| taken.how == Acquisition::Free)
    );
    // A second node takes its share straight from the first, highest shards first, each
    // under a new fence: no moment where nobody owns them.
    let b = step(store.as_ref(), "node-b", T0 + 1).await;
    assert_eq!(shard_numbers(&b), [2, 3]);
    assert_eq!((b.live_nodes, b.total_shards), (2, SHARDS));
    for taken in &b.acquired {
        assert_eq!(
            (taken.how, taken.from.as_deref()),
            (Acquisition::Rebalance, Some("node-a"))
        );
        let before = a
            .owned
            .iter()
            .find(|o| o.shard == taken.owned.shard)
            .unwrap();
        assert!(taken.owned.fence > before.fence);
    }
    let a = step(store.as_ref(), "node-a", T0 + 2).await;
    assert_eq!(shard_numbers(&a), [0, 1]);
    assert!(
        a.acquired.is_empty(),
        "a node at its share takes nothing back"
    );
    let b = step(store.as_ref(), "node-b", T0 + 3).await;
    assert_eq!(shard_numbers(&b), [2, 3]);

    let by_a = scanned_jobs(store.as_ref(), "node-a", &a, T0 + 500).await;
    let by_b = scanned_jobs(store.as_ref(), "node-b", &b, T0 + 500).await;
    let expected_a: BTreeSet<i64> = jobs
        .iter()
        .map(|job| job.get())
        .filter(|id| id % i64::from(SHARDS) < 2)
        .collect();
    assert_eq!(by_a, expected_a);
    assert!(by_a.is_disjoint(&by_b));
    assert_eq!(by_a.len() + by_b.len(), jobs.len());

    let owners = store.shard_owners().await.unwrap();
    let named: Vec<Option<&str>> = owners.iter().map(|o| o.owner_node.as_deref()).collect();
    assert_eq!(
        named,
        [
            Some("node-a"),
            Some("node-a"),
            Some("node-b"),
            Some("node-b")
        ]
    );
    assert!(owners.iter().all(|owner| owner.scanned_at_ms == T0 + 500));

    // A graceful stop frees its shards at once: the other node takes them at its next step.
    store.release_all_shards("node-a").await.unwrap();
    let b = step(store.as_ref(), "node-b", T0 + 4).await;
    assert_eq!(shard_numbers(&b), [0, 1, 2, 3]);
    assert_eq!(b.live_nodes, 1);
}

async fn a_paused_owner_is_fenced_out_once_its_shards_were_taken_over(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    store.create_app(&demo_app()).await.unwrap();
    store.ensure_shards(SHARDS).await.unwrap();
    let jobs = running_jobs(store.as_ref(), 8).await;
    let held_by_a = step(store.as_ref(), "node-a", T0).await;
    assert_eq!(
        scanned_jobs(store.as_ref(), "node-a", &held_by_a, T0)
            .await
            .len(),
        jobs.len()
    );

    // Node a stops renewing (paused). While its lease runs node b takes its share from it;
    // after the lease, the rest: a takeover. Every shard has a new fence.
    let b = step(store.as_ref(), "node-b", T0 + 5_000).await;
    assert_eq!(shard_numbers(&b), [2, 3]);
    let b = step(store.as_ref(), "node-b", T0 + LEASE_MS + 1).await;
    assert_eq!(shard_numbers(&b), [0, 1, 2, 3]);
    for taken in &b.acquired {
        assert_eq!(
            (taken.how, taken.from.as_deref()),
            (Acquisition::Takeover, Some("node-a"))
        );
        assert_eq!(taken.scanned_at_ms, T0, "a's last scan");
    }
    for owned in &b.owned {
        let before = held_by_a
            .owned
            .iter()
            .find(|o| o.shard == owned.shard)
            .unwrap();
        assert!(owned.fence > before.fence);
    }

    // Node a wakes and scans with the fences it holds: refused, nothing written, no job
    // advanced, so b's scan plans the fires after a's window as if a had never woken.
    let late = store
        .pre_read(&scan_request(T0 + 6_000, "node-a", held_by_a.owned.clone()))
        .await
        .unwrap();
    assert_eq!(late.fenced_out, [0, 1, 2, 3]);
    assert!(late.fires.is_empty() && late.jobs_read == 0, "{late:?}");
    let by_b = store
        .pre_read(&scan_request(T0 + 6_000, "node-b", b.owned.clone()))
        .await
        .unwrap();
    let first_fires: BTreeSet<i64> = by_b
        .fires
        .iter()
        .map(|fire| fire.scheduled_at_ms - T0)
        .collect();
    assert_eq!(
        first_fires,
        BTreeSet::from([6_000, 7_000, 8_000, 9_000, 10_000, 11_000])
    );
    assert_eq!(by_b.fires.len(), jobs.len() * 6);

    // Its lease step then finds the shards gone; alive again, it takes its share back from b.
    let a = step(store.as_ref(), "node-a", T0 + LEASE_MS + 2).await;
    assert_eq!(shard_numbers(&a), [2, 3], "{a:?}");
    assert_eq!(a.live_nodes, 2);
}

on_every_backend!(
    nodes_share_the_shards_evenly_and_scan_only_their_own,
    a_paused_owner_is_fenced_out_once_its_shards_were_taken_over,
);
