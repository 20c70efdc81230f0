//! Runs across jobs, for the console: the search (`GET /api/runs`) and one run in detail
//! (`GET /api/runs/{log_id}`). Each run comes with the app it ran in, the handler it ran and
//! its job's description, so a list shows them without a request per row.
//!
//! A run belongs to the app it ran in (the app its job had when it fired), as the daily
//! reports count it: a member sees the runs of the apps granted to them (VIEW), and a search
//! never reaches beyond those, whatever its filters. Naming a job of an app the caller may not
//! view answers 404, as for a job that does not exist (and as `GET /api/jobs/{id}/runs`
//! answers it), so that what exists in other apps is not revealed.
//!
//! Outcomes are counted as the daily reports count them: SUCCEEDED (result 200), FAILED
//! (finished with any other result: failure, timeout, kill, lost), RUNNING (planned or
//! dispatched, no result yet; UNFINISHED, the replay filter's name for it, is accepted too).
//! A fire cancelled by a stop or an edit has no outcome: it shows without an `outcome` filter
//! only. (The enumeration is the replays' [`RunOutcome`]; its UNKNOWN, "no run row", names
//! nothing a search of rows can find, so it is refused.)

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use kadence_schemas::{JobId, TriggerId};
use serde::{Deserialize, Serialize};

use super::body::{ApiPath, ApiQuery};
use super::caller::Caller;
use super::error::{ApiError, ErrorBody};
use super::pages::{Page, page_request};
use super::runs::load_run_for;
use super::{ApiState, bad_request, load_job_for, parse_app_filter};
use crate::domain::model::{Access, Run};
use crate::monitors::follow_up::fire_of_shard;
use crate::store::{RunFilter, RunOutcome, RunSummary};

/// Query of `GET /api/runs`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RunQuery {
    /// Only runs in this app.
    pub app: Option<String>,
    /// Only this job's runs (a job id).
    pub job: Option<String>,
    /// Only runs with this outcome: SUCCEEDED, FAILED or RUNNING (not finished yet).
    pub outcome: Option<String>,
    /// Only runs scheduled at or after this time, ms since the epoch.
    pub from_ms: Option<String>,
    /// Only runs scheduled before this time, ms since the epoch.
    pub to_ms: Option<String>,
    /// The `next` of the previous page (a log id: the runs listed next are older).
    pub after: Option<String>,
    /// Runs at most (default 100, at most 1 000).
    pub limit: Option<u32>,
}

/// Searches runs across jobs, newest first, a page at a time.
///
/// Any signed-in caller, within the apps they may view, whatever the filters: `app` naming
/// an app they may not view is a 403, and `job` naming a job of one a 404, as a job that
/// does not exist. Newest first by log id, the order their fires were planned in; `next` is
/// a log id. Each run comes with its app, handler and job description, so that a list needs
/// no request per row.
///
/// Outcomes are counted as the daily reports count them: SUCCEEDED (result 200), FAILED
/// (finished with any other result: failure, timeout, kill, lost), RUNNING (planned or
/// dispatched, no result yet; UNFINISHED is accepted too). A fire cancelled by a stop or an
/// edit has no outcome: it shows without an `outcome` filter only. `from_ms` after `to_ms`
/// is a 400.
#[utoipa::path(
    get, path = "/api/runs", tag = "runs", params(RunQuery),
    responses(
        (status = 200, description = "A page of the runs the caller may see, newest first", body = Page<RunSummary>),
        (status = 404, description = "The job named does not exist", body = ErrorBody),
    ),
)]
pub(super) async fn search_runs(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<RunQuery>,
) -> Result<Json<Page<RunSummary>>, ApiError> {
    let job = match query.job.as_deref() {
        Some(raw) => {
            let id = raw.trim().parse::<JobId>().map_err(|_| {
                bad_request(format!(
                    "job {raw:?} is not a job id: use a positive integer"
                ))
            })?;
            Some(
                load_job_for(&state, &caller, &id.to_string(), Access::View)
                    .await?
                    .id,
            )
        }
        None => None,
    };
    let from_ms = parse_ms("from_ms", query.from_ms.as_deref())?;
    let to_ms = parse_ms("to_ms", query.to_ms.as_deref())?;
    if let (Some(from), Some(to)) = (from_ms, to_ms)
        && from > to
    {
        return Err(bad_request(format!(
            "from_ms ({from}) is after to_ms ({to}): the range starts at from_ms and ends before to_ms"
        )));
    }
    let filter = RunFilter {
        apps: caller.visible_apps(parse_app_filter(query.app.as_deref())?)?,
        job,
        outcome: query.outcome.as_deref().map(parse_outcome).transpose()?,
        from_ms,
        to_ms,
    };
    let page = page_request(query.after.as_deref(), query.limit, |text| {
        text.parse::<i64>().ok()
    })?;
    let runs = state.store.search_runs(&filter, &page).await?;
    Ok(Json(Page::new(runs, page.limit, |summary| {
        summary.run.log_id.to_string()
    })))
}

