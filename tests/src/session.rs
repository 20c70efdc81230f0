//! Logging in to a scheduler's API, for tests and benchmarks that drive it over HTTP: every
//! route but `/health` and the login needs a token.

/// The first admin's password the suites configure (`auth.admin_password`).
pub const TEST_ADMIN_PASSWORD: &str = "test-admin-password";

/// A session token for `user` at the API at `api` (e.g. `http://127.0.0.1:8080`); panics
/// with the answer if the login fails.
pub async fn login(api: &str, user: &str, password: &str) -> String {
    let response = post_login(api, user, password).await;
    let status = response.status();
    let body: serde_json::Value = response.json().await.expect("a JSON answer");
    assert!(
        status.is_success(),
        "login of {user} failed: {status} {body}"
    );
    body["token"]
        .as_str()
        .expect("the login answers a token")
        .to_owned()
}

/// One login attempt at the API at `api`, whatever its answer: its status and its
/// `Retry-After` header (the throttle's wait, when refused for too many failures).
pub async fn attempt_login(api: &str, user: &str, password: &str) -> (u16, Option<String>) {
    let response = post_login(api, user, password).await;
    let retry_after = (response.headers().get("retry-after"))
        .map(|value| value.to_str().unwrap_or_default().to_owned());
    (response.status().as_u16(), retry_after)
}

/// `POST /api/auth/login` with `user` and `password`; panics if the API does not answer.
async fn post_login(api: &str, user: &str, password: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{api}/api/auth/login"))
        .json(&serde_json::json!({"name": user, "password": password}))
        .send()
        .await
        .expect("the API answers the login")
}
