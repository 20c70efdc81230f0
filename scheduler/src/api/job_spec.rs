//! A job's definition as the API reads it ([`NewJobRequest`], checked into a `NewJob` with
//! XXL-JOB's defaults) and shows it ([`JobView`]). Its alarm webhook is an http(s) URL to
//! an address webhooks may reach ([`check_webhook_target`]); members who may only view the
//! app see it without its credentials ([`JobView::shown_to`]).

use kadence_schemas::{AppName, BlockStrategy, GlueType, JobId};
use serde::{Deserialize, Serialize};

use super::caller::Caller;
use super::error::ApiError;
use super::{ApiState, MAX_PARAMS_BYTES, bad_request};
use crate::model::{
    Access, ChildTriggerMode, Glue, HistoryPolicy, Job, NewJob, RetryBackoff, RetryPolicy,
    RouteStrategy,
};
use crate::monitors::webhook_target::{parse_webhook_url, redact_webhook_url};
use crate::schedule::{MisfireStrategy, ScheduleSpec, ScheduleType, parse_time_zone};

/// Body of `POST /api/jobs`. Optional fields take XXL-JOB's defaults.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewJobRequest {
    /// The executor app.
    #[schema(value_type = AppName)]
    pub app: String,
    /// Display name; defaults to the handler name.
    #[serde(default)]
    pub name: Option<String>,
    /// CRON (default), FIX_RATE, FIX_DELAY or NONE.
    #[serde(default)]
    #[schema(value_type = Option<ScheduleType>)]
    pub schedule_type: Option<String>,
    /// Cron expression, or seconds for FIX_RATE and FIX_DELAY.
    #[serde(default)]
    pub schedule_conf: Option<String>,
    /// IANA time zone; default UTC.
    #[serde(default)]
    pub time_zone: Option<String>,
    /// DO_NOTHING (default) or FIRE_ONCE_NOW.
    #[serde(default)]
    #[schema(value_type = Option<MisfireStrategy>)]
    pub misfire_strategy: Option<String>,
    /// How the partition is picked, XXL-JOB's routing strategies; default FIRST.
    #[serde(default)]
    #[schema(value_type = Option<RouteStrategy>)]
    pub route_strategy: Option<String>,
    /// Handler name on the executors.
    pub handler: String,
    /// Parameters for the handler, at most 64 KiB.
    #[serde(default)]
    pub params: Option<String>,
    /// SERIAL_EXECUTION (default), DISCARD_LATER, COVER_EARLY or CONCURRENT.
    #[serde(default)]
    #[schema(value_type = Option<BlockStrategy>)]
    pub block_strategy: Option<String>,
    /// Run timeout in seconds; 0 or absent for none.
    #[serde(default)]
    pub timeout_seconds: Option<u32>,
    /// Owner, for people.
    #[serde(default)]
    pub author: Option<String>,
    /// Where failure alarms are e-mailed.
    #[serde(default)]
    pub alarm_emails: Option<Vec<String>>,
    /// Where failure alarms are POSTed (http or https URL). Loopback, private, link-local
    /// and other internal addresses are refused unless the scheduler's
    /// `alarm.webhook_allowed_networks` names them.
    #[serde(default)]
    pub alarm_webhook: Option<String>,
    /// Retries of a failed run; default 0.
    #[serde(default)]
    pub retry_count: Option<u32>,
    /// NONE (default), FIXED or EXPONENTIAL.
    #[serde(default)]
    pub retry_backoff: Option<String>,
    /// FIXED: the delay; EXPONENTIAL: the first delay. Seconds.
    #[serde(default)]
    pub retry_backoff_seconds: Option<u32>,
    /// EXPONENTIAL: the largest delay, seconds.
    #[serde(default)]
    pub retry_backoff_cap_seconds: Option<u32>,
    /// BEAN (default) or GLUE_SHELL, GLUE_PYTHON, GLUE_NODEJS, GLUE_PHP, GLUE_POWERSHELL.
    #[serde(default)]
    #[schema(value_type = Option<GlueType>)]
    pub glue_type: Option<String>,
    /// The script, for GLUE_* types (at most 256 KiB).
    #[serde(default)]
    pub glue_source: Option<String>,
    /// Note on this version of the script.
    #[serde(default)]
    pub glue_remark: Option<String>,
    /// Jobs fired when this one succeeds.
    #[serde(default)]
    pub child_job_ids: Option<Vec<i64>>,
    /// For a sharded job: EACH_SHARD (default, XXL-JOB) fires the children once per succeeded
    /// shard; ALL_SHARDS once per fire, when every shard succeeded.
    #[serde(default)]
    #[schema(value_type = Option<ChildTriggerMode>)]
    pub child_trigger_mode: Option<String>,
    /// Which finished runs keep their rows: ALL (default), FAILURES, or NONE (counted only;
    /// for very frequent jobs).
    #[serde(default)]
    #[schema(value_type = Option<HistoryPolicy>)]
    pub history: Option<String>,
    /// Start the job right away.
    #[serde(default)]
    pub start: bool,
}