/// One run with the rest of its story (`GET /api/runs/{log_id}`).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunDetail {
    /// The run, with its app, handler and job description.
    #[serde(flatten)]
    pub summary: RunSummary,
    /// Every attempt of the run it belongs to — the first attempt and its retries, linked by
    /// `first_log_id` — by attempt; this run is one of them.
    pub attempts: Vec<Run>,
    /// The runs of child jobs that an attempt's success fired (trigger type PARENT), among
    /// the apps the caller may view, by log id. Found by the trigger ids the follow-up gives
    /// them (`{child}-p{parent log id}`, or `{child}-p{parent fire}` when the job fires its
    /// children once all shards succeeded), for the job's children as it defines them now: a
    /// child taken off the list since is not looked for.
    pub children: Vec<RunSummary>,
    /// The job's child jobs as it defines them now (empty if the job is gone).
    pub child_job_ids: Vec<JobId>,
}

/// Shows one run with its attempts and the child runs it fired.
///
/// Needs VIEW on the app the run ran in (404 otherwise, as for a run that does not exist).
/// Besides the run, with where it ran (`partition`, `executor_id`) and its trigger id:
/// `attempts`, the first attempt and its retries; and `children`, the runs of child jobs
/// that an attempt's success fired, among the apps the caller may view, for the job's
/// children as it defines them now.
#[utoipa::path(
    get, path = "/api/runs/{log_id}", tag = "runs",
    params(("log_id" = i64, Path, description = "The run's log id")),
    responses(
        (status = 200, description = "The run with its attempts and child runs", body = RunDetail),
        (status = 404, description = "No such run", body = ErrorBody),
    ),
)]
pub(super) async fn get_run(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(log_id): ApiPath<String>,
) -> Result<Json<RunDetail>, ApiError> {
    let summary = load_run_for(&state, &caller, &log_id, Access::View).await?;
    let first_log_id = summary.run.first_log_id.unwrap_or(summary.run.log_id);
    let attempts = state.store.run_attempts(first_log_id).await?;
    let child_job_ids = match state.store.get_job(summary.run.job_id).await? {
        Some(job) => job.spec.child_job_ids,
        None => Vec::new(),
    };
    let candidates = child_trigger_ids(&summary.run, &attempts, &child_job_ids);
    let children = state
        .store
        .runs_by_trigger_ids(&candidates)
        .await?
        .into_iter()
        .filter(|child| caller.user.may(&child.app, Access::View))
        .collect();
    Ok(Json(RunDetail {
        summary,
        attempts,
        children,
        child_job_ids,
    }))
}

