//! Users, their grants and their life cycle (admins only, except that anyone may change
//! their own password):
//!
//! - `GET /api/users`, `POST /api/users` (`{name, password, role}`);
//! - `PUT /api/users/{name}/password` (`{password, current_password}`; an admin setting
//!   someone else's needs no `current_password`);
//! - `PUT /api/users/{name}/grants/{app}` (`{access}`), `DELETE` the same to take it back;
//! - `PUT /api/users/{name}/role` (`{role}`: `ADMIN` or `MEMBER`);
//! - `PUT /api/users/{name}/status` (`{status}`: `ENABLED` or `DISABLED`);
//! - `DELETE /api/users/{name}`.
//!
//! One shape throughout: each thing about a user (password, role, status, a grant) is a
//! resource of its own that a `PUT` replaces, and the user goes with a `DELETE` of its path.
//!
//! What each change does to the user's access, at once (every request reads its caller's
//! role, status and grants from the database, `caller`; nothing is cached):
//! - **Disabled**: the user keeps name, role and grants but cannot log in — the login answers
//!   exactly as for a wrong password, so a guesser learns nothing, while the audit trail's
//!   entry says `user disabled` — and every token of theirs, console sessions and API tokens
//!   alike, is revoked (their unused reset tokens voided) and refused from the next request.
//!   Re-enabled, they log in again, but what was revoked stays revoked: an account is
//!   suspended because its owner left or its credentials are in doubt, and bringing its old
//!   tokens back would bring back whatever leaked; automation gets a new token.
//! - **Demoted**: their next request is judged as a member's, with the grants they have;
//!   their tokens keep working (the person is still trusted, with less).
//! - **Deleted**: the user's row goes, with their grants, tokens and reset tokens. The audit
//!   trail keeps every entry (entries name users by name and id, not by a key to the row);
//!   the name is free for a new user, who gets a new id.
//!
//! Guard rails: the last enabled admin cannot be demoted, disabled or deleted (409: make
//! another admin first), and no admin can do any of these to themselves (409: another admin
//! must), so that nobody locks the users' management, or themselves, out by a slip. The
//! store checks both in the transaction that makes the change, under a lock
//! ([`Accounts::change_user`](crate::store::Accounts)), so that two admins demoting each
//! other at once cannot both succeed; a sole admin acting on themselves is told the first.
//!
//! Every change is audited with the user's name and what changed: a new user's role, a role
//! or status before and after, a deleted user's role and status.
//!
//! XXL-JOB let any logged-in user reach its user management (CVE-2022-36157); here the role
//! is checked before anything is read.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kadence_schemas::AppName;
use serde::{Deserialize, Serialize};

use super::audit::AuditNote;
use super::body::{ApiJson, ApiPath};
use super::caller::Caller;
use super::client::ClientAddress;
use super::error::ApiError;
use super::error::ErrorBody;
use super::{ApiState, bad_request};
use crate::domain::model::{Access, Role, User, UserStatus};
use crate::operations::auth::{hash_password, verify_password};
use crate::store::{NewUser, UserChange, UserChangeOutcome, UserCredentials, UserStanding};

/// Shortest password accepted.
pub const MIN_PASSWORD_CHARS: usize = 10;
/// Longest password accepted (Argon2 hashes any length; this bounds the work per login).
const MAX_PASSWORD_BYTES: usize = 1024;
/// Longest user name.
const MAX_USER_NAME_CHARS: usize = 64;

/// Body of `POST /api/users`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewUserRequest {
    /// Login name: 1–64 of `A-Z a-z 0-9 . _ - @`.
    pub name: String,
    /// At least 10 characters.
    pub password: String,
    /// `ADMIN` or `MEMBER` (default): a member has no apps until granted some.
    #[serde(default)]
    pub role: Option<String>,
}

/// Body of `PUT /api/users/{name}/password`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordRequest {
    /// The new password, at least 10 characters.
    pub password: String,
    /// The present password: needed when users change their own.
    #[serde(default)]
    pub current_password: Option<String>,
}

