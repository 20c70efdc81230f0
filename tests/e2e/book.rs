//! The book under `/docs/` (`api.book_dir`, see `kadence_scheduler::http::book`), on a real node:
//!
//! - With a book: `/docs` redirects to `/docs/`; the index, a page in a sub-folder and a
//!   style sheet are served with their content types to a client with no session; a
//!   directory named without its slash redirects within `/docs`; a missing file is 404
//!   naming it; a path that climbs out of the book (`..`, plain or percent-encoded, written
//!   by hand over TCP since HTTP clients tidy such paths away) is 400 and never shows the
//!   file beside the book.
//! - Without one: `/docs` and everything under it is 404 with a plain text saying how to
//!   serve the book.
//! - A `book_dir` with no `index.html` stops the node at start, naming the key.
//!
//! Once, on SQLite: nothing here passes through the store.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kadence_scheduler::app::Scheduler;
use kadence_scheduler::clock::SystemClock;
use kadence_scheduler::config::Config;
use reqwest::header::{CONTENT_SECURITY_POLICY, CONTENT_TYPE, LOCATION};
use reqwest::{Method, StatusCode};
use secrecy::SecretString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use kadence_tests::fixtures::{Backend, TestDatabase};

/// What the file beside the book holds: no answer under `/docs` may show it.
const BESIDE_THE_BOOK: &str = "not part of the book";

/// A small built book in a temporary directory: `book/` holds `index.html`,
/// `guides/console.html` and `css/general.css`; `secret.txt` lies beside it.
pub struct TestBook {
    root: tempfile::TempDir,
}

impl TestBook {
    pub fn new() -> TestBook {
        let root = tempfile::tempdir().expect("a temporary directory");
        let book = root.path().join("book");
        std::fs::create_dir_all(book.join("guides")).unwrap();
        std::fs::create_dir_all(book.join("css")).unwrap();
        std::fs::write(book.join("index.html"), "<h1>The Kadence book</h1>").unwrap();
        std::fs::write(
            book.join("guides/console.html"),
            "<h1>The web console</h1><h2 id=\"jobs\">Jobs</h2>",
        )
        .unwrap();
        std::fs::write(book.join("css/general.css"), "h1 { color: navy; }").unwrap();
        std::fs::write(root.path().join("secret.txt"), BESIDE_THE_BOOK).unwrap();
        TestBook { root }
    }

    /// The directory to serve.
    pub fn dir(&self) -> PathBuf {
        self.root.path().join("book")
    }
}

