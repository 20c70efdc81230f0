//! Who may do what through the API: credentials on every route, each member confined to the
//! apps granted to them (no IDOR), script source and child jobs by permission, logins and
//! tokens that expire and can be revoked, failed logins throttled.
//!
//! [`every_route_checks_credentials_and_grants`] walks a table with one request per route of
//! the router and proves, for each: 401 without credentials, 403 for a member who lacks the
//! grant (or the role) — 404 for one who may not even view the app of the job or run it
//! names, as for one that does not exist — and not 401/403 for the right one. The table must name every operation
//! of the API's OpenAPI document, which the router is built from (`utoipa_axum::routes!`), so
//! a new route cannot slip past it.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use kadence_tests::session::attempt_login;

use crate::helpers::{TEST_ADMIN_PASSWORD, TestApp, login, spawn_app, spawn_app_with};
use kadence_tests::fixtures::Backend;

/// The operations anyone may call, besides the schema registry's (under [`PUBLIC_PREFIX`]).
const PUBLIC: [(&str, &str); 6] = [
    ("GET", "/health"),
    ("GET", "/health/ready"),
    ("GET", "/metrics"),
    ("POST", "/api/auth/login"),
    ("POST", "/api/auth/session"),
    ("POST", "/api/auth/password-reset"),
];
/// Where every operation is public: the record schemas, the same as the repository's.
const PUBLIC_PREFIX: &str = "/registry/";

/// Every operation of the API document the scheduler serves, as (method, path template,
/// public): the router is built from the same annotations, so this is every route.
async fn documented_operations(app: &TestApp) -> Vec<(String, String, bool)> {
    let (status, document) = app
        .call_as(None, Method::GET, "/api/openapi.json", None)
        .await;
    assert_eq!(
        status, 200,
        "the API document needs no credentials: {document}"
    );
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in ["get", "post", "put", "patch", "delete"] {
            if let Some(operation) = item.get(method) {
                let public = operation["security"] == json!([]);
                operations.push((method.to_uppercase(), path.clone(), public));
            }
        }
    }
    assert!(operations.len() > 30, "{operations:?}");
    // The browsable page comes from the binary and points at the same document.
    let (status, page) = app.call_as(None, Method::GET, "/api/docs/", None).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.as_str().unwrap().contains("swagger-ui"), "{page}");
    let (status, script) = app
        .call_as(None, Method::GET, "/api/docs/swagger-initializer.js", None)
        .await;
    assert_eq!(status, 200, "{script}");
    assert!(
        script.as_str().unwrap().contains("/api/openapi.json"),
        "{script}"
    );
    operations
}

/// What a request needs, on app `alpha` where an app is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    /// Any signed-in user (listings are filtered, not refused).
    AnyUser,
    View,
    Operate,
    Admin,
}

struct Case {
    route: (&'static str, &'static str),
    method: Method,
    path: String,
    body: Option<Value>,
    needs: Needs,
}

fn case(
    route: (&'static str, &'static str),
    path: &str,
    body: Option<Value>,
    needs: Needs,
) -> Case {
    Case {
        route,
        method: route.0.parse().unwrap(),
        path: path.to_owned(),
        body,
        needs,
    }
}

/// Whether `case` names one of alpha's jobs or runs by its id: to a member who may not view
/// alpha it does not exist (404, as a missing one), rather than being refused (403), so that
/// ids cannot be probed for what other apps hold.
fn names_one_of_alphas(case: &Case) -> bool {
    let template = case.route.1;
    template.starts_with("/api/jobs/{id}")
        || template.starts_with("/api/runs/{log_id}")
        || template == "/api/backfills"
        || case.path.contains("?job=")
}

/// Apps `alpha` and `beta` with one stopped job each, a run of alpha's job, and members:
/// OPERATE on alpha, VIEW on alpha, OPERATE on beta.
struct Fixture {
    alpha_job: i64,
    beta_job: i64,
    alpha_run: i64,
    operator: String,
    viewer: String,
    outsider: String,
}

