//! XXL-JOB users onto Kadence users: `role` 1 an ADMIN, 0 a MEMBER with a grant per group
//! of `permission`; never a password, never a name Kadence has.

use std::collections::{HashMap, HashSet};

use kadence_schemas::AppName;

use super::planned::{GroupApp, Known, Plan, PlannedUser, already_imported, refused, row};
use super::report::{Action, Difference, SourceKind};
use super::snapshot::{ImportOptions, XxlSnapshot, XxlUser, fingerprint};
use crate::domain::model::{Access, Role};
use crate::store::{ImportedId, ImportedKind};

/// Plans the users of `snapshot`.
pub(super) fn plan_users(
    plan: &mut Plan,
    snapshot: &XxlSnapshot,
    options: &ImportOptions,
    known: &Known,
    groups: &HashMap<i64, GroupApp>,
    imported: &HashMap<(ImportedKind, i64), &ImportedId>,
) {
    let mut taken: HashSet<String> = known.users.iter().cloned().collect();
    let mut sorted: Vec<&XxlUser> = snapshot.users.iter().collect();
    sorted.sort_by_key(|user| user.id);
    for user in sorted {
        let print = fingerprint(user);
        let name = user.username.trim();
        if let Some(earlier) = imported.get(&(ImportedKind::User, user.id)) {
            let key = (SourceKind::User, user.id, name);
            already_imported(plan, key, earlier, &print, format!("user {name}"));
            continue;
        }
        let role = match user.role {
            1 => Role::Admin,
            0 => Role::Member,
            other => {
                let reason =
                    format!("unknown role {other} (XXL-JOB has 0, a user, and 1, an admin)");
                plan.rows
                    .push(refused(SourceKind::User, user.id, name, reason));
                continue;
            }
        };
        if let Err(reason) = check_user_name(name) {
            plan.rows
                .push(refused(SourceKind::User, user.id, name, reason));
            continue;
        }
        if !taken.insert(name.to_owned()) {
            let reason = format!(
                "a Kadence user named {name} exists (not imported): left as it is; give it \
                 XXL-JOB's permissions by hand (kadence user grant)"
            );
            plan.rows
                .push(refused(SourceKind::User, user.id, name, reason));
            continue;
        }
        let grants = if role == Role::Admin {
            Vec::new()
        } else {
            user_grants(plan, user, options.member_access, groups)
        };
        plan.rows.push(row(
            SourceKind::User,
            user.id,
            name,
            Action::Create,
            Some(format!("user {name}")),
        ));
        plan.users.push(PlannedUser {
            source_id: user.id,
            fingerprint: print,
            name: name.to_owned(),
            role,
            grants,
        });
    }
}

/// The grants of an XXL-JOB user's `permission` (group ids): one per group imported.
fn user_grants(
    plan: &mut Plan,
    user: &XxlUser,
    access: Access,
    groups: &HashMap<i64, GroupApp>,
) -> Vec<(AppName, Access)> {
    let mut grants: Vec<(AppName, Access)> = Vec::new();
    for part in user
        .permission
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
    {
        if part.is_empty() {
            continue;
        }
        let note = match part.parse::<i64>().ok().map(|id| (id, groups.get(&id))) {
            Some((_, Some(Ok((app, _))))) => {
                if !grants.iter().any(|(granted, _)| granted == app) {
                    grants.push((app.clone(), access));
                }
                continue;
            }
            Some((id, Some(Err(reason)))) => {
                format!(
                    "permission on executor group {id} left out: the group is refused ({reason})"
                )
            }
            Some((id, None)) => {
                format!(
                    "permission on executor group {id}, which does not exist in XXL-JOB: left out"
                )
            }
            None => format!("permission {part:?} is not a group id: left out"),
        };
        plan.differences
            .push(Difference::of(SourceKind::User, user.id, note));
    }
    grants
}

/// Kadence's rule for user names (as `POST /api/users` checks them).
fn check_user_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@');
    if name.is_empty() || name.chars().count() > 64 || !name.chars().all(allowed) {
        return Err(format!(
            "the user name {name:?} is not a Kadence user name (1 to 64 of A-Z a-z 0-9 . _ - @)"
        ));
    }
    Ok(())
}
