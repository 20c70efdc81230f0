//! The grants writing a job definition needs besides OPERATE on its app, checked by the
//! create and the edit (`jobs`): SCRIPTS to write a script job's source
//! ([`require_script_grant`]), and OPERATE in the app of each child job newly named, with
//! SCRIPTS there for a script child ([`check_child_apps`]), since a child fires with its
//! parent. Running a script job at a request needs SCRIPTS too: the check of a script child
//! is `require_script_runner`, in the API's `mod.rs`, which the trigger and the backfill
//! call as well.

use kadence_schemas::{GlueType, JobId};

use super::caller::Caller;
use super::error::ApiError;
use super::{ApiState, require_script_runner};
use crate::domain::model::{Access, NewJob};

/// Script source runs as shell (or Python, …) on every executor of the app, so writing it
/// needs the SCRIPTS grant (or admin): on a new script job, and on an edit that changes a
/// script job's type or source. Other edits of a script job need only OPERATE.
pub(super) fn require_script_grant(
    caller: &Caller,
    spec: &NewJob,
    current: Option<&NewJob>,
) -> Result<(), ApiError> {
    if spec.glue.glue_type == GlueType::Bean {
        return Ok(());
    }
    let unchanged = current.is_some_and(|current| {
        current.glue.glue_type == spec.glue.glue_type
            && current.glue.source == spec.glue.source
            && current.app == spec.app
    });
    if unchanged {
        return Ok(());
    }
    caller.require(&spec.app, Access::Scripts)
}

/// A job may name only children the caller may operate: a child fires with the parent,
/// so naming one in another team's app would be a way to run their jobs. Naming a script
/// job a child runs its script whenever the parent succeeds, so it needs what a manual
/// trigger of it needs ([`require_script_runner`]). Children the job named before (`current`)
/// are not checked again: an edit of other fields keeps them.
pub(super) async fn check_child_apps(
    state: &ApiState,
    caller: &Caller,
    spec: &NewJob,
    current: Option<&NewJob>,
) -> Result<(), ApiError> {
    let named_before =
        |child: &JobId| current.is_some_and(|current| current.child_job_ids.contains(child));
    for child in spec
        .child_job_ids
        .iter()
        .filter(|child| !named_before(child))
    {
        // A child that does not exist is refused by `check_children`, with the reason.
        if let Some(job) = state.store.get_job(*child).await? {
            caller
                .require(&job.spec.app, Access::Operate)
                .map_err(|_| {
                    ApiError::Forbidden(format!(
                        "child job {child} is in app {}, where user {} may not operate jobs",
                        job.spec.app, caller.user.name
                    ))
                })?;
            require_script_runner(caller, &job)?;
        }
    }
    Ok(())
}