async fn fixture(app: &TestApp) -> Fixture {
    app.create_app("alpha", 1).await;
    app.create_app("beta", 1).await;
    let job = |name: &str| json!({"app": name, "handler": "ok", "schedule_conf": "0 0 3 * * ?"});
    let alpha_job = app.create_job(job("alpha")).await.id;
    let beta_job = app.create_job(job("beta")).await.id;
    let (status, triggered) = app.trigger_with(alpha_job, json!({})).await;
    assert_eq!(status, 202, "{triggered}");
    Fixture {
        alpha_job,
        beta_job,
        alpha_run: triggered["log_id"].as_i64().unwrap(),
        operator: app.add_member("op-alpha", &[("alpha", "OPERATE")]).await,
        viewer: app.add_member("view-alpha", &[("alpha", "VIEW")]).await,
        outsider: app.add_member("op-beta", &[("beta", "OPERATE")]).await,
    }
}

/// The permission table; `spare` is a stopped job of alpha that the DELETE case removes.
fn cases(fixture: &Fixture, spare: i64) -> Vec<Case> {
    use Needs::*;
    let job = fixture.alpha_job;
    let new_job = json!({"app": "alpha", "handler": "ok", "schedule_type": "NONE"});
    vec![
        case(
            ("POST", "/api/auth/logout"),
            "/api/auth/logout",
            None,
            AnyUser,
        ),
        case(("GET", "/api/auth/me"), "/api/auth/me", None, AnyUser),
        case(
            ("PUT", "/api/auth/me/locale"),
            "/api/auth/me/locale",
            Some(json!({"locale": "zh-CN"})),
            AnyUser,
        ),
        case(("GET", "/api/tokens"), "/api/tokens", None, AnyUser),
        case(
            ("POST", "/api/tokens"),
            "/api/tokens",
            Some(json!({"name": "ci"})),
            AnyUser,
        ),
        case(
            ("DELETE", "/api/tokens/{id}"),
            "/api/tokens/999999",
            None,
            AnyUser,
        ),
        case(
            ("GET", "/api/users/{name}/tokens"),
            "/api/users/op-beta/tokens",
            None,
            Admin,
        ),
        case(
            ("DELETE", "/api/users/{name}/tokens/{id}"),
            "/api/users/op-beta/tokens/999999",
            None,
            Admin,
        ),
        case(("GET", "/api/users"), "/api/users", None, Admin),
        case(
            ("POST", "/api/users"),
            "/api/users",
            Some(json!({"name": "newcomer", "password": "newcomer-password"})),
            Admin,
        ),
        case(
            ("PUT", "/api/users/{name}/password"),
            "/api/users/newcomer/password",
            Some(json!({"password": "another-password-1"})),
            Admin,
        ),
        case(
            ("PUT", "/api/users/{name}/grants/{app}"),
            "/api/users/view-alpha/grants/alpha",
            Some(json!({"access": "VIEW"})),
            Admin,
        ),
        case(
            ("DELETE", "/api/users/{name}/grants/{app}"),
            "/api/users/op-beta/grants/beta",
            None,
            Admin,
        ),
        case(
            ("PUT", "/api/users/{name}/role"),
            "/api/users/newcomer/role",
            Some(json!({"role": "MEMBER"})),
            Admin,
        ),
        case(
            ("PUT", "/api/users/{name}/status"),
            "/api/users/newcomer/status",
            Some(json!({"status": "ENABLED"})),
            Admin,
        ),
        case(
            ("DELETE", "/api/users/{name}"),
            "/api/users/newcomer",
            None,
            Admin,
        ),
        case(("GET", "/api/apps"), "/api/apps", None, AnyUser),
        case(
            ("POST", "/api/apps"),
            "/api/apps",
            Some(json!({"name": "gamma", "partitions": 1})),
            Admin,
        ),
        case(("GET", "/api/jobs"), "/api/jobs", None, AnyUser),
        case(("GET", "/api/jobs"), "/api/jobs?app=alpha", None, View),
        case(("POST", "/api/jobs"), "/api/jobs", Some(new_job), Operate),
        case(
            ("GET", "/api/jobs/{id}"),
            &format!("/api/jobs/{job}"),
            None,
            View,
        ),
        case(
            ("PATCH", "/api/jobs/{id}"),
            &format!("/api/jobs/{job}"),
            Some(json!({"params": "edited"})),
            Operate,
        ),
        // Removing a job needs OPERATE on its app, like the other writes of a job.
        case(
            ("DELETE", "/api/jobs/{id}"),
            &format!("/api/jobs/{spare}"),
            None,
            Operate,
        ),
        case(
            ("GET", "/api/jobs/{id}/glue"),
            &format!("/api/jobs/{job}/glue"),
            None,
            View,
        ),
        case(
            ("POST", "/api/jobs/{id}/start"),
            &format!("/api/jobs/{job}/start"),
            None,
            Operate,
        ),
        case(
            ("POST", "/api/jobs/{id}/stop"),
            &format!("/api/jobs/{job}/stop"),
            None,
            Operate,
        ),
        case(
            ("POST", "/api/jobs/{id}/trigger"),
            &format!("/api/jobs/{job}/trigger"),
            None,
            Operate,
        ),
        case(
            ("POST", "/api/jobs/{id}/kill"),
            &format!("/api/jobs/{job}/kill"),
            None,
            Operate,
        ),
        case(
            ("POST", "/api/runs/{log_id}/kill"),
            &format!("/api/runs/{}/kill", fixture.alpha_run),
            None,
            Operate,
        ),
        case(
            ("GET", "/api/jobs/{id}/runs"),
            &format!("/api/jobs/{job}/runs"),
            None,
            View,
        ),
        case(
            ("GET", "/api/schedules/preview"),
            "/api/schedules/preview?schedule_conf=0%200%203%20*%20*%20%3F",
            None,
            AnyUser,
        ),
        case(("GET", "/api/executors"), "/api/executors", None, AnyUser),
        case(
            ("GET", "/api/executors"),
            "/api/executors?app=alpha",
            None,
            View,
        ),
        // Runs across jobs: filtered to the caller's apps; naming an app or a job needs
        // VIEW there.
        case(("GET", "/api/runs"), "/api/runs", None, AnyUser),
        case(("GET", "/api/runs"), "/api/runs?app=alpha", None, View),
        case(
            ("GET", "/api/runs"),
            &format!("/api/runs?job={job}"),
            None,
            View,
        ),
        case(
            ("GET", "/api/runs/{log_id}"),
            &format!("/api/runs/{}", fixture.alpha_run),
            None,
            View,
        ),
        case(
            ("GET", "/api/runs/{log_id}/log"),
            &format!("/api/runs/{}/log", fixture.alpha_run),
            None,
            View,
        ),
        case(("GET", "/api/reports"), "/api/reports", None, AnyUser),
        // The dashboard counts only the caller's apps.
        case(("GET", "/api/overview"), "/api/overview", None, AnyUser),
        case(
            ("GET", "/api/reports"),
            "/api/reports?app=alpha",
            None,
            View,
        ),
        case(("GET", "/api/replays"), "/api/replays", None, AnyUser),
        case(
            ("GET", "/api/replays"),
            "/api/replays?app=alpha",
            None,
            View,
        ),
        // Counting reads the topic: VIEW. Replaying runs jobs again: OPERATE.
        case(
            ("POST", "/api/replays"),
            "/api/replays",
            Some(json!({"app": "alpha", "from_ms": 1, "to_ms": 2, "dry_run": true})),
            View,
        ),
        case(
            ("POST", "/api/replays"),
            "/api/replays",
            Some(json!({"app": "alpha", "from_ms": 1, "to_ms": 2})),
            Operate,
        ),
        // A replay is hidden (404), not refused, from who may see neither of its apps.
        case(
            ("GET", "/api/replays/{id}"),
            "/api/replays/999999",
            None,
            AnyUser,
        ),
        case(
            ("POST", "/api/backfills"),
            "/api/backfills",
            Some(json!({"job_id": job, "from_ms": 1, "to_ms": 2, "dry_run": true})),
            View,
        ),
        case(
            ("POST", "/api/backfills"),
            "/api/backfills",
            Some(json!({"job_id": job, "from_ms": 1, "to_ms": 2})),
            Operate,
        ),
        case(
            ("GET", "/api/shadow/report"),
            "/api/shadow/report?app=alpha&from_ms=0&to_ms=1",
            None,
            View,
        ),
        case(("GET", "/api/audit"), "/api/audit", None, AnyUser),
        case(("GET", "/api/audit"), "/api/audit?app=alpha", None, View),
        case(
            ("GET", "/api/signing-keys"),
            "/api/signing-keys",
            None,
            AnyUser,
        ),
        case(
            ("POST", "/api/signing-keys/rotate"),
            "/api/signing-keys/rotate",
            None,
            Admin,
        ),
        case(
            ("GET", "/api/apps/{app}/executor-keys"),
            "/api/apps/alpha/executor-keys",
            None,
            View,
        ),
        case(
            ("POST", "/api/apps/{app}/executor-keys"),
            "/api/apps/alpha/executor-keys",
            None,
            Admin,
        ),
        // An unknown key: the admin's answer is 404, after the role check.
        case(
            ("DELETE", "/api/apps/{app}/executor-keys/{key_id}"),
            "/api/apps/alpha/executor-keys/0123456789abcdef",
            None,
            Admin,
        ),
        // An unknown key: the admin's answer is 404, after the role check.
        case(
            ("POST", "/api/signing-keys/{id}/retire"),
            "/api/signing-keys/0000/retire",
            None,
            Admin,
        ),
        // Imports create apps, jobs and users: an admin's, dry run included.
        case(
            ("POST", "/api/imports/xxl-job"),
            "/api/imports/xxl-job",
            Some(json!({"source": "xxl-job:db:3306/x", "snapshot": {}, "dry_run": true})),
            Admin,
        ),
        // Nothing imported from it: the admin's answer is 404, after the role check.
        case(
            ("POST", "/api/imports/xxl-job/undo"),
            "/api/imports/xxl-job/undo",
            Some(json!({"source": "xxl-job:db:3306/x", "dry_run": true})),
            Admin,
        ),
        case(
            ("POST", "/api/users/{name}/password-reset"),
            "/api/users/op-beta/password-reset",
            None,
            Admin,
        ),
    ]
}