/// A client with no session that does not follow redirects.
fn stranger() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `method path` without credentials: status, content type, content security policy, body.
async fn fetch(app: &TestApp, method: Method, path: &str) -> (StatusCode, String, String, String) {
    let answer = stranger()
        .request(method, format!("{}{path}", app.api_url()))
        .send()
        .await
        .unwrap_or_else(|error| panic!("{path}: {error}"));
    let header = |name| {
        answer
            .headers()
            .get(name)
            .map(|value: &reqwest::header::HeaderValue| value.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let (kind, policy) = (header(CONTENT_TYPE), header(CONTENT_SECURITY_POLICY));
    let status = answer.status();
    (status, kind, policy, answer.text().await.unwrap())
}

/// Where `GET path` redirects to (it must: 307).
async fn redirect_of(app: &TestApp, path: &str) -> String {
    let answer = stranger()
        .get(format!("{}{path}", app.api_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::TEMPORARY_REDIRECT, "{path}");
    answer.headers()[LOCATION].to_str().unwrap().to_owned()
}

/// `GET path` written by hand over TCP, the path exactly as given: status and body.
async fn raw_get(app: &TestApp, path: &str) -> (u16, String) {
    let address = app.api_url().trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_string(&mut answer))
        .await
        .expect("an answer in time")
        .unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer:?}"));
    (status, answer)
}

async fn the_book_is_served_to_anyone_under_docs(backend: Backend) {
    let book = TestBook::new();
    let app = spawn_app_with(backend, |config| config.api.book_dir = Some(book.dir())).await;

    assert_eq!(redirect_of(&app, "/docs").await, "/docs/");

    let (status, kind, policy, body) = fetch(&app, Method::GET, "/docs/").await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "<h1>The Kadence book</h1>")
    );
    assert!(kind.starts_with("text/html"), "{kind}");
    assert!(
        policy.contains("frame-ancestors 'self'") && policy.contains("default-src 'self'"),
        "{policy}"
    );
    // The console's question, whether the book is served.
    let (status, ..) = fetch(&app, Method::HEAD, "/docs/index.html").await;
    assert_eq!(status, StatusCode::OK);
    let (status, kind, _, body) = fetch(&app, Method::GET, "/docs/guides/console.html").await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.starts_with("text/html"), "{kind}");
    assert!(body.contains("id=\"jobs\""), "{body}");
    let (status, kind, _, body) = fetch(&app, Method::GET, "/docs/css/general.css").await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "h1 { color: navy; }")
    );
    assert!(kind.starts_with("text/css"), "{kind}");

    // A folder named without its slash stays in the book.
    assert_eq!(redirect_of(&app, "/docs/guides").await, "/docs/guides/");
    // …which lists nothing: it has no index.html.
    let (status, _, _, body) = fetch(&app, Method::GET, "/docs/guides/").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(!body.contains("console.html"), "no listing: {body}");
    let (status, kind, _, body) = fetch(&app, Method::GET, "/docs/guides/missing.html").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(kind.starts_with("text/plain"), "{kind}");
    assert_eq!(
        body.trim(),
        "the book has no page /docs/guides/missing.html"
    );

    for escape in [
        "/docs/../secret.txt",
        "/docs/%2e%2e/secret.txt",
        "/docs/guides/..%2f..%2fsecret.txt",
        "/docs/guides/..%5c..%5csecret.txt",
    ] {
        let (status, answer) = raw_get(&app, escape).await;
        assert_eq!(status, 400, "{escape}: {answer}");
        assert!(
            answer.contains("may not have a `..` segment"),
            "{escape}: {answer}"
        );
        assert!(!answer.contains(BESIDE_THE_BOOK), "{escape}: {answer}");
    }
    app.shutdown().await;
}

async fn without_a_book_dir_docs_says_how_to_serve_it(backend: Backend) {
    let app = spawn_app(backend).await;
    for (method, path) in [
        (Method::GET, "/docs"),
        (Method::GET, "/docs/"),
        (Method::GET, "/docs/guides/console.html"),
        (Method::HEAD, "/docs/index.html"),
    ] {
        let (status, kind, _, body) = fetch(&app, method.clone(), path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}");
        assert!(kind.starts_with("text/plain"), "{method} {path}: {kind}");
        if method == Method::GET {
            assert!(
                body.contains("does not serve the Kadence book")
                    && body.contains("mdbook build docs")
                    && body.contains("api.book_dir"),
                "{path}: {body}"
            );
        }
    }
    app.shutdown().await;
}

async fn a_book_dir_without_an_index_stops_the_node_at_start(backend: Backend) {
    let database = TestDatabase::create(backend).await;
    let not_built = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.database.url = SecretString::from(database.url.clone());
    config.kafka.brokers = kadence_tests::fixtures::brokers();
    config.kafka.broker_kind = kadence_tests::fixtures::broker_kind();
    config.api.book_dir = Some(not_built.path().to_owned());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let Err(error) = Scheduler::start(config, listener, Arc::new(SystemClock)).await else {
        panic!("a node started with a book_dir that holds no book");
    };
    let error = format!("{error:#}");
    assert!(
        error.contains("api.book_dir (KADENCE_API__BOOK_DIR)") && error.contains("no index.html"),
        "{error}"
    );
}

on_sqlite_only!(
    the_book_is_served_to_anyone_under_docs,
    without_a_book_dir_docs_says_how_to_serve_it,
    a_book_dir_without_an_index_stops_the_node_at_start,
);
