//! Where an alarm webhook may point. Anyone who may operate an app's jobs sets their
//! `alarm_webhook`, and the scheduler POSTs to it from inside the operator's network:
//! unchecked, that reaches what only the scheduler can reach (a database's admin port, the
//! cloud metadata service at 169.254.169.254), and the run's alarm status tells which ports
//! answer. So a webhook is checked twice:
//!
//! - **when its job is saved**, [`WebhookTargets::parse_url`] takes only an absolute http
//!   or https URL with a host ([`parse_webhook_url`]) and refuses a literal IP address in a
//!   refused range (the API answers 400 naming `alarm_webhook`). A host name is not resolved
//!   then: what it resolves to may change before any alarm is sent;
//! - **when an alarm is delivered**, the literal address is checked again (the allow-list may
//!   have changed since), and a host name is resolved by [`AllowedAddressResolver`], the HTTP
//!   client's only resolver, which keeps only the addresses [`WebhookTargets::check`]
//!   permits. The addresses checked are the addresses connected to, so a name that
//!   resolves to a public address when tested and to an internal one when used (DNS
//!   rebinding) gains nothing. The client follows no redirect and uses no proxy, either of
//!   which would connect somewhere this module never saw (see
//!   [`WebhookChannel`](super::alarm::WebhookChannel)).
//!
//! Refused ([`refused_range`]): loopback, private (10/8, 172.16/12, 192.168/16), link-local
//! (169.254/16, where metadata services answer; fe80::/10), unspecified, 0.0.0.0/8,
//! multicast, broadcast, shared (100.64/10, carrier-grade NAT), reserved (240/4),
//! unique-local (fc00::/7), site-local (fec0::/10), and the IPv6 forms that carry one of
//! those IPv4 addresses (IPv4-mapped `::ffff:0:0/96`, IPv4-compatible `::/96`, NAT64
//! `64:ff9b::/96`). An operator whose alarm receivers live on such a network names it in
//! `alarm.webhook_allowed_networks` ([`WebhookNetworks`]); nothing else opens a range.
//!
//! A webhook URL often carries its receiver's credentials (`https://user:key@…`,
//! `?token=…`, and most often in its path, as Slack's and Discord's do): members with only
//! VIEW on an app see its scheme, host and port only, through [`redact_webhook_url`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ipnet::{Ipv4Net, Ipv6Net};
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::config::WebhookNetworks;

/// The config key that opens refused ranges, as error messages name it.
pub const ALLOWED_NETWORKS_KEY: &str =
    "alarm.webhook_allowed_networks (KADENCE_ALARM__WEBHOOK_ALLOWED_NETWORKS)";

/// Longest webhook URL accepted, in bytes.
pub const MAX_WEBHOOK_URL_BYTES: usize = 2048;

/// What a redacted part of a URL shows instead.
pub const REDACTED: &str = "REDACTED";

/// IPv4 ranges no webhook may reach unless allowed, each with what it is. The broadcast
/// address comes before the reserved range that holds it, so that it is named as itself.
const REFUSED_V4: &[(Ipv4Net, &str)] = &[
    (v4(0, 0, 0, 0, 8), "in 0.0.0.0/8 (\"this network\")"),
    (v4(10, 0, 0, 0, 8), "a private address"),
    (
        v4(100, 64, 0, 0, 10),
        "a shared address (100.64.0.0/10, carrier-grade NAT)",
    ),
    (v4(127, 0, 0, 0, 8), "a loopback address"),
    (
        v4(169, 254, 0, 0, 16),
        "a link-local address (where cloud metadata services answer)",
    ),
    (v4(172, 16, 0, 0, 12), "a private address"),
    (v4(192, 168, 0, 0, 16), "a private address"),
    (v4(224, 0, 0, 0, 4), "a multicast address"),
    (v4(255, 255, 255, 255, 32), "the broadcast address"),
    (v4(240, 0, 0, 0, 4), "a reserved address (240.0.0.0/4)"),
];

/// IPv6 ranges no webhook may reach unless allowed (those carrying IPv4 addresses are
/// judged by the address they carry, see [`embedded_v4`]).
const REFUSED_V6: &[(Ipv6Net, &str)] = &[
    (v6(Ipv6Addr::UNSPECIFIED, 128), "the unspecified address"),
    (v6(Ipv6Addr::LOCALHOST, 128), "a loopback address"),
    (
        v6(Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7),
        "a unique-local address (fc00::/7)",
    ),
    (
        v6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10),
        "a link-local address",
    ),
    (
        v6(Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10),
        "a site-local address (fec0::/10)",
    ),
    (
        v6(Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8),
        "a multicast address",
    ),
];

const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), prefix)
}

const fn v6(address: Ipv6Addr, prefix: u8) -> Ipv6Net {
    Ipv6Net::new_assert(address, prefix)
}

