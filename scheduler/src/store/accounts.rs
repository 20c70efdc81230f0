//! The accounts half of the store: users, their grants per app and their tokens, behind their
//! own trait, [`Accounts`], which every [`Store`](super::Store) also implements. The store
//! keeps only hashes (an Argon2id PHC string per password, the SHA-256 of each token); hashing
//! and checking are `crate::operations::auth`'s.
//!
//! A user's standing — role, enabled or disabled, existence — changes only through
//! [`Accounts::change_user`], which keeps at least one enabled admin and lets no admin take
//! their own standing: it locks every enabled admin's row before it looks, so that two admins
//! demoting (or disabling, or deleting) each other at once cannot both succeed. Disabling
//! revokes every token of the user (sessions and API tokens) and voids their unused reset
//! tokens; deleting removes the user's row, and with it (`ON DELETE CASCADE`) their grants,
//! tokens and reset tokens. The audit trail keeps its entries: they hold the user's name and
//! id, and no key to the row.

use kadence_schemas::AppName;

use super::StoreError;
use crate::domain::model::{Access, Role, TokenInfo, TokenKind, User, UserStatus};

/// A user to create.
#[derive(Debug, Clone)]
pub struct NewUser {
    /// Login name.
    pub name: String,
    /// The password's Argon2id PHC string.
    pub password_hash: String,
    /// Admin or member.
    pub role: Role,
}

/// A token to record; the token itself is never stored.
#[derive(Debug, Clone)]
pub struct NewToken {
    /// Its owner.
    pub user_id: i64,
    /// Session or API token.
    pub kind: TokenKind,
    /// Its name.
    pub name: String,
    /// The SHA-256 of the token, hex.
    pub token_hash: String,
    /// Not accepted from this instant, ms.
    pub expires_at_ms: i64,
}

/// A user with the hash their password is checked against (for logins only).
#[derive(Debug, Clone)]
pub struct UserCredentials {
    /// The user.
    pub user: User,
    /// Their password's Argon2id PHC string.
    pub password_hash: String,
}

/// A change of a user's standing, made by [`Accounts::change_user`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserChange {
    /// Make the user an admin or a member.
    Role(Role),
    /// Enable the user, or disable them (which revokes their tokens).
    Status(UserStatus),
    /// Delete the user with their grants and tokens.
    Delete,
}

impl UserChange {
    /// Whether the change leaves the user no longer an enabled admin, were they one.
    pub fn ends_admin_standing(self) -> bool {
        match self {
            UserChange::Role(role) => role != Role::Admin,
            UserChange::Status(status) => status == UserStatus::Disabled,
            UserChange::Delete => true,
        }
    }
}

/// A user's role and status, as they were before a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserStanding {
    /// Admin or member.
    pub role: Role,
    /// Disabled since this instant, ms; none while enabled.
    pub disabled_at_ms: Option<i64>,
}

impl UserStanding {
    /// Enabled or disabled.
    pub fn status(self) -> UserStatus {
        match self.disabled_at_ms {
            None => UserStatus::Enabled,
            Some(_) => UserStatus::Disabled,
        }
    }
}

/// What [`Accounts::change_user`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserChangeOutcome {
    /// Done; the user's standing before it.
    Changed(UserStanding),
    /// Refused, nothing changed: the user is the last enabled admin, and the change would
    /// leave nobody to manage users.
    LastEnabledAdmin,
    /// Refused, nothing changed: the admin making the change would demote, disable or
    /// delete themselves (another admin must).
    OwnAccount,
    /// No such user.
    NoSuchUser,
}

/// Users, grants and tokens.
#[async_trait::async_trait]
pub trait Accounts: Send + Sync {
    /// How many users exist (none on a first start).
    async fn count_users(&self) -> Result<i64, StoreError>;

    /// Creates a user without grants; [`StoreError::UserExists`] if the name is taken.
    async fn create_user(&self, user: &NewUser, now_ms: i64) -> Result<User, StoreError>;

    /// A user and their password hash, by login name.
    async fn user_credentials(&self, name: &str) -> Result<Option<UserCredentials>, StoreError>;

    /// A user by id, with their grants.
    async fn get_user(&self, id: i64) -> Result<Option<User>, StoreError>;

    /// Every user, by name, with their grants.
    async fn list_users(&self) -> Result<Vec<User>, StoreError>;

    /// Replaces a user's password hash and, in the same transaction, revokes the user's live
    /// session tokens but `keep_session` (the session of a user changing their own password):
    /// whoever held a session under the old password is logged out. API tokens stay; they are
    /// revoked one by one. False if the user does not exist.
    async fn set_password_hash(
        &self,
        user_id: i64,
        password_hash: &str,
        keep_session: Option<i64>,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Sets the language the user chose for the console (`None`: the browser's); false if
    /// the user does not exist.
    async fn set_locale(
        &self,
        user_id: i64,
        locale: Option<&str>,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Grants `access` on `app` (replacing an earlier grant there); [`StoreError::UnknownApp`]
    /// if the app does not exist, false if the user does not.
    async fn grant(&self, user_id: i64, app: &AppName, access: Access) -> Result<bool, StoreError>;

    /// Changes user `user_id`'s standing for the admin `by` in one transaction, unless they
    /// are the last enabled admin, or `by` themselves, and the change would end their
    /// standing as one (see the module docs): a new role; enabled again (a token still live
    /// is revoked: they log in anew); disabled (at `now_ms`, unless disabled already, with
    /// every live token revoked and every unused reset token voided); or deleted with their
    /// grants and tokens.
    async fn change_user(
        &self,
        user_id: i64,
        change: UserChange,
        by: i64,
        now_ms: i64,
    ) -> Result<UserChangeOutcome, StoreError>;

    /// Takes back the user's grant on `app`; false if there was none.
    async fn revoke_grant(&self, user_id: i64, app: &AppName) -> Result<bool, StoreError>;

    /// Records a token.
    async fn insert_token(&self, token: &NewToken, now_ms: i64) -> Result<TokenInfo, StoreError>;

    /// The user a token (by its hash) belongs to, if the token is neither revoked nor expired
    /// at `now_ms` and the user is enabled, with the token. Read from the database on every
    /// call, never cached: a role changed or a user disabled counts from the next request.
    async fn authenticate_token(
        &self,
        token_hash: &str,
        now_ms: i64,
    ) -> Result<Option<(User, TokenInfo)>, StoreError>;

    /// A user's tokens, newest first (revoked and expired ones included, for the record).
    async fn list_tokens(&self, user_id: i64) -> Result<Vec<TokenInfo>, StoreError>;

    /// Revokes token `token_id` of `user_id`; false if no such live token.
    async fn revoke_token(
        &self,
        user_id: i64,
        token_id: i64,
        now_ms: i64,
    ) -> Result<bool, StoreError>;
}