/// Largest script accepted, in bytes: scripts travel in every trigger record.
pub const MAX_GLUE_SOURCE_BYTES: usize = 256 * 1024;

pub(super) fn parse_or<T: std::str::FromStr>(value: Option<&str>, default: T) -> Result<T, ApiError>
where
    T::Err: std::fmt::Display,
{
    value.map_or(Ok(default), |raw| raw.parse::<T>().map_err(bad_request))
}

/// The job a request describes, with XXL-JOB's defaults; a 400 names the field at fault.
pub(super) fn parse_new_job(request: NewJobRequest) -> Result<NewJob, ApiError> {
    let at = ApiError::at;
    let app = AppName::parse(&request.app)
        .map_err(bad_request)
        .map_err(at("app"))?;
    let handler = request.handler.trim().to_owned();
    if handler.is_empty() || handler.len() > 200 {
        return invalid("handler", "handler must be 1 to 200 characters");
    }
    let params = request.params.unwrap_or_default();
    check_params(&params).map_err(at("params"))?;
    // A blank name takes the handler's, as a missing one does.
    let name = request
        .name
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| handler.clone());
    if name.len() > 255 {
        return invalid("name", "name must be at most 255 characters");
    }
    let schedule = parse_schedule(
        request.schedule_type.as_deref(),
        request.schedule_conf.as_deref(),
    )?;
    Ok(NewJob {
        app,
        name,
        schedule,
        time_zone: parse_time_zone(request.time_zone.as_deref().unwrap_or("UTC"))
            .map_err(bad_request)
            .map_err(at("time_zone"))?,
        misfire_strategy: parse_or(
            request.misfire_strategy.as_deref(),
            MisfireStrategy::DoNothing,
        )
        .map_err(at("misfire_strategy"))?,
        route_strategy: parse_or(request.route_strategy.as_deref(), RouteStrategy::First)
            .map_err(at("route_strategy"))?,
        handler,
        params,
        block_strategy: parse_or(request.block_strategy.as_deref(), BlockStrategy::default())
            .map_err(at("block_strategy"))?,
        timeout_ms: i64::from(request.timeout_seconds.unwrap_or(0)) * 1000,
        author: request.author.unwrap_or_default(),
        alarm_emails: parse_emails(request.alarm_emails.unwrap_or_default())
            .map_err(at("alarm_emails"))?,
        alarm_webhook: parse_webhook(request.alarm_webhook).map_err(at("alarm_webhook"))?,
        retry: RetryPolicy {
            count: request.retry_count.unwrap_or(0),
            backoff: RetryBackoff::from_parts(
                request.retry_backoff.as_deref().unwrap_or("NONE"),
                i64::from(request.retry_backoff_seconds.unwrap_or(0)) * 1000,
                i64::from(request.retry_backoff_cap_seconds.unwrap_or(0)) * 1000,
            )
            .map_err(bad_request)
            .map_err(at("retry_backoff"))?,
        },
        glue: parse_glue(
            request.glue_type.as_deref(),
            request.glue_source,
            request.glue_remark.unwrap_or_default(),
        )
        .map_err(at("glue_source"))?,
        child_job_ids: request
            .child_job_ids
            .unwrap_or_default()
            .into_iter()
            .map(|id| JobId::new(id).map_err(bad_request))
            .collect::<Result<_, _>>()
            .map_err(at("child_job_ids"))?,
        child_trigger_mode: parse_or(
            request.child_trigger_mode.as_deref(),
            ChildTriggerMode::EachShard,
        )
        .map_err(at("child_trigger_mode"))?,
        history: parse_or(request.history.as_deref(), HistoryPolicy::All).map_err(at("history"))?,
    })
}

