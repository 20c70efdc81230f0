//! What imports write, on both stores: everything of an import in one transaction (a name
//! taken meanwhile leaves nothing behind), children linked to the ids the write gave out,
//! `imported_ids` as the undo and second runs read it; and reset tokens that work once,
//! until they expire, and only the latest one issued.

use kadence_scheduler::domain::model::{
    Access, App, GlueVersion, JobStatus, NewJob, Role, TokenKind, User,
};
use kadence_scheduler::domain::schedule::ScheduleSpec;
use kadence_scheduler::operations::auth::{hash_password, verify_password};
use kadence_scheduler::store::{
    ImportWrite, ImportedApp, ImportedJob, ImportedKind, ImportedUser, NewResetToken, NewToken,
    Store, StoreError, UserChange, UserChangeOutcome, UserCredentials,
};
use kadence_schemas::{AppName, GlueType};

use super::{T0, store_on};
use kadence_tests::fixtures::{Backend, TestDatabase};

fn app(name: &str) -> ImportedApp {
    ImportedApp {
        source_id: 10,
        fingerprint: "f-app".into(),
        app: App {
            name: AppName::parse(name).unwrap(),
            title: "Billing".into(),
            partitions: 3,
            created_at_ms: T0,
        },
    }
}

fn job(source_id: i64, app: &str, children: Vec<i64>) -> ImportedJob {
    let spec = NewJob::new(
        AppName::parse(app).unwrap(),
        &format!("job {source_id}"),
        ScheduleSpec::parse("FIX_RATE", "5").unwrap(),
        "ok",
    );
    ImportedJob {
        source_id,
        fingerprint: format!("f-{source_id}"),
        spec,
        child_sources: children,
        status: JobStatus::Stopped,
        next_fire_ms: None,
        glue_versions: Vec::new(),
        glue_updated_at_ms: None,
    }
}

fn reset(hash: &str, expires_at_ms: i64) -> NewResetToken {
    NewResetToken {
        token_hash: hash.into(),
        expires_at_ms,
        issued_by: "admin".into(),
    }
}

fn user(name: &str, grants: Vec<(AppName, Access)>) -> ImportedUser {
    ImportedUser {
        source_id: 7,
        fingerprint: "f-user".into(),
        name: name.into(),
        role: Role::Member,
        grants,
        reset: reset(&format!("hash-of-{name}"), T0 + 60_000),
    }
}

async fn an_import_is_one_transaction(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let billing = AppName::parse("billing").unwrap();
    let mut script = job(2, "billing", Vec::new());
    script.spec.glue.glue_type = GlueType::GlueShell;
    script.spec.glue.source = Some("echo 2".into());
    script.glue_versions = (1..=2)
        .map(|n| GlueVersion {
            glue_type: GlueType::GlueShell,
            source: format!("echo {n}"),
            remark: format!("v{n}"),
            created_at_ms: T0 + n,
        })
        .collect();
    let mut running = job(3, "billing", Vec::new());
    (running.status, running.next_fire_ms) = (JobStatus::Running, Some(T0 + 5_000));
    let write = ImportWrite {
        source: "xxl-job:db:3306/x".into(),
        apps: vec![app("billing")],
        jobs: vec![job(1, "billing", vec![2, 3]), script, running],
        users: vec![user("li", vec![(billing.clone(), Access::Operate)])],
    };
    // A user of that name exists: nothing of the write may stay.
    let taken = store
        .create_user(
            &kadence_scheduler::store::NewUser {
                name: "li".into(),
                password_hash: hash_password("0123456789").unwrap(),
                role: Role::Member,
            },
            T0,
        )
        .await
        .unwrap();
    let refused = store.write_import(&write, T0).await;
    assert!(
        matches!(refused, Err(StoreError::UserExists(ref name)) if name == "li"),
        "{refused:?}"
    );
    assert!(store.get_app(&billing).await.unwrap().is_none());
    assert!(store.imported_ids(&write.source).await.unwrap().is_empty());
    deleted(store.as_ref(), taken.id).await;

    let ids = store.write_import(&write, T0).await.unwrap();
    let id = |source: i64| ids.jobs.iter().find(|(s, _)| *s == source).unwrap().1;
    let parent = store.get_job(id(1)).await.unwrap().unwrap();
    assert_eq!(parent.spec.child_job_ids, [id(2), id(3)]);
    let started = store.get_job(id(3)).await.unwrap().unwrap();
    assert_eq!(
        (started.status, started.next_fire_ms),
        (JobStatus::Running, Some(T0 + 5_000))
    );
    let versions = store.glue_versions(id(2)).await.unwrap();
    let sources: Vec<&str> = versions.iter().map(|v| v.source.as_str()).collect();
    assert_eq!(sources, ["echo 2", "echo 1"], "newest first, as given");
    let li: User = store.get_user(ids.users[0].1).await.unwrap().unwrap();
    assert_eq!(li.grants.len(), 1);
    let credentials: UserCredentials = store.user_credentials("li").await.unwrap().unwrap();
    assert!(
        !verify_password("", &credentials.password_hash),
        "no password"
    );

    let mut rows = store.imported_ids(&write.source).await.unwrap();
    rows.sort_by_key(|row| (row.kind.as_str(), row.source_id));
    let kinds: Vec<(ImportedKind, i64, String)> = rows
        .into_iter()
        .map(|row| (row.kind, row.source_id, row.kadence_id))
        .collect();
    assert_eq!(
        kinds,
        [
            (ImportedKind::App, 10, "billing".to_owned()),
            (ImportedKind::Job, 1, id(1).to_string()),
            (ImportedKind::Job, 2, id(2).to_string()),
            (ImportedKind::Job, 3, id(3).to_string()),
            (ImportedKind::User, 7, li.id.to_string()),
        ]
    );
    assert!(
        store
            .imported_ids("another source")
            .await
            .unwrap()
            .is_empty()
    );

    // The undo's steps: an app goes only once no job is in it; forgetting is per row.
    assert!(!store.remove_app_without_jobs(&billing).await.unwrap());
    for source in [1, 2, 3] {
        store
            .set_job_status(id(source), JobStatus::Stopped, None, T0, T0)
            .await
            .unwrap();
    }
    assert_eq!(
        store.remove_job(id(1)).await.unwrap(),
        kadence_scheduler::store::JobRemoval::Removed { runs: 0 }
    );
    for source in [2, 3] {
        store.remove_job(id(source)).await.unwrap();
        store
            .forget_imported(&write.source, ImportedKind::Job, source)
            .await
            .unwrap();
    }
    assert!(store.remove_app_without_jobs(&billing).await.unwrap());
    deleted(store.as_ref(), li.id).await;
    assert!(store.get_user(li.id).await.unwrap().is_none());
    let left = store.imported_ids(&write.source).await.unwrap();
    assert_eq!(
        left.len(),
        3,
        "app, job 1 and the user are still listed: {left:?}"
    );
}

