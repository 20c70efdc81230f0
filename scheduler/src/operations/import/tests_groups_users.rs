//! The mapping of groups and users, and second runs, without a database (the helpers are
//! `tests`').

use kadence_schemas::AppName;

use super::snapshot::fingerprint;
use super::tests::{group, imported, job, notes_of, row_of, run, user};
use super::*;
use crate::domain::model::{Access, App, Role};
use crate::store::ImportedKind;

#[test]
fn a_second_run_skips_what_it_made_and_says_what_changed_since() {
    let snapshot = XxlSnapshot {
        groups: vec![group(1, "app"), group(2, "existing")],
        jobs: vec![job(1, 1), job(2, 1)],
        users: vec![user(1, "li", 0, "1")],
        ..XxlSnapshot::default()
    };
    let mut changed = job(2, 1);
    changed.executor_param = Some("old".into());
    let known = Known {
        imported: vec![
            imported(ImportedKind::App, 1, "app", &fingerprint(&group(1, "app"))),
            imported(ImportedKind::Job, 1, "10", &fingerprint(&job(1, 1))),
            imported(ImportedKind::Job, 2, "11", &fingerprint(&changed)),
            imported(
                ImportedKind::User,
                1,
                "5",
                &fingerprint(&user(1, "li", 0, "1")),
            ),
        ],
        apps: vec![App {
            name: AppName::parse("existing").unwrap(),
            title: String::new(),
            partitions: 6,
            created_at_ms: 0,
        }],
        users: vec!["admin".into(), "li".into()],
        now_ms: 0,
    };
    let plan = run(&snapshot, &ImportOptions::default(), &known);
    assert!(
        plan.apps.is_empty() && plan.jobs.is_empty() && plan.users.is_empty(),
        "{plan:#?}"
    );
    assert_eq!(row_of(&plan, SourceKind::Group, 2).action, Action::Reuse);
    assert_eq!(
        row_of(&plan, SourceKind::Job, 1).kadence.as_deref(),
        Some("job 10")
    );
    assert!(
        notes_of(&plan, SourceKind::Job, 1)
            .iter()
            .all(|note| !note.contains("changed"))
    );
    assert!(
        notes_of(&plan, SourceKind::Job, 2)
            .iter()
            .any(|note| note.contains("changed in XXL-JOB"))
    );
    assert_eq!(row_of(&plan, SourceKind::User, 1).action, Action::Skip);
}

#[test]
fn users_keep_their_role_and_groups_but_never_a_name_kadence_has() {
    let snapshot = XxlSnapshot {
        groups: vec![group(1, "app"), group(2, "other")],
        users: vec![
            user(1, "admin", 1, ""),
            user(2, "boss", 1, "1"),
            user(3, "li", 0, "1,2,7,x"),
            user(4, "bad name", 0, ""),
        ],
        ..XxlSnapshot::default()
    };
    let known = Known {
        users: vec!["admin".into()],
        ..Known::default()
    };
    let options = ImportOptions {
        member_access: Access::Scripts,
        ..ImportOptions::default()
    };
    let plan = run(&snapshot, &options, &known);
    assert_eq!(row_of(&plan, SourceKind::User, 1).action, Action::Refuse);
    assert!(
        row_of(&plan, SourceKind::User, 1)
            .reason
            .as_deref()
            .unwrap()
            .contains("exists")
    );
    assert_eq!(row_of(&plan, SourceKind::User, 4).action, Action::Refuse);
    let boss = plan.users.iter().find(|user| user.name == "boss").unwrap();
    assert_eq!((boss.role, boss.grants.len()), (Role::Admin, 0));
    let li = plan.users.iter().find(|user| user.name == "li").unwrap();
    assert_eq!(li.role, Role::Member);
    let apps: Vec<(&str, Access)> = li
        .grants
        .iter()
        .map(|(app, access)| (app.as_str(), *access))
        .collect();
    assert_eq!(apps, [("app", Access::Scripts), ("other", Access::Scripts)]);
    let notes = notes_of(&plan, SourceKind::User, 3);
    assert!(
        notes
            .iter()
            .any(|note| note.contains("group 7, which does not exist")),
        "{notes:?}"
    );
    assert!(notes.iter().any(|note| note.contains("\"x\"")), "{notes:?}");
}

#[test]
fn groups_with_hand_entered_addresses_are_imported_with_a_difference() {
    let mut manual = group(1, "manual");
    manual.address_type = 1;
    manual.address_list = Some("http://10.0.0.1:9999/,http://10.0.0.2:9999/".into());
    manual.has_access_token = true;
    let snapshot = XxlSnapshot {
        groups: vec![manual],
        ..XxlSnapshot::default()
    };
    let plan = run(&snapshot, &ImportOptions::default(), &Known::default());
    assert_eq!(row_of(&plan, SourceKind::Group, 1).action, Action::Create);
    let notes = notes_of(&plan, SourceKind::Group, 1);
    assert!(
        notes
            .iter()
            .any(|note| note.contains("10.0.0.1") && note.contains("meaningless"))
    );
    assert!(notes.iter().any(|note| note.contains("access token")));
}

#[test]
fn a_source_is_named_without_its_credentials() {
    assert_eq!(
        source_name("mysql://root:secret@db.example:3307/xxl_job?ssl-mode=disabled"),
        "xxl-job:db.example:3307/xxl_job"
    );
    assert_eq!(
        source_name("mysql://root@127.0.0.1/xxl_job"),
        "xxl-job:127.0.0.1:3306/xxl_job"
    );
}
