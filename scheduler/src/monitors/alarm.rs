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
//! A 2xx answer is delivery; anything else, or no answer within the timeout, is a failure
//! (the run's alarm status becomes FAILED and the reason is logged).

use std::time::Duration;

use chrono::{DateTime, SecondsFormat};
use lettre::message::{Mailbox, header::ContentType};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use crate::config::{AlarmConfig, SmtpTls};
use crate::model::{AlarmStatus, Job};
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
    /// The webhook could not be reached.
    #[error("cannot POST the alarm webhook: {0}")]
    Webhook(#[from] reqwest::Error),
    /// The webhook answered with an error status.
    #[error("the alarm webhook answered {0}")]
    WebhookStatus(reqwest::StatusCode),
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

/// HTTP POST of the alarm as JSON to the job's `alarm_webhook`.
pub struct WebhookChannel {
    client: reqwest::Client,
}

impl WebhookChannel {
    /// A channel whose requests give up after `timeout`.
    pub fn new(timeout: Duration) -> Result<WebhookChannel, AlarmError> {
        Ok(WebhookChannel {
            client: reqwest::Client::builder().timeout(timeout).build()?,
        })
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
        let Some(url) = &job.spec.alarm_webhook else {
            return Ok(());
        };
        let response = self.client.post(url).json(alarm).send().await?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(AlarmError::WebhookStatus(response.status()))
        }
    }
}

/// Every alarm channel.
pub struct Alarms {
    channels: Vec<Box<dyn AlarmChannel>>,
}

impl Alarms {
    /// The given channels.
    pub fn new(channels: Vec<Box<dyn AlarmChannel>>) -> Alarms {
        Alarms { channels }
    }

    /// E-mail and webhook from the configuration.
    pub fn from_config(config: &AlarmConfig) -> Result<Alarms, AlarmError> {
        Ok(Alarms::new(vec![
            Box::new(EmailChannel::new(config)?),
            Box::new(WebhookChannel::new(config.timeout)?),
        ]))
    }

    /// Sends `alarm` on every channel `job` has targets on, calling `delivered(channel, ok)`
    /// for each: SENT if all took it, FAILED if one did not (logged), NOT_NEEDED if the job
    /// has no targets.
    pub async fn send(
        &self,
        job: &Job,
        alarm: &Alarm,
        mut delivered: impl FnMut(&'static str, bool),
    ) -> AlarmStatus {
        let mut status = AlarmStatus::NotNeeded;
        for channel in self.channels.iter().filter(|channel| channel.wants(job)) {
            let sent = channel.send(job, alarm).await;
            delivered(channel.name(), sent.is_ok());
            match sent {
                Ok(()) if status != AlarmStatus::Failed => status = AlarmStatus::Sent,
                Ok(()) => {}
                Err(error) => {
                    tracing::warn!(channel = channel.name(), trigger_id = %alarm.trigger_id,
                        %error, "alarm not delivered");
                    status = AlarmStatus::Failed;
                }
            }
        }
        status
    }
}
