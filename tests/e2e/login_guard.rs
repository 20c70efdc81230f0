//! What guards the login and the credentials of writes, and what it leaves in the audit trail
//! and the log:
//!
//! - An attacker's failed logins slow down only the attacker's address: the admin logs in
//!   from another address meanwhile (the node is behind a trusted proxy, the test process,
//!   which names each client in `X-Forwarded-For`).
//! - Each failure doubles the wait, and an attempt during it is answered 429 with a
//!   `Retry-After` saying how long is left; failed and throttled logins are in the audit
//!   trail, each kind as one entry counting them.
//! - A flood of writes with a bad token is one audit entry with its count and the token's
//!   fingerprint, never the token; a write with the console's cookie but without its header
//!   is refused and recorded, as is a console login without it.
//! - The session cookie is `Secure` only when a trusted proxy says the browser came over
//!   HTTPS.
//! - A login name with line breaks and other control characters cannot forge a line of the
//!   scheduler's log (`kadence serve` as a process, its stderr read).

use std::net::IpAddr;
use std::process::Stdio;
use std::time::Duration;

use kadence_scheduler::config::TrustedProxies;
use kadence_scheduler::operations::auth::token_hash;
use kadence_tests::serve::spawn_serve;
use reqwest::Method;
use reqwest::header::{COOKIE, SET_COOKIE};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::helpers::{TEST_ADMIN_PASSWORD, TestApp, spawn_app_with};
use kadence_tests::fixtures::{Backend, TestDatabase, broker_kind, brokers, unique, wait_for};

/// The attacker's address and the admin's, as the trusted proxy names them.
const ATTACKER: &str = "198.51.100.7";
const ADMIN_DESK: &str = "203.0.113.9";

/// A login attempt by the client at `address`, forwarded by the trusted proxy: the status
/// and the `Retry-After` seconds.
async fn login_from(
    app: &TestApp,
    address: &str,
    name: &str,
    password: &str,
) -> (u16, Option<u64>) {
    let response = reqwest::Client::new()
        .post(format!("{}/api/auth/login", app.api_url()))
        .header("X-Forwarded-For", address)
        .json(&json!({"name": name, "password": password}))
        .send()
        .await
        .expect("the API answers");
    let retry_after = (response.headers().get("retry-after"))
        .and_then(|value| value.to_str().ok())
        .map(|value| value.parse().expect("Retry-After in seconds"));
    (response.status().as_u16(), retry_after)
}

/// The audit entries of `query` (e.g. `user=admin`), newest first.
async fn audit(app: &TestApp, query: &str) -> Vec<Value> {
    let (status, page) = app
        .call(Method::GET, &format!("/api/audit?{query}"), None)
        .await;
    assert_eq!(status, 200, "{page}");
    page["items"].as_array().expect("a page").clone()
}

/// Waits until the entries of `query` answered `status` are exactly one, counting `count`
/// refusals: that entry.
async fn one_entry_counting(app: &TestApp, query: &str, status: u16, count: u64) -> Value {
    one_entry_like(app, query, count, |entry| entry["status"] == status).await
}

/// Waits until the entries of `query` that are `like` this are exactly one, counting `count`
/// refusals: that entry.
async fn one_entry_like(
    app: &TestApp,
    query: &str,
    count: u64,
    like: impl Fn(&Value) -> bool,
) -> Value {
    let what = format!("one audit entry of {query} counting {count}");
    wait_for(Duration::from_secs(15), &what, || async {
        let entries: Vec<Value> = (audit(app, query).await.into_iter())
            .filter(|entry| like(entry))
            .collect();
        match entries.as_slice() {
            [entry] if entry["details"]["count"] == count => Some(entry.clone()),
            _ => None,
        }
    })
    .await
}

