//! A user's standing on every store (`Accounts::change_user`): a new role counts at the next
//! token check; disabling revokes every token and voids reset tokens, and a re-enable brings
//! none of them back; deleting takes grants and tokens with the user and leaves the audit
//! trail whole; the last enabled admin keeps their standing, also when two admins demote each
//! other at once, and no admin takes their own.

use std::sync::Arc;

use kadence_scheduler::domain::model::{Access, NewAuditEntry, Role, TokenKind, UserStatus};
use kadence_scheduler::operations::auth::{hash_password, mint_token, token_hash};
use kadence_scheduler::store::{
    AuditFilter, NewResetToken, NewToken, NewUser, PageRequest, Store, UserChange,
    UserChangeOutcome, UserStanding,
};
use kadence_schemas::AppName;

use super::{T0, demo_app, store_on};
use kadence_tests::fixtures::{Backend, TestDatabase};

/// An admin id no test user has.
const OTHER_ADMIN: i64 = 1_000_000;

const ENABLED_MEMBER: UserStanding = UserStanding {
    role: Role::Member,
    disabled_at_ms: None,
};

/// Creates `name` with `role`; their id.
async fn user(store: &dyn Store, name: &str, role: Role) -> i64 {
    let user = NewUser {
        name: name.into(),
        password_hash: hash_password("s3cret").unwrap(),
        role,
    };
    store.create_user(&user, T0).await.unwrap().id
}

/// A new live token of `kind` for user `user_id`; the token itself.
async fn token(store: &dyn Store, user_id: i64, kind: TokenKind) -> String {
    let token = mint_token();
    let record = NewToken {
        user_id,
        kind,
        name: "t".into(),
        token_hash: token_hash(&token),
        expires_at_ms: T0 + 3_600_000,
    };
    store.insert_token(&record, T0).await.unwrap();
    token
}

/// Whether `token` authenticates at `now_ms`.
async fn works(store: &dyn Store, token: &str, now_ms: i64) -> bool {
    (store.authenticate_token(&token_hash(token), now_ms).await)
        .unwrap()
        .is_some()
}

/// The change an admin who is neither the user nor anyone else here makes.
async fn change(store: &dyn Store, id: i64, change: UserChange, now_ms: i64) -> UserChangeOutcome {
    store
        .change_user(id, change, OTHER_ADMIN, now_ms)
        .await
        .unwrap()
}

async fn a_new_role_counts_at_the_next_token_check(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    user(store.as_ref(), "admin", Role::Admin).await;
    let ann = user(store.as_ref(), "ann", Role::Member).await;
    let session = token(store.as_ref(), ann, TokenKind::Session).await;

    let promoted = change(store.as_ref(), ann, UserChange::Role(Role::Admin), T0 + 1).await;
    assert_eq!(promoted, UserChangeOutcome::Changed(ENABLED_MEMBER));
    let (caller, _) = (store
        .authenticate_token(&token_hash(&session), T0 + 2)
        .await)
        .unwrap()
        .expect("a role change leaves the tokens alone");
    assert_eq!(caller.role, Role::Admin);

    let demoted = change(store.as_ref(), ann, UserChange::Role(Role::Member), T0 + 3).await;
    assert_eq!(
        demoted,
        UserChangeOutcome::Changed(UserStanding {
            role: Role::Admin,
            disabled_at_ms: None
        })
    );
    let (caller, _) = (store
        .authenticate_token(&token_hash(&session), T0 + 4)
        .await)
        .unwrap()
        .unwrap();
    assert_eq!(caller.role, Role::Member, "the very next check");
    assert_eq!(
        change(store.as_ref(), ann + 100, UserChange::Role(Role::Admin), T0).await,
        UserChangeOutcome::NoSuchUser
    );
}

