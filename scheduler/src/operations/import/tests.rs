//! The mapping, without a database: what each kind of XXL-JOB row becomes, what is refused
//! and why, and the differences reported.

use kadence_schemas::{AppName, BlockStrategy, GlueType, JobId};

use super::snapshot::fingerprint;
use super::*;
use crate::domain::model::{App, RouteStrategy};
use crate::domain::schedule::{MisfireStrategy, ScheduleSpec, parse_time_zone};
use crate::store::{ImportedId, ImportedKind};

pub(super) fn group(id: i64, app_name: &str) -> XxlGroup {
    XxlGroup {
        id,
        app_name: app_name.into(),
        title: format!("title {id}"),
        address_type: 0,
        address_list: None,
        has_access_token: false,
    }
}

pub(super) fn job(id: i64, group: i64) -> XxlJob {
    XxlJob {
        id,
        job_group: group,
        job_desc: format!("job {id}"),
        author: Some("XXL".into()),
        alarm_email: Some("a@example.com, b@example.com".into()),
        schedule_type: Some("CRON".into()),
        schedule_conf: Some("0 0 2 * * ?".into()),
        misfire_strategy: Some("DO_NOTHING".into()),
        executor_route_strategy: Some("FIRST".into()),
        executor_handler: Some("demoJobHandler".into()),
        executor_param: Some("p".into()),
        executor_block_strategy: Some("SERIAL_EXECUTION".into()),
        executor_timeout: 30,
        executor_fail_retry_count: 2,
        glue_type: Some("BEAN".into()),
        glue_source: Some(String::new()),
        glue_remark: Some("init".into()),
        glue_updatetime: Some("2024-01-02 03:04:05".into()),
        child_jobid: Some(String::new()),
        trigger_status: 0,
        glue_versions_total: 0,
    }
}

pub(super) fn user(id: i64, name: &str, role: i64, permission: &str) -> XxlUser {
    XxlUser {
        id,
        username: name.into(),
        role,
        permission: Some(permission.into()),
    }
}

pub(super) fn run(snapshot: &XxlSnapshot, options: &ImportOptions, known: &Known) -> Plan {
    let zone = parse_time_zone(&options.time_zone).unwrap();
    plan(snapshot, options, zone, known)
}

pub(super) fn row_of(plan: &Plan, kind: SourceKind, id: i64) -> &MappingRow {
    plan.rows
        .iter()
        .find(|row| row.kind == kind && row.source_id == id)
        .unwrap_or_else(|| panic!("no row for {kind} {id}: {:#?}", plan.rows))
}

pub(super) fn notes_of(plan: &Plan, kind: SourceKind, id: i64) -> Vec<&str> {
    plan.differences
        .iter()
        .filter(|difference| difference.kind == Some(kind) && difference.source_id == Some(id))
        .map(|difference| difference.note.as_str())
        .collect()
}

#[test]
fn a_job_keeps_every_setting_and_starts_stopped() {
    let mut running = job(1, 1);
    running.trigger_status = 1;
    let snapshot = XxlSnapshot {
        groups: vec![group(1, "billing")],
        jobs: vec![running],
        ..XxlSnapshot::default()
    };
    let plan = run(&snapshot, &ImportOptions::default(), &Known::default());
    assert_eq!(plan.apps.len(), 1);
    assert_eq!(
        (plan.apps[0].name.as_str(), plan.apps[0].partitions),
        ("billing", 3)
    );
    assert_eq!(plan.apps[0].title, "title 1");
    let planned = &plan.jobs[0];
    let spec = &planned.spec;
    assert_eq!(spec.name, "job 1");
    assert_eq!(
        spec.schedule,
        ScheduleSpec::parse("CRON", "0 0 2 * * ?").unwrap()
    );
    assert_eq!(spec.time_zone, chrono_tz::Tz::UTC);
    assert_eq!(spec.misfire_strategy, MisfireStrategy::DoNothing);
    assert_eq!(spec.route_strategy, RouteStrategy::First);
    assert_eq!(spec.block_strategy, BlockStrategy::SerialExecution);
    assert_eq!(
        (spec.handler.as_str(), spec.params.as_str()),
        ("demoJobHandler", "p")
    );
    assert_eq!((spec.timeout_ms, spec.retry.count), (30_000, 2));
    assert_eq!(spec.alarm_emails, ["a@example.com", "b@example.com"]);
    assert_eq!(spec.author, "XXL");
    assert_eq!(spec.glue.glue_type, GlueType::Bean);
    assert!(!planned.start, "imported STOPPED by default");
    assert!(
        notes_of(&plan, SourceKind::Job, 1)
            .iter()
            .any(|note| note.contains("imported STOPPED"))
    );
    assert!(
        notes_of(&plan, SourceKind::Job, 1)
            .iter()
            .any(|note| note.starts_with("FIRST: partition 0"))
    );
    assert!(
        plan.differences
            .iter()
            .any(|d| d.kind.is_none() && d.note.starts_with("time zone UTC"))
    );

    let keep = ImportOptions {
        keep_state: true,
        time_zone: "Asia/Shanghai".into(),
        ..ImportOptions::default()
    };
    let plan = run(&snapshot, &keep, &Known::default());
    assert!(plan.jobs[0].start, "--keep-state starts what ran");
    assert_eq!(plan.jobs[0].spec.time_zone.name(), "Asia/Shanghai");
    assert_eq!(
        plan.jobs[0].glue_updated_at_ms,
        Some(1_704_135_845_000),
        "03:04:05 in Shanghai"
    );
}

