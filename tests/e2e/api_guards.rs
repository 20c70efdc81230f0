//! Clients that hold on to the API: none may stall it for the others, nor make it read what it
//! will refuse.
//!
//! - Strangers dribbling login bodies a byte at a time fill only the budget of the routes
//!   anyone may call: a signed-in user is still answered, and the dribblers are cut off with
//!   408 at the body deadline.
//! - One client address gets a share of that budget (429 beyond).
//! - A request head that stops coming has its connection closed at the header deadline.
//! - A member's XXL-JOB import is refused (403) before the node reads its body: the request
//!   says `Expect: 100-continue`, so a node about to read the body would first answer
//!   `100 Continue`; this one answers 403 straight away.
//! - A third import while two are under way is 503, before its body is read.
//!
//! Requests are written by hand over TCP, as such clients do; only statuses are checked.

use std::time::Duration;

use kadence_scheduler::config::{Config, TrustedProxies};
use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::helpers::{TestApp, spawn_app_with};
use kadence_tests::fixtures::{Backend, wait_for};

/// How long a hand-written request waits for its answer before the test fails.
const ANSWER_LIMIT: Duration = Duration::from_secs(45);
/// The body deadline the tests configure: long enough that every dribbler is still sending
/// while the test checks what the others get.
const BODY_DEADLINE: Duration = Duration::from_secs(10);

/// `host:port` of the app's API.
fn address(app: &TestApp) -> String {
    app.api_url().trim_start_matches("http://").to_owned()
}

/// The head of a `POST path` declaring a JSON body of `length` bytes, with `extra` header
/// lines (each ending in CRLF).
fn post_head(address: &str, path: &str, length: usize, extra: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\n{extra}\r\n"
    )
}

