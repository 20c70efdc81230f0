//! A job's definition as users write it ([`NewJobRequest`]: the body of `POST /api/jobs`,
//! and what the XXL-JOB import maps each XXL-JOB job onto), checked into a `NewJob` with
//! XXL-JOB's defaults ([`parse_new_job`]). Every text and list of it is checked against its
//! limit first ([`check_sizes`], limits in [`crate::domain::model::limits`]), so a refusal
//! names the field, its size and the limit, and never echoes a huge value. Its alarm webhook
//! is an http(s) URL; where it may point is checked by the job operations, which know the
//! node's allowed networks.

use kadence_schemas::{AppName, BlockStrategy, GlueType, JobId};
use serde::{Deserialize, Serialize};

use super::JobError;
use crate::domain::model::limits::{self, CHOICE};
use crate::domain::model::{
    ChildTriggerMode, Glue, HistoryPolicy, NewJob, RetryBackoff, RetryPolicy, RouteStrategy,
};
use crate::domain::schedule::{MisfireStrategy, ScheduleSpec, ScheduleType, parse_time_zone};
use crate::monitors::webhook_target::parse_webhook_url;

/// Body of `POST /api/jobs`. Optional fields take XXL-JOB's defaults.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewJobRequest {
    /// The executor app.
    #[schema(value_type = AppName)]
    pub app: String,
    /// Display name, at most 255 characters; defaults to the handler name.
    #[serde(default)]
    #[schema(max_length = 255)]
    pub name: Option<String>,
    /// CRON (default), FIX_RATE, FIX_DELAY or NONE.
    #[serde(default)]
    #[schema(value_type = Option<ScheduleType>)]
    pub schedule_type: Option<String>,
    /// Cron expression, or seconds for FIX_RATE and FIX_DELAY; at most 255 characters.
    #[serde(default)]
    #[schema(max_length = 255)]
    pub schedule_conf: Option<String>,
    /// IANA time zone; default UTC.
    #[serde(default)]
    #[schema(max_length = 64)]
    pub time_zone: Option<String>,
    /// DO_NOTHING (default) or FIRE_ONCE_NOW.
    #[serde(default)]
    #[schema(value_type = Option<MisfireStrategy>)]
    pub misfire_strategy: Option<String>,
    /// How the partition is picked, XXL-JOB's routing strategies; default FIRST.
    #[serde(default)]
    #[schema(value_type = Option<RouteStrategy>)]
    pub route_strategy: Option<String>,
    /// Handler name on the executors, 1 to 255 characters.
    #[schema(min_length = 1, max_length = 255)]
    pub handler: String,
    /// Parameters for the handler, at most 64 KiB (65 536 bytes of UTF-8).
    #[serde(default)]
    #[schema(max_length = 65536)]
    pub params: Option<String>,
    /// SERIAL_EXECUTION (default), DISCARD_LATER, COVER_EARLY or CONCURRENT.
    #[serde(default)]
    #[schema(value_type = Option<BlockStrategy>)]
    pub block_strategy: Option<String>,
    /// Run timeout in seconds; 0 or absent for none.
    #[serde(default)]
    pub timeout_seconds: Option<u32>,
    /// Owner, for people; at most 255 characters.
    #[serde(default)]
    #[schema(max_length = 255)]
    pub author: Option<String>,
    /// Where failure alarms are e-mailed: at most 20 addresses, each at most 254 bytes.
    #[serde(default)]
    #[schema(max_items = 20)]
    pub alarm_emails: Option<Vec<String>>,
    /// Where failure alarms are POSTed (http or https URL, at most 2 048 bytes as stored).
    /// Loopback, private, link-local and other internal addresses are refused unless the
    /// scheduler's `alarm.webhook_allowed_networks` names them.
    #[serde(default)]
    #[schema(max_length = 2048)]
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
    /// The script, for GLUE_* types (at most 256 KiB: 262 144 bytes of UTF-8).
    #[serde(default)]
    #[schema(max_length = 262144)]
    pub glue_source: Option<String>,
    /// Note on this version of the script; at most 255 characters.
    #[serde(default)]
    #[schema(max_length = 255)]
    pub glue_remark: Option<String>,
    /// Jobs fired when this one succeeds; at most 50.
    #[serde(default)]
    #[schema(max_items = 50)]
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

fn parse_or<T: std::str::FromStr>(value: Option<&str>, default: T) -> Result<T, JobError>
where
    T::Err: std::fmt::Display,
{
    value.map_or(Ok(default), |raw| {
        raw.parse::<T>().map_err(JobError::invalid)
    })
}