#[test]
fn every_schedule_type_and_route_maps_with_its_difference() {
    let mut jobs = Vec::new();
    let routes = [
        "FIRST",
        "LAST",
        "ROUND",
        "RANDOM",
        "CONSISTENT_HASH",
        "LEAST_FREQUENTLY_USED",
        "LEAST_RECENTLY_USED",
        "FAILOVER",
        "BUSYOVER",
        "SHARDING_BROADCAST",
    ];
    for (n, route) in routes.iter().enumerate() {
        let mut found = job(n as i64 + 1, 1);
        found.executor_route_strategy = Some((*route).into());
        jobs.push(found);
    }
    let mut rate = job(20, 1);
    (rate.schedule_type, rate.schedule_conf) = (Some("FIX_RATE".into()), Some("7".into()));
    let mut none = job(21, 1);
    (none.schedule_type, none.schedule_conf) = (Some("NONE".into()), Some(String::new()));
    jobs.extend([rate, none]);
    let snapshot = XxlSnapshot {
        groups: vec![group(1, "app")],
        jobs,
        ..XxlSnapshot::default()
    };
    let plan = run(
        &snapshot,
        &ImportOptions {
            partitions: 4,
            ..ImportOptions::default()
        },
        &Known::default(),
    );
    assert_eq!(plan.jobs.len(), 12, "{:#?}", plan.rows);
    for (n, route) in routes.iter().enumerate() {
        let id = n as i64 + 1;
        assert_eq!(plan.jobs[n].spec.route_strategy.as_str(), *route);
        assert!(
            notes_of(&plan, SourceKind::Job, id)
                .iter()
                .any(|note| note.starts_with(route)),
            "{route}"
        );
    }
    assert!(
        notes_of(&plan, SourceKind::Job, 10)
            .iter()
            .any(|note| note.contains("shard total 4"))
    );
    assert!(
        notes_of(&plan, SourceKind::Job, 2)
            .iter()
            .any(|note| note.contains("partition 3"))
    );
    assert_eq!(
        plan.jobs[10].spec.schedule,
        ScheduleSpec::FixRate { seconds: 7 }
    );
    assert!(
        notes_of(&plan, SourceKind::Job, 20)
            .iter()
            .any(|note| note.contains("whole second"))
    );
    assert_eq!(plan.jobs[11].spec.schedule, ScheduleSpec::None);
}

#[test]
fn what_kadence_cannot_run_is_refused_with_its_reason_and_so_are_its_parents() {
    let mut groovy = job(1, 1);
    (groovy.glue_type, groovy.glue_source) =
        (Some("GLUE_GROOVY".into()), Some("class A {}".into()));
    let mut parent = job(2, 1);
    parent.child_jobid = Some("1".into());
    let mut grandparent = job(3, 1);
    grandparent.child_jobid = Some("2".into());
    let mut bad_cron = job(4, 1);
    bad_cron.schedule_conf = Some("0 61 * * * ?".into());
    let orphan = job(5, 9);
    let mut no_route = job(6, 1);
    no_route.executor_route_strategy = None;
    let mut python2 = job(7, 1);
    (python2.glue_type, python2.glue_source) =
        (Some("GLUE_PYTHON2".into()), Some("print 1".into()));
    let snapshot = XxlSnapshot {
        groups: vec![group(1, "app"), group(2, "not a valid name!")],
        jobs: vec![
            groovy,
            parent,
            grandparent,
            bad_cron,
            orphan,
            no_route,
            python2,
            job(8, 2),
        ],
        ..XxlSnapshot::default()
    };
    let plan = run(&snapshot, &ImportOptions::default(), &Known::default());
    assert!(plan.jobs.is_empty(), "{:#?}", plan.jobs);
    let reason = |id| row_of(&plan, SourceKind::Job, id).reason.clone().unwrap();
    assert!(reason(1).contains("GLUE_GROOVY"));
    assert!(reason(2).starts_with("its child job 1 is refused: GLUE_GROOVY"));
    assert!(reason(3).starts_with("its child job 2 is refused"));
    assert!(
        reason(4).contains("Kadence refuses it") && reason(4).contains("minute"),
        "{}",
        reason(4)
    );
    assert!(reason(5).contains("group 9 does not exist"));
    assert!(reason(6).contains("no route strategy"));
    assert!(reason(7).contains("python3"));
    assert!(reason(8).contains("group 2 is refused"));
    assert_eq!(row_of(&plan, SourceKind::Group, 2).action, Action::Refuse);
    assert!(
        plan.rows
            .iter()
            .all(|row| row.kind == SourceKind::Group || row.action == Action::Refuse)
    );
}

