//! What the console stands on, over plain HTTP: the session cookie (`HttpOnly`,
//! `SameSite=Strict`, never in the answer), a login taken only as JSON with the console's
//! header (no login CSRF), writes with the cookie refused without the console's header,
//! logout clearing it, the language kept per user, field-level errors, and
//! the console's files served with their safety headers and revalidation.

use reqwest::header::{
    CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, ETAG, IF_NONE_MATCH, SET_COOKIE,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TEST_ADMIN_PASSWORD, spawn_app};
use kadence_tests::fixtures::Backend;

/// A request with the console's cookie; `console` adds the header writes need.
async fn with_cookie(
    http: &reqwest::Client,
    url: &str,
    method: Method,
    cookie: &str,
    console: bool,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = http.request(method, url).header(COOKIE, cookie);
    if console {
        request = request.header("X-Requested-With", "kadence-console");
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("the API answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn a_console_session_lives_in_a_cookie_and_writes_need_the_header(backend: Backend) {
    let app = spawn_app(backend).await;
    let base = app.api_url().to_owned();
    let http = reqwest::Client::new();
    let login = format!("{base}/api/auth/session");
    let session = |password: &str| {
        http.post(&login)
            .header("X-Requested-With", "kadence-console")
            .json(&json!({"name": "admin", "password": password}))
            .send()
    };

    // What another site can make a browser send: a form or a text/plain body, no headers
    // of its own. Neither logs the browser in.
    let credentials = json!({"name": "admin", "password": TEST_ADMIN_PASSWORD}).to_string();
    let forged = http
        .post(&login)
        .header(CONTENT_TYPE, "text/plain")
        .header("X-Requested-With", "kadence-console")
        .body(credentials.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(forged.headers().get(SET_COOKIE).is_none());
    let forged = http
        .post(&login)
        .header(CONTENT_TYPE, "application/json")
        .body(credentials)
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert!(forged.headers().get(SET_COOKIE).is_none());

    let refused = session("wrong").await.unwrap();
    assert_eq!(refused.status(), 401);
    assert!(
        refused.headers().get(SET_COOKIE).is_none(),
        "no cookie for a wrong password"
    );

    let opened = session(TEST_ADMIN_PASSWORD).await.unwrap();
    assert_eq!(opened.status(), 201);
    let set_cookie = opened.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    for part in [
        "kadence_session=kdn_",
        "HttpOnly",
        "SameSite=Strict",
        "Path=/",
    ] {
        assert!(set_cookie.contains(part), "{part} in {set_cookie}");
    }
    let body: Value = opened.json().await.unwrap();
    assert_eq!(body["user"]["name"], "admin");
    assert!(
        body.get("token").is_none(),
        "the token stays in the cookie: {body}"
    );
    let cookie = set_cookie.split(';').next().unwrap().to_owned();

    let (status, me) = with_cookie(
        &http,
        &format!("{base}/api/auth/me"),
        Method::GET,
        &cookie,
        false,
        None,
    )
    .await;
    assert_eq!((status, &me["name"]), (StatusCode::OK, &json!("admin")));

    let new_app = json!({"name": "web", "partitions": 1});
    let apps = format!("{base}/api/apps");
    let (status, refusal) = with_cookie(
        &http,
        &apps,
        Method::POST,
        &cookie,
        false,
        Some(new_app.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refusal}");
    assert!(
        refusal["error"]
            .as_str()
            .unwrap()
            .contains("x-requested-with"),
        "{refusal}"
    );
    let (status, created) =
        with_cookie(&http, &apps, Method::POST, &cookie, true, Some(new_app)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");

    // A bad field is named, so that the console shows the message beside it.
    let jobs = format!("{base}/api/jobs");
    let bad_cron = json!({"app": "web", "handler": "ok", "schedule_conf": "0 61 * * * ?"});
    let (status, error) =
        with_cookie(&http, &jobs, Method::POST, &cookie, true, Some(bad_cron)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error["field"], "schedule_conf", "{error}");
    assert!(
        error["error"].as_str().unwrap().contains("minute"),
        "{error}"
    );
    let bad_zone =
        json!({"app": "web", "handler": "ok", "schedule_type": "NONE", "time_zone": "Mars/Base"});
    let (_, error) = with_cookie(&http, &jobs, Method::POST, &cookie, true, Some(bad_zone)).await;
    assert_eq!(error["field"], "time_zone", "{error}");

    // The language is the user's, kept in the store.
    let locale = format!("{base}/api/auth/me/locale");
    let (status, error) = with_cookie(
        &http,
        &locale,
        Method::PUT,
        &cookie,
        true,
        Some(json!({"locale": "fr"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    let (status, _) = with_cookie(
        &http,
        &locale,
        Method::PUT,
        &cookie,
        true,
        Some(json!({"locale": "zh-CN"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, me) = app.call(Method::GET, "/api/auth/me", None).await;
    assert_eq!(
        me["locale"], "zh-CN",
        "another session of the user sees it: {me}"
    );
    let (_, me) = with_cookie(
        &http,
        &locale,
        Method::PUT,
        &cookie,
        true,
        Some(json!({"locale": null})),
    )
    .await;
    assert_eq!(me["locale"], Value::Null, "back to the browser's language");

    let logout = http
        .post(format!("{base}/api/auth/logout"))
        .header(COOKIE, &cookie)
        .header("X-Requested-With", "kadence-console")
        .send()
        .await
        .unwrap();
    assert_eq!(logout.status(), 204);
    let cleared = logout.headers()[SET_COOKIE].to_str().unwrap();
    assert!(
        cleared.starts_with("kadence_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    let (status, _) = with_cookie(
        &http,
        &format!("{base}/api/auth/me"),
        Method::GET,
        &cookie,
        false,
        None,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "the session ended with the logout"
    );
    app.shutdown().await;
}

async fn the_console_is_served_from_the_binary(backend: Backend) {
    let app = spawn_app(backend).await;
    let base = app.api_url().to_owned();
    let http = reqwest::Client::new();
    let page = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()[CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let policy = page.headers()[CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(
        policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"),
        "{policy}"
    );
    assert!(page.text().await.unwrap().contains("/console/app.js"));

    let script = http
        .get(format!("{base}/console/app.js"))
        .send()
        .await
        .unwrap();
    assert!(
        script.headers()[CONTENT_TYPE]
            .to_str()
            .unwrap()
            .contains("javascript")
    );
    let etag = script.headers()[ETAG].clone();
    let again = http
        .get(format!("{base}/console/app.js"))
        .header(IF_NONE_MATCH, etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304, "an unchanged file is not sent again");

    let chinese: Value = http
        .get(format!("{base}/console/i18n/zh-CN.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        chinese["nav.jobs"], "任务管理",
        "the catalog is merged from its area files"
    );
    let missing = http
        .get(format!("{base}/console/nope.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    app.shutdown().await;
}

on_every_backend!(
    a_console_session_lives_in_a_cookie_and_writes_need_the_header,
    the_console_is_served_from_the_binary
);