/// Every route: 401 without a token (and with a made-up one), 403 for each caller who lacks
/// what it needs, not 401/403 for one who has it.
async fn every_route_checks_credentials_and_grants(backend: Backend) {
    let app = spawn_app(backend).await;
    let fixture = fixture(&app).await;
    let spare = app
        .create_job(json!({"app": "alpha", "handler": "ok", "schedule_type": "NONE"}))
        .await
        .id;
    let cases = cases(&fixture, spare);
    let operations = documented_operations(&app).await;
    for (method, path, public) in &operations {
        if *public {
            assert!(
                PUBLIC.contains(&(method.as_str(), path.as_str()))
                    || path.starts_with(PUBLIC_PREFIX),
                "{method} {path} is documented as public: only {PUBLIC:?} and the schema \
                 registry may be"
            );
            continue;
        }
        assert!(
            cases
                .iter()
                .any(|case| case.route == (method.as_str(), path.as_str())),
            "{method} {path} has no case in the permission table: add one saying what it needs"
        );
    }
    for case in &cases {
        assert!(
            operations
                .iter()
                .any(|(method, path, _)| (method.as_str(), path.as_str()) == case.route),
            "the permission table names {:?}, which the API document does not list",
            case.route
        );
    }
    for case in &cases {
        let what = format!("{} {}", case.method, case.path);
        let forged = "kdn_0000000000000000000000000000000000000000000000000000000000000000";
        for token in [None, Some(forged)] {
            let (status, body) = app
                .call_as(token, case.method.clone(), &case.path, case.body.clone())
                .await;
            assert_eq!(status, 401, "{what} with token {token:?}: {body}");
        }
        let (refused, allowed): (Vec<&str>, &str) = match case.needs {
            Needs::AnyUser => (vec![], &fixture.outsider),
            Needs::View => (vec![&fixture.outsider], &fixture.viewer),
            Needs::Operate => (vec![&fixture.outsider, &fixture.viewer], &fixture.operator),
            Needs::Admin => (vec![&fixture.operator], app.admin_token()),
        };
        for token in refused {
            let (status, body) = app
                .call_as(
                    Some(token),
                    case.method.clone(),
                    &case.path,
                    case.body.clone(),
                )
                .await;
            if token == fixture.outsider && names_one_of_alphas(case) {
                assert_eq!(
                    status, 404,
                    "{what} by a member who may not view alpha: {body}"
                );
                assert!(
                    body["error"].as_str().unwrap().contains("does not exist"),
                    "answered as for one that does not exist: {body}"
                );
                continue;
            }
            assert_eq!(status, 403, "{what} by a member without the grant: {body}");
            assert!(
                body["error"].as_str().unwrap().contains("grant")
                    || body["error"].as_str().unwrap().contains("admin"),
                "{what}: {body}"
            );
        }
        // A logout ends the token it is sent with: a fresh session of the same user.
        let fresh;
        let allowed = if case.route == ("POST", "/api/auth/logout") {
            fresh = login(app.api_url(), "op-beta", "op-beta-password-1").await;
            fresh.as_str()
        } else {
            allowed
        };
        let (status, body) = app
            .call_as(
                Some(allowed),
                case.method.clone(),
                &case.path,
                case.body.clone(),
            )
            .await;
        assert!(
            status != 401 && status != 403 && status < 500,
            "{what} by a caller who may: {status} {body}"
        );
    }
    let _ = fixture.beta_job;
    app.shutdown().await;
}

