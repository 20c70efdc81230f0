//! Alarms for failed runs, through a small trait with two real channels: e-mail over SMTP
//! (`lettre`) to the job's `alarm_emails`, and a webhook (HTTP POST of [`Alarm`] as JSON) to
//! its `alarm_webhook`. XXL-JOB only e-mails.
//!
//! The webhook body is [`Alarm`] serialised as JSON, e.g.
//!
//! ```json
//! {"kind": "run_failed", "job_id": 7, "job_name": "nightly export", "app": "billing",
//!  "author": "ops", "trigger_id": "7-1767225600000-r1", "log_id": 42, "first_log_id": 41,
//!  "attempt": 1, "retries_left": 1, "trigger_type": "RETRY",
//!  "scheduled_at": "2026-01-01T00:00:00.000Z", "finished_at": "2026-01-01T00:00:01.250Z",
//!  "code": 500, "message": "database is down", "executor_id": "billing-host-1"}
//! ```
//!
//! A 2xx answer is delivery; anything else is a failure: a redirect (none is followed), an
//! error status, no answer within `alarm.timeout`, a refused connection, or a target
//! [`super::webhook_target`] refuses (an internal address not in
//! `alarm.webhook_allowed_networks`). The call reads none of the answer but its status.
//!
//! **Who learns why a delivery failed.** The run's alarm status, which every member who may
//! view the app sees, is only SENT or FAILED: it never says whether the connection was
//! refused, timed out or got an error status, so that a webhook pointed at a port is not a
//! way to learn whether something listens there. The reason goes to the scheduler's log (a
//! warning, control characters escaped) and to the audit trail, as an entry without an app
//! (user `(scheduler)`, action `ALARM {channel}`, target `/api/jobs/{id}`, status 502, the
//! run and the reason in its details), which only admins list: see [`failure_audit_entry`].
//!
//! **When a member learns it.** The moment the status turns would tell what the status does
//! not: a refused connection fails at once, an error status after a round trip, silence
//! after `alarm.timeout`; with a stopwatch, a webhook on an allowed address would be a port
//! probe again. So [`Alarms::send`] gives one alarm's delivery `alarm.timeout` in all (its
//! channels are tried side by side, each cut off at that deadline) and answers a failure
//! only once the deadline has passed, however soon it was known. The caller writes the
//! status, the audit entry and the delivery metrics (`/metrics` may be open to members)
//! only then. A success is answered as soon as every channel took the alarm: SENT says the
//! receiver answered 2xx, and no stopwatch learns more from when it did; holding it back
//! would only make working alarms late. The follow-up monitor keeps many deliveries in
//! flight, so that a failure's wait holds up neither the other alarms nor the retries and
//! child jobs behind it (see [`super::follow_up`]).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat};
use lettre::message::{Mailbox, header::ContentType};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use super::webhook_target::{AllowedAddressResolver, WebhookTargets, WebhookUrlError};
use crate::config::{AlarmConfig, SmtpTls};
use crate::domain::model::{AlarmStatus, Job, NewAuditEntry};
use crate::store::FinishedRun;

/// What an alarm says about one failed run (also the webhook's JSON body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alarm {
    /// Always `run_failed`.
    pub kind: String,
    /// The job.
    pub job_id: i64,
    /// Its name.
    pub job_name: String,
    /// Its app.
    pub app: String,
    /// Its author.
    pub author: String,
    /// The failed run.
    pub trigger_id: String,
    /// The failed run's log id.
    pub log_id: i64,
    /// The first attempt's log id (the same as `log_id` for a first attempt).
    pub first_log_id: i64,
    /// 0 for the first attempt.
    pub attempt: i32,
    /// Retries still to come for this run.
    pub retries_left: i64,
    /// Why the run was triggered.
    pub trigger_type: String,
    /// When it was scheduled, RFC 3339 UTC.
    pub scheduled_at: String,
    /// When its result came, RFC 3339 UTC.
    pub finished_at: Option<String>,
    /// Result code (500 failure, 502 timeout).
    pub code: i32,
    /// Result message.
    pub message: Option<String>,
    /// The executor that reported it.
    pub executor_id: Option<String>,
}

