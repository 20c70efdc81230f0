//! The audit trail's entries that stand for a flood of refusals: recording one returns its
//! id, and its details (the count) are replaced later, on every backend.

use kadence_scheduler::domain::model::NewAuditEntry;
use kadence_scheduler::store::{AuditFilter, PageRequest};
use serde_json::json;

use super::{T0, store_on};
use kadence_tests::fixtures::{Backend, TestDatabase};

/// An entry's id comes back from recording it, and its details can be replaced by that id
/// alone; an id that does not exist is said to.
async fn an_entry_is_recorded_with_its_id_and_its_count_updated(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let refusal = |at_ms: i64| NewAuditEntry {
        at_ms,
        user_id: None,
        user_name: String::new(),
        action: "POST /api/jobs".into(),
        target: "/api/jobs".into(),
        app: None,
        status: 401,
        details: Some(json!({"address": "198.51.100.7", "count": 1})),
    };
    let first = store.record_audit(&refusal(T0)).await.unwrap();
    let second = store.record_audit(&refusal(T0 + 1)).await.unwrap();
    assert!(second > first, "ids grow: {first}, {second}");
    let counted = json!({"address": "198.51.100.7", "count": 40, "last_at_ms": T0 + 900});
    assert!(store.set_audit_details(first, &counted).await.unwrap());
    assert!(
        !store
            .set_audit_details(second + 1_000, &counted)
            .await
            .unwrap()
    );
    let entries = store
        .list_audit(&AuditFilter::default(), &PageRequest::first(10))
        .await
        .unwrap();
    let details: Vec<(i64, serde_json::Value)> = entries
        .into_iter()
        .map(|entry| (entry.id, entry.entry.details.unwrap()))
        .collect();
    assert_eq!(
        details,
        vec![
            (second, json!({"address": "198.51.100.7", "count": 1})),
            (first, counted)
        ]
    );
}

on_every_backend!(an_entry_is_recorded_with_its_id_and_its_count_updated);
