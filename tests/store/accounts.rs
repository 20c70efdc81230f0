//! Users, grants and tokens on both stores: names are unique, grants name existing apps and
//! replace each other, only a token's hash is kept and it stops working when revoked or
//! expired, and the first start makes exactly one admin.

use secrecy::SecretString;

use kadence_scheduler::domain::model::{Access, AppGrant, NewAuditEntry, Role, TokenKind};
use kadence_scheduler::operations::auth::{
    FIRST_ADMIN, FirstAdmin, ensure_first_admin, hash_password, mint_token, token_hash,
    verify_password,
};
use kadence_scheduler::store::{AuditFilter, NewToken, NewUser, PageRequest, StoreError};
use kadence_schemas::AppName;

use super::{T0, demo_app, store_on};
use kadence_tests::fixtures::{Backend, TestDatabase};

fn member(name: &str) -> NewUser {
    NewUser {
        name: name.into(),
        password_hash: hash_password("s3cret").unwrap(),
        role: Role::Member,
    }
}

async fn users_have_unique_names_and_grants_on_existing_apps(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    store.create_app(&demo_app()).await.unwrap();
    let demo = AppName::parse("demo").unwrap();

    let ann = store.create_user(&member("ann"), T0).await.unwrap();
    assert!(matches!(
        store.create_user(&member("ann"), T0).await,
        Err(StoreError::UserExists(name)) if name == "ann"
    ));
    assert!(matches!(
        store
            .grant(ann.id, &AppName::parse("nowhere").unwrap(), Access::View)
            .await,
        Err(StoreError::UnknownApp(_))
    ));
    assert!(store.grant(ann.id, &demo, Access::View).await.unwrap());
    assert!(
        store.grant(ann.id, &demo, Access::Operate).await.unwrap(),
        "replaces"
    );
    assert!(
        !store
            .grant(ann.id + 100, &demo, Access::View)
            .await
            .unwrap(),
        "no such user"
    );
    let stored = store.get_user(ann.id).await.unwrap().unwrap();
    assert_eq!(
        stored.grants,
        [AppGrant {
            app: demo.clone(),
            access: Access::Operate
        }]
    );

    let credentials = store.user_credentials("ann").await.unwrap().unwrap();
    assert_eq!(credentials.user, stored);
    assert!(verify_password("s3cret", &credentials.password_hash));
    assert!(
        store
            .set_password_hash(ann.id, &hash_password("n3w").unwrap(), None, T0 + 1)
            .await
            .unwrap()
    );
    let changed = store.user_credentials("ann").await.unwrap().unwrap();
    assert!(verify_password("n3w", &changed.password_hash));
    assert!(!verify_password("s3cret", &changed.password_hash));

    store.create_user(&member("bob"), T0).await.unwrap();
    let names: Vec<String> = store
        .list_users()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.name)
        .collect();
    assert_eq!(names, ["ann", "bob"]);
    assert!(store.revoke_grant(ann.id, &demo).await.unwrap());
    assert!(!store.revoke_grant(ann.id, &demo).await.unwrap());
    assert!(
        store
            .get_user(ann.id)
            .await
            .unwrap()
            .unwrap()
            .grants
            .is_empty()
    );
    assert!(store.user_credentials("carol").await.unwrap().is_none());
}

async fn tokens_work_until_revoked_or_expired(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let ann = store.create_user(&member("ann"), T0).await.unwrap();
    let token = mint_token();
    let recorded = store
        .insert_token(
            &NewToken {
                user_id: ann.id,
                kind: TokenKind::Api,
                name: "deploys".into(),
                token_hash: token_hash(&token),
                expires_at_ms: T0 + 60_000,
            },
            T0,
        )
        .await
        .unwrap();
    assert_eq!(
        (recorded.kind, recorded.name.as_str()),
        (TokenKind::Api, "deploys")
    );

    let (user, found) = store
        .authenticate_token(&token_hash(&token), T0 + 1_000)
        .await
        .unwrap()
        .expect("a live token names its user");
    assert_eq!((user.id, found.id), (ann.id, recorded.id));
    assert!(
        store
            .authenticate_token(&token, T0)
            .await
            .unwrap()
            .is_none(),
        "only hashes match"
    );
    assert!(
        store
            .authenticate_token(&token_hash(&token), T0 + 60_000)
            .await
            .unwrap()
            .is_none(),
        "expired"
    );

    let other = store.create_user(&member("bob"), T0).await.unwrap();
    assert!(
        !store
            .revoke_token(other.id, recorded.id, T0 + 2_000)
            .await
            .unwrap(),
        "not bob's"
    );
    assert!(
        store
            .revoke_token(ann.id, recorded.id, T0 + 2_000)
            .await
            .unwrap()
    );
    assert!(
        !store
            .revoke_token(ann.id, recorded.id, T0 + 3_000)
            .await
            .unwrap(),
        "once"
    );
    assert!(
        store
            .authenticate_token(&token_hash(&token), T0 + 2_500)
            .await
            .unwrap()
            .is_none()
    );
    let listed = store.list_tokens(ann.id).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].revoked_at_ms, Some(T0 + 2_000));
}

