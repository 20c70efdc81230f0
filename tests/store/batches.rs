//! Fire batches: log ids reserved without rows and never taken twice, a batch claimed only
//! once its lease ended and by one node, acknowledgements moving its lease and deleting it,
//! and a batch that cannot be read set aside instead of blocking the claims.

use kadence_scheduler::domain::model::PendingFire;
use kadence_scheduler::domain::schedule::MisfireStrategy;
use kadence_scheduler::store::{BatchProgress, NewFire, NewFireBatch, Store};
use kadence_schemas::{TriggerId, TriggerType};

use super::{T0, lease_for, running_job, scan_request, store_on};
use kadence_tests::fixtures::{Backend, TestDatabase};

const LEASE_MS: i64 = 2_000;

/// The fires a scan of `node-a` at T0 planned for one job due every second from T0 + 1 s,
/// with their reserved log ids; the batch the scan wrote is settled (deleted), so that each
/// test writes its own.
async fn planned_fires(store: &dyn Store) -> Vec<PendingFire> {
    running_job(store, MisfireStrategy::DoNothing, T0 + 1_000).await;
    let shards = lease_for(store, T0, "node-a").await;
    let outcome = store
        .pre_read(&scan_request(T0, "node-a", shards))
        .await
        .unwrap();
    let scanned: Vec<BatchProgress> = outcome
        .batches
        .iter()
        .map(|batch| BatchProgress {
            id: batch.id,
            pending_from_ms: None,
        })
        .collect();
    store
        .settle_fire_batches("node-a", &scanned, LEASE_MS)
        .await
        .unwrap();
    outcome.fires
}

fn batch<'a>(node_id: &'a str, fires: &'a [PendingFire]) -> NewFireBatch<'a> {
    NewFireBatch {
        shard: 1,
        node_id,
        fires,
        now_ms: T0,
        lease_ms: LEASE_MS,
    }
}

async fn reserved_log_ids_are_never_taken_twice(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let first = store.reserve_log_ids(3).await.unwrap();
    let second = store.reserve_log_ids(2).await.unwrap();
    assert_eq!(first.len(), 3);
    assert!(first.windows(2).all(|pair| pair[0] < pair[1]), "{first:?}");
    assert!(second[0] > first[2], "{first:?} then {second:?}");
    assert!(store.reserve_log_ids(0).await.unwrap().is_empty());
    // A run row written the usual way takes an id past every reserved one.
    let job = running_job(store.as_ref(), MisfireStrategy::DoNothing, T0 + 1_000).await;
    let job = store.get_job(job).await.unwrap().unwrap();
    let written = store
        .insert_fire(
            &job,
            &NewFire {
                trigger_id: TriggerId::fresh(job.id),
                trigger_type: TriggerType::Manual,
                params: String::new(),
                scheduled_at_ms: T0,
                node_id: "node-a".into(),
                lease_until_ms: T0 + LEASE_MS,
                partitions: None,
            },
        )
        .await
        .unwrap();
    assert!(written[0].log_id > second[1]);
    assert!(store.reserve_log_ids(1).await.unwrap()[0] > written[0].log_id);
}

async fn a_batch_is_claimed_after_its_lease_by_one_node_and_settled_by_its_owner(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let fires = planned_fires(store.as_ref()).await;
    assert_eq!(fires.len(), 5, "T0+1 s … T0+5 s");
    let id = store
        .write_fire_batch(batch("node-a", &fires))
        .await
        .unwrap();

    // Leased until its earliest fire (T0+1 s) + 2 s.
    let claim = |node: &'static str, now_ms: i64| {
        let store = std::sync::Arc::clone(&store);
        async move {
            store
                .claim_expired_batches(node, now_ms, LEASE_MS, 10)
                .await
                .unwrap()
        }
    };
    assert!(claim("node-b", T0 + 3_000).await.is_empty());
    // Node a saw the first two acknowledged: the batch's lease follows its third fire.
    let progress = BatchProgress {
        id,
        pending_from_ms: Some(T0 + 3_000),
    };
    store
        .settle_fire_batches("node-a", &[progress], LEASE_MS)
        .await
        .unwrap();
    assert!(claim("node-b", T0 + 4_500).await.is_empty());

    // Node a dies. Once T0+3 s + 2 s passed, one of two nodes claiming at once gets the batch,
    // with every fire it was written with and the point from which they may be unsent.
    let (b, c) = tokio::join!(claim("node-b", T0 + 5_001), claim("node-c", T0 + 5_001));
    let claimed: Vec<_> = b.into_iter().chain(c).collect();
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!(
        (claimed[0].id, claimed[0].pending_from_ms),
        (id, T0 + 3_000)
    );
    assert_eq!(claimed[0].fires, fires);
    let pending: Vec<i64> = claimed[0]
        .pending_fires()
        .map(|fire| fire.scheduled_at_ms - T0)
        .collect();
    assert_eq!(pending, [3_000, 4_000, 5_000]);

    // Node a's late settling does not touch the batch it lost; the new owner's deletes it.
    let done = BatchProgress {
        id,
        pending_from_ms: None,
    };
    store
        .settle_fire_batches("node-a", &[done], LEASE_MS)
        .await
        .unwrap();
    assert_eq!(claim("node-d", T0 + 60_000).await.len(), 1, "still there");
    store
        .settle_fire_batches("node-d", &[done], LEASE_MS)
        .await
        .unwrap();
    assert!(claim("node-e", T0 + 120_000).await.is_empty(), "deleted");
}

async fn an_unreadable_batch_is_set_aside(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let fires = planned_fires(store.as_ref()).await;
    let readable = store
        .write_fire_batch(batch("node-a", &fires))
        .await
        .unwrap();
    let unreadable = store
        .write_fire_batch(batch("node-a", &fires))
        .await
        .unwrap();
    // Three bytes that decode as no batch, as each backend writes a binary literal.
    let garbage = match db.backend() {
        Backend::Postgres => r"'\xffffff'::bytea",
        Backend::Sqlite | Backend::MySql => "X'FFFFFF'",
    };
    db.execute(&format!(
        "UPDATE fire_batches SET fires = {garbage} WHERE id = {unreadable}"
    ))
    .await;
    let claimed = store
        .claim_expired_batches("node-b", T0 + 60_000, LEASE_MS, 10)
        .await
        .unwrap();
    let ids: Vec<i64> = claimed.iter().map(|batch| batch.id).collect();
    assert_eq!(ids, [readable]);
    let again = store
        .claim_expired_batches("node-c", T0 + 1_000_000_000, LEASE_MS, 10)
        .await
        .unwrap();
    assert!(
        again.iter().all(|batch| batch.id != unreadable),
        "never claimed again"
    );
}

on_every_backend!(
    reserved_log_ids_are_never_taken_twice,
    a_batch_is_claimed_after_its_lease_by_one_node_and_settled_by_its_owner,
    an_unreadable_batch_is_set_aside,
);
