//! Executor groups onto apps: a new app per group, an app of that name reused, a group
//! imported before skipped, a group whose AppName Kadence cannot take, or whose title is
//! over an app title's limit, refused.

use std::collections::HashMap;

use kadence_schemas::AppName;

use super::planned::{GroupApp, Known, Plan, PlannedApp, already_imported, refused, row};
use super::report::{Action, Difference, MappingRow, SourceKind};
use super::snapshot::{ImportOptions, XxlGroup, XxlSnapshot, fingerprint};
use crate::domain::model::limits::APP_TITLE;
use crate::store::{ImportedId, ImportedKind};

/// Plans the groups of `snapshot`; returns each group's app (or why it is refused) by id.
pub(super) fn plan_groups(
    plan: &mut Plan,
    snapshot: &XxlSnapshot,
    options: &ImportOptions,
    known: &Known,
    imported: &HashMap<(ImportedKind, i64), &ImportedId>,
) -> HashMap<i64, GroupApp> {
    let existing: HashMap<&str, i32> = known
        .apps
        .iter()
        .map(|app| (app.name.as_str(), app.partitions))
        .collect();
    let mut groups = HashMap::new();
    let mut planned: HashMap<String, i64> = HashMap::new();
    let mut sorted: Vec<&XxlGroup> = snapshot.groups.iter().collect();
    sorted.sort_by_key(|group| group.id);
    for group in sorted {
        let print = fingerprint(group);
        let name = group.app_name.trim();
        let key = (SourceKind::Group, group.id, name);
        group_differences(plan, group);
        if let Some(earlier) = imported.get(&(ImportedKind::App, group.id)) {
            let app = AppName::parse(&earlier.kadence_id).map_err(|error| error.to_string());
            let partitions = existing.get(earlier.kadence_id.as_str()).copied();
            let app = app.map(|app| (app, partitions.unwrap_or(options.partitions)));
            groups.insert(group.id, app);
            already_imported(
                plan,
                key,
                earlier,
                &print,
                format!("app {}", earlier.kadence_id),
            );
            continue;
        }
        let app = match group_app(group, &existing, &planned) {
            Ok(app) => app,
            Err(reason) => {
                plan.rows
                    .push(refused(SourceKind::Group, group.id, name, reason.clone()));
                groups.insert(group.id, Err(reason));
                continue;
            }
        };
        let app = new_or_reused(plan, group, app, (&existing, &mut planned), options);
        groups.insert(group.id, Ok(app));
    }
    groups
}

/// The group's AppName as an app's name, and its title as an app's title when the group
/// makes a new app (a reused app keeps its own title); or why not.
fn group_app(
    group: &XxlGroup,
    existing: &HashMap<&str, i32>,
    planned: &HashMap<String, i64>,
) -> Result<AppName, String> {
    let app = AppName::parse(group.app_name.trim())
        .map_err(|error| format!("its AppName cannot name a Kadence app: {error}"))?;
    let reused = existing.contains_key(app.as_str()) || planned.contains_key(app.as_str());
    if !reused {
        APP_TITLE
            .check(group.title.trim())
            .map_err(|over| format!("Kadence refuses its title: {over}"))?;
    }
    Ok(app)
}

/// The app of a group that was not imported before: an app already planned by a group of
/// the same AppName, an app of that name made by hand, or a new one.
fn new_or_reused(
    plan: &mut Plan,
    group: &XxlGroup,
    app: AppName,
    (existing, planned): (&HashMap<&str, i32>, &mut HashMap<String, i64>),
    options: &ImportOptions,
) -> (AppName, i32) {
    let name = group.app_name.trim();
    let kadence = Some(format!("app {app}"));
    if let Some(first) = planned.get(app.as_str()) {
        plan.rows.push(MappingRow {
            reason: Some(format!(
                "the same AppName as group {first}: its jobs go into that app"
            )),
            ..row(SourceKind::Group, group.id, name, Action::Reuse, kadence)
        });
        return (app, options.partitions);
    }
    if let Some(&partitions) = existing.get(app.as_str()) {
        plan.rows.push(MappingRow {
            reason: Some(format!(
                "an app named {app} exists in Kadence (not made by an import): its jobs go \
                 into it, with its {partitions} partitions"
            )),
            ..row(SourceKind::Group, group.id, name, Action::Reuse, kadence)
        });
        return (app, partitions);
    }
    plan.rows.push(row(
        SourceKind::Group,
        group.id,
        name,
        Action::Create,
        kadence,
    ));
    planned.insert(app.to_string(), group.id);
    plan.apps.push(PlannedApp {
        source_id: group.id,
        fingerprint: fingerprint(group),
        name: app.clone(),
        title: group.title.trim().to_owned(),
        partitions: options.partitions,
    });
    (app, options.partitions)
}

fn group_differences(plan: &mut Plan, group: &XxlGroup) {
    let addresses = group.address_list.as_deref().unwrap_or_default().trim();
    if group.address_type == 1 {
        plan.differences.push(Difference::of(
            SourceKind::Group,
            group.id,
            format!(
                "executor addresses entered by hand ({addresses}): meaningless in Kadence, \
                 where the executors of an app join its consumer group wherever they run"
            ),
        ));
    }
    if group.has_access_token {
        plan.differences.push(Difference::of(
            SourceKind::Group,
            group.id,
            "an executor access token: Kadence signs every trigger instead, and executors \
             check the signature with the key `kadence key list` shows",
        ));
    }
}
