//! A user's life cycle through the API, as an admin manages it: a disabled user's session,
//! console session and API token are refused on their very next request and their right
//! password is answered as a wrong one (the audit trail saying why), and a re-enable lets
//! them log in anew; a demoted admin's token is judged as a member's at once; a deleted user
//! cannot log in, their tokens fail, their grants are gone and the audit trail keeps their
//! entries; the last enabled admin and an admin's own account are guarded, also when two
//! admins demote each other at once; and every change, a user's creation included, is in
//! the audit trail with the user's name and the role or status before and after.
//!
//! Every test of the API runs on every backend: what each proves passes through the store
//! (the token check reads the user's role and status there on every request). The console's
//! controls for the same, in a real headless Chromium, run once, on SQLite: what is under test
//! there is the console.

use reqwest::Method;
use reqwest::header::{COOKIE, SET_COOKIE};
use serde_json::{Value, json};

use crate::browser::Browser;
use crate::console::log_in;
use crate::helpers::{TEST_ADMIN_PASSWORD, TestApp, login, spawn_app};
use kadence_tests::fixtures::{Backend, wait_for};
use kadence_tests::session::attempt_login;

/// `PUT /api/users/{name}/{what}` with `{what: value}` as `token`'s owner.
async fn set(app: &TestApp, token: &str, name: &str, what: &str, value: &str) -> (u16, Value) {
    let path = format!("/api/users/{name}/{what}");
    let body = json!({ what: value });
    app.call_as(Some(token), Method::PUT, &path, Some(body))
        .await
}

/// The audit trail's entries on `target` (newest first).
async fn audit_of(app: &TestApp, target: &str) -> Vec<Value> {
    let (status, page) = app
        .call(Method::GET, &format!("/api/audit?target={target}"), None)
        .await;
    assert_eq!(status, 200, "{page}");
    page["items"].as_array().unwrap().clone()
}

/// A console session for `name`: the `kadence_session` cookie, as `name=value`.
async fn console_session(app: &TestApp, name: &str, password: &str) -> String {
    let opened = reqwest::Client::new()
        .post(format!("{}/api/auth/session", app.api_url()))
        .header("X-Requested-With", "kadence-console")
        .json(&json!({ "name": name, "password": password }))
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 201, "console login of {name}");
    let set_cookie = opened.headers()[SET_COOKIE].to_str().unwrap();
    set_cookie.split(';').next().unwrap().to_owned()
}

/// `GET /api/auth/me` with the console's `cookie`: the status.
async fn me_by_cookie(app: &TestApp, cookie: &str) -> u16 {
    let answer = reqwest::Client::new()
        .get(format!("{}/api/auth/me", app.api_url()))
        .header(COOKIE, cookie)
        .send()
        .await
        .unwrap();
    answer.status().as_u16()
}

/// `GET path` as `token`'s owner: the status.
async fn status_of(app: &TestApp, token: &str, path: &str) -> u16 {
    app.call_as(Some(token), Method::GET, path, None).await.0
}

/// An API token of `token`'s owner.
async fn api_token(app: &TestApp, token: &str) -> String {
    let body = json!({"name": "automation"});
    let (status, issued) = app
        .call_as(Some(token), Method::POST, "/api/tokens", Some(body))
        .await;
    assert_eq!(status, 201, "{issued}");
    issued["token"].as_str().unwrap().to_owned()
}

/// Creates `name` with `role` as the first admin; the user's session token.
async fn add_user(app: &TestApp, name: &str, role: &str) -> String {
    let password = format!("{name}-password-1");
    let body = json!({"name": name, "password": password, "role": role});
    let (status, created) = app.call(Method::POST, "/api/users", Some(body)).await;
    assert_eq!(status, 201, "{created}");
    login(app.api_url(), name, &password).await
}