impl Alarm {
    /// The alarm for `run` of `job`.
    pub fn for_run(job: &Job, run: &FinishedRun) -> Alarm {
        let retries_left = i64::from(job.spec.retry.count) - i64::from(run.fire.attempt);
        Alarm {
            kind: "run_failed".to_owned(),
            job_id: job.id.get(),
            job_name: job.spec.name.clone(),
            app: job.spec.app.to_string(),
            author: job.spec.author.clone(),
            trigger_id: run.fire.trigger_id.to_string(),
            log_id: run.fire.log_id,
            first_log_id: run.first_log_id.unwrap_or(run.fire.log_id),
            attempt: run.fire.attempt,
            retries_left: retries_left.max(0),
            trigger_type: run.fire.trigger_type.to_string(),
            scheduled_at: rfc3339(run.fire.scheduled_at_ms),
            finished_at: run.finished_at_ms.map(rfc3339),
            code: run.code,
            message: run.message.clone(),
            executor_id: run.executor_id.clone(),
        }
    }

    /// A one-line subject.
    fn subject(&self) -> String {
        format!(
            "[Kadence] job {} ({}) failed: run {} code {}",
            self.job_id, self.job_name, self.trigger_id, self.code
        )
    }

    /// A plain-text body.
    fn text(&self) -> String {
        format!(
            "Job {} ({}) of app {} failed.\n\nrun: {} (log id {}, first attempt {})\n\
             attempt: {} ({} retries left)\ntrigger type: {}\nscheduled at: {}\n\
             finished at: {}\nexecutor: {}\ncode: {}\nmessage: {}\n",
            self.job_id,
            self.job_name,
            self.app,
            self.trigger_id,
            self.log_id,
            self.first_log_id,
            self.attempt,
            self.retries_left,
            self.trigger_type,
            self.scheduled_at,
            self.finished_at.as_deref().unwrap_or("-"),
            self.executor_id.as_deref().unwrap_or("-"),
            self.code,
            self.message.as_deref().unwrap_or("-"),
        )
    }
}