/// The job a request describes, with XXL-JOB's defaults; a refusal names the field at fault.
pub fn parse_new_job(request: NewJobRequest) -> Result<NewJob, JobError> {
    let at = JobError::at;
    check_sizes(&request)?;
    let app = AppName::parse(&request.app)
        .map_err(JobError::invalid)
        .map_err(at("app"))?;
    let handler = request.handler.trim().to_owned();
    if handler.is_empty() {
        return invalid(
            "handler",
            "handler must not be empty: name the executors' handler",
        );
    }
    let params = request.params.unwrap_or_default();
    // A blank name takes the handler's, as a missing one does.
    let name = request
        .name
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| handler.clone());
    let schedule = parse_schedule(
        request.schedule_type.as_deref(),
        request.schedule_conf.as_deref(),
    )?;
    Ok(NewJob {
        app,
        name,
        schedule,
        time_zone: parse_time_zone(request.time_zone.as_deref().unwrap_or("UTC"))
            .map_err(JobError::invalid)
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
            .map_err(JobError::invalid)
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
            .map(|id| JobId::new(id).map_err(JobError::invalid))
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

/// Refuses the first text or list of `request` over its limit (see
/// [`crate::domain::model::limits`]), before anything is parsed: the 400 names the field, its size
/// and the limit, and never echoes the value.
fn check_sizes(request: &NewJobRequest) -> Result<(), JobError> {
    let texts = [
        (limits::JOB_NAME, request.name.as_deref()),
        (limits::HANDLER, Some(request.handler.as_str())),
        (limits::AUTHOR, request.author.as_deref()),
        (limits::PARAMS, request.params.as_deref()),
        (limits::SCHEDULE_CONF, request.schedule_conf.as_deref()),
        (limits::TIME_ZONE, request.time_zone.as_deref()),
        (limits::ALARM_WEBHOOK, request.alarm_webhook.as_deref()),
        (limits::GLUE_SOURCE, request.glue_source.as_deref()),
        (limits::GLUE_REMARK, request.glue_remark.as_deref()),
    ];
    let choices = [
        ("schedule_type", &request.schedule_type),
        ("misfire_strategy", &request.misfire_strategy),
        ("route_strategy", &request.route_strategy),
        ("block_strategy", &request.block_strategy),
        ("retry_backoff", &request.retry_backoff),
        ("glue_type", &request.glue_type),
        ("child_trigger_mode", &request.child_trigger_mode),
        ("history", &request.history),
    ];
    let choices = (choices.into_iter()).map(|(field, text)| (CHOICE.named(field), text.as_deref()));
    for (limit, text) in texts.into_iter().chain(choices) {
        if let Some(text) = text {
            limit.check(text)?;
        }
    }
    let emails = request.alarm_emails.as_deref().unwrap_or_default();
    limits::ALARM_EMAILS.check_count(emails.len())?;
    for (index, email) in emails.iter().enumerate() {
        limits::ALARM_EMAIL.check_entry(index, email.trim())?;
    }
    let children = request.child_job_ids.as_ref().map_or(0, Vec::len);
    limits::CHILD_JOB_IDS.check_count(children)?;
    Ok(())
}

/// A refusal of `field`.
fn invalid<T>(field: &'static str, message: &str) -> Result<T, JobError> {
    Err(JobError::at(field)(JobError::invalid(message)))
}

/// A schedule's type and configuration; the error names whichever is at fault.
fn parse_schedule(
    schedule_type: Option<&str>,
    schedule_conf: Option<&str>,
) -> Result<ScheduleSpec, JobError> {
    let schedule_type = schedule_type.unwrap_or("CRON");
    parse_or(Some(schedule_type), ScheduleType::Cron).map_err(JobError::at("schedule_type"))?;
    ScheduleSpec::parse(schedule_type, schedule_conf.unwrap_or(""))
        .map_err(JobError::invalid)
        .map_err(JobError::at("schedule_conf"))
}

fn parse_emails(emails: Vec<String>) -> Result<Vec<String>, JobError> {
    emails
        .into_iter()
        .map(|email| {
            let email = email.trim().to_owned();
            // Its length is checked with the other sizes (`check_sizes`).
            let valid = email
                .split_once('@')
                .is_some_and(|(user, domain)| !user.is_empty() && domain.contains('.'))
                && !email.contains(|c: char| c.is_whitespace() || c == ',');
            if valid {
                Ok(email)
            } else {
                Err(JobError::invalid(format!(
                    "invalid alarm e-mail address {email:?}"
                )))
            }
        })
        .collect()
}

/// An alarm webhook, if one is given: an http or https URL with a host
/// ([`parse_webhook_url`]), kept as the URL parser writes it, which is what is called.
fn parse_webhook(url: Option<String>) -> Result<Option<String>, JobError> {
    let Some(url) = url else { return Ok(None) };
    match parse_webhook_url(&url) {
        Ok(url) => {
            // Percent-encoding may lengthen what was typed: the stored form is what counts.
            let url: String = url.into();
            limits::ALARM_WEBHOOK.check(&url)?;
            Ok(Some(url))
        }
        Err(error) => Err(JobError::invalid(format!("invalid alarm webhook: {error}"))),
    }
}

fn parse_glue(
    glue_type: Option<&str>,
    source: Option<String>,
    remark: String,
) -> Result<Glue, JobError> {
    let glue_type: GlueType = parse_or(glue_type, GlueType::Bean)?;
    let source = source.filter(|source| !source.trim().is_empty());
    match (glue_type, &source) {
        (GlueType::Bean, Some(_)) => {
            return Err(JobError::invalid(
                "glue_source is only for GLUE_* types; BEAN runs the named handler",
            ));
        }
        (GlueType::Bean, None) => {}
        (_, None) => {
            return Err(JobError::invalid(format!(
                "glue type {glue_type} needs a glue_source (the script)"
            )));
        }
        // Its size is checked with the others (`check_sizes`).
        _ => {}
    }
    Ok(Glue {
        glue_type,
        source,
        remark,
    })
}

/// Params within their limit ([`limits::PARAMS`]): a job's, or a manual trigger's own.
pub fn check_params(params: &str) -> Result<(), JobError> {
    Ok(limits::PARAMS.check(params)?)
}