/// Body of `PUT /api/users/{name}/role`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleRequest {
    /// `ADMIN` or `MEMBER`.
    pub role: String,
}

/// Body of `PUT /api/users/{name}/status`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusRequest {
    /// `ENABLED` (may log in) or `DISABLED` (may not; every token of theirs is revoked).
    pub status: String,
}

/// Body of `PUT /api/users/{name}/grants/{app}`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    /// `VIEW`, `OPERATE` or `SCRIPTS`.
    pub access: String,
}

/// Lists every user with their role, status and grants (admin).
///
/// Admin only, checked before anything is read (XXL-JOB let any logged-in user reach its
/// user management). By name; never a password or its hash. The whole list, not a page.
#[utoipa::path(
    get, path = "/api/users", tag = "users",
    responses((status = 200, description = "Every user with their grants", body = Vec<User>)),
)]
pub(super) async fn list_users(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
) -> Result<Json<Vec<User>>, ApiError> {
    caller.require_admin()?;
    Ok(Json(state.store.list_users().await?))
}

/// Creates a user with a password: a MEMBER, or an ADMIN if `role` says so (admin).
///
/// Admin only. A member has no apps until granted some
/// (`PUT /api/users/{name}/grants/{app}`). The name is 1 to 64 of `A-Z a-z 0-9 . _ - @` and
/// must be free (409 otherwise); the password needs at least 10 characters, and Kadence
/// keeps only its Argon2id hash. For a user to choose their own password, give them a reset
/// token (`POST /api/users/{name}/password-reset`).
#[utoipa::path(
    post, path = "/api/users", tag = "users", request_body = NewUserRequest,
    responses(
        (status = 201, description = "The new user", body = User),
        (status = 409, description = "A user with this name exists", body = ErrorBody),
    ),
)]
pub(super) async fn create_user(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiJson(request): ApiJson<NewUserRequest>,
) -> Result<(StatusCode, AuditNote, Json<User>), ApiError> {
    caller.require_admin()?;
    check_user_name(&request.name)?;
    let role = match request.role.as_deref() {
        None => Role::Member,
        Some(role) => role.parse::<Role>().map_err(bad_request)?,
    };
    let password_hash = hashed(request.password).await?;
    let user = NewUser {
        name: request.name,
        password_hash,
        role,
    };
    let user = state.store.create_user(&user, state.clock.now_ms()).await?;
    let note = user_note(&user.name, serde_json::json!({ "role": user.role }));
    Ok((StatusCode::CREATED, note, Json(user)))
}

/// Makes a user an ADMIN or a MEMBER (admin).
///
/// Admin only. It counts from the user's next request; a demoted user's tokens keep
/// working, judged as a member's with the grants they have. Refused with 409 when the
/// caller would demote themselves (another admin must) or the last enabled admin (make
/// another admin first).
#[utoipa::path(
    put, path = "/api/users/{name}/role", tag = "users", request_body = RoleRequest,
    params(("name" = String, Path, description = "The user's name")),
    responses(
        (status = 200, description = "The user with the new role, which counts from their next request", body = User),
        (status = 404, description = "No such user", body = ErrorBody),
        (status = 409, description = "The caller's own demotion, or the last enabled admin's", body = ErrorBody),
    ),
)]
pub(super) async fn set_role(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<RoleRequest>,
) -> Result<(AuditNote, Json<User>), ApiError> {
    caller.require_admin()?;
    let role = request.role.parse::<Role>().map_err(bad_request)?;
    let (user, before) = change_standing(&state, &caller, &name, UserChange::Role(role)).await?;
    let change = serde_json::json!({ "role": { "before": before.role, "after": role } });
    Ok((
        user_note(&user.name, change),
        reload(&state, user.id).await?,
    ))
}