/// An attacker guessing the admin's password waits longer and longer; the admin, from their
/// own desk, logs in at once.
async fn the_admin_logs_in_from_another_address_while_one_is_throttled(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.api.trusted_proxies = TrustedProxies::parse(&["127.0.0.1"]).unwrap();
        config.auth.login_delay_first = Duration::from_secs(30);
    })
    .await;
    let free = kadence_scheduler::config::AuthConfig::default().login_free_failures;
    for _ in 0..=free {
        assert_eq!(login_from(&app, ATTACKER, "admin", "guess").await.0, 401);
    }
    let (status, retry_after) = login_from(&app, ATTACKER, "admin", TEST_ADMIN_PASSWORD).await;
    assert_eq!(
        status, 429,
        "the attacker's address waits, right password or not"
    );
    assert!((29..=30).contains(&retry_after.unwrap()), "{retry_after:?}");
    let (status, _) = login_from(&app, ADMIN_DESK, "admin", TEST_ADMIN_PASSWORD).await;
    assert_eq!(
        status, 201,
        "the admin is not locked out from their own desk"
    );
    assert_eq!(
        login_from(&app, ATTACKER, "admin", TEST_ADMIN_PASSWORD)
            .await
            .0,
        429,
        "the admin's login clears nothing of the attacker's"
    );
    let throttled = one_entry_counting(&app, "user=admin", 429, 2).await;
    assert_eq!(throttled["details"]["address"], ATTACKER);
    let failed = one_entry_counting(&app, "user=admin", 401, u64::from(free) + 1).await;
    assert_eq!(failed["details"]["address"], ATTACKER);
    app.shutdown().await;
}

/// With no free failures and a first wait of 2 s, the waits go 2 s, 4 s, 8 s, and each 429
/// says how long is left; the three failures and the three throttled attempts are one audit
/// entry each.
async fn each_failure_doubles_the_wait_and_retry_after_says_how_long(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.api.trusted_proxies = TrustedProxies::parse(&["127.0.0.1"]).unwrap();
        config.auth.login_free_failures = 0;
        config.auth.login_delay_first = Duration::from_secs(2);
    })
    .await;
    let mut waits = Vec::new();
    for _ in 0..3 {
        assert_eq!(login_from(&app, ATTACKER, "mallory", "guess").await.0, 401);
        let (status, retry_after) = login_from(&app, ATTACKER, "mallory", "guess").await;
        assert_eq!(status, 429);
        let retry_after = retry_after.expect("a 429 says when to come back");
        waits.push(retry_after);
        tokio::time::sleep(Duration::from_secs(retry_after)).await;
    }
    // Each is the full wait, or a second less if the clock crossed a second meanwhile.
    assert!(
        (1..=2).contains(&waits[0]) && (3..=4).contains(&waits[1]) && (7..=8).contains(&waits[2]),
        "{waits:?}"
    );
    let throttled = one_entry_counting(&app, "user=mallory", 429, 3).await;
    let failed = one_entry_counting(&app, "user=mallory", 401, 3).await;
    for entry in [&throttled, &failed] {
        assert_eq!(entry["action"], "POST /api/auth/login");
        assert_eq!(entry["details"]["address"], ATTACKER);
        assert!(
            !entry.to_string().contains("guess"),
            "no password in the trail: {entry}"
        );
    }
    assert!(
        throttled["details"]["last_at_ms"].as_i64() > throttled["at_ms"].as_i64(),
        "{throttled}"
    );
    app.shutdown().await;
}