async fn a_reset_token_works_once_until_it_expires(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let store = store_on(&db).await;
    let ann = store
        .create_user(
            &kadence_scheduler::store::NewUser {
                name: "ann".into(),
                password_hash: hash_password("old password").unwrap(),
                role: Role::Member,
            },
            T0,
        )
        .await
        .unwrap();
    let session = store
        .insert_token(
            &NewToken {
                user_id: ann.id,
                kind: TokenKind::Session,
                name: "browser".into(),
                token_hash: "session-hash".into(),
                expires_at_ms: T0 + 3_600_000,
            },
            T0,
        )
        .await
        .unwrap();
    assert!(
        !store
            .issue_reset_token(999_999, &reset("nobody", T0 + 1_000), T0)
            .await
            .unwrap()
    );
    assert!(
        store
            .issue_reset_token(ann.id, &reset("first", T0 + 1_000), T0)
            .await
            .unwrap()
    );
    let new_hash = hash_password("new password").unwrap();
    assert_eq!(
        store
            .redeem_reset_token("first", &new_hash, T0 + 1_000)
            .await
            .unwrap(),
        None,
        "expired at its instant"
    );
    assert!(
        store
            .issue_reset_token(ann.id, &reset("second", T0 + 60_000), T0)
            .await
            .unwrap()
    );
    assert!(
        store
            .issue_reset_token(ann.id, &reset("third", T0 + 60_000), T0)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .redeem_reset_token("second", &new_hash, T0 + 1)
            .await
            .unwrap(),
        None,
        "voided by the newer one"
    );
    let redeemed = store
        .redeem_reset_token("third", &new_hash, T0 + 2)
        .await
        .unwrap();
    assert_eq!(redeemed.map(|user| user.id), Some(ann.id));
    assert_eq!(
        store
            .redeem_reset_token("third", &new_hash, T0 + 3)
            .await
            .unwrap(),
        None,
        "once"
    );
    let credentials = store.user_credentials("ann").await.unwrap().unwrap();
    assert!(verify_password("new password", &credentials.password_hash));
    assert!(
        store
            .authenticate_token("session-hash", T0 + 4)
            .await
            .unwrap()
            .is_none(),
        "the sessions of the old password end (token {})",
        session.id
    );
}

/// Deletes user `id` as an admin would (the store's guards pass: no admin is involved).
async fn deleted(store: &dyn Store, id: i64) {
    let outcome = store.change_user(id, UserChange::Delete, 0, T0).await;
    assert!(
        matches!(outcome, Ok(UserChangeOutcome::Changed(_))),
        "{outcome:?}"
    );
}

on_every_backend!(
    an_import_is_one_transaction,
    a_reset_token_works_once_until_it_expires
);