/// Enables or disables a user (admin).
///
/// Admin only. DISABLED keeps the user's name, role and grants, but refuses their logins
/// (answered as a wrong password is, so that a guesser learns nothing; the audit trail says
/// why) and revokes at once every token of theirs, sessions and API tokens alike, and their
/// unused reset tokens. ENABLED lets them log in again; what was revoked stays revoked, so
/// automation needs a new token. Refused with 409 when the caller would disable themselves
/// or the last enabled admin.
#[utoipa::path(
    put, path = "/api/users/{name}/status", tag = "users", request_body = StatusRequest,
    params(("name" = String, Path, description = "The user's name")),
    responses(
        (status = 200, description = "The user, enabled or disabled; disabling revokes every token of theirs at once", body = User),
        (status = 404, description = "No such user", body = ErrorBody),
        (status = 409, description = "The caller disabling themselves, or the last enabled admin", body = ErrorBody),
    ),
)]
pub(super) async fn set_status(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<StatusRequest>,
) -> Result<(AuditNote, Json<User>), ApiError> {
    caller.require_admin()?;
    let status = request.status.parse::<UserStatus>().map_err(bad_request)?;
    let change = UserChange::Status(status);
    let (user, before) = change_standing(&state, &caller, &name, change).await?;
    let change = serde_json::json!({ "status": { "before": before.status(), "after": status } });
    Ok((
        user_note(&user.name, change),
        reload(&state, user.id).await?,
    ))
}