async fn a_disabled_user_is_refused_at_once_and_comes_back_by_logging_in(backend: Backend) {
    let app = spawn_app(backend).await;
    let session = app.add_member("ann", &[]).await;
    let api = api_token(&app, &session).await;
    let cookie = console_session(&app, "ann", "ann-password-1").await;
    for token in [&session, &api] {
        assert_eq!(status_of(&app, token, "/api/auth/me").await, 200);
    }
    assert_eq!(me_by_cookie(&app, &cookie).await, 200);

    let (status, disabled) = set(&app, app.admin_token(), "ann", "status", "DISABLED").await;
    assert_eq!(status, 200, "{disabled}");
    assert!(disabled["disabled_at_ms"].is_i64(), "{disabled}");
    for token in [&session, &api] {
        let (status, body) = app
            .call_as(Some(token), Method::GET, "/api/auth/me", None)
            .await;
        assert_eq!(status, 401, "the very next request: {body}");
    }
    assert_eq!(me_by_cookie(&app, &cookie).await, 401, "the console's too");

    // The right password is answered exactly as a wrong one.
    let mut answers = Vec::new();
    for password in ["ann-password-1", "not-her-password"] {
        let body = json!({"name": "ann", "password": password});
        let login = "/api/auth/login";
        answers.push(app.call_as(None, Method::POST, login, Some(body)).await);
    }
    assert_eq!(answers[0].0, 401, "{answers:?}");
    assert_eq!(answers[0], answers[1], "no oracle");
    let logins = audit_of(&app, "/api/auth/login").await;
    let reasons: Vec<&Value> = logins
        .iter()
        .filter(|entry| entry["user_name"] == "ann" && entry["status"] == 401)
        .map(|entry| &entry["details"]["reason"])
        .collect();
    assert_eq!(reasons.len(), 2, "{logins:?}");
    assert_eq!(
        (reasons[1], reasons[0] == "user disabled"),
        (&json!("user disabled"), false),
        "the trail says why the right password was refused (newest first): {logins:?}"
    );
    let changes = audit_of(&app, "/api/users/ann/status").await;
    assert_eq!(changes[0]["status"], 200, "{changes:?}");
    assert_eq!(
        changes[0]["details"],
        json!({"user": "ann", "status": {"before": "ENABLED", "after": "DISABLED"}})
    );
    let (_, users) = app.call(Method::GET, "/api/users", None).await;
    let listed = users
        .as_array()
        .unwrap()
        .iter()
        .find(|user| user["name"] == "ann");
    assert_eq!(
        listed.unwrap()["disabled_at_ms"],
        disabled["disabled_at_ms"]
    );

    let (status, enabled) = set(&app, app.admin_token(), "ann", "status", "ENABLED").await;
    assert_eq!(status, 200, "{enabled}");
    assert_eq!(enabled["disabled_at_ms"], Value::Null);
    for token in [&session, &api] {
        assert_eq!(
            status_of(&app, token, "/api/auth/me").await,
            401,
            "what was revoked stays revoked"
        );
    }
    let again = login(app.api_url(), "ann", "ann-password-1").await;
    assert_eq!(status_of(&app, &again, "/api/auth/me").await, 200);
    let changes = audit_of(&app, "/api/users/ann/status").await;
    assert_eq!(
        changes[0]["details"],
        json!({"user": "ann", "status": {"before": "DISABLED", "after": "ENABLED"}})
    );
    let (status, body) = set(&app, app.admin_token(), "ann", "status", "PAUSED").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("ENABLED, DISABLED"),
        "{body}"
    );
    app.shutdown().await;
}

async fn a_demoted_admin_is_judged_as_a_member_at_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let session = add_user(&app, "deputy", "ADMIN").await;
    let api = api_token(&app, &session).await;
    let created = audit_of(&app, "/api/users").await;
    let creation = created
        .iter()
        .find(|entry| entry["action"] == "POST /api/users")
        .expect("the creation is audited");
    assert_eq!(
        creation["details"],
        json!({"user": "deputy", "role": "ADMIN"}),
        "a creation names the new user and their role"
    );
    for token in [&session, &api] {
        assert_eq!(status_of(&app, token, "/api/users").await, 200);
    }

    let (status, demoted) = set(&app, app.admin_token(), "deputy", "role", "MEMBER").await;
    assert_eq!(
        (status, &demoted["role"]),
        (200, &json!("MEMBER")),
        "{demoted}"
    );
    for token in [&session, &api] {
        let (status, body) = app
            .call_as(Some(token), Method::GET, "/api/users", None)
            .await;
        assert_eq!(
            status, 403,
            "judged as a member on the next request: {body}"
        );
        let (status, me) = app
            .call_as(Some(token), Method::GET, "/api/auth/me", None)
            .await;
        assert_eq!((status, &me["role"]), (200, &json!("MEMBER")));
    }
    let (status, body) = set(&app, &session, "admin", "role", "MEMBER").await;
    assert_eq!(status, 403, "a member changes no role: {body}");
    let changes = audit_of(&app, "/api/users/deputy/role").await;
    assert_eq!(
        changes[0]["details"],
        json!({"user": "deputy", "role": {"before": "ADMIN", "after": "MEMBER"}})
    );

    let (status, promoted) = set(&app, app.admin_token(), "deputy", "role", "ADMIN").await;
    assert_eq!(
        (status, &promoted["role"]),
        (200, &json!("ADMIN")),
        "{promoted}"
    );
    assert_eq!(status_of(&app, &api, "/api/users").await, 200, "and back");
    let (status, body) = set(&app, app.admin_token(), "deputy", "role", "OWNER").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("ADMIN, MEMBER"),
        "{body}"
    );
    app.shutdown().await;
}