/// A member's listings hold only their apps; asking for another app by name is refused.
async fn listings_show_a_member_only_their_apps(backend: Backend) {
    let app = spawn_app(backend).await;
    let fixture = fixture(&app).await;
    let outsider = Some(fixture.outsider.as_str());
    let (status, jobs) = app.call_as(outsider, Method::GET, "/api/jobs", None).await;
    assert_eq!(status, 200, "{jobs}");
    let ids: Vec<i64> = jobs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![fixture.beta_job]);
    let (_, apps) = app.call_as(outsider, Method::GET, "/api/apps", None).await;
    let names: Vec<&str> = apps["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|app| app["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["beta"]);
    for path in [
        "/api/jobs?app=alpha",
        "/api/executors?app=alpha",
        "/api/reports?app=alpha",
    ] {
        let (status, body) = app.call_as(outsider, Method::GET, path, None).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert_eq!(
            body["error"],
            "user op-beta has no VIEW grant on app alpha: ask an admin for one"
        );
    }
    // A member with no grants at all sees nothing, rather than everything.
    let nobody = app.add_member("nobody", &[]).await;
    let (_, jobs) = app
        .call_as(Some(&nobody), Method::GET, "/api/jobs", None)
        .await;
    assert_eq!(jobs["items"], json!([]));
    let (_, all) = app.call(Method::GET, "/api/jobs", None).await;
    assert_eq!(
        all["items"].as_array().unwrap().len(),
        2,
        "an admin sees every app"
    );
    app.shutdown().await;
}

