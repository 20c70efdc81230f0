//! Address classification, URL checks, the resolver and redaction.

use super::*;

fn address(text: &str) -> IpAddr {
    text.parse().expect("an address")
}

fn allowing(networks: &[&str]) -> WebhookTargets {
    WebhookTargets::new(WebhookNetworks::parse(networks).expect("networks"))
}

#[test]
fn internal_ranges_are_refused_and_public_addresses_are_not() {
    let refused = [
        ("127.0.0.1", "a loopback address"),
        ("127.255.0.9", "a loopback address"),
        ("10.1.2.3", "a private address"),
        ("172.16.0.1", "a private address"),
        ("172.31.255.255", "a private address"),
        ("192.168.1.1", "a private address"),
        (
            "169.254.169.254",
            "a link-local address (where cloud metadata services answer)",
        ),
        ("0.0.0.0", "in 0.0.0.0/8 (\"this network\")"),
        ("0.1.2.3", "in 0.0.0.0/8 (\"this network\")"),
        (
            "100.64.0.1",
            "a shared address (100.64.0.0/10, carrier-grade NAT)",
        ),
        (
            "100.127.255.254",
            "a shared address (100.64.0.0/10, carrier-grade NAT)",
        ),
        ("224.0.0.1", "a multicast address"),
        ("255.255.255.255", "the broadcast address"),
        ("240.0.0.1", "a reserved address (240.0.0.0/4)"),
        ("::", "the unspecified address"),
        ("::1", "a loopback address"),
        ("fc00::1", "a unique-local address (fc00::/7)"),
        ("fd12:3456::1", "a unique-local address (fc00::/7)"),
        ("fe80::1", "a link-local address"),
        ("fec0::1", "a site-local address (fec0::/10)"),
        ("ff02::1", "a multicast address"),
        ("::ffff:127.0.0.1", "a loopback address"),
        (
            "::ffff:169.254.169.254",
            "a link-local address (where cloud metadata services answer)",
        ),
        ("::10.0.0.1", "a private address"),
        ("64:ff9b::192.168.0.1", "a private address"),
    ];
    for (text, range) in refused {
        assert_eq!(refused_range(address(text)), Some(range), "{text}");
    }
    for public in [
        "8.8.8.8",
        "1.1.1.1",
        "172.32.0.1",
        "100.128.0.1",
        "169.255.0.1",
        "2606:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::8.8.8.8",
    ] {
        assert_eq!(refused_range(address(public)), None, "{public}");
    }
}

#[test]
fn the_allow_list_opens_only_the_networks_it_names() {
    let none = WebhookTargets::default();
    let error = none.check(address("127.0.0.1")).unwrap_err();
    assert_eq!(error.range, "a loopback address");
    let message = error.to_string();
    assert!(
        message.contains("127.0.0.1 is a loopback address")
            && message.contains("alarm.webhook_allowed_networks")
            && message.contains("KADENCE_ALARM__WEBHOOK_ALLOWED_NETWORKS"),
        "{message}"
    );
    assert_eq!(none.check(address("8.8.8.8")), Ok(()));

    let some = allowing(&["127.0.0.1", "10.20.0.0/16", "fd00:1::/64"]);
    assert_eq!(some.check(address("127.0.0.1")), Ok(()));
    assert_eq!(
        some.check(address("::ffff:127.0.0.1")),
        Ok(()),
        "the IPv6 form of an allowed IPv4 address"
    );
    assert!(some.check(address("127.0.0.2")).is_err());
    assert!(some.check(address("::1")).is_err());
    assert_eq!(some.check(address("10.20.9.9")), Ok(()));
    assert!(some.check(address("10.21.0.1")).is_err());
    assert_eq!(some.check(address("fd00:1::5")), Ok(()));
    assert!(some.check(address("fd00:2::5")).is_err());
    assert!(some.check(address("169.254.169.254")).is_err());
}

#[test]
fn webhook_urls_are_absolute_http_with_a_host() {
    let url = parse_webhook_url(" https://user:key@hooks.example.com:8443/a?b=c ").unwrap();
    assert_eq!(
        url.as_str(),
        "https://user:key@hooks.example.com:8443/a?b=c"
    );
    assert_eq!(
        parse_webhook_url("HTTP://Hooks.Example.com")
            .unwrap()
            .as_str(),
        "http://hooks.example.com/",
        "kept as the parser writes it, which is what is called"
    );
    let refused = [
        ("ftp://hooks.example.com/", "scheme \"ftp\""),
        ("hooks.example.com/alarm", "not a URL"),
        ("/alarm", "not a URL"),
        ("http://", "not a URL"),
        ("file:///etc/passwd", "scheme \"file\""),
        ("http://hooks.example.com/a b", "whitespace"),
        ("http://hooks.exa\tmple.com/", "whitespace"),
        ("http://hooks.example.com\\@127.0.0.1/", "backslash"),
        ("http://hooks.example.com/\u{7}", "control character"),
        (
            "http://:secret@hooks.example.com/",
            "password but no user name",
        ),
    ];
    for (text, expected) in refused {
        let error = parse_webhook_url(text).unwrap_err().to_string();
        assert!(error.contains(expected), "{text}: {error}");
    }
    let long = format!(
        "http://hooks.example.com/{}",
        "a".repeat(MAX_WEBHOOK_URL_BYTES)
    );
    assert!(matches!(
        parse_webhook_url(&long),
        Err(WebhookUrlError::TooLong(_))
    ));
}