#[test]
fn children_are_remapped_cycles_refused_and_missing_ones_named() {
    let mut parent = job(1, 1);
    parent.child_jobid = Some("2, 3,99".into());
    let mut a = job(4, 1);
    a.child_jobid = Some("5".into());
    let mut b = job(5, 1);
    b.child_jobid = Some("4".into());
    let snapshot = XxlSnapshot {
        groups: vec![group(1, "app")],
        jobs: vec![parent, job(2, 1), job(3, 1), a, b],
        ..XxlSnapshot::default()
    };
    let known = Known {
        imported: vec![
            imported(ImportedKind::App, 1, "app", &fingerprint(&group(1, "app"))),
            imported(ImportedKind::Job, 3, "40", &fingerprint(&job(3, 1))),
        ],
        apps: vec![App {
            name: AppName::parse("app").unwrap(),
            title: String::new(),
            partitions: 2,
            created_at_ms: 0,
        }],
        users: Vec::new(),
        now_ms: 0,
    };
    let plan = run(&snapshot, &ImportOptions::default(), &known);
    let parent = plan.jobs.iter().find(|job| job.source_id == 1).unwrap();
    assert_eq!(
        parent.children,
        [
            ChildRef::Planned(2),
            ChildRef::Existing(JobId::new(40).unwrap())
        ]
    );
    assert!(
        notes_of(&plan, SourceKind::Job, 1)
            .iter()
            .any(|note| note.contains("child job 99 does not exist"))
    );
    assert!(
        row_of(&plan, SourceKind::Job, 4)
            .reason
            .as_deref()
            .unwrap()
            .contains("cycle")
    );
    assert!(
        row_of(&plan, SourceKind::Job, 5)
            .reason
            .as_deref()
            .unwrap()
            .contains("cycle")
    );
    assert_eq!(row_of(&plan, SourceKind::Job, 3).action, Action::Skip);
    assert_eq!(row_of(&plan, SourceKind::Group, 1).action, Action::Skip);
    assert!(plan.apps.is_empty());
}

pub(super) fn imported(
    kind: ImportedKind,
    source_id: i64,
    kadence_id: &str,
    print: &str,
) -> ImportedId {
    ImportedId {
        kind,
        source_id,
        kadence_id: kadence_id.into(),
        fingerprint: print.into(),
        imported_at_ms: 1,
    }
}

#[test]
fn script_versions_keep_the_newest_thirty_ending_with_the_current_script() {
    let mut script = job(1, 1);
    script.glue_type = Some("GLUE_SHELL".into());
    script.glue_source = Some("echo 35".into());
    script.executor_handler = Some(String::new());
    script.glue_versions_total = 35;
    let versions = (1..=35)
        .map(|n| XxlGlueVersion {
            id: n,
            job_id: 1,
            glue_type: Some("GLUE_SHELL".into()),
            glue_source: Some(format!("echo {n}")),
            glue_remark: format!("v{n}"),
            add_time: Some(format!("2024-01-01 00:00:{n:02}")),
        })
        .rev() // take the newest by id, whatever the order they come in
        .take(30)
        .collect();
    let snapshot = XxlSnapshot {
        groups: vec![group(1, "app")],
        jobs: vec![script],
        glue_versions: versions,
        ..XxlSnapshot::default()
    };
    let plan = run(&snapshot, &ImportOptions::default(), &Known::default());
    let planned = &plan.jobs[0];
    assert_eq!(planned.spec.handler, "GLUE_SHELL");
    assert_eq!(planned.glue_versions.len(), 30);
    assert_eq!(planned.glue_versions[0].source, "echo 6");
    assert_eq!(
        planned.glue_versions[29].source, "echo 35",
        "the newest is the current script"
    );
    assert_eq!(planned.glue_versions[29].created_at_ms, 1_704_067_235_000);
    let notes = notes_of(&plan, SourceKind::Job, 1);
    assert!(
        notes
            .iter()
            .any(|note| note.starts_with("35 script versions")),
        "{notes:?}"
    );
    assert!(notes.iter().any(|note| note.contains(".scripts(true)")));
}

#[test]
fn unknown_misfire_and_block_strategies_take_xxl_jobs_fallbacks() {
    let mut odd = job(1, 1);
    odd.misfire_strategy = Some("SOMETIMES".into());
    odd.executor_block_strategy = Some("CONCURRENT_EXECUTION".into());
    let snapshot = XxlSnapshot {
        groups: vec![group(1, "app")],
        jobs: vec![odd],
        ..XxlSnapshot::default()
    };
    let plan = run(&snapshot, &ImportOptions::default(), &Known::default());
    assert_eq!(
        plan.jobs[0].spec.misfire_strategy,
        MisfireStrategy::DoNothing
    );
    assert_eq!(
        plan.jobs[0].spec.block_strategy,
        BlockStrategy::SerialExecution
    );
    assert_eq!(
        notes_of(&plan, SourceKind::Job, 1)
            .iter()
            .filter(|note| note.starts_with("unknown"))
            .count(),
        2
    );
}