fn rfc3339(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

/// Why an alarm was not delivered.
#[derive(Debug, thiserror::Error)]
pub enum AlarmError {
    /// The channel is not set up (e.g. no SMTP host configured).
    #[error("{0}")]
    NotConfigured(String),
    /// An address or URL of the job is unusable.
    #[error("invalid alarm target {target:?}: {reason}")]
    InvalidTarget {
        /// The address or URL.
        target: String,
        /// Why.
        reason: String,
    },
    /// The SMTP server refused or could not be reached.
    #[error("cannot send the alarm e-mail: {0}")]
    Smtp(#[from] lettre::transport::smtp::Error),
    /// The webhook's URL is unusable or points where webhooks may not reach.
    #[error("the alarm webhook is refused: {0}")]
    WebhookTarget(#[from] WebhookUrlError),
    /// The webhook could not be reached (its cause says why: refused, timed out, a host
    /// resolving only to refused addresses…).
    #[error("cannot POST the alarm webhook")]
    Webhook(#[from] reqwest::Error),
    /// The webhook answered with a status other than 2xx.
    #[error("the alarm webhook answered {0}, not 2xx (redirects are not followed)")]
    WebhookStatus(reqwest::StatusCode),
    /// The channel had not delivered when the delivery's time (`alarm.timeout`) ran out.
    #[error("not delivered within {0:?} (alarm.timeout)")]
    TimedOut(Duration),
}

impl AlarmError {
    /// The error with every cause, `: `-separated, control characters escaped: the reason
    /// logged and shown to admins.
    pub fn detail(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(error) = cause {
            text.push_str(": ");
            text.push_str(&error.to_string());
            cause = error.source();
        }
        escape_controls(&text)
    }
}

/// `text` with each control character written as an escape (`\n`, `\u{1b}`), so that a
/// reason built from what a remote server sent cannot forge log lines or terminal output.
fn escape_controls(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    escaped
}

/// The audit entry telling admins that `alarm` was not delivered on `channel`, and why
/// (`detail`): without an app, so that only admins list it (see the module docs).
pub fn failure_audit_entry(
    alarm: &Alarm,
    channel: &str,
    detail: &str,
    now_ms: i64,
) -> NewAuditEntry {
    NewAuditEntry {
        at_ms: now_ms,
        user_id: None,
        user_name: "(scheduler)".to_owned(),
        action: format!("ALARM {channel}"),
        target: format!("/api/jobs/{}", alarm.job_id),
        app: None,
        status: reqwest::StatusCode::BAD_GATEWAY.as_u16(),
        details: Some(serde_json::json!({
            "app": alarm.app,
            "job_id": alarm.job_id,
            "log_id": alarm.log_id,
            "trigger_id": alarm.trigger_id,
            "channel": channel,
            "reason": detail,
        })),
    }
}

/// One way of delivering alarms.
#[async_trait::async_trait]
pub trait AlarmChannel: Send + Sync {
    /// The channel's name, for logs.
    fn name(&self) -> &'static str;
    /// Whether `job` has targets on this channel.
    fn wants(&self, job: &Job) -> bool;
    /// Delivers `alarm` to `job`'s targets.
    async fn send(&self, job: &Job, alarm: &Alarm) -> Result<(), AlarmError>;
}

/// E-mail over SMTP to the job's `alarm_emails`.
pub struct EmailChannel {
    transport: Option<AsyncSmtpTransport<Tokio1Executor>>,
    from: Option<Mailbox>,
}

impl EmailChannel {
    /// A channel from the `alarm` configuration; without an SMTP host, e-mail alarms fail
    /// saying so.
    pub fn new(config: &AlarmConfig) -> Result<EmailChannel, AlarmError> {
        let Some(host) = config.smtp_host.as_deref() else {
            return Ok(EmailChannel {
                transport: None,
                from: None,
            });
        };
        let invalid = |reason: String| AlarmError::InvalidTarget {
            target: host.to_owned(),
            reason,
        };
        let mut builder = match config.smtp_tls {
            SmtpTls::None => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host),
            SmtpTls::Starttls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(host)
                .map_err(|error| invalid(error.to_string()))?,
            SmtpTls::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(host)
                .map_err(|error| invalid(error.to_string()))?,
        }
        .port(config.smtp_port)
        .timeout(Some(config.timeout));
        if let Some(username) = &config.smtp_username {
            let password = config
                .smtp_password
                .as_ref()
                .map(|password| password.expose_secret().to_owned())
                .unwrap_or_default();
            builder = builder.credentials(Credentials::new(username.clone(), password));
        }
        let from =
            config
                .smtp_from
                .parse::<Mailbox>()
                .map_err(|error| AlarmError::InvalidTarget {
                    target: config.smtp_from.clone(),
                    reason: error.to_string(),
                })?;
        Ok(EmailChannel {
            transport: Some(builder.build()),
            from: Some(from),
        })
    }
}

#[async_trait::async_trait]
impl AlarmChannel for EmailChannel {
    fn name(&self) -> &'static str {
        "email"
    }

    fn wants(&self, job: &Job) -> bool {
        !job.spec.alarm_emails.is_empty()
    }

    async fn send(&self, job: &Job, alarm: &Alarm) -> Result<(), AlarmError> {
        let (Some(transport), Some(from)) = (&self.transport, &self.from) else {
            return Err(AlarmError::NotConfigured(
                "e-mail alarms need an SMTP server: set alarm.smtp_host".to_owned(),
            ));
        };
        let mut message = Message::builder()
            .from(from.clone())
            .subject(alarm.subject())
            .header(ContentType::TEXT_PLAIN);
        for address in &job.spec.alarm_emails {
            let mailbox =
                address
                    .parse::<Mailbox>()
                    .map_err(|error| AlarmError::InvalidTarget {
                        target: address.clone(),
                        reason: error.to_string(),
                    })?;
            message = message.to(mailbox);
        }
        let message = message
            .body(alarm.text())
            .map_err(|error| AlarmError::InvalidTarget {
                target: job.spec.alarm_emails.join(","),
                reason: error.to_string(),
            })?;
        transport.send(message).await?;
        Ok(())
    }
}

/// Longest a webhook's connection may take to open (less if `alarm.timeout` is shorter).
pub const WEBHOOK_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// HTTP POST of the alarm as JSON to the job's `alarm_webhook`, only to addresses
/// `targets` permits (see [`super::webhook_target`]).
pub struct WebhookChannel {
    client: reqwest::Client,
    targets: WebhookTargets,
}

impl WebhookChannel {
    /// A channel reaching what `targets` permits, whose requests give up after `timeout`.
    pub fn new(timeout: Duration, targets: WebhookTargets) -> Result<WebhookChannel, AlarmError> {
        let client = reqwest::Client::builder()
            // Every name is resolved by the resolver that drops refused addresses; literal
            // addresses, which no resolver sees, are checked in `send`.
            .dns_resolver(Arc::new(AllowedAddressResolver::new(targets.clone())))
            // A redirect's target was never checked (a literal address in its `Location`
            // skips the resolver): it is a failure, not followed.
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would resolve and connect on its own, past the resolver.
            .no_proxy()
            .connect_timeout(timeout.min(WEBHOOK_CONNECT_TIMEOUT))
            .timeout(timeout)
            .build()?;
        Ok(WebhookChannel { client, targets })
    }
}

#[async_trait::async_trait]
impl AlarmChannel for WebhookChannel {
    fn name(&self) -> &'static str {
        "webhook"
    }

    fn wants(&self, job: &Job) -> bool {
        job.spec.alarm_webhook.is_some()
    }

    async fn send(&self, job: &Job, alarm: &Alarm) -> Result<(), AlarmError> {
        let Some(text) = &job.spec.alarm_webhook else {
            return Ok(());
        };
        // Checked again: the allow-list may have changed since the job was saved.
        let url = self.targets.parse_url(text)?;
        // The URL may carry credentials: the reason names the job, never the URL.
        let sent = self.client.post(url).json(alarm).send().await;
        let response = sent.map_err(reqwest::Error::without_url)?;
        // The body is never read: only the status counts, and a receiver may send any
        // amount. Dropping the answer closes its connection.
        let status = response.status();
        drop(response);
        if status.is_success() {
            Ok(())
        } else {
            Err(AlarmError::WebhookStatus(status))
        }
    }
}

/// What became of one alarm: its status and each channel's outcome, in channel order.
#[derive(Debug)]
pub struct AlarmDelivery {
    /// SENT if every channel took it, FAILED if one did not, NOT_NEEDED without targets.
    pub status: AlarmStatus,
    /// Each channel the job has targets on, with its outcome.
    pub outcomes: Vec<(&'static str, Result<(), AlarmError>)>,
}

/// Every alarm channel, and how long one alarm's delivery may take.
pub struct Alarms {
    channels: Vec<Box<dyn AlarmChannel>>,
    timeout: Duration,
}

impl Alarms {
    /// The given channels; a delivery on them gets `timeout` in all (`alarm.timeout`), and
    /// a failed one is answered no sooner (see the module docs).
    pub fn new(channels: Vec<Box<dyn AlarmChannel>>, timeout: Duration) -> Alarms {
        Alarms { channels, timeout }
    }

    /// E-mail and webhook from the configuration.
    pub fn from_config(config: &AlarmConfig) -> Result<Alarms, AlarmError> {
        let channels: Vec<Box<dyn AlarmChannel>> = vec![
            Box::new(EmailChannel::new(config)?),
            Box::new(WebhookChannel::new(
                config.timeout,
                WebhookTargets::new(config.webhook_allowed_networks.clone()),
            )?),
        ];
        Ok(Alarms::new(channels, config.timeout))
    }

    /// Sends `alarm` on every channel `job` has targets on, side by side, and answers when
    /// the outcome may be shown (see the module docs): SENT as soon as every channel took
    /// it; FAILED once the delivery's time is up since this call began, however soon a
    /// channel failed (a channel still busy then has failed, [`AlarmError::TimedOut`]);
    /// NOT_NEEDED at once if the job has no targets. Each failure is logged with its reason;
    /// the status is all a member learns.
    pub async fn send(&self, job: &Job, alarm: &Alarm) -> AlarmDelivery {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let wanted = self.channels.iter().filter(|channel| channel.wants(job));
        let sends = wanted.map(|channel| async move {
            let sent = tokio::time::timeout_at(deadline, channel.send(job, alarm))
                .await
                .unwrap_or(Err(AlarmError::TimedOut(self.timeout)));
            (channel.name(), sent)
        });
        let outcomes = futures::future::join_all(sends).await;
        let status = if outcomes.is_empty() {
            AlarmStatus::NotNeeded
        } else if outcomes.iter().all(|(_, sent)| sent.is_ok()) {
            AlarmStatus::Sent
        } else {
            tokio::time::sleep_until(deadline).await;
            AlarmStatus::Failed
        };
        for (channel, sent) in &outcomes {
            if let Err(error) = sent {
                tracing::warn!(channel, job_id = alarm.job_id, trigger_id = %alarm.trigger_id,
                    reason = %error.detail(), "alarm not delivered");
            }
        }
        AlarmDelivery { status, outcomes }
    }
}

#[cfg(test)]
mod tests;