/// The status line's code of the first answer on `stream`.
async fn first_status(stream: &mut tokio::net::tcp::OwnedReadHalf) -> u16 {
    let mut seen = Vec::new();
    let mut chunk = [0_u8; 1024];
    let read = tokio::time::timeout(ANSWER_LIMIT, async {
        while !seen.windows(2).any(|pair| pair == b"\r\n") {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(read) => seen.extend_from_slice(&chunk[..read]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer within {ANSWER_LIMIT:?}");
    let line = String::from_utf8_lossy(&seen);
    (line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {line:?}"))
}

/// Sends `head`, then a body a byte every 200 ms, until the node answers: its status.
async fn dribble(address: String, head: String) -> u16 {
    let stream = TcpStream::connect(&address)
        .await
        .expect("connect to the API");
    let (mut answers, mut sending) = stream.into_split();
    sending
        .write_all(head.as_bytes())
        .await
        .expect("send the head");
    let writer = tokio::spawn(async move {
        // Ends when the node closes the connection.
        while sending.write_all(b" ").await.is_ok() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let status = first_status(&mut answers).await;
    writer.abort();
    status
}

/// `count` dribblers of login bodies, the `n`th with the extra header lines `extra(n)`.
fn dribblers(app: &TestApp, count: usize, extra: impl Fn(usize) -> String) -> Vec<JoinHandle<u16>> {
    (0..count)
        .map(|n| {
            let head = post_head(&address(app), "/api/auth/login", 10_000, &extra(n));
            tokio::spawn(dribble(address(app), head))
        })
        .collect()
}

/// Waits until `finished` of `handles` have ended.
async fn until_finished(handles: &[JoinHandle<u16>], finished: usize, what: &str) {
    wait_for(ANSWER_LIMIT, what, || async {
        let done = handles.iter().filter(|handle| handle.is_finished()).count();
        (done >= finished).then_some(())
    })
    .await;
}

/// The statuses `handles` end with, sorted.
async fn statuses(handles: Vec<JoinHandle<u16>>) -> Vec<u16> {
    let mut statuses = Vec::new();
    for handle in handles {
        statuses.push(handle.await.expect("a dribbler"));
    }
    statuses.sort_unstable();
    statuses
}

/// 70 strangers (by address, behind a trusted proxy) dribble login bodies: 8 fill the public
/// budget, the rest are turned away at once, and a signed-in user is answered all along.
async fn a_slow_loris_on_the_login_does_not_starve_signed_in_users(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.api.trusted_proxies = TrustedProxies::parse(&["127.0.0.1"]).unwrap();
        config.api.body_read_timeout = BODY_DEADLINE;
        config.api.request_timeout = Duration::from_secs(60);
    })
    .await;
    let budget = Config::default().api.public_max_concurrent_requests;
    let strangers = 70;
    let handles = dribblers(&app, strangers, |n| {
        format!("X-Forwarded-For: 198.51.{}.{}\r\n", n / 200, n % 200 + 1)
    });
    until_finished(
        &handles,
        strangers - budget,
        "the strangers beyond the budget",
    )
    .await;

    let (status, me) = app.call(Method::GET, "/api/auth/me", None).await;
    assert_eq!(status, 200, "a signed-in user is answered: {me}");
    let (status, jobs) = app.call(Method::GET, "/api/jobs", None).await;
    assert_eq!(status, 200, "{jobs}");
    let login = reqwest::Client::new()
        .post(format!("{}/api/auth/login", app.api_url()))
        .header("X-Forwarded-For", "203.0.113.1")
        .json(&json!({"name": "admin", "password": "whatever"}))
        .send()
        .await
        .expect("the API answers");
    assert_eq!(login.status(), 503, "the public budget is full");
    assert!(login.headers().contains_key("retry-after"));

    let statuses = statuses(handles).await;
    let cut_off = statuses.iter().filter(|&&status| status == 408).count();
    let turned_away = statuses.iter().filter(|&&status| status == 503).count();
    assert_eq!(
        (cut_off, turned_away),
        (budget, strangers - budget),
        "those in the budget are cut off at the body deadline: {statuses:?}"
    );
    app.shutdown().await;
}

/// Three dribblers from one address: two hold its share until the body deadline (408), the
/// third is refused at once (429).
async fn one_address_gets_a_share_and_a_dribbled_body_is_cut_off(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.api.body_read_timeout = Duration::from_secs(2);
        config.api.request_timeout = Duration::from_secs(60);
    })
    .await;
    let handles = dribblers(&app, 3, |_| String::new());
    assert_eq!(statuses(handles).await, [408, 408, 429]);
    app.shutdown().await;
}

/// Half a request head, then nothing: the node closes the connection at the header deadline
/// (without one it would keep it, and its task, for as long as the client likes).
async fn a_head_that_stops_coming_is_cut_off(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.api.header_read_timeout = Duration::from_secs(1);
    })
    .await;
    let stream = TcpStream::connect(address(&app))
        .await
        .expect("connect to the API");
    let (mut answers, mut sending) = stream.into_split();
    let half = b"POST /api/auth/login HTTP/1.1\r\nHost: kadence\r\n";
    sending.write_all(half).await.expect("send half a head");
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(ANSWER_LIMIT, answers.read_to_end(&mut rest)).await;
    assert!(
        ended.is_ok(),
        "the connection is still open after {ANSWER_LIMIT:?}"
    );
    app.shutdown().await;
}

/// A VIEW member's import of a body declared 60 MiB: refused 403 with no `100 Continue`
/// first, i.e. before the node asked for the body.
async fn a_members_import_is_refused_before_its_body_is_read(backend: Backend) {
    let app = spawn_app_with(backend, |_| {}).await;
    app.create_app("alpha", 1).await;
    let viewer = app.add_member("viewer", &[("alpha", "VIEW")]).await;
    let address = address(&app);
    let head = post_head(
        &address,
        "/api/imports/xxl-job",
        60 * 1024 * 1024,
        &format!("Authorization: Bearer {viewer}\r\nExpect: 100-continue\r\n"),
    );
    let stream = TcpStream::connect(&address)
        .await
        .expect("connect to the API");
    let (mut answers, mut sending) = stream.into_split();
    sending
        .write_all(head.as_bytes())
        .await
        .expect("send the head");
    assert_eq!(
        first_status(&mut answers).await,
        403,
        "refused at once, not `100 Continue` (send the body) nor an answer after reading it"
    );
    app.shutdown().await;
}

/// Two imports under way (their bodies dribbling): a third is 503 at once.
async fn a_third_import_at_once_is_turned_away(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.api.body_read_timeout = BODY_DEADLINE;
        config.api.request_timeout = Duration::from_secs(60);
    })
    .await;
    let imports = Config::default().api.max_concurrent_imports;
    let address = address(&app);
    let bearer = format!("Authorization: Bearer {}\r\n", app.admin_token());
    let head = post_head(&address, "/api/imports/xxl-job", 1024 * 1024, &bearer);
    let under_way: Vec<JoinHandle<u16>> = (0..imports)
        .map(|_| tokio::spawn(dribble(address.clone(), head.clone())))
        .collect();
    // A head start, so that the probes below do not take a place before them; then until
    // both hold theirs, a dry run of an empty snapshot is turned away.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let empty = json!({"source": "xxl-job:h:3306/db", "dry_run": true,
        "snapshot": {"groups": [], "jobs": []}});
    wait_for(ANSWER_LIMIT, "a third import turned away", || async {
        let (status, answer) = app
            .call(Method::POST, "/api/imports/xxl-job", Some(empty.clone()))
            .await;
        assert!(status == 200 || status == 503, "{status} {answer}");
        (status == 503).then_some(())
    })
    .await;
    assert_eq!(statuses(under_way).await, vec![408; imports]);
    let (status, answer) = app
        .call(Method::POST, "/api/imports/xxl-job", Some(empty))
        .await;
    assert_eq!(status, 200, "their places are free again: {answer}");
    app.shutdown().await;
}

on_sqlite_only!(
    a_slow_loris_on_the_login_does_not_starve_signed_in_users,
    one_address_gets_a_share_and_a_dribbled_body_is_cut_off,
    a_head_that_stops_coming_is_cut_off,
    a_members_import_is_refused_before_its_body_is_read,
    a_third_import_at_once_is_turned_away,
);