/// A 400 about `field`.
fn invalid<T>(field: &'static str, message: &str) -> Result<T, ApiError> {
    Err(ApiError::at(field)(bad_request(message)))
}

/// A schedule's type and configuration; the error names whichever is at fault.
fn parse_schedule(
    schedule_type: Option<&str>,
    schedule_conf: Option<&str>,
) -> Result<ScheduleSpec, ApiError> {
    let schedule_type = schedule_type.unwrap_or("CRON");
    parse_or(Some(schedule_type), ScheduleType::Cron).map_err(ApiError::at("schedule_type"))?;
    ScheduleSpec::parse(schedule_type, schedule_conf.unwrap_or(""))
        .map_err(bad_request)
        .map_err(ApiError::at("schedule_conf"))
}

pub(super) fn parse_emails(emails: Vec<String>) -> Result<Vec<String>, ApiError> {
    emails
        .into_iter()
        .map(|email| {
            let email = email.trim().to_owned();
            let valid = email.len() <= 254
                && email
                    .split_once('@')
                    .is_some_and(|(user, domain)| !user.is_empty() && domain.contains('.'))
                && !email.contains(|c: char| c.is_whitespace() || c == ',');
            if valid {
                Ok(email)
            } else {
                Err(bad_request(format!(
                    "invalid alarm e-mail address {email:?}"
                )))
            }
        })
        .collect()
}

/// An alarm webhook, if one is given: an http or https URL with a host
/// ([`parse_webhook_url`]), kept as the URL parser writes it, which is what is called.
pub(super) fn parse_webhook(url: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(url) = url else { return Ok(None) };
    match parse_webhook_url(&url) {
        Ok(url) => Ok(Some(url.into())),
        Err(error) => Err(bad_request(format!("invalid alarm webhook: {error}"))),
    }
}

/// Refuses a job whose alarm webhook is a literal address webhooks may not reach (loopback,
/// private, link-local…, unless `alarm.webhook_allowed_networks` names it): a 400 naming
/// `alarm_webhook`, the address's range and the setting. Names are checked as they are
/// resolved, at delivery (see [`crate::monitors::webhook_target`]).
pub(super) fn check_webhook_target(state: &ApiState, spec: &NewJob) -> Result<(), ApiError> {
    let Some(url) = &spec.alarm_webhook else {
        return Ok(());
    };
    match state.webhook_targets.parse_url(url) {
        Ok(_) => Ok(()),
        Err(error) => invalid("alarm_webhook", &format!("alarm webhook refused: {error}")),
    }
}