/// What refused range `address` is in (e.g. "a loopback address"), or `None` when a webhook
/// may reach it without being allowed. An IPv6 address carrying an IPv4 one is judged by
/// the IPv4 address.
pub fn refused_range(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => REFUSED_V6
            .iter()
            .find(|(range, _)| range.contains(&v6))
            .map(|(_, what)| *what)
            .or_else(|| embedded_v4(v6).and_then(refused_v4)),
    }
}

fn refused_v4(address: Ipv4Addr) -> Option<&'static str> {
    REFUSED_V4
        .iter()
        .find(|(range, _)| range.contains(&address))
        .map(|(_, what)| *what)
}

/// The IPv4 address an IPv6 one carries: IPv4-mapped (`::ffff:a.b.c.d`, how a dual-stack
/// socket reaches IPv4), IPv4-compatible (`::a.b.c.d`, deprecated but parsed) or NAT64
/// (`64:ff9b::a.b.c.d`, which a NAT64 gateway forwards to the IPv4 address).
fn embedded_v4(address: Ipv6Addr) -> Option<Ipv4Addr> {
    const NAT64: Ipv6Net = v6(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96);
    const COMPATIBLE: Ipv6Net = v6(Ipv6Addr::UNSPECIFIED, 96);
    let [.., high, low] = address.segments();
    let carried = Ipv4Addr::from((u32::from(high) << 16) | u32::from(low));
    address
        .to_ipv4_mapped()
        .or_else(|| (NAT64.contains(&address) || COMPATIBLE.contains(&address)).then_some(carried))
}

/// An address a webhook may not reach, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{address} is {range}: alarm webhooks may not reach loopback, private, link-local or \
     other internal addresses unless the scheduler's {ALLOWED_NETWORKS_KEY} names them"
)]
pub struct RefusedAddress {
    /// The address.
    pub address: IpAddr,
    /// What range it is in, e.g. "a loopback address".
    pub range: &'static str,
}

/// A host name whose every address is refused (the resolver's error at delivery).
#[derive(Debug, Clone, thiserror::Error)]
#[error("host {host} resolves to no address an alarm webhook may reach{}", listed(.refused))]
pub struct RefusedHost {
    /// The name.
    pub host: String,
    /// Each address it resolved to, and why it is refused.
    pub refused: Vec<RefusedAddress>,
}

fn listed(refused: &[RefusedAddress]) -> String {
    let each: Vec<String> = refused
        .iter()
        .map(|refused| format!("{} is {}", refused.address, refused.range))
        .collect();
    if each.is_empty() {
        String::new()
    } else {
        format!(
            " ({}; {ALLOWED_NETWORKS_KEY} opens ranges)",
            each.join(", ")
        )
    }
}

/// Why a webhook URL is not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookUrlError {
    /// Not an absolute URL, or one with characters a URL never holds. (The text is not
    /// repeated: it may hold credentials, and this message is logged at delivery.)
    #[error("not a URL ({0}): give an http:// or https:// URL")]
    NotAUrl(String),
    /// A scheme other than http or https.
    #[error("scheme {0:?} is not http or https: give an http:// or https:// URL")]
    Scheme(String),
    /// Longer than [`MAX_WEBHOOK_URL_BYTES`].
    #[error("the URL is {0} bytes; the limit is {MAX_WEBHOOK_URL_BYTES}")]
    TooLong(usize),
    /// A password without a user name (`http://:secret@host`).
    #[error("the URL has a password but no user name; give both (user:password@) or neither")]
    PasswordWithoutUser,
    /// A literal address in a refused range.
    #[error(transparent)]
    Refused(#[from] RefusedAddress),
}

