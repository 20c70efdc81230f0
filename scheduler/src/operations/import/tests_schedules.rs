//! The mapping of cron expressions: XXL-JOB's meaning kept, and the report saying so.

use super::tests::{group, job, notes_of, row_of, run};
use super::*;

/// A schedule Kadence reads otherwise than XXL-JOB's Quartz is imported with XXL-JOB's
/// meaning, and its row says what was done; one read the same stays as written.
#[test]
fn a_schedule_read_otherwise_is_imported_with_xxl_job_s_meaning() {
    let mut stepped = job(1, 1);
    stepped.schedule_conf = Some("0 0 9 ? * MON-FRI/2".into());
    let mut long_name = job(2, 1);
    long_name.schedule_conf = Some("0 0 9 ? * TUES".into());
    let snapshot = XxlSnapshot {
        groups: vec![group(1, "app")],
        jobs: vec![stepped, long_name, job(3, 1)],
        ..XxlSnapshot::default()
    };
    let options = ImportOptions {
        time_zone: "Asia/Shanghai".into(),
        ..ImportOptions::default()
    };
    // 2026-01-01T00:00:00Z.
    let known = Known {
        now_ms: 1_767_225_600_000,
        ..Known::default()
    };
    let plan = run(&snapshot, &options, &known);
    let schedule = |id| {
        let planned = plan.jobs.iter().find(|job| job.source_id == id).unwrap();
        planned.spec.schedule.conf()
    };
    assert_eq!(schedule(1), "0 0 9 ? * MON-FRI");
    assert_eq!(schedule(2), "0 0 9 ? * TUE");
    assert_eq!(schedule(3), "0 0 2 * * ?");
    let note = |id| {
        notes_of(&plan, SourceKind::Job, id)
            .into_iter()
            .find(|note| note.starts_with("cron "))
            .map(str::to_owned)
    };
    let stepped = note(1).expect("a note on the rewritten schedule");
    assert!(
        stepped.contains("is imported as \"0 0 9 ? * MON-FRI\", XXL-JOB's meaning"),
        "{stepped}"
    );
    assert!(
        stepped.contains("as Kadence reads \"0 0 9 ? * MON-FRI/2\": "),
        "{stepped}"
    );
    assert!(
        note(2)
            .unwrap()
            .contains("Kadence refuses \"0 0 9 ? * TUES\" as written")
    );
    assert_eq!(note(3), None);
    assert_eq!(row_of(&plan, SourceKind::Job, 1).action, Action::Create);
}