async fn disabling_revokes_every_token_and_a_re_enable_brings_none_back(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    user(store.as_ref(), "admin", Role::Admin).await;
    let ann = user(store.as_ref(), "ann", Role::Member).await;
    let session = token(store.as_ref(), ann, TokenKind::Session).await;
    let api = token(store.as_ref(), ann, TokenKind::Api).await;
    let reset = mint_token();
    let issued = NewResetToken {
        token_hash: token_hash(&reset),
        expires_at_ms: T0 + 3_600_000,
        issued_by: "admin".into(),
    };
    assert!(store.issue_reset_token(ann, &issued, T0).await.unwrap());

    let disable = UserChange::Status(UserStatus::Disabled);
    let outcome = change(store.as_ref(), ann, disable, T0 + 10).await;
    assert_eq!(outcome, UserChangeOutcome::Changed(ENABLED_MEMBER));
    for token in [&session, &api] {
        assert!(
            !works(store.as_ref(), token, T0 + 11).await,
            "refused at once"
        );
    }
    let tokens = store.list_tokens(ann).await.unwrap();
    assert!(
        tokens
            .iter()
            .all(|token| token.revoked_at_ms == Some(T0 + 10)),
        "sessions and API tokens revoked: {tokens:?}"
    );
    let password = hash_password("an-attacker-s").unwrap();
    let redeemed = store.redeem_reset_token(&issued.token_hash, &password, T0 + 12);
    assert!(redeemed.await.unwrap().is_none(), "the reset token is void");
    // A token recorded in the same instant (a login racing the disable) is refused too.
    let late = token(store.as_ref(), ann, TokenKind::Session).await;
    assert!(!works(store.as_ref(), &late, T0 + 13).await);

    let stored = store.get_user(ann).await.unwrap().unwrap();
    assert_eq!(stored.disabled_at_ms, Some(T0 + 10));
    assert_eq!(stored.status(), UserStatus::Disabled);
    let again = change(store.as_ref(), ann, disable, T0 + 20).await;
    assert_eq!(
        again,
        UserChangeOutcome::Changed(UserStanding {
            role: Role::Member,
            disabled_at_ms: Some(T0 + 10)
        })
    );
    let stored = store.get_user(ann).await.unwrap().unwrap();
    assert_eq!(
        stored.disabled_at_ms,
        Some(T0 + 10),
        "the first instant stays"
    );

    // A reset token an admin issues while the user is disabled is meant: it survives the
    // re-enable.
    let handed_over = mint_token();
    let issued = NewResetToken {
        token_hash: token_hash(&handed_over),
        ..issued
    };
    assert!(
        store
            .issue_reset_token(ann, &issued, T0 + 25)
            .await
            .unwrap()
    );

    let enable = UserChange::Status(UserStatus::Enabled);
    change(store.as_ref(), ann, enable, T0 + 30).await;
    let stored = store.user_credentials("ann").await.unwrap().unwrap();
    assert_eq!(stored.user.disabled_at_ms, None);
    for token in [&session, &api, &late] {
        assert!(
            !works(store.as_ref(), token, T0 + 31).await,
            "stays revoked"
        );
    }
    let fresh = token(store.as_ref(), ann, TokenKind::Api).await;
    assert!(works(store.as_ref(), &fresh, T0 + 32).await);
    let enabled_again = change(store.as_ref(), ann, enable, T0 + 33).await;
    assert!(matches!(enabled_again, UserChangeOutcome::Changed(_)));
    assert!(
        works(store.as_ref(), &fresh, T0 + 34).await,
        "enabling an enabled user revokes nothing"
    );
    let redeemed = store.redeem_reset_token(&issued.token_hash, &password, T0 + 35);
    assert!(redeemed.await.unwrap().is_some(), "the reset token works");
}

async fn deleting_takes_grants_and_tokens_and_leaves_the_audit_trail(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    store.create_app(&demo_app()).await.unwrap();
    let demo = AppName::parse("demo").unwrap();
    user(store.as_ref(), "admin", Role::Admin).await;
    let ann = user(store.as_ref(), "ann", Role::Member).await;
    assert!(store.grant(ann, &demo, Access::Operate).await.unwrap());
    let api = token(store.as_ref(), ann, TokenKind::Api).await;
    let entry = NewAuditEntry {
        at_ms: T0,
        user_id: Some(ann),
        user_name: "ann".into(),
        action: "POST /api/jobs".into(),
        target: "/api/jobs".into(),
        app: Some(demo.clone()),
        status: 201,
        details: None,
    };
    store.record_audit(&entry).await.unwrap();

    let outcome = change(store.as_ref(), ann, UserChange::Delete, T0 + 1).await;
    assert_eq!(outcome, UserChangeOutcome::Changed(ENABLED_MEMBER));
    assert!(store.get_user(ann).await.unwrap().is_none());
    assert!(!works(store.as_ref(), &api, T0 + 2).await);
    assert!(
        store.list_tokens(ann).await.unwrap().is_empty(),
        "tokens go"
    );
    assert!(!store.revoke_grant(ann, &demo).await.unwrap(), "grants go");
    let filter = AuditFilter {
        user_name: Some("ann".into()),
        ..AuditFilter::default()
    };
    let trail = store
        .list_audit(&filter, &PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].entry, entry, "the trail keeps its entries");
    assert_eq!(
        change(store.as_ref(), ann, UserChange::Delete, T0 + 3).await,
        UserChangeOutcome::NoSuchUser
    );
    let again = user(store.as_ref(), "ann", Role::Member).await;
    assert_ne!(again, ann, "the name is free again, under a new id");
}