/// The URL an alarm webhook text names, as it will be called: absolute, http or https, with
/// a host, at most [`MAX_WEBHOOK_URL_BYTES`], without whitespace, control characters or
/// backslashes (which the URL parser would silently drop or turn into `/`, so that the URL
/// called would not be the one shown). Hosts are not checked here: see
/// [`WebhookTargets::check_url`].
pub fn parse_webhook_url(text: &str) -> Result<Url, WebhookUrlError> {
    let text = text.trim();
    if text.len() > MAX_WEBHOOK_URL_BYTES {
        return Err(WebhookUrlError::TooLong(text.len()));
    }
    let not_a_url = |reason: &str| WebhookUrlError::NotAUrl(reason.to_owned());
    if text.contains(|c: char| c.is_whitespace() || c.is_control() || c == '\\') {
        return Err(not_a_url(
            "it holds whitespace, a control character or a backslash",
        ));
    }
    let url = Url::parse(text).map_err(|error| not_a_url(&error.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(WebhookUrlError::Scheme(url.scheme().to_owned()));
    }
    if url.host().is_none() {
        return Err(not_a_url("it names no host"));
    }
    if url.username().is_empty() && url.password().is_some() {
        return Err(WebhookUrlError::PasswordWithoutUser);
    }
    Ok(url)
}

/// The addresses alarm webhooks may reach: every address in no refused range, and those of
/// the networks `alarm.webhook_allowed_networks` names.
#[derive(Debug, Clone, Default)]
pub struct WebhookTargets {
    allowed: WebhookNetworks,
}

impl WebhookTargets {
    /// The public addresses and those of `allowed`.
    pub fn new(allowed: WebhookNetworks) -> WebhookTargets {
        WebhookTargets { allowed }
    }

    /// Ok if a webhook may connect to `address`: it is in no refused range, or an allowed
    /// network holds it (or the IPv4 address it carries).
    pub fn check(&self, address: IpAddr) -> Result<(), RefusedAddress> {
        let Some(range) = refused_range(address) else {
            return Ok(());
        };
        let carried = match address {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        if self.allowed.contains(address) || carried.is_some_and(|v4| self.allowed.contains(v4)) {
            Ok(())
        } else {
            Err(RefusedAddress { address, range })
        }
    }

    /// The URL `text` names ([`parse_webhook_url`]) if its host is a name or a literal
    /// address [`check`](Self::check) permits: what a job may be saved with, and what an
    /// alarm is delivered to.
    pub fn parse_url(&self, text: &str) -> Result<Url, WebhookUrlError> {
        let url = parse_webhook_url(text)?;
        self.check_url(&url)?;
        Ok(url)
    }

    /// Ok unless `url`'s host is a literal IP address [`check`](Self::check) refuses. A host
    /// name passes: its addresses are checked as they are resolved, at delivery.
    pub fn check_url(&self, url: &Url) -> Result<(), RefusedAddress> {
        // The parser writes a literal address in its canonical form (`0x7f.1` becomes
        // `127.0.0.1`), an IPv6 one in brackets.
        let host = url.host_str().unwrap_or_default();
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        match literal.parse::<IpAddr>() {
            Ok(address) => self.check(address),
            Err(_) => Ok(()),
        }
    }
}

/// The webhook client's resolver: the system's, keeping only the addresses `targets`
/// permits; a name left with none fails with [`RefusedHost`]. (Literal addresses never
/// reach a resolver: the channel checks them itself.)
#[derive(Debug, Clone)]
pub struct AllowedAddressResolver {
    targets: WebhookTargets,
}

impl AllowedAddressResolver {
    /// A resolver letting through what `targets` permits.
    pub fn new(targets: WebhookTargets) -> AllowedAddressResolver {
        AllowedAddressResolver { targets }
    }
}

impl Resolve for AllowedAddressResolver {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(resolve_allowed(
            name.as_str().to_owned(),
            self.targets.clone(),
        ))
    }
}

async fn resolve_allowed(
    host: String,
    targets: WebhookTargets,
) -> Result<Addrs, Box<dyn std::error::Error + Send + Sync>> {
    // Port 0: the client puts the URL's port (or the scheme's) in its place.
    let resolved = tokio::net::lookup_host((host.as_str(), 0)).await?;
    let mut allowed: Vec<SocketAddr> = Vec::new();
    let mut refused = Vec::new();
    for address in resolved {
        match targets.check(address.ip()) {
            Ok(()) => allowed.push(address),
            Err(refusal) => refused.push(refusal),
        }
    }
    if allowed.is_empty() {
        return Err(RefusedHost { host, refused }.into());
    }
    Ok(Box::new(allowed.into_iter()))
}

/// `url` as a member who may only view its job sees it: scheme, host and port, and
/// [`REDACTED`] for everything after (`https://hooks.slack.com/REDACTED`). Receivers put
/// their credential anywhere after the host: in the user info (`https://user:key@…`), the
/// query (`?token=…`), the fragment, and most often the path (Slack's
/// `/services/T…/B…/{secret}`, Discord's `/api/webhooks/{id}/{token}`, Teams' and most
/// others'), so none of it is shown; what stays tells where alarms go. A URL with nothing
/// after its host is shown whole; a text that is not an http(s) URL with a host (saved before
/// URLs were parsed) is hidden whole.
pub fn redact_webhook_url(url: &str) -> String {
    let Ok(parsed) = Url::parse(url.trim()) else {
        return REDACTED.to_owned();
    };
    let Some(host) = parsed.host_str().filter(|_| !parsed.cannot_be_a_base()) else {
        return REDACTED.to_owned();
    };
    let origin = match parsed.port() {
        Some(port) => format!("{}://{host}:{port}", parsed.scheme()),
        None => format!("{}://{host}", parsed.scheme()),
    };
    let nothing_after = parsed.username().is_empty()
        && parsed.password().is_none()
        && parsed.path() == "/"
        && parsed.query().is_none()
        && parsed.fragment().is_none();
    if nothing_after {
        format!("{origin}/")
    } else {
        format!("{origin}/{REDACTED}")
    }
}

#[cfg(test)]
mod tests;