/// Deletes a user with their grants, tokens and reset tokens (admin).
///
/// Admin only. Their tokens are refused from the next request on. The audit trail keeps
/// their entries (which name the user by name and id), and the name is free for a new user,
/// who gets a new id. Refused with 409 for the caller themselves (another admin must) and
/// for the last enabled admin (make another admin first), so that nobody locks the users'
/// management out by a slip. Disabling suspends a user and keeps their grants.
#[utoipa::path(
    delete, path = "/api/users/{name}", tag = "users",
    params(("name" = String, Path, description = "The user's name")),
    responses(
        (status = 204, description = "Deleted with their grants and tokens; the audit trail keeps their entries"),
        (status = 404, description = "No such user", body = ErrorBody),
        (status = 409, description = "The caller themselves, or the last enabled admin", body = ErrorBody),
    ),
)]
pub(super) async fn delete_user(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<(AuditNote, StatusCode), ApiError> {
    caller.require_admin()?;
    let (user, before) = change_standing(&state, &caller, &name, UserChange::Delete).await?;
    let note = user_note(
        &user.name,
        serde_json::json!({ "role": before.role, "status": before.status(), "deleted": true }),
    );
    Ok((note, StatusCode::NO_CONTENT))
}

/// Makes `change` to user `name` for `caller`: the user and their standing before it, or 404
/// if there is no such user, or 409 when it would take an admin's standing from the caller
/// themselves or from the last enabled admin.
async fn change_standing(
    state: &ApiState,
    caller: &Caller,
    name: &str,
    change: UserChange,
) -> Result<(User, UserStanding), ApiError> {
    let user = find_user(state, name).await?;
    let now = state.clock.now_ms();
    let outcome = state
        .store
        .change_user(user.id, change, caller.user.id, now);
    match outcome.await? {
        UserChangeOutcome::Changed(before) => Ok((user, before)),
        UserChangeOutcome::NoSuchUser => Err(ApiError::NotFound(format!(
            "user {} does not exist",
            user.name
        ))),
        refused => Err(ApiError::Conflict(refusal(change, &user.name, refused))),
    }
}

/// Why `change` to user `name` was `refused` (the last enabled admin, or the caller's own
/// account), as a 409 says it and an import's undo reports it.
pub(super) fn refusal(change: UserChange, name: &str, refused: UserChangeOutcome) -> String {
    let (verb, done) = match change {
        UserChange::Role(_) => ("demote", "demoted"),
        UserChange::Status(_) => ("disable", "disabled"),
        UserChange::Delete => ("delete", "deleted"),
    };
    if refused == UserChangeOutcome::LastEnabledAdmin {
        format!(
            "user {name} is the last enabled admin and cannot be {done}: make another user an \
             admin first (kadence user role NAME ADMIN), or nobody could manage users"
        )
    } else {
        format!(
            "you cannot {verb} yourself ({name}): another admin must, so that no admin locks \
             themselves out by a slip"
        )
    }
}

/// An audit note on user `name`: `details` with the user's name added.
fn user_note(name: &str, mut details: serde_json::Value) -> AuditNote {
    details["user"] = serde_json::Value::from(name);
    AuditNote::default().with(details)
}

/// Sets a user's password: an admin sets anyone's, every user their own.
///
/// Users changing their own password, admins included, give the present one as
/// `current_password` (403 when missing or wrong); wrong ones count as failed logins do
/// (429 with `Retry-After`), so that a stolen session can neither take the account over nor
/// guess the password at the network's speed. An admin setting another user's needs no
/// `current_password`; a member setting another's is refused (403). The new password needs
/// at least 10 characters. Every session of the user ends but the one making their own
/// change, so that a session taken under the old password is worth nothing; API tokens keep
/// working (revoke them one by one).
#[utoipa::path(
    put, path = "/api/users/{name}/password", tag = "users", request_body = PasswordRequest,
    params(("name" = String, Path, description = "The user's name")),
    responses(
        (status = 204, description = "Changed; the user's other sessions are revoked"),
        (status = 403, description = "Another user's password and not an admin, or the caller's own current_password missing or wrong", body = ErrorBody),
        (status = 404, description = "No such user", body = ErrorBody),
        (status = 429, description = "Too many wrong current passwords: retry after Retry-After seconds", body = ErrorBody),
    ),
)]
pub(super) async fn set_password(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ClientAddress(address): ClientAddress,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<PasswordRequest>,
) -> Result<StatusCode, ApiError> {
    let own = caller.user.name == name;
    if !own {
        caller.require_admin()?;
    }
    let found = find_credentials(&state, &name).await?;
    if own {
        // A stolen session must not be enough to take the account over for good, nor to
        // guess the password at the network's speed: the check counts as a login would.
        let now = state.clock.now_ms();
        if let Err(retry_after_secs) = state.credentials.login_throttle.check(&name, address, now) {
            return Err(ApiError::TooManyRequests {
                message: format!(
                    "too many wrong passwords for this user or from this address: try again \
                     in {retry_after_secs} s"
                ),
                retry_after_secs,
            });
        }
        let current = request.current_password.unwrap_or_default();
        if !password_matches(current, found.password_hash.clone()).await? {
            state.credentials.login_throttle.failed(&name, address, now);
            return Err(ApiError::Forbidden(
                "current_password is missing or wrong: give your present password to change it"
                    .to_owned(),
            ));
        }
    }
    let password_hash = hashed(request.password).await?;
    // The caller's own session survives their own change; every other session of the user
    // ends, so that one taken under the old password is worth nothing now.
    let keep_session = own.then_some(caller.token.id);
    state
        .store
        .set_password_hash(
            found.user.id,
            &password_hash,
            keep_session,
            state.clock.now_ms(),
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Grants a user VIEW, OPERATE or SCRIPTS on an app, replacing their grant there (admin).
///
/// Admin only. Each level includes the ones before it: VIEW reads the app's jobs, runs,
/// logs, executors and reports; OPERATE also creates, edits, starts, stops, triggers, kills
/// and deletes its jobs; SCRIPTS also writes the source of its script jobs (`GLUE_*`),
/// which runs on its executors, and runs them at a request. The grant counts from the
/// user's next request; an admin needs none. An app that does not exist is a 400.
#[utoipa::path(
    put, path = "/api/users/{name}/grants/{app}", tag = "users", request_body = GrantRequest,
    params(
        ("name" = String, Path, description = "The user's name"),
        ("app" = AppName, Path, description = "The app"),
    ),
    responses(
        (status = 200, description = "The user with the grant", body = User),
        (status = 404, description = "No such user", body = ErrorBody),
    ),
)]
pub(super) async fn grant(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath((name, app)): ApiPath<(String, String)>,
    ApiJson(request): ApiJson<GrantRequest>,
) -> Result<(AuditNote, Json<User>), ApiError> {
    caller.require_admin()?;
    let app = AppName::parse(&app).map_err(bad_request)?;
    let access = request.access.parse::<Access>().map_err(bad_request)?;
    let user = find_user(&state, &name).await?;
    state.store.grant(user.id, &app, access).await?;
    let note = AuditNote::app(&app).with(serde_json::json!({ "user": name, "access": access }));
    Ok((note, reload(&state, user.id).await?))
}