pub(super) fn parse_glue(
    glue_type: Option<&str>,
    source: Option<String>,
    remark: String,
) -> Result<Glue, ApiError> {
    let glue_type: GlueType = parse_or(glue_type, GlueType::Bean)?;
    let source = source.filter(|source| !source.trim().is_empty());
    match (glue_type, &source) {
        (GlueType::Bean, Some(_)) => {
            return Err(bad_request(
                "glue_source is only for GLUE_* types; BEAN runs the named handler",
            ));
        }
        (GlueType::Bean, None) => {}
        (_, None) => {
            return Err(bad_request(format!(
                "glue type {glue_type} needs a glue_source (the script)"
            )));
        }
        (_, Some(script)) if script.len() > MAX_GLUE_SOURCE_BYTES => {
            return Err(bad_request(format!(
                "glue_source is {} bytes; the limit is {MAX_GLUE_SOURCE_BYTES} bytes",
                script.len()
            )));
        }
        _ => {}
    }
    Ok(Glue {
        glue_type,
        source,
        remark,
    })
}

/// Child jobs must exist, and following child links from `job` must never lead back to it.
pub(super) async fn check_children(
    state: &ApiState,
    job: Option<JobId>,
    children: &[JobId],
) -> Result<(), ApiError> {
    if children.is_empty() {
        return Ok(());
    }
    // Only the jobs reachable from the children are read, level by level.
    let mut links: std::collections::HashMap<JobId, Vec<JobId>> = std::collections::HashMap::new();
    let mut asked: std::collections::HashSet<JobId> = children.iter().copied().collect();
    let mut frontier: Vec<JobId> = asked.iter().copied().collect();
    while !frontier.is_empty() {
        let found = state.store.child_links(&frontier).await?;
        frontier = found
            .iter()
            .flat_map(|(_, next)| next.iter().copied())
            .filter(|id| asked.insert(*id))
            .collect();
        links.extend(found);
    }
    for child in children {
        if !links.contains_key(child) {
            return Err(ApiError::at("child_job_ids")(bad_request(format!(
                "child job {child} does not exist"
            ))));
        }
    }
    let Some(job) = job else {
        return Ok(()); // a new job has no parents yet, so its children cannot reach it
    };
    // Depth-first from each child; the path is reported when it returns to `job`.
    let mut stack: Vec<Vec<JobId>> = children.iter().map(|child| vec![job, *child]).collect();
    let mut seen = std::collections::HashSet::new();
    while let Some(path) = stack.pop() {
        let last = *path.last().expect("paths are never empty");
        if last == job {
            let shown: Vec<String> = path.iter().map(ToString::to_string).collect();
            return Err(ApiError::at("child_job_ids")(bad_request(format!(
                "child jobs would form a cycle: {}",
                shown.join(" → ")
            ))));
        }
        if !seen.insert(last) {
            continue;
        }
        for next in links.get(&last).map(Vec::as_slice).unwrap_or_default() {
            let mut longer = path.clone();
            longer.push(*next);
            stack.push(longer);
        }
    }
    Ok(())
}

pub(super) fn check_params(params: &str) -> Result<(), ApiError> {
    if params.len() > MAX_PARAMS_BYTES {
        return Err(bad_request(format!(
            "params are {} bytes; the limit is {MAX_PARAMS_BYTES} bytes (they travel in every \
             trigger record: pass a reference to large data instead)",
            params.len()
        )));
    }
    Ok(())
}