/// Forty writes with a made-up token are one entry counting forty, with the token's
/// fingerprint and not the token; writes with no credentials are an entry of their own;
/// reads are not recorded.
async fn a_flood_of_bad_token_writes_is_one_audit_entry_with_its_count(backend: Backend) {
    let app = spawn_app_with(backend, |_| {}).await;
    let token = format!("kdn_{}", "7e".repeat(32));
    let job = json!({"app": "nowhere", "handler": "ok", "schedule_type": "NONE"});
    for _ in 0..40 {
        let (status, body) = app
            .call_as(Some(&token), Method::POST, "/api/jobs", Some(job.clone()))
            .await;
        assert_eq!(status, 401, "{body}");
    }
    for _ in 0..3 {
        let (status, _) = app
            .call_as(None, Method::POST, "/api/jobs", Some(job.clone()))
            .await;
        assert_eq!(status, 401);
        let (status, _) = app
            .call_as(Some(&token), Method::GET, "/api/jobs", None)
            .await;
        assert_eq!(status, 401);
    }
    let trail = |entries: &[Value]| {
        (entries.iter())
            .map(|entry| entry["details"]["count"].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let fingerprint = format!("sha256:{}", &token_hash(&token)[..12]);
    let flood = one_entry_like(&app, "target=/api/jobs", 40, |entry| {
        entry["details"]["token"] == fingerprint.as_str()
    })
    .await;
    let anonymous = one_entry_like(&app, "target=/api/jobs", 3, |entry| {
        entry["details"].get("token").is_none()
    })
    .await;
    assert_eq!(anonymous["status"], 401);
    let entries = audit(&app, "target=/api/jobs").await;
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(trail(&entries), 43, "reads are not recorded: {entries:?}");
    assert_eq!(flood["action"], "POST /api/jobs");
    assert_eq!(flood["user_name"], "");
    assert_eq!(flood["status"], 401);
    assert_eq!(flood["details"]["address"], "127.0.0.1");
    assert!(
        !entries
            .iter()
            .any(|entry| entry.to_string().contains("7e7e7e7e")),
        "no token in the trail: {entries:?}"
    );
    app.shutdown().await;
}

/// A write with the console's cookie and without its header (what another site can make a
/// browser send) is refused and recorded with the cookie token's fingerprint; so is a
/// console login without the header.
async fn writes_and_logins_without_the_console_header_are_recorded(backend: Backend) {
    let app = spawn_app_with(backend, |_| {}).await;
    let http = reqwest::Client::new();
    let login = format!("{}/api/auth/session", app.api_url());
    let opened = (http.post(&login))
        .header("X-Requested-With", "kadence-console")
        .json(&json!({"name": "admin", "password": TEST_ADMIN_PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 201);
    let set_cookie = opened.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    let session_token = cookie.trim_start_matches("kadence_session=").to_owned();
    for _ in 0..2 {
        let forged = (http.post(format!("{}/api/apps", app.api_url())))
            .header(COOKIE, &cookie)
            .json(&json!({"name": "forged", "partitions": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(forged.status(), 403);
    }
    let forged_login = (http.post(&login))
        .json(&json!({"name": "admin", "password": TEST_ADMIN_PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged_login.status(), 403);

    let write = one_entry_counting(&app, "target=/api/apps", 403, 2).await;
    assert_eq!(write["action"], "POST /api/apps");
    assert_eq!(
        write["details"]["token"],
        format!("sha256:{}", &token_hash(&session_token)[..12])
    );
    let reason = write["details"]["reason"].as_str().unwrap();
    assert!(reason.contains("x-requested-with"), "{reason}");
    let login_entry = one_entry_counting(&app, "target=/api/auth/session", 403, 1).await;
    assert_eq!(login_entry["action"], "POST /api/auth/session");
    assert!(
        !write.to_string().contains(&session_token[4..]),
        "no token in the trail: {write}"
    );
    app.shutdown().await;
}

/// `Set-Cookie` of a console login from `local` (a loopback address the request leaves
/// from) with `X-Forwarded-Proto: https`, if `https`.
async fn session_cookie(app: &TestApp, local: &str, https: bool) -> String {
    let http = (reqwest::Client::builder())
        .local_address(local.parse::<IpAddr>().unwrap())
        .build()
        .unwrap();
    let mut request = (http.post(format!("{}/api/auth/session", app.api_url())))
        .header("X-Requested-With", "kadence-console")
        .json(&json!({"name": "admin", "password": TEST_ADMIN_PASSWORD}));
    if https {
        request = request.header("X-Forwarded-Proto", "https");
    }
    let response = request.send().await.expect("the API answers");
    assert_eq!(response.status(), 201);
    response.headers()[SET_COOKIE].to_str().unwrap().to_owned()
}

/// The node trusts 127.0.0.1 as its proxy: what that proxy says about HTTPS counts, what a
/// client at 127.0.0.2 says does not.
async fn the_cookie_is_secure_only_when_a_trusted_proxy_says_https(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.api.trusted_proxies = TrustedProxies::parse(&["127.0.0.1"]).unwrap();
    })
    .await;
    let secure =
        |cookie: &str| (cookie.split(';')).any(|part| part.trim().eq_ignore_ascii_case("secure"));
    let from_proxy = session_cookie(&app, "127.0.0.1", true).await;
    assert!(secure(&from_proxy), "{from_proxy}");
    let plain = session_cookie(&app, "127.0.0.1", false).await;
    assert!(!secure(&plain), "{plain}");
    let claimed = session_cookie(&app, "127.0.0.2", true).await;
    assert!(
        !secure(&claimed),
        "a client that is no trusted proxy is not believed: {claimed}"
    );
    app.shutdown().await;
}

/// A login name carrying a forged log line (line feed, carriage return, an escape sequence
/// that would erase the real line on a terminal, a bell, NEL) stays inside the one line that
/// logs the failed login, quoted: `kadence serve` as a process, its stderr read.
async fn a_login_name_cannot_forge_a_line_of_the_log(backend: Backend) {
    let database = TestDatabase::create(backend).await;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_kadence-cli"));
    command
        .arg("serve")
        .env("KADENCE_DATABASE__URL", &database.url)
        .env("KADENCE_KAFKA__BROKERS", brokers())
        .env("KADENCE_KAFKA__BROKER_KIND", broker_kind().name())
        .env("KADENCE_KAFKA__TOPIC_PREFIX", unique("kguard"))
        .env("KADENCE_API__LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped());
    let (mut child, api) = spawn_serve(command).await;
    let stderr = child.stderr.take().expect("piped stderr");
    let lines = tokio::spawn(async move {
        let mut read = Vec::new();
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            read.push(line);
        }
        read
    });
    let forged = "FORGED INFO kadence_scheduler::http::api::sessions: user=\"admin\" logged in";
    let name = format!("mallory\n{forged}\r\u{1b}[2K{forged}\u{7}\u{85}\t{forged}");
    let (status, _) = kadence_tests::session::attempt_login(&api, &name, "guess").await;
    assert_eq!(status, 401);
    // The line is written as the answer goes out; give it a moment, then stop the node.
    tokio::time::sleep(Duration::from_secs(1)).await;
    child.start_kill().expect("stop kadence serve");
    child.wait().await.expect("reap kadence serve");
    let lines = lines.await.expect("the stderr reader");
    let marked: Vec<&String> = lines
        .iter()
        .filter(|line| line.contains("FORGED"))
        .collect();
    assert_eq!(marked.len(), 1, "one line, the real one: {lines:#?}");
    assert!(marked[0].contains("failed login"), "{}", marked[0]);
    assert!(
        !marked[0].trim_start().starts_with("FORGED"),
        "{}",
        marked[0]
    );
    let raw: Vec<&String> = (lines.iter())
        .filter(|line| line.chars().any(char::is_control))
        .collect();
    assert!(raw.is_empty(), "control characters in the log: {raw:#?}");
}

on_every_backend!(a_flood_of_bad_token_writes_is_one_audit_entry_with_its_count);
on_sqlite_only!(
    the_admin_logs_in_from_another_address_while_one_is_throttled,
    each_failure_doubles_the_wait_and_retry_after_says_how_long,
    writes_and_logins_without_the_console_header_are_recorded,
    the_cookie_is_secure_only_when_a_trusted_proxy_says_https,
    a_login_name_cannot_forge_a_line_of_the_log,
);