/// Script source needs the SCRIPTS grant; other edits of a script job need OPERATE; a job may
/// not name a child in an app its author may not operate.
async fn script_source_and_children_need_their_grants(backend: Backend) {
    let app = spawn_app(backend).await;
    let fixture = fixture(&app).await;
    let operator = Some(fixture.operator.as_str());
    let script = json!({"app": "alpha", "handler": "sh", "schedule_type": "NONE",
        "glue_type": "GLUE_SHELL", "glue_source": "echo hi"});
    let (status, body) = app
        .call_as(operator, Method::POST, "/api/jobs", Some(script.clone()))
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["error"],
        "user op-alpha has no SCRIPTS grant on app alpha: ask an admin for one"
    );

    let scripter = app.add_member("scripter", &[("alpha", "SCRIPTS")]).await;
    let (status, created) = app
        .call_as(Some(&scripter), Method::POST, "/api/jobs", Some(script))
        .await;
    assert_eq!(status, 201, "{created}");
    let path = format!("/api/jobs/{}", created["id"]);
    let (status, body) = app
        .call_as(operator, Method::PATCH, &path, Some(json!({"params": "x"})))
        .await;
    assert_eq!(
        status, 200,
        "params of a script job need only OPERATE: {body}"
    );
    let (status, body) = app
        .call_as(
            operator,
            Method::PATCH,
            &path,
            Some(json!({"glue_source": "rm -rf /"})),
        )
        .await;
    assert_eq!(status, 403, "{body}");

    let child_elsewhere = json!({"app": "alpha", "handler": "ok", "schedule_type": "NONE",
        "child_job_ids": [fixture.beta_job]});
    let (status, body) = app
        .call_as(operator, Method::POST, "/api/jobs", Some(child_elsewhere))
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("child job"),
        "{body}"
    );
    app.shutdown().await;
}