#[test]
fn literal_addresses_are_checked_in_every_spelling_and_names_are_left_to_the_resolver() {
    let none = WebhookTargets::default();
    for text in [
        "http://127.0.0.1:9/hook",
        "http://0x7f.1/hook",
        "http://2130706433/hook",
        "http://0177.0.0.1/hook",
        "http://[::1]:8080/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://[::ffff:a9fe:a9fe]/latest/meta-data",
        "http://169.254.169.254/latest/meta-data",
        "https://user:pass@10.0.0.1/hook",
        "http://0.0.0.0:22/",
    ] {
        let error = none.parse_url(text).unwrap_err();
        assert!(
            matches!(error, WebhookUrlError::Refused(_)),
            "{text}: {error}"
        );
    }
    assert!(none.parse_url("http://8.8.8.8/hook").is_ok());
    assert!(
        none.parse_url("http://localhost:9/hook").is_ok(),
        "a name is checked when it is resolved"
    );
    assert!(
        allowing(&["127.0.0.0/8"])
            .parse_url("http://0x7f.1/hook")
            .is_ok()
    );
}

#[tokio::test]
async fn the_resolver_keeps_only_addresses_the_targets_permit() {
    let name = |text: &str| text.parse::<Name>().expect("a name");
    let error = AllowedAddressResolver::new(WebhookTargets::default())
        .resolve(name("localhost"))
        .await
        .err()
        .expect("localhost is loopback only");
    let message = error.to_string();
    assert!(
        message.contains("host localhost resolves to no address")
            && message.contains("a loopback address"),
        "{message}"
    );
    let addresses: Vec<SocketAddr> = AllowedAddressResolver::new(allowing(&["127.0.0.0/8"]))
        .resolve(name("localhost"))
        .await
        .expect("127.0.0.1 is allowed")
        .collect();
    assert!(!addresses.is_empty());
    assert!(
        addresses
            .iter()
            .all(|resolved| resolved.ip() == address("127.0.0.1")),
        "::1, not allowed, is dropped: {addresses:?}"
    );
}

#[test]
fn redaction_shows_only_where_alarms_go() {
    let redacted = [
        // Credentials in the user info, the query and the fragment.
        (
            "https://ops:s3cret@hooks.example.com:8443/a/b?token=abc&team=x#frag",
            "https://hooks.example.com:8443/REDACTED",
        ),
        (
            "https://ops@hooks.example.com/",
            "https://hooks.example.com/REDACTED",
        ),
        (
            "https://hooks.example.com/?token=abc",
            "https://hooks.example.com/REDACTED",
        ),
        (
            "https://hooks.example.com/#abc",
            "https://hooks.example.com/REDACTED",
        ),
        // Credentials in the path: Slack, Discord, Teams.
        (
            "https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "https://hooks.slack.com/REDACTED",
        ),
        (
            "https://discord.com/api/webhooks/123456789/AbCdEf-token",
            "https://discord.com/REDACTED",
        ),
        (
            "https://contoso.webhook.office.com/webhookb2/1234@5678/IncomingWebhook/abcd/ef01",
            "https://contoso.webhook.office.com/REDACTED",
        ),
        // The default port is not shown; another is; an IPv6 host keeps its brackets.
        ("http://10.20.0.5:80/alarm", "http://10.20.0.5/REDACTED"),
        (
            "http://[fd00::5]:9000/alarm",
            "http://[fd00::5]:9000/REDACTED",
        ),
        // A host name's case is normalised, as the client would call it.
        (
            "HTTPS://Hooks.Example.COM/Alarm",
            "https://hooks.example.com/REDACTED",
        ),
    ];
    for (url, shown) in redacted {
        assert_eq!(redact_webhook_url(url), shown, "{url}");
    }
    assert_eq!(
        redact_webhook_url("https://hooks.example.com"),
        "https://hooks.example.com/",
        "nothing after the host to hide"
    );
    assert_eq!(redact_webhook_url("not a url at all"), REDACTED);
    assert_eq!(redact_webhook_url("mailto:ops@example.com"), REDACTED);
}