async fn the_first_start_makes_one_admin(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let blank = SecretString::from("  ");
    let refused = ensure_first_admin(store.as_ref(), Some(&blank), T0)
        .await
        .expect_err("a blank configured password is refused");
    assert!(
        refused.to_string().contains("auth.admin_password is empty"),
        "{refused}"
    );
    assert_eq!(
        store.count_users().await.unwrap(),
        0,
        "and nobody is created"
    );
    let configured = SecretString::from("from-config");
    assert_eq!(
        ensure_first_admin(store.as_ref(), Some(&configured), T0)
            .await
            .unwrap(),
        FirstAdmin::CreatedWithConfiguredPassword
    );
    assert_eq!(
        ensure_first_admin(store.as_ref(), None, T0).await.unwrap(),
        FirstAdmin::UsersExist
    );
    let admin = store.user_credentials(FIRST_ADMIN).await.unwrap().unwrap();
    assert_eq!(admin.user.role, Role::Admin);
    assert!(verify_password("from-config", &admin.password_hash));
    assert_eq!(store.list_users().await.unwrap().len(), 1);

    let fresh = TestDatabase::create(backend).await;
    let fresh_store = store_on(&fresh).await;
    let FirstAdmin::CreatedWithRandomPassword(password) =
        ensure_first_admin(fresh_store.as_ref(), None, T0)
            .await
            .unwrap()
    else {
        panic!("no password configured: a random one is made");
    };
    let admin = fresh_store
        .user_credentials(FIRST_ADMIN)
        .await
        .unwrap()
        .unwrap();
    assert!(verify_password(&password, &admin.password_hash));
}

/// The audit trail lists newest first, a page at a time, filtered by apps (none without an
/// app for a member's scope), user, target path and below, and time.
async fn the_audit_trail_filters_and_pages(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let demo = AppName::parse("demo").unwrap();
    let entry = |at_ms: i64, user: &str, target: &str, app: Option<&AppName>| NewAuditEntry {
        at_ms,
        user_id: Some(1),
        user_name: user.into(),
        action: "PATCH /api/jobs/{id}".into(),
        target: target.into(),
        app: app.cloned(),
        status: 200,
        details: Some(serde_json::json!({"before": {"params": "a"}, "after": {"params": "b"}})),
    };
    store
        .record_audit(&entry(T0, "ann", "/api/jobs/1", Some(&demo)))
        .await
        .unwrap();
    store
        .record_audit(&entry(T0 + 1, "bob", "/api/jobs/12", Some(&demo)))
        .await
        .unwrap();
    store
        .record_audit(&entry(T0 + 2, "ann", "/api/jobs/1/stop", Some(&demo)))
        .await
        .unwrap();
    store
        .record_audit(&entry(T0 + 3, "admin", "/api/users", None))
        .await
        .unwrap();
    let list = |filter: AuditFilter, page: PageRequest<i64>| {
        let store = &store;
        async move {
            let entries = store.list_audit(&filter, &page).await.unwrap();
            entries
                .into_iter()
                .map(|entry| entry.entry.at_ms - T0)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        list(AuditFilter::default(), PageRequest::first(10)).await,
        vec![3, 2, 1, 0]
    );
    let scoped = AuditFilter {
        apps: Some(vec![demo.clone()]),
        ..AuditFilter::default()
    };
    assert_eq!(list(scoped, PageRequest::first(10)).await, vec![2, 1, 0]);
    let nothing = AuditFilter {
        apps: Some(vec![]),
        ..AuditFilter::default()
    };
    assert_eq!(
        list(nothing, PageRequest::first(10)).await,
        Vec::<i64>::new()
    );
    let job_one = AuditFilter {
        target: Some("/api/jobs/1".into()),
        ..AuditFilter::default()
    };
    assert_eq!(
        list(job_one, PageRequest::first(10)).await,
        vec![2, 0],
        "not /api/jobs/12"
    );
    let ann_late = AuditFilter {
        user_name: Some("ann".into()),
        from_ms: Some(T0 + 1),
        ..AuditFilter::default()
    };
    assert_eq!(list(ann_late, PageRequest::first(10)).await, vec![2]);
    let first = store
        .list_audit(&AuditFilter::default(), &PageRequest::first(2))
        .await
        .unwrap();
    let next = PageRequest {
        after: Some(first[1].id),
        limit: 2,
    };
    assert_eq!(list(AuditFilter::default(), next).await, vec![1, 0]);
    assert_eq!(
        first[1].entry,
        entry(T0 + 2, "ann", "/api/jobs/1/stop", Some(&demo))
    );
}

on_every_backend!(
    users_have_unique_names_and_grants_on_existing_apps,
    tokens_work_until_revoked_or_expired,
    the_first_start_makes_one_admin,
    the_audit_trail_filters_and_pages,
);
