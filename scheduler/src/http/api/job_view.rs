//! A job as the API shows it ([`JobView`]): its definition with enumerations as their names
//! and times in ms since the epoch; members who may only view the app, and the audit trail,
//! see its alarm webhook as its scheme, host and port only ([`JobView::shown_to`],
//! [`JobView::redacted`]).

use serde::{Deserialize, Serialize};

use super::caller::Caller;
use crate::domain::model::{Access, Job};
use crate::monitors::webhook_target::redact_webhook_url;

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
    /// Alarm webhook URL; for a caller who may only view the app, its scheme, host and port
    /// only, with all after them shown as `/REDACTED` (`https://hooks.slack.com/REDACTED`):
    /// receivers put their credential in the path, the query or the user info.
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

    /// The view with the webhook URL shown up to its host and port ([`redact_webhook_url`]):
    /// for VIEW members, and for audit entries, which every member who may view the app lists.
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
