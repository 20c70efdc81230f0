//! Rows over Kadence's limits (see `crate::domain::model::limits`): refused with the limit named, or,
//! for old script versions, left out with a note; never cut (the helpers are `tests`').

use kadence_schemas::AppName;

use super::tests::{group, job, notes_of, row_of, run};
use super::*;
use crate::domain::model::App;

#[test]
fn a_title_over_the_limit_refuses_a_new_app_not_a_reused_one() {
    let mut wordy = group(1, "wordy");
    wordy.title = "t".repeat(300);
    // An app of that name exists: the group's title is not used, so it is no reason to refuse.
    let mut reused = group(2, "existing");
    reused.title = "t".repeat(300);
    let snapshot = XxlSnapshot {
        groups: vec![wordy, reused],
        jobs: vec![job(1, 1), job(2, 2)],
        ..XxlSnapshot::default()
    };
    let known = Known {
        apps: vec![App {
            name: AppName::parse("existing").unwrap(),
            title: String::new(),
            partitions: 3,
            created_at_ms: 0,
        }],
        ..Known::default()
    };
    let plan = run(&snapshot, &ImportOptions::default(), &known);
    let title = row_of(&plan, SourceKind::Group, 1);
    assert_eq!(title.action, Action::Refuse);
    assert_eq!(
        title.reason.as_deref(),
        Some(
            "Kadence refuses its title: title is 300 characters long; the limit is 255 characters"
        )
    );
    assert_eq!(row_of(&plan, SourceKind::Job, 1).action, Action::Refuse);
    assert_eq!(row_of(&plan, SourceKind::Group, 2).action, Action::Reuse);
    assert_eq!(row_of(&plan, SourceKind::Job, 2).action, Action::Create);
}

#[test]
fn a_job_over_a_limit_is_refused_and_an_old_script_version_left_out() {
    let mut fan_out = job(10, 1);
    let children: Vec<String> = (100..151).map(|id| id.to_string()).collect();
    fan_out.child_jobid = Some(children.join(","));
    let mut script = job(11, 1);
    script.glue_type = Some("GLUE_SHELL".into());
    script.glue_source = Some("echo now".into());
    let version = |id: i64, source: String, remark: &str| XxlGlueVersion {
        id,
        job_id: 11,
        glue_type: Some("GLUE_SHELL".into()),
        glue_source: Some(source),
        glue_remark: remark.to_owned(),
        add_time: None,
    };
    let snapshot = XxlSnapshot {
        groups: vec![group(1, "plain")],
        jobs: vec![fan_out, script],
        glue_versions: vec![
            version(1, "x".repeat(256 * 1024 + 1), "huge"),
            version(2, "echo before".into(), &"r".repeat(256)),
            version(3, "echo kept".into(), "fine"),
        ],
        ..XxlSnapshot::default()
    };
    let plan = run(&snapshot, &ImportOptions::default(), &Known::default());
    let children = row_of(&plan, SourceKind::Job, 10);
    assert_eq!(children.action, Action::Refuse);
    assert!(
        (children.reason.as_deref().unwrap())
            .contains("child_job_ids has 51 entries; the limit is 50 entries"),
        "{children:?}"
    );
    assert_eq!(row_of(&plan, SourceKind::Job, 11).action, Action::Create);
    let planned = plan.jobs.iter().find(|job| job.source_id == 11).unwrap();
    let sources: Vec<&str> = (planned.glue_versions.iter())
        .map(|version| version.source.as_str())
        .collect();
    assert_eq!(sources, ["echo kept", "echo now"]);
    let notes = notes_of(&plan, SourceKind::Job, 11);
    for expected in [
        "script version 1 is not imported: glue_source is 262145 bytes long; the limit is \
         262144 bytes",
        "script version 2 is not imported: glue_remark is 256 characters long; the limit is \
         255 characters",
    ] {
        assert!(
            notes.iter().any(|note| note.starts_with(expected)),
            "{expected}: {notes:?}"
        );
    }
}