/// Takes back a user's grant on an app (admin).
///
/// Admin only. From the user's next request the app is not theirs: its jobs, runs and
/// reports are no longer listed to them, and its jobs and runs asked for by id answer 404,
/// as if they did not exist. 404 when the user has no grant on the app.
#[utoipa::path(
    delete, path = "/api/users/{name}/grants/{app}", tag = "users",
    params(
        ("name" = String, Path, description = "The user's name"),
        ("app" = AppName, Path, description = "The app"),
    ),
    responses(
        (status = 200, description = "The user without the grant", body = User),
        (status = 404, description = "No such user, or no grant on this app", body = ErrorBody),
    ),
)]
pub(super) async fn revoke_grant(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiPath((name, app)): ApiPath<(String, String)>,
) -> Result<(AuditNote, Json<User>), ApiError> {
    caller.require_admin()?;
    let app = AppName::parse(&app).map_err(bad_request)?;
    let user = find_user(&state, &name).await?;
    if !state.store.revoke_grant(user.id, &app).await? {
        return Err(ApiError::NotFound(format!(
            "user {name} has no grant on app {app}"
        )));
    }
    let note = AuditNote::app(&app).with(serde_json::json!({ "user": name }));
    Ok((note, reload(&state, user.id).await?))
}

async fn find_credentials(state: &ApiState, name: &str) -> Result<UserCredentials, ApiError> {
    state
        .store
        .user_credentials(name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("user {name} does not exist")))
}

pub(super) async fn find_user(state: &ApiState, name: &str) -> Result<User, ApiError> {
    Ok(find_credentials(state, name).await?.user)
}

async fn reload(state: &ApiState, id: i64) -> Result<Json<User>, ApiError> {
    let user = state.store.get_user(id).await?;
    user.map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("user {id} no longer exists")))
}

fn check_user_name(name: &str) -> Result<(), ApiError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@');
    if name.is_empty() || name.chars().count() > MAX_USER_NAME_CHARS || !name.chars().all(allowed) {
        return Err(bad_request(format!(
            "invalid user name {name:?}: use 1 to {MAX_USER_NAME_CHARS} of A-Z a-z 0-9 . _ - @"
        )));
    }
    Ok(())
}

/// The Argon2id hash of an acceptable password (off the async workers: it is slow on
/// purpose).
pub(super) async fn hashed(password: String) -> Result<String, ApiError> {
    if password.chars().count() < MIN_PASSWORD_CHARS || password.len() > MAX_PASSWORD_BYTES {
        return Err(bad_request(format!(
            "the password must be at least {MIN_PASSWORD_CHARS} characters (and at most \
             {MAX_PASSWORD_BYTES} bytes)"
        )));
    }
    tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|error| ApiError::Internal(error.into()))?
        .map_err(|error| ApiError::Internal(error.into()))
}

/// Whether `password` matches the Argon2id `hash` (off the async workers, like [`hashed`]).
pub(super) async fn password_matches(password: String, hash: String) -> Result<bool, ApiError> {
    tokio::task::spawn_blocking(move || verify_password(&password, &hash))
        .await
        .map_err(|error| ApiError::Internal(error.into()))
}
