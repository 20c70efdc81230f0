//! The `[alarm]` section: how failed runs are told about, by e-mail over SMTP and by webhook,
//! and which internal networks webhooks may reach (see [`crate::monitors::webhook_target`]).

use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::IpNetworks;

/// How the SMTP connection is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtpTls {
    /// Plain text (a local relay).
    None,
    /// STARTTLS on the submission port (587).
    Starttls,
    /// TLS from the first byte (465).
    Tls,
}

/// Alarms for failed runs (see [`crate::monitors::alarm`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlarmConfig {
    /// SMTP server for e-mail alarms. Default none: e-mail alarms fail saying so (webhooks
    /// still work).
    pub smtp_host: Option<String>,
    /// SMTP port. Default 587.
    pub smtp_port: u16,
    /// `none`, `starttls` or `tls`. Default `starttls`.
    pub smtp_tls: SmtpTls,
    /// SMTP user name, if the server wants one. Default none.
    pub smtp_username: Option<String>,
    /// SMTP password. Default none. Never logged.
    #[serde(skip_serializing)]
    pub smtp_password: Option<SecretString>,
    /// Sender address. Default `Kadence <kadence@localhost>`.
    pub smtp_from: String,
    /// How long one alarm's delivery (SMTP and webhook, side by side) may take; a failed one
    /// shows FAILED only once this has passed, however soon it failed, so that when it turns
    /// FAILED tells a member nothing (see [`crate::monitors::alarm`]). Default `10s`.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Networks alarm webhooks may reach although they are loopback, private, link-local or
    /// otherwise internal (addresses or CIDR ranges, e.g. `["10.20.0.0/16", "127.0.0.1"]`;
    /// `KADENCE_ALARM__WEBHOOK_ALLOWED_NETWORKS='[10.20.0.0/16]'`). Default none: a webhook
    /// reaches public addresses only, so that whoever may edit a job cannot make the
    /// scheduler call its own network.
    pub webhook_allowed_networks: WebhookNetworks,
}

impl Default for AlarmConfig {
    fn default() -> Self {
        AlarmConfig {
            smtp_host: None,
            smtp_port: 587,
            smtp_tls: SmtpTls::Starttls,
            smtp_username: None,
            smtp_password: None,
            smtp_from: "Kadence <kadence@localhost>".to_owned(),
            timeout: Duration::from_secs(10),
            webhook_allowed_networks: WebhookNetworks::default(),
        }
    }
}

/// The internal networks alarm webhooks may reach (`alarm.webhook_allowed_networks`).
pub type WebhookNetworks = IpNetworks;

#[cfg(test)]
// figment's `Jail` closures return `figment::Error`, which is large; that is its API.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;

    #[test]
    fn webhook_networks_are_addresses_or_ranges_from_file_or_environment() {
        figment::Jail::expect_with(|jail| {
            let alarm = crate::config::Config::load(None).expect("loads").alarm;
            assert_eq!(alarm.webhook_allowed_networks, WebhookNetworks::default());
            jail.create_file(
                "kadence.toml",
                r#"
                [alarm]
                webhook_allowed_networks = ["10.20.0.0/16", " 127.0.0.1 "]
                "#,
            )?;
            let file = Some(std::path::Path::new("kadence.toml"));
            let networks = crate::config::Config::load(file)
                .expect("loads")
                .alarm
                .webhook_allowed_networks;
            assert!(networks.contains("10.20.3.4".parse().unwrap()));
            assert!(networks.contains("127.0.0.1".parse().unwrap()));
            assert!(!networks.contains("127.0.0.2".parse().unwrap()));
            jail.set_env("KADENCE_ALARM__WEBHOOK_ALLOWED_NETWORKS", "[fd00:1::/64]");
            let networks = crate::config::Config::load(file)
                .expect("loads")
                .alarm
                .webhook_allowed_networks;
            assert!(networks.contains("fd00:1::7".parse().unwrap()));
            assert!(!networks.contains("10.20.3.4".parse().unwrap()));
            jail.set_env(
                "KADENCE_ALARM__WEBHOOK_ALLOWED_NETWORKS",
                "[hooks.internal]",
            );
            let error = crate::config::Config::load(file).unwrap_err().to_string();
            assert!(error.contains("\"hooks.internal\""), "{error}");
            Ok(())
        });
    }
}
