//! [`Accounts::change_user`](crate::store::Accounts::change_user): a user's new role, enabled
//! or disabled, or deleted, in one transaction that keeps an enabled admin and keeps each
//! admin's own standing from their own hands. The same SQL on every backend; generated inside
//! [`accounts`](super::accounts), whose trait implementation calls it.
//!
//! The guard reads the enabled admins with `ROW_LOCK` (PostgreSQL and MySQL `FOR UPDATE`;
//! SQLite's one writer at a time needs none) before it reads the user: of two admins
//! demoting each other at once, the second waits for the first to commit, then finds one
//! enabled admin left — the one it is asked to demote — and refuses. Without the lock each
//! would count two admins and both would go.

use super::backend::{SqlBackend, SqlStore};
use super::statement::Statement;
use crate::store::StoreError;

use crate::domain::model::{Role, UserStatus};
use crate::store::{UserChange, UserChangeOutcome, UserStanding};

const OPERATION: &str = "change a user's role or status";

/// See [`Accounts::change_user`](crate::store::Accounts::change_user).
pub(crate) async fn change_user<B: SqlBackend>(
    store: &SqlStore<B>,
    user_id: i64,
    change: UserChange,
    by: i64,
    now_ms: i64,
) -> Result<UserChangeOutcome, StoreError> {
    let mut tx = store.begin_write(OPERATION).await?;
    let admins: Vec<(i64,)> = Statement::new(format!(
        "SELECT id FROM users WHERE role = $1 AND disabled_at_ms IS NULL \
         ORDER BY id{}",
        B::ROW_LOCK
    ))
    .bind(Role::Admin.as_str())
    .fetch_all::<B, _>(&mut tx)
    .await
    .map_err(StoreError::query(OPERATION))?;
    let row: Option<(String, Option<i64>)> = Statement::new(format!(
        "SELECT role, disabled_at_ms FROM users WHERE id = $1{}",
        B::ROW_LOCK
    ))
    .bind(user_id)
    .fetch_optional::<B, _>(&mut tx)
    .await
    .map_err(StoreError::query(OPERATION))?;
    let Some((role, disabled_at_ms)) = row else {
        return Ok(UserChangeOutcome::NoSuchUser);
    };
    let role = role
        .parse::<Role>()
        .map_err(|error| StoreError::CorruptRow {
            what: format!("user {user_id}"),
            reason: error.to_string(),
        })?;
    // The last admin first: for a sole admin acting on themselves it is the reason
    // that tells them what to do (make another admin).
    let last_admin = admins.len() == 1 && admins[0].0 == user_id;
    if last_admin && change.ends_admin_standing() {
        return Ok(UserChangeOutcome::LastEnabledAdmin);
    }
    if by == user_id && change.ends_admin_standing() {
        return Ok(UserChangeOutcome::OwnAccount);
    }
    for (statement, values) in statements(change, disabled_at_ms.is_some()) {
        let mut query = Statement::new(statement);
        for value in values {
            query = match value {
                Bound::Id => query.bind(user_id),
                Bound::Now => query.bind(now_ms),
                Bound::Role(role) => query.bind(role.as_str()),
            };
        }
        query
            .execute::<B>(&mut tx)
            .await
            .map_err(StoreError::query(OPERATION))?;
    }
    tx.commit().await.map_err(StoreError::query(OPERATION))?;
    Ok(UserChangeOutcome::Changed(UserStanding {
        role,
        disabled_at_ms,
    }))
}

/// What a statement of [`statements`] binds, in order.
#[derive(Clone, Copy)]
enum Bound {
    /// The user's id.
    Id,
    /// The change's instant.
    Now,
    /// The new role.
    Role(Role),
}

/// Revokes every live token of the user, sessions and API tokens alike; binds the
/// instant and the user's id.
const REVOKE_TOKENS: &str = "UPDATE auth_tokens SET revoked_at_ms = $1 \
                             WHERE user_id = $2 AND revoked_at_ms IS NULL";

/// The statements that make `change` to a user who is `disabled` now.
///
/// - Disabling keeps the first instant if the user is disabled already, revokes
///   every live token and voids the unused reset tokens: nothing they held works
///   again, even after a re-enable.
/// - Enabling a disabled user revokes a token still live: one recorded while they
///   were disabled (a login that checked the password just before the disable and
///   recorded its session just after; the token check refused it meanwhile), so
///   that a re-enable brings back nothing from before. A reset token stays: one
///   issued while they were disabled is an admin's on purpose. Enabling an enabled
///   user changes nothing.
/// - Deleting takes grants, tokens and reset tokens with the row (`ON DELETE
///   CASCADE`).
fn statements(change: UserChange, disabled: bool) -> Vec<(&'static str, Vec<Bound>)> {
    use Bound::{Id, Now};
    match change {
        UserChange::Role(role) => vec![(
            "UPDATE users SET role = $1, updated_at_ms = $2 WHERE id = $3",
            vec![Bound::Role(role), Now, Id],
        )],
        UserChange::Status(UserStatus::Enabled) if !disabled => Vec::new(),
        UserChange::Status(UserStatus::Enabled) => vec![
            (
                "UPDATE users SET disabled_at_ms = NULL, updated_at_ms = $1 \
                 WHERE id = $2",
                vec![Now, Id],
            ),
            (REVOKE_TOKENS, vec![Now, Id]),
        ],
        UserChange::Status(UserStatus::Disabled) => vec![
            (
                "UPDATE users SET disabled_at_ms = COALESCE(disabled_at_ms, $1), \
                 updated_at_ms = $2 WHERE id = $3",
                vec![Now, Now, Id],
            ),
            (REVOKE_TOKENS, vec![Now, Id]),
            (
                "UPDATE password_reset_tokens SET used_at_ms = $1 \
                 WHERE user_id = $2 AND used_at_ms IS NULL",
                vec![Now, Id],
            ),
        ],
        UserChange::Delete => vec![("DELETE FROM users WHERE id = $1", vec![Id])],
    }
}