/// The trigger ids the follow-up monitor gives the child runs of `run`'s successful
/// attempts (`crate::monitors::follow_up`): `{child}-p{attempt's log id}` per child, and for
/// a shard, `{child}-p{its fire}` (a join of every shard's success).
fn child_trigger_ids(run: &Run, attempts: &[Run], children: &[JobId]) -> Vec<TriggerId> {
    let mut parent_keys: Vec<String> = attempts
        .iter()
        .filter(|attempt| attempt.handle_code == Some(kadence_schemas::result_code::SUCCESS))
        .map(|attempt| attempt.log_id.to_string())
        .collect();
    if run.shard_total > 1 {
        parent_keys.push(fire_of_shard(&run.trigger_id));
    }
    children
        .iter()
        .flat_map(|child| {
            parent_keys
                .iter()
                .filter_map(move |key| TriggerId::parse(&format!("{child}-p{key}")).ok())
        })
        .collect()
}

/// A time of the query, in ms since the epoch, or a 400 naming `field`.
fn parse_ms(field: &str, text: Option<&str>) -> Result<Option<i64>, ApiError> {
    text.map(|text| {
        text.trim().parse::<i64>().map_err(|_| {
            bad_request(format!(
                "{field} {text:?} is not a time: use milliseconds since the epoch"
            ))
        })
    })
    .transpose()
}

/// The `outcome` of the query (see the module docs), or a 400 listing the accepted values.
fn parse_outcome(text: &str) -> Result<RunOutcome, ApiError> {
    if text.trim().eq_ignore_ascii_case("RUNNING") {
        return Ok(RunOutcome::Unfinished);
    }
    match text.parse::<RunOutcome>() {
        Ok(RunOutcome::Unknown) | Err(_) => Err(bad_request(format!(
            "outcome {text:?} is not a run outcome: use SUCCEEDED, FAILED or RUNNING"
        ))),
        Ok(outcome) => Ok(outcome),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_and_times_are_parsed_naming_the_field() {
        assert_eq!(parse_outcome("running").unwrap(), RunOutcome::Unfinished);
        assert_eq!(parse_outcome("UNFINISHED").unwrap(), RunOutcome::Unfinished);
        assert_eq!(parse_outcome("Failed").unwrap(), RunOutcome::Failed);
        for bad in ["UNKNOWN", "lost", ""] {
            let error = parse_outcome(bad).unwrap_err().to_string();
            assert!(error.starts_with("outcome "), "{error}");
        }
        assert_eq!(parse_ms("from_ms", Some("42")).unwrap(), Some(42));
        let error = parse_ms("to_ms", Some("soon")).unwrap_err().to_string();
        assert!(error.starts_with("to_ms \"soon\""), "{error}");
    }

    #[test]
    fn child_runs_are_looked_for_under_the_follow_up_s_trigger_ids() {
        let job = JobId::new(7).unwrap();
        let mut first = Run {
            log_id: 40,
            trigger_id: TriggerId::scheduled(job, 5_000),
            job_id: job,
            trigger_type: kadence_schemas::TriggerType::Cron,
            params: String::new(),
            attempt: 0,
            shard_index: 0,
            shard_total: 1,
            scheduled_at_ms: 5_000,
            state: crate::domain::model::RunState::Finished,
            partition: Some(0),
            dispatched_at_ms: None,
            executor_id: None,
            started_at_ms: None,
            handle_code: Some(500),
            handle_msg: None,
            handle_at_ms: None,
            first_log_id: None,
            alarm_status: crate::domain::model::AlarmStatus::NotNeeded,
            replay_of: None,
            operation_id: None,
        };
        let retry = Run {
            log_id: 41,
            handle_code: Some(200),
            first_log_id: Some(40),
            ..first.clone()
        };
        let children = [JobId::new(8).unwrap(), JobId::new(9).unwrap()];
        let ids = child_trigger_ids(&first, &[first.clone(), retry.clone()], &children);
        let ids: Vec<&str> = ids.iter().map(TriggerId::as_str).collect();
        assert_eq!(ids, ["8-p41", "9-p41"]);
        first.shard_total = 2;
        first.trigger_id = TriggerId::shard(job, 5_000, 1);
        let ids = child_trigger_ids(&first, &[retry], &children[..1]);
        let ids: Vec<&str> = ids.iter().map(TriggerId::as_str).collect();
        assert_eq!(ids, ["8-p41", "8-p7-5000"]);
    }
}