async fn the_last_enabled_admin_keeps_their_standing(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let store = store.as_ref();
    let root = user(store, "root", Role::Admin).await;
    let standby = user(store, "standby", Role::Admin).await;
    let disable = UserChange::Status(UserStatus::Disabled);
    assert!(matches!(
        change(store, standby, disable, T0).await,
        UserChangeOutcome::Changed(_)
    ));
    for refused in [UserChange::Role(Role::Member), disable, UserChange::Delete] {
        assert_eq!(
            change(store, root, refused, T0 + 1).await,
            UserChangeOutcome::LastEnabledAdmin,
            "{refused:?}: a disabled admin does not count"
        );
    }
    let own = store.change_user(root, UserChange::Delete, root, T0 + 1);
    assert_eq!(
        own.await.unwrap(),
        UserChangeOutcome::LastEnabledAdmin,
        "a sole admin acting on themselves is told the reason that says what to do"
    );
    let kept = store.get_user(root).await.unwrap().unwrap();
    assert_eq!(
        (kept.role, kept.status()),
        (Role::Admin, UserStatus::Enabled)
    );
    // What leaves the enabled admins as they are is allowed.
    for allowed in [
        UserChange::Role(Role::Admin),
        UserChange::Status(UserStatus::Enabled),
    ] {
        assert!(matches!(
            change(store, root, allowed, T0 + 2).await,
            UserChangeOutcome::Changed(_)
        ));
    }
    assert!(
        matches!(
            change(store, standby, UserChange::Role(Role::Member), T0 + 3).await,
            UserChangeOutcome::Changed(_)
        ),
        "a disabled admin may be demoted"
    );

    // Two enabled admins: either may go, but not both.
    let promote = UserChange::Role(Role::Admin);
    change(store, standby, promote, T0 + 4).await;
    change(
        store,
        standby,
        UserChange::Status(UserStatus::Enabled),
        T0 + 4,
    )
    .await;
    for own in [UserChange::Role(Role::Member), disable, UserChange::Delete] {
        let outcome = store.change_user(root, own, root, T0 + 5).await.unwrap();
        assert_eq!(outcome, UserChangeOutcome::OwnAccount, "{own:?}");
    }
    let own = store.change_user(root, UserChange::Role(Role::Admin), root, T0 + 5);
    assert!(matches!(own.await.unwrap(), UserChangeOutcome::Changed(_)));
    assert!(matches!(
        change(store, root, UserChange::Delete, T0 + 5).await,
        UserChangeOutcome::Changed(_)
    ));
    assert_eq!(
        change(store, standby, UserChange::Delete, T0 + 6).await,
        UserChangeOutcome::LastEnabledAdmin
    );
}

/// Two admins demoting each other at the same moment, many times over: each time one goes
/// and the other is refused, never both (the guard's lock).
async fn admins_demoting_each_other_at_once_leave_one(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store: Arc<dyn Store> = store_on(&db).await;
    let ann = user(store.as_ref(), "ann", Role::Admin).await;
    let bob = user(store.as_ref(), "bob", Role::Admin).await;
    for round in 0..8 {
        let demote = |id: i64, by: i64| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let change = UserChange::Role(Role::Member);
                store.change_user(id, change, by, T0 + round).await.unwrap()
            })
        };
        let (first, second) = (demote(ann, bob), demote(bob, ann));
        let outcomes = [first.await.unwrap(), second.await.unwrap()];
        let refused = outcomes
            .iter()
            .filter(|outcome| **outcome == UserChangeOutcome::LastEnabledAdmin)
            .count();
        assert_eq!(refused, 1, "round {round}: {outcomes:?}");
        let admins = store.list_users().await.unwrap();
        let admins = admins.iter().filter(|user| user.role == Role::Admin);
        assert_eq!(admins.count(), 1, "round {round}");
        for id in [ann, bob] {
            change(
                store.as_ref(),
                id,
                UserChange::Role(Role::Admin),
                T0 + round,
            )
            .await;
        }
    }
}

on_every_backend!(
    a_new_role_counts_at_the_next_token_check,
    disabling_revokes_every_token_and_a_re_enable_brings_none_back,
    deleting_takes_grants_and_tokens_and_leaves_the_audit_trail,
    the_last_enabled_admin_keeps_their_standing,
    admins_demoting_each_other_at_once_leave_one,
);
