//! Signing keys on both stores: the first start makes one key (one, however many nodes start
//! at once), a rotation's key becomes the newest, the newest active key is the one to sign
//! with, and the only active key cannot be retired.

use kadence_scheduler::engine::signer::new_signing_key;
use kadence_scheduler::store::{NewSigningKey, RetireOutcome};
use secrecy::ExposeSecret;

use super::{T0, store_on};
use kadence_tests::fixtures::{Backend, TestDatabase};

fn fresh_key() -> NewSigningKey {
    new_signing_key().expect("a new key").1
}

async fn the_first_key_is_made_once_even_by_concurrent_nodes(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let (node_a, node_b) = (store_on(&db).await, store_on(&db).await);
    assert!(node_a.newest_signing_key().await.unwrap().is_none());
    assert!(node_a.list_signing_keys().await.unwrap().is_empty());

    let candidates: Vec<NewSigningKey> = (0..4).map(|_| fresh_key()).collect();
    let (a1, b1, a2, b2) = tokio::join!(
        node_a.ensure_signing_key(&candidates[0], T0),
        node_b.ensure_signing_key(&candidates[1], T0),
        node_a.ensure_signing_key(&candidates[2], T0),
        node_b.ensure_signing_key(&candidates[3], T0),
    );
    let ensured = [a1.unwrap(), b1.unwrap(), a2.unwrap(), b2.unwrap()];
    let winner = &ensured[0].info.key_id;
    assert!(
        ensured.iter().all(|key| &key.info.key_id == winner),
        "every node signs with the same key"
    );
    assert!(candidates.iter().any(|key| &key.key_id == winner));
    let listed = node_a.list_signing_keys().await.unwrap();
    assert_eq!(listed.len(), 1, "one key, not one per node: {listed:?}");
    let stored = node_b.newest_signing_key().await.unwrap().unwrap();
    let candidate = candidates.iter().find(|key| &key.key_id == winner).unwrap();
    assert_eq!(stored.info.public_key, candidate.public_key);
    assert_eq!(
        stored.private_key.expose_secret(),
        candidate.private_key.expose_secret()
    );
    assert_eq!(
        (stored.info.created_at_ms, stored.info.retired_at_ms),
        (T0, None)
    );

    // Later starts find it and add nothing.
    let again = node_b
        .ensure_signing_key(&fresh_key(), T0 + 5)
        .await
        .unwrap();
    assert_eq!(&again.info.key_id, winner);
    assert_eq!(node_a.list_signing_keys().await.unwrap().len(), 1);
}

async fn rotation_and_retirement_keep_one_key_to_sign_with(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let first = store.ensure_signing_key(&fresh_key(), T0).await.unwrap();
    let first_id = first.info.key_id.clone();
    assert_eq!(
        store.retire_signing_key(&first_id, T0 + 1).await.unwrap(),
        RetireOutcome::OnlyActiveKey
    );
    assert_eq!(
        store
            .retire_signing_key("no-such-key", T0 + 1)
            .await
            .unwrap(),
        RetireOutcome::NotFound
    );

    // Two rotations in the same millisecond: the later one is the newest all the same.
    let (second, third) = (fresh_key(), fresh_key());
    store.add_signing_key(&second, T0 + 10).await.unwrap();
    let added = store.add_signing_key(&third, T0 + 10).await.unwrap();
    assert_eq!(
        (added.key_id.as_str(), added.retired_at_ms),
        (third.key_id.as_str(), None)
    );
    let newest = store.newest_signing_key().await.unwrap().unwrap();
    assert_eq!(newest.info.key_id, third.key_id);
    let ids: Vec<String> = store
        .list_signing_keys()
        .await
        .unwrap()
        .into_iter()
        .map(|key| key.key_id)
        .collect();
    assert_eq!(
        ids,
        [
            third.key_id.clone(),
            second.key_id.clone(),
            first_id.clone()
        ],
        "newest first"
    );

    // Retiring the newest makes the next newest active one sign again.
    let RetireOutcome::Retired(retired) = store
        .retire_signing_key(&third.key_id, T0 + 20)
        .await
        .unwrap()
    else {
        panic!("the newest key is retired");
    };
    assert_eq!(retired.retired_at_ms, Some(T0 + 20));
    let newest = store.newest_signing_key().await.unwrap().unwrap();
    assert_eq!(newest.info.key_id, second.key_id);
    assert!(matches!(
        store.retire_signing_key(&third.key_id, T0 + 30).await.unwrap(),
        RetireOutcome::AlreadyRetired(key) if key.retired_at_ms == Some(T0 + 20)
    ));
    assert!(matches!(
        store.retire_signing_key(&first_id, T0 + 30).await.unwrap(),
        RetireOutcome::Retired(_)
    ));
    assert_eq!(
        store
            .retire_signing_key(&second.key_id, T0 + 40)
            .await
            .unwrap(),
        RetireOutcome::OnlyActiveKey,
        "the last active key stays"
    );
    let active: Vec<String> = store
        .list_signing_keys()
        .await
        .unwrap()
        .into_iter()
        .filter(|key| key.retired_at_ms.is_none())
        .map(|key| key.key_id)
        .collect();
    assert_eq!(active, [second.key_id]);
    // A later start keeps signing with the active key rather than making another.
    let ensured = store
        .ensure_signing_key(&fresh_key(), T0 + 50)
        .await
        .unwrap();
    assert_eq!(ensured.info.key_id, active[0]);
}

/// Two admins retiring the last two active keys at once leave one of them active.
async fn concurrent_retirements_leave_an_active_key(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let (node_a, node_b) = (store_on(&db).await, store_on(&db).await);
    let first = node_a.ensure_signing_key(&fresh_key(), T0).await.unwrap();
    let second = fresh_key();
    node_a.add_signing_key(&second, T0 + 1).await.unwrap();
    let (a, b) = tokio::join!(
        node_a.retire_signing_key(&first.info.key_id, T0 + 2),
        node_b.retire_signing_key(&second.key_id, T0 + 2),
    );
    let outcomes = [a.unwrap(), b.unwrap()];
    let retired = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, RetireOutcome::Retired(_)))
        .count();
    assert_eq!(retired, 1, "{outcomes:?}");
    assert!(
        outcomes.contains(&RetireOutcome::OnlyActiveKey),
        "{outcomes:?}"
    );
    assert!(node_b.newest_signing_key().await.unwrap().is_some());
}

on_every_backend!(
    the_first_key_is_made_once_even_by_concurrent_nodes,
    rotation_and_retirement_keep_one_key_to_sign_with,
    concurrent_retirements_leave_an_active_key,
);