/// A login gives a session token that works until logout or expiry; an API token works until
/// revoked; neither is accepted afterwards, and a token is never shown again.
async fn sessions_and_api_tokens_expire_and_are_revoked(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.auth.session_ttl = Duration::from_secs(2);
    })
    .await;
    let me = |token: String| {
        let app = &app;
        async move {
            app.call_as(Some(&token), Method::GET, "/api/auth/me", None)
                .await
                .0
        }
    };
    let (status, body) = app
        .call_as(
            None,
            Method::POST,
            "/api/auth/login",
            Some(json!({"name": "admin", "password": "wrong"})),
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("wrong user name or password"))
    );
    let (status, _) = app
        .call_as(
            None,
            Method::POST,
            "/api/auth/login",
            Some(json!({"name": "nobody", "password": "wrong"})),
        )
        .await;
    assert_eq!(status, 401, "an unknown name gets the same answer");

    let session = login(app.api_url(), "admin", TEST_ADMIN_PASSWORD).await;
    assert_eq!(me(session.clone()).await, 200);
    let (status, issued) = app
        .call_as(
            Some(&session),
            Method::POST,
            "/api/tokens",
            Some(json!({"name": "deploys", "expires_in_days": 30})),
        )
        .await;
    assert_eq!(status, 201, "{issued}");
    let api_token = issued["token"].as_str().unwrap().to_owned();
    let (_, listed) = app
        .call_as(Some(&session), Method::GET, "/api/tokens", None)
        .await;
    let listed_text = listed.to_string();
    assert!(
        listed_text.contains("deploys") && !listed_text.contains(&api_token),
        "{listed}"
    );

    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(me(session).await, 401, "the session expired");
    assert_eq!(me(api_token.clone()).await, 200, "the API token lives on");
    let (status, _) = app
        .call_as(
            Some(&api_token),
            Method::DELETE,
            &format!("/api/tokens/{}", issued["token_id"]),
            None,
        )
        .await;
    assert_eq!(status, 204);
    assert_eq!(me(api_token).await, 401, "the API token was revoked");

    let session = login(app.api_url(), "admin", TEST_ADMIN_PASSWORD).await;
    let (status, _) = app
        .call_as(Some(&session), Method::POST, "/api/auth/logout", None)
        .await;
    assert_eq!(status, 204);
    assert_eq!(me(session).await, 401, "logged out");
    let fresh = login(app.api_url(), "admin", TEST_ADMIN_PASSWORD).await;
    let (status, body) = app
        .call_as(
            Some(&fresh),
            Method::POST,
            "/api/tokens",
            Some(json!({"name": "forever", "expires_in_days": 100000})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    app.shutdown().await;
}

/// A password change ends the user's other sessions (a user changing their own keeps the
/// session they changed it with); API tokens live on until revoked, and an admin can list and
/// revoke another user's tokens.
async fn a_password_change_ends_sessions_and_admins_revoke_tokens(backend: Backend) {
    let app = spawn_app(backend).await;
    let status_of = |token: String| {
        let app = &app;
        async move {
            app.call_as(Some(&token), Method::GET, "/api/auth/me", None)
                .await
                .0
        }
    };
    let first = app.add_member("carol", &[]).await;
    let second = login(app.api_url(), "carol", "carol-password-1").await;
    let (status, issued) = app
        .call_as(
            Some(&first),
            Method::POST,
            "/api/tokens",
            Some(json!({"name": "nightly"})),
        )
        .await;
    assert_eq!(status, 201, "{issued}");
    let api_token = issued["token"].as_str().unwrap().to_owned();

    let (status, body) = app
        .call_as(
            Some(&first),
            Method::PUT,
            "/api/users/carol/password",
            Some(json!({"password": "carol-password-2", "current_password": "carol-password-1"})),
        )
        .await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(
        status_of(first.clone()).await,
        200,
        "the session it was changed with"
    );
    assert_eq!(
        status_of(second.clone()).await,
        401,
        "another session of the user"
    );
    assert_eq!(
        status_of(api_token.clone()).await,
        200,
        "an API token lives on"
    );

    let (status, listed) = app.call(Method::GET, "/api/users/carol/tokens", None).await;
    assert_eq!(status, 200, "{listed}");
    let tokens = listed.as_array().unwrap();
    assert_eq!(tokens.len(), 3, "{listed}");
    let revoked_sessions = tokens
        .iter()
        .filter(|token| token["kind"] == "SESSION" && token["revoked_at_ms"].is_i64())
        .count();
    assert_eq!(revoked_sessions, 1, "{listed}");
    assert!(
        !listed.to_string().contains(&api_token),
        "never the secret: {listed}"
    );
    let path = format!("/api/users/carol/tokens/{}", issued["token_id"]);
    let (status, body) = app.call(Method::DELETE, &path, None).await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(status_of(api_token).await, 401, "revoked by an admin");
    let (status, _) = app.call(Method::DELETE, &path, None).await;
    assert_eq!(status, 404, "revoked already");

    let (status, body) = app
        .call(
            Method::PUT,
            "/api/users/carol/password",
            Some(json!({"password": "carol-password-3"})),
        )
        .await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(
        status_of(first).await,
        401,
        "an admin's reset ends every session"
    );
    login(app.api_url(), "carol", "carol-password-3").await;
    app.shutdown().await;
}

/// Too many failed logins for a user from an address, or from an address, are answered 429
/// with `Retry-After`, even with the right password; other users are not affected.
async fn failed_logins_are_throttled(backend: Backend) {
    let app = spawn_app_with(backend, |config| {
        config.auth.login_free_failures = 2;
        config.auth.login_delay_first = Duration::from_secs(60);
        config.auth.login_free_failures_per_address = 5;
    })
    .await;
    let attempt =
        |name: &'static str, password: &'static str| attempt_login(app.api_url(), name, password);
    app.add_member("ann", &[]).await;
    for _ in 0..3 {
        assert_eq!(attempt("admin", "wrong").await.0, 401);
    }
    let (status, retry_after) = attempt("admin", TEST_ADMIN_PASSWORD).await;
    assert_eq!(status, 429, "waiting, even with the right password");
    assert!(retry_after.unwrap().parse::<u64>().unwrap() > 0);
    assert_eq!(
        attempt("ann", "ann-password-1").await.0,
        201,
        "other users log in"
    );
    // Three more failures under other names use up the address's five free ones.
    for name in ["x", "y", "z"] {
        assert_eq!(attempt(name, "wrong").await.0, 401);
    }
    assert_eq!(
        attempt("ann", "ann-password-1").await.0,
        429,
        "the address waits"
    );
    app.shutdown().await;
}

/// Every write lands in the audit trail with who, what and the answer, job edits with the
/// definition before and after, failed logins and refused attempts included; a member reads
/// only the entries of the apps they may view.
async fn writes_are_audited(backend: Backend) {
    let app = spawn_app(backend).await;
    let fixture = fixture(&app).await;
    let job = fixture.alpha_job;
    let path = format!("/api/jobs/{job}");
    for params in ["first", "second"] {
        let (status, body) = app
            .call(Method::PATCH, &path, Some(json!({ "params": params })))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, _) = app
        .call_as(
            Some(&fixture.viewer),
            Method::POST,
            &format!("{path}/stop"),
            None,
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = app
        .call_as(
            None,
            Method::POST,
            "/api/auth/login",
            Some(json!({"name": "admin", "password": "guess"})),
        )
        .await;
    assert_eq!(status, 401);

    let (status, trail) = app
        .call(Method::GET, &format!("/api/audit?target={path}"), None)
        .await;
    assert_eq!(status, 200, "{trail}");
    let entries = trail["items"].as_array().unwrap();
    let summary: Vec<(String, String, u64)> = entries
        .iter()
        .map(|entry| {
            (
                entry["user_name"].as_str().unwrap().to_owned(),
                entry["action"].as_str().unwrap().to_owned(),
                entry["status"].as_u64().unwrap(),
            )
        })
        .collect();
    let own = |user: &str, action: &str, status: u64| (user.to_owned(), action.to_owned(), status);
    assert_eq!(
        summary,
        vec![
            own("view-alpha", "POST /api/jobs/{id}/stop", 403),
            own("admin", "PATCH /api/jobs/{id}", 200),
            own("admin", "PATCH /api/jobs/{id}", 200),
            own("admin", "POST /api/jobs/{id}/trigger", 202),
        ],
        "newest first"
    );
    assert_eq!(entries[1]["details"]["before"]["params"], "first");
    assert_eq!(entries[1]["details"]["after"]["params"], "second");
    assert_eq!(entries[1]["app"], "alpha");

    let (_, logins) = app
        .call(Method::GET, "/api/audit?target=/api/auth/login", None)
        .await;
    let failed = logins["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["status"] == 401);
    assert_eq!(failed.unwrap()["user_name"], "admin", "{logins}");
    let (_, seen) = app
        .call_as(Some(&fixture.viewer), Method::GET, "/api/audit", None)
        .await;
    let seen = seen["items"].as_array().unwrap();
    assert!(
        !seen.is_empty() && seen.iter().all(|entry| entry["app"] == "alpha"),
        "{seen:?}"
    );
    let (status, _) = app
        .call_as(
            Some(&fixture.outsider),
            Method::GET,
            "/api/audit?app=alpha",
            None,
        )
        .await;
    assert_eq!(status, 403);
    app.shutdown().await;
}

on_every_backend!(
    every_route_checks_credentials_and_grants,
    listings_show_a_member_only_their_apps,
    writes_are_audited,
    a_password_change_ends_sessions_and_admins_revoke_tokens,
);
on_sqlite_only!(
    script_source_and_children_need_their_grants,
    sessions_and_api_tokens_expire_and_are_revoked,
    failed_logins_are_throttled,
);