async fn a_deleted_user_is_gone_but_the_audit_trail_keeps_them(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_app("alpha", 1).await;
    let session = app.add_member("carol", &[("alpha", "VIEW")]).await;
    let api = api_token(&app, &session).await;
    let (status, _) = app
        .call_as(
            Some(&session),
            Method::PUT,
            "/api/auth/me/locale",
            Some(json!({"locale": "zh-CN"})),
        )
        .await;
    assert_eq!(status, 200, "carol writes something for the trail");

    let (status, body) = app.call(Method::DELETE, "/api/users/carol", None).await;
    assert_eq!(status, 204, "{body}");
    for token in [&session, &api] {
        assert_eq!(status_of(&app, token, "/api/auth/me").await, 401);
    }
    let (status, _) = attempt_login(app.api_url(), "carol", "carol-password-1").await;
    assert_eq!(status, 401, "a deleted user cannot log in");
    let (status, body) = app.call(Method::GET, "/api/users/carol/tokens", None).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = app.call(Method::DELETE, "/api/users/carol", None).await;
    assert_eq!(status, 404, "{body}");

    let (status, trail) = app.call(Method::GET, "/api/audit?user=carol", None).await;
    assert_eq!(status, 200, "{trail}");
    assert!(
        trail["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|entry| entry["action"] == "PUT /api/auth/me/locale"),
        "the trail keeps what carol did: {trail}"
    );
    let deletion = audit_of(&app, "/api/users/carol").await;
    let deletion = deletion
        .iter()
        .find(|entry| entry["action"] == "DELETE /api/users/{name}" && entry["status"] == 204)
        .expect("the deletion is audited");
    assert_eq!(
        deletion["details"],
        json!({"user": "carol", "role": "MEMBER", "status": "ENABLED", "deleted": true})
    );

    // The name is free again; nothing of the old carol comes with it.
    let body = json!({"name": "carol", "password": "carol-password-2"});
    let (status, fresh) = app.call(Method::POST, "/api/users", Some(body)).await;
    assert_eq!(status, 201, "{fresh}");
    assert_eq!(
        status_of(&app, &api, "/api/auth/me").await,
        401,
        "the old token is no key to the new carol"
    );
    app.shutdown().await;
}

/// The first admin demoting, disabling and deleting themselves: each refused with 409, its
/// message holding `expected`.
async fn own_changes_are_refused(app: &TestApp, expected: &str) {
    let changes = [
        (Method::PUT, "role", Some(json!({"role": "MEMBER"}))),
        (Method::PUT, "status", Some(json!({"status": "DISABLED"}))),
        (Method::DELETE, "", None),
    ];
    for (method, what, body) in changes {
        let path = format!("/api/users/admin/{what}");
        let (status, answer) = app.call(method, path.trim_end_matches('/'), body).await;
        assert_eq!(status, 409, "{path}: {answer}");
        let message = answer["error"].as_str().unwrap();
        assert!(message.contains(expected), "{path}: {message}");
    }
}

async fn the_last_admin_and_an_admins_own_account_are_guarded(backend: Backend) {
    let app = spawn_app(backend).await;
    let admin = app.admin_token().to_owned();
    own_changes_are_refused(&app, "user admin is the last enabled admin and cannot be").await;
    assert_eq!(
        status_of(&app, &admin, "/api/users").await,
        200,
        "still the admin"
    );

    // With a second admin, an admin still cannot take their own standing.
    let deputy = add_user(&app, "deputy", "ADMIN").await;
    own_changes_are_refused(&app, "yourself (admin): another admin must").await;
    let (status, body) = set(&app, &admin, "admin", "role", "ADMIN").await;
    assert_eq!(status, 200, "keeping one's own role is no change: {body}");

    // Two admins demoting each other at the same moment: never both.
    for round in 0..3 {
        let (first, second) = tokio::join!(
            set(&app, &admin, "deputy", "role", "MEMBER"),
            set(&app, &deputy, "admin", "role", "MEMBER"),
        );
        let mut statuses = [first.0, second.0];
        statuses.sort_unstable();
        assert!(
            statuses == [200, 403] || statuses == [200, 409],
            "round {round}: one goes, the other is refused (as the last admin, or as a \
             member by then): {first:?} {second:?}"
        );
        let (winner, loser) = if first.0 == 200 {
            (&admin, "deputy")
        } else {
            (&deputy, "admin")
        };
        let (_, users) = app
            .call_as(Some(winner), Method::GET, "/api/users", None)
            .await;
        let admins = users.as_array().unwrap().iter();
        let admins = admins.filter(|user| user["role"] == "ADMIN").count();
        assert_eq!(admins, 1, "round {round}: {users}");
        let (status, body) = set(&app, winner, loser, "role", "ADMIN").await;
        assert_eq!(status, 200, "{body}");
    }
    let refused = audit_of(&app, "/api/users/admin/role").await;
    assert!(
        refused.iter().any(|entry| entry["status"] == 409),
        "refusals are in the trail too: {refused:?}"
    );
    app.shutdown().await;
}

/// The user `name` as the API lists them.
async fn listed(app: &TestApp, name: &str) -> Option<Value> {
    let (status, users) = app.call(Method::GET, "/api/users", None).await;
    assert_eq!(status, 200, "{users}");
    let users = users.as_array().unwrap().iter();
    users.into_iter().find(|user| user["name"] == name).cloned()
}

/// Waits until the API lists `name` as `accept` wants.
async fn wait_for_user(app: &TestApp, name: &str, what: &str, accept: impl Fn(&Value) -> bool) {
    wait_for(std::time::Duration::from_secs(20), what, || async {
        listed(app, name).await.filter(|user| accept(user))
    })
    .await;
}

/// The users page's role and status controls: disable (the user's token refused at once)
/// and enable, a new role, a deletion; none for the admin's own account.
async fn an_admin_manages_a_users_standing_in_the_console(backend: Backend) {
    let app = spawn_app(backend).await;
    let erin = app.add_member("erin", &[]).await;
    add_user(&app, "frank", "MEMBER").await;
    let base = app.api_url().to_owned();
    let browser = Browser::start("en-US").await;
    browser.goto(&base).await;
    log_in(&browser, "admin", TEST_ADMIN_PASSWORD).await;

    browser.goto(&format!("{base}/#/users?user=erin")).await;
    browser.find("#user-panel[data-user=\"erin\"]").await;
    browser.click("#user-disable").await;
    browser
        .click("[data-action=\"disable\"] [data-confirm=\"yes\"]")
        .await;
    browser
        .wait_for_text("tr[data-user=\"erin\"]", "erin disabled", |row| {
            row.contains("Disabled")
        })
        .await;
    assert!(listed(&app, "erin").await.unwrap()["disabled_at_ms"].is_i64());
    assert_eq!(status_of(&app, &erin, "/api/auth/me").await, 401);
    browser.screenshot("user-disabled").await;

    browser.click("#user-enable").await;
    wait_for_user(&app, "erin", "erin enabled", |user| {
        user["disabled_at_ms"].is_null()
    })
    .await;
    browser.select("#standing-role", "ADMIN").await;
    browser.click("#role-save").await;
    wait_for_user(&app, "erin", "erin an admin", |user| {
        user["role"] == "ADMIN"
    })
    .await;

    browser.goto(&format!("{base}/#/users?user=frank")).await;
    browser.find("#user-panel[data-user=\"frank\"]").await;
    browser.click("#user-delete").await;
    browser
        .click("[data-action=\"delete-user\"] [data-confirm=\"yes\"]")
        .await;
    browser.wait_gone("tr[data-user=\"frank\"]").await;
    assert!(listed(&app, "frank").await.is_none(), "deleted");

    // Their own account has no such controls: the API would refuse them.
    browser.goto(&format!("{base}/#/users?user=admin")).await;
    browser.find("#user-panel[data-user=\"admin\"]").await;
    for control in ["#role-form", "#user-disable", "#user-delete"] {
        assert!(browser.all(control).await.is_empty(), "{control}");
    }
    // This node serves no book: no help link leads nowhere.
    assert!(
        browser.all("a.help").await.is_empty(),
        "no help link without a book"
    );
    browser.close().await;
    app.shutdown().await;
}

on_sqlite_only!(an_admin_manages_a_users_standing_in_the_console);
on_every_backend!(
    a_disabled_user_is_refused_at_once_and_comes_back_by_logging_in,
    a_demoted_admin_is_judged_as_a_member_at_once,
    a_deleted_user_is_gone_but_the_audit_trail_keeps_them,
    the_last_admin_and_an_admins_own_account_are_guarded,
);
