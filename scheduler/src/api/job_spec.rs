//! A job's definition as the API reads it ([`NewJobRequest`], checked into a `NewJob` with
//! XXL-JOB's defaults; `job_view` shows it). Every text and list of it is checked
//! against its limit first ([`check_sizes`], limits in [`crate::model::limits`]), so a
//! refusal names the field, its size and the limit, and never echoes a huge value. Its alarm
//! webhook is an http(s) URL to an address webhooks may reach ([`check_webhook_target`]).

use kadence_schemas::{AppName, BlockStrategy, GlueType, JobId};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::{ApiState, bad_request};
use crate::model::limits::{self, CHOICE};
use crate::model::{
    ChildTriggerMode, Glue, HistoryPolicy, NewJob, RetryBackoff, RetryPolicy, RouteStrategy,
};
use crate::monitors::webhook_target::parse_webhook_url;
use crate::schedule::{MisfireStrategy, ScheduleSpec, ScheduleType, parse_time_zone};

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

pub(super) fn parse_or<T: std::str::FromStr>(value: Option<&str>, default: T) -> Result<T, ApiError>
where
    T::Err: std::fmt::Display,
{
    value.map_or(Ok(default), |raw| raw.parse::<T>().map_err(bad_request))
}

/// The job a request describes, with XXL-JOB's defaults; a 400 names the field at fault.
pub(super) fn parse_new_job(request: NewJobRequest) -> Result<NewJob, ApiError> {
    let at = ApiError::at;
    check_sizes(&request)?;
    let app = AppName::parse(&request.app)
        .map_err(bad_request)
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

/// Refuses the first text or list of `request` over its limit (see
/// [`crate::model::limits`]), before anything is parsed: the 400 names the field, its size
/// and the limit, and never echoes the value.
fn check_sizes(request: &NewJobRequest) -> Result<(), ApiError> {
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
            // Its length is checked with the other sizes (`check_sizes`).
            let valid = email
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
        Ok(url) => {
            // Percent-encoding may lengthen what was typed: the stored form is what counts.
            let url: String = url.into();
            limits::ALARM_WEBHOOK.check(&url)?;
            Ok(Some(url))
        }
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
        // Its size is checked with the others (`check_sizes`).
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

/// Params within their limit ([`limits::PARAMS`]): a job's, or a manual trigger's own.
pub(super) fn check_params(params: &str) -> Result<(), ApiError> {
    Ok(limits::PARAMS.check(params)?)
}

#[cfg(test)]
mod tests {
    //! The limits as the API states them (see `crate::model::limits`).

    use crate::model::limits::*;

    #[test]
    fn the_api_takes_a_body_with_the_largest_script_and_params() {
        let largest_job = GLUE_SOURCE.max + PARAMS.max + 64 * 1024;
        assert!(largest_job <= crate::api::BODY_LIMIT_BYTES);
        // A replay names each of an app's partitions at most once.
        assert_eq!(
            Ok(REPLAY_OFFSETS.max),
            usize::try_from(crate::api::MAX_PARTITIONS)
        );
    }

    /// The OpenAPI document's `maxLength` / `maxItems` of `schema.property` (null included in the
    /// type or not).
    fn documented(document: &serde_json::Value, schema: &str, property: &str, key: &str) -> usize {
        let field = &document["components"]["schemas"][schema]["properties"][property];
        field[key]
            .as_u64()
            .and_then(|max| usize::try_from(max).ok())
            .unwrap_or_else(|| panic!("{schema}.{property} states no {key}: {field}"))
    }

    /// utoipa takes only literals in its attributes: this keeps them equal to the limits.
    #[test]
    fn the_openapi_document_states_each_limit() {
        let document = serde_json::to_value(crate::api::openapi_document()).expect("JSON");
        let stated = [
            ("NewJobRequest", JOB_NAME),
            ("NewJobRequest", HANDLER),
            ("NewJobRequest", AUTHOR),
            ("NewJobRequest", PARAMS),
            ("NewJobRequest", SCHEDULE_CONF),
            ("NewJobRequest", TIME_ZONE),
            ("NewJobRequest", ALARM_EMAILS),
            ("NewJobRequest", ALARM_WEBHOOK),
            ("NewJobRequest", GLUE_SOURCE),
            ("NewJobRequest", GLUE_REMARK),
            ("NewJobRequest", CHILD_JOB_IDS),
            ("NewAppRequest", APP_TITLE),
            ("KillRequest", KILL_REASON),
            ("ReplayBody", REPLAY_JOB_IDS),
            ("ReplayBody", REPLAY_TRIGGER_TYPES),
            ("ReplayBody", REPLAY_OUTCOMES),
            ("ReplayBody", REPLAY_OFFSETS),
            ("XxlImportRequest", IMPORT_SOURCE),
        ];
        let preview = &document["paths"]["/api/schedules/preview"]["get"]["parameters"];
        for limit in [SCHEDULE_CONF, TIME_ZONE] {
            let parameter = (preview.as_array().expect("the preview's parameters").iter())
                .find(|parameter| parameter["name"] == limit.field)
                .expect("a parameter of the limit's name");
            assert_eq!(
                parameter["schema"]["maxLength"].as_u64(),
                u64::try_from(limit.max).ok(),
                "{parameter}"
            );
        }
        for (schema, limit) in stated {
            let key = match limit.measure {
                Measure::Entries => "maxItems",
                Measure::Characters | Measure::Bytes => "maxLength",
            };
            assert_eq!(
                documented(&document, schema, limit.field, key),
                limit.max,
                "{schema}.{}",
                limit.field
            );
        }
    }
}