/// A job as the API shows it: enumerations as their names, times in ms since the epoch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct JobView {
    /// Id.
    pub id: i64,
    /// Executor app.
    pub app: String,
    /// Display name.
    pub name: String,
    /// CRON, FIX_RATE, FIX_DELAY or NONE.
    pub schedule_type: String,
    /// Cron expression or seconds.
    pub schedule_conf: String,
    /// IANA time zone.
    pub time_zone: String,
    /// Misfire strategy.
    pub misfire_strategy: String,
    /// Route strategy.
    pub route_strategy: String,
    /// Handler name.
    pub handler: String,
    /// Handler parameters.
    pub params: String,
    /// Block strategy.
    pub block_strategy: String,
    /// Timeout in seconds, 0 for none.
    pub timeout_seconds: i64,
    /// Owner.
    pub author: String,
    /// Alarm e-mail addresses.
    pub alarm_emails: Vec<String>,
    /// Alarm webhook URL; for a caller who may only view the app, with its user name,
    /// password, query values and fragment replaced by `REDACTED`.
    pub alarm_webhook: Option<String>,
    /// Retries of a failed run.
    pub retry_count: u32,
    /// NONE, FIXED or EXPONENTIAL.
    pub retry_backoff: String,
    /// Backoff delay (first delay for EXPONENTIAL), seconds.
    pub retry_backoff_seconds: i64,
    /// Largest EXPONENTIAL delay, seconds.
    pub retry_backoff_cap_seconds: i64,
    /// BEAN or a GLUE_* type.
    pub glue_type: String,
    /// The script, for GLUE_* types.
    pub glue_source: Option<String>,
    /// Note on the script's latest version.
    pub glue_remark: String,
    /// When the script last changed, ms.
    pub glue_updated_at_ms: Option<i64>,
    /// Jobs fired when this one succeeds.
    pub child_job_ids: Vec<i64>,
    /// EACH_SHARD or ALL_SHARDS.
    pub child_trigger_mode: String,
    /// ALL, FAILURES or NONE: which finished runs keep their rows.
    pub history: String,
    /// RUNNING or STOPPED.
    pub status: String,
    /// Latest fire written, ms.
    pub last_fire_ms: Option<i64>,
    /// Next fire, ms.
    pub next_fire_ms: Option<i64>,
}

impl JobView {
    /// `job` as `caller` may see it: whole for those who may operate its app; for those who
    /// may only view it, [`redacted`](Self::redacted), since a webhook URL's credentials
    /// would let them call its receiver as the scheduler.
    pub(super) fn shown_to(job: &Job, caller: &Caller) -> JobView {
        let view = JobView::from(job);
        if caller.user.may(&job.spec.app, Access::Operate) {
            view
        } else {
            view.redacted()
        }
    }

    /// The view with the webhook URL's credentials replaced ([`redact_webhook_url`]): for
    /// VIEW members, and for audit entries, which every member who may view the app lists.
    pub(super) fn redacted(mut self) -> JobView {
        self.alarm_webhook = self.alarm_webhook.as_deref().map(redact_webhook_url);
        self
    }
}

impl From<&Job> for JobView {
    fn from(job: &Job) -> Self {
        JobView {
            id: job.id.get(),
            app: job.spec.app.to_string(),
            name: job.spec.name.clone(),
            schedule_type: job.spec.schedule.schedule_type().to_string(),
            schedule_conf: job.spec.schedule.conf(),
            time_zone: job.spec.time_zone.name().to_owned(),
            misfire_strategy: job.spec.misfire_strategy.to_string(),
            route_strategy: job.spec.route_strategy.to_string(),
            handler: job.spec.handler.clone(),
            params: job.spec.params.clone(),
            block_strategy: job.spec.block_strategy.to_string(),
            timeout_seconds: job.spec.timeout_ms / 1000,
            author: job.spec.author.clone(),
            alarm_emails: job.spec.alarm_emails.clone(),
            alarm_webhook: job.spec.alarm_webhook.clone(),
            retry_count: job.spec.retry.count,
            retry_backoff: job.spec.retry.backoff.kind().to_owned(),
            retry_backoff_seconds: job.spec.retry.backoff.parts().0 / 1000,
            retry_backoff_cap_seconds: job.spec.retry.backoff.parts().1 / 1000,
            glue_type: job.spec.glue.glue_type.to_string(),
            glue_source: job.spec.glue.source.clone(),
            glue_remark: job.spec.glue.remark.clone(),
            glue_updated_at_ms: job.glue_updated_at_ms,
            child_job_ids: job.spec.child_job_ids.iter().map(|id| id.get()).collect(),
            child_trigger_mode: job.spec.child_trigger_mode.to_string(),
            history: job.spec.history.to_string(),
            status: job.status.to_string(),
            last_fire_ms: job.last_fire_ms,
            next_fire_ms: job.next_fire_ms,
        }
    }
}
