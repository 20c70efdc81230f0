//! The [`Accounts`](crate::store::Accounts) implementation: tables `users`, `user_grants`
//! and `auth_tokens`, the same SQL on every backend; a change of a user's standing is
//! [`user_changes`](super::user_changes)'.

use super::backend::{SqlBackend, SqlStore};
use super::dialect::Dialect;
use super::statement::{IntoSqlValue as _, Statement};
use crate::store::StoreError;
use crate::store::rows::{TOKEN_COLUMNS, TokenRow, USER_COLUMNS, UserRow};

use kadence_schemas::AppName;

use crate::domain::model::{Access, AppGrant, Role, TokenInfo, TokenKind, User};
use crate::store::{Accounts, NewToken, NewUser, UserCredentials};

fn corrupt(what: String) -> impl FnOnce(crate::domain::model::ModelError) -> StoreError {
    move |error| StoreError::CorruptRow {
        what,
        reason: error.to_string(),
    }
}

fn user_from(row: UserRow, grants: Vec<AppGrant>) -> Result<UserCredentials, StoreError> {
    let (id, name, role, password_hash, created_at_ms, locale, disabled_at_ms) = row;
    let role = role
        .parse::<Role>()
        .map_err(corrupt(format!("user {id}")))?;
    Ok(UserCredentials {
        user: User {
            id,
            name,
            role,
            grants,
            created_at_ms,
            locale,
            disabled_at_ms,
        },
        password_hash,
    })
}

fn token_from(row: TokenRow) -> Result<TokenInfo, StoreError> {
    let (id, user_id, kind, name, created_at_ms, expires_at_ms, revoked_at_ms) = row;
    Ok(TokenInfo {
        id,
        user_id,
        kind: kind
            .parse::<TokenKind>()
            .map_err(corrupt(format!("token {id}")))?,
        name,
        created_at_ms,
        expires_at_ms,
        revoked_at_ms,
    })
}

/// Grants per user, of every user or of one.
async fn grants_by_user<B: SqlBackend>(
    store: &SqlStore<B>,
    user_id: Option<i64>,
) -> Result<std::collections::HashMap<i64, Vec<AppGrant>>, StoreError> {
    const OPERATION: &str = "read user grants";
    let rows: Vec<(i64, String, String)> = Statement::new(
        "SELECT user_id, app, access FROM user_grants \
         WHERE $1 IS NULL OR user_id = $2 ORDER BY user_id, app",
    )
    .bind(user_id)
    .bind(user_id)
    .fetch_all::<B, _>(&mut *store.connection(OPERATION).await?)
    .await
    .map_err(StoreError::query(OPERATION))?;
    let mut grants: std::collections::HashMap<i64, Vec<AppGrant>> =
        std::collections::HashMap::new();
    for (user_id, app, access) in rows {
        let what = || format!("grant of user {user_id} on {app}");
        let grant = AppGrant {
            app: AppName::parse(&app).map_err(|error| StoreError::CorruptRow {
                what: what(),
                reason: error.to_string(),
            })?,
            access: access.parse::<Access>().map_err(corrupt(what()))?,
        };
        grants.entry(user_id).or_default().push(grant);
    }
    Ok(grants)
}

/// Which user to read.
enum UserKey<'a> {
    Name(&'a str),
    Id(i64),
}

async fn read_user<B: SqlBackend>(
    store: &SqlStore<B>,
    key: UserKey<'_>,
) -> Result<Option<UserCredentials>, StoreError> {
    let row: Option<UserRow> = match key {
        UserKey::Name(name) => {
            Statement::new(format!("SELECT {USER_COLUMNS} FROM users WHERE name = $1"))
                .bind(name)
                .fetch_optional::<B, _>(&mut *store.connection("read a user").await?)
                .await
        }
        UserKey::Id(id) => {
            Statement::new(format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"))
                .bind(id)
                .fetch_optional::<B, _>(&mut *store.connection("read a user").await?)
                .await
        }
    }
    .map_err(StoreError::query("read a user"))?;
    let Some(row) = row else { return Ok(None) };
    let mut grants = grants_by_user(store, Some(row.0)).await?;
    let mine = grants.remove(&row.0).unwrap_or_default();
    user_from(row, mine).map(Some)
}

/// Sets user `user_id`'s password hash and ends their sessions but `keep_session`
/// (whoever held one under the old password holds nothing now); whether the user
/// exists. A password change and a reset token's redemption both come here.
pub(crate) async fn set_password_in<B: SqlBackend>(
    tx: &mut B::Connection,
    user_id: i64,
    password_hash: &str,
    keep_session: Option<i64>,
    now_ms: i64,
    operation: &'static str,
) -> Result<bool, StoreError> {
    let done =
        Statement::new("UPDATE users SET password_hash = $1, updated_at_ms = $2 WHERE id = $3")
            .bind(password_hash)
            .bind(now_ms)
            .bind(user_id)
            .execute::<B>(&mut *tx)
            .await
            .map_err(StoreError::query(operation))?;
    Statement::new(
        "UPDATE auth_tokens SET revoked_at_ms = $1 \
         WHERE user_id = $2 AND kind = $3 AND revoked_at_ms IS NULL AND id <> $4",
    )
    .bind(now_ms)
    .bind(user_id)
    .bind(TokenKind::Session.as_str())
    .bind(keep_session.unwrap_or(0))
    .execute::<B>(&mut *tx)
    .await
    .map_err(StoreError::query(operation))?;
    Ok(done == 1)
}

#[async_trait::async_trait]
impl<B: SqlBackend> Accounts for SqlStore<B> {
    async fn count_users(&self) -> Result<i64, StoreError> {
        let (count,): (i64,) = Statement::new("SELECT COUNT(*) FROM users")
            .fetch_one::<B, _>(&mut *self.connection("count users").await?)
            .await
            .map_err(StoreError::query("count users"))?;
        Ok(count)
    }

    async fn create_user(&self, user: &NewUser, now_ms: i64) -> Result<User, StoreError> {
        const OPERATION: &str = "create a user";
        let insert = Statement::insert_into(
            "users",
            [
                ("name", user.name.as_str().into_sql_value()),
                (
                    "password_hash",
                    user.password_hash.as_str().into_sql_value(),
                ),
                ("role", user.role.as_str().into_sql_value()),
                ("created_at_ms", now_ms.into_sql_value()),
                ("updated_at_ms", now_ms.into_sql_value()),
            ],
        );
        let mut connection = self.connection(OPERATION).await?;
        match insert.insert_returning_id::<B>(&mut connection).await {
            Ok(id) => Ok(User {
                id,
                name: user.name.clone(),
                role: user.role,
                grants: Vec::new(),
                created_at_ms: now_ms,
                locale: None,
                disabled_at_ms: None,
            }),
            Err(sqlx::Error::Database(error)) if error.is_unique_violation() => {
                Err(StoreError::UserExists(user.name.clone()))
            }
            Err(source) => Err(StoreError::query(OPERATION)(source)),
        }
    }

    async fn user_credentials(&self, name: &str) -> Result<Option<UserCredentials>, StoreError> {
        read_user(self, UserKey::Name(name)).await
    }

    async fn get_user(&self, id: i64) -> Result<Option<User>, StoreError> {
        let found = read_user(self, UserKey::Id(id)).await?;
        Ok(found.map(|credentials| credentials.user))
    }

    async fn list_users(&self) -> Result<Vec<User>, StoreError> {
        let rows: Vec<UserRow> =
            Statement::new(format!("SELECT {USER_COLUMNS} FROM users ORDER BY name"))
                .fetch_all::<B, _>(&mut *self.connection("list users").await?)
                .await
                .map_err(StoreError::query("list users"))?;
        let mut grants = grants_by_user(self, None).await?;
        rows.into_iter()
            .map(|row| {
                let mine = grants.remove(&row.0).unwrap_or_default();
                user_from(row, mine).map(|credentials| credentials.user)
            })
            .collect()
    }

    async fn set_password_hash(
        &self,
        user_id: i64,
        password_hash: &str,
        keep_session: Option<i64>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        const OPERATION: &str = "change a password";
        let mut tx = self.begin_write(OPERATION).await?;
        let changed = set_password_in::<B>(
            &mut tx,
            user_id,
            password_hash,
            keep_session,
            now_ms,
            OPERATION,
        )
        .await?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        Ok(changed)
    }

    async fn grant(&self, user_id: i64, app: &AppName, access: Access) -> Result<bool, StoreError> {
        const OPERATION: &str = "grant access to an app";
        let mut tx = self.begin_write(OPERATION).await?;
        let app_exists: Option<(String,)> = Statement::new("SELECT name FROM apps WHERE name = $1")
            .bind(app.as_str())
            .fetch_optional::<B, _>(&mut tx)
            .await
            .map_err(StoreError::query(OPERATION))?;
        if app_exists.is_none() {
            return Err(StoreError::UnknownApp(app.clone()));
        }
        let done = Statement::new(match B::DIALECT {
            Dialect::Ansi => {
                "INSERT INTO user_grants (user_id, app, access) \
                 SELECT id, $1, $2 FROM users WHERE id = $3 \
                 ON CONFLICT (user_id, app) DO UPDATE SET access = excluded.access"
            }
            Dialect::MySql => {
                "INSERT INTO user_grants (user_id, app, access) \
                 SELECT id, $1, $2 FROM users WHERE id = $3 \
                 ON DUPLICATE KEY UPDATE access = VALUES(access)"
            }
        })
        .bind(app.as_str())
        .bind(access.as_str())
        .bind(user_id)
        .execute::<B>(&mut tx)
        .await
        .map_err(StoreError::query(OPERATION))?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        // A row inserted or updated (MySQL counts an update twice): the user exists.
        Ok(done >= 1)
    }

    async fn change_user(
        &self,
        user_id: i64,
        change: crate::store::UserChange,
        by: i64,
        now_ms: i64,
    ) -> Result<crate::store::UserChangeOutcome, StoreError> {
        super::user_changes::change_user(self, user_id, change, by, now_ms).await
    }

    async fn revoke_grant(&self, user_id: i64, app: &AppName) -> Result<bool, StoreError> {
        let done = Statement::new("DELETE FROM user_grants WHERE user_id = $1 AND app = $2")
            .bind(user_id)
            .bind(app.as_str())
            .execute::<B>(&mut *self.connection("revoke access to an app").await?)
            .await
            .map_err(StoreError::query("revoke access to an app"))?;
        Ok(done == 1)
    }

    async fn insert_token(&self, token: &NewToken, now_ms: i64) -> Result<TokenInfo, StoreError> {
        const OPERATION: &str = "record a token";
        let insert = Statement::insert_into(
            "auth_tokens",
            [
                ("user_id", token.user_id.into_sql_value()),
                ("kind", token.kind.as_str().into_sql_value()),
                ("name", token.name.as_str().into_sql_value()),
                ("token_hash", token.token_hash.as_str().into_sql_value()),
                ("created_at_ms", now_ms.into_sql_value()),
                ("expires_at_ms", token.expires_at_ms.into_sql_value()),
            ],
        );
        let mut tx = self.begin_write(OPERATION).await?;
        let id = (insert.insert_returning_id::<B>(&mut tx).await)
            .map_err(StoreError::query(OPERATION))?;
        let row: TokenRow = Statement::new(format!(
            "SELECT {TOKEN_COLUMNS} FROM auth_tokens WHERE id = $1"
        ))
        .bind(id)
        .fetch_one::<B, _>(&mut tx)
        .await
        .map_err(StoreError::query(OPERATION))?;
        tx.commit().await.map_err(StoreError::query(OPERATION))?;
        token_from(row)
    }

    async fn set_locale(
        &self,
        user_id: i64,
        locale: Option<&str>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = Statement::new("UPDATE users SET locale = $1, updated_at_ms = $2 WHERE id = $3")
            .bind(locale)
            .bind(now_ms)
            .bind(user_id)
            .execute::<B>(&mut *self.connection("set a user's language").await?)
            .await
            .map_err(StoreError::query("set a user's language"))?;
        Ok(done == 1)
    }

    async fn authenticate_token(
        &self,
        token_hash: &str,
        now_ms: i64,
    ) -> Result<Option<(User, TokenInfo)>, StoreError> {
        let row: Option<TokenRow> = Statement::new(format!(
            "SELECT {TOKEN_COLUMNS} FROM auth_tokens WHERE token_hash = $1 \
             AND revoked_at_ms IS NULL AND expires_at_ms > $2"
        ))
        .bind(token_hash)
        .bind(now_ms)
        .fetch_optional::<B, _>(&mut *self.connection("check a token").await?)
        .await
        .map_err(StoreError::query("check a token"))?;
        let Some(row) = row else { return Ok(None) };
        let token = token_from(row)?;
        // Disabling revokes the user's tokens; this refuses one a login made in
        // the same instant as well.
        let user = self.get_user(token.user_id).await?;
        Ok(user
            .filter(|user| user.disabled_at_ms.is_none())
            .map(|user| (user, token)))
    }

    async fn list_tokens(&self, user_id: i64) -> Result<Vec<TokenInfo>, StoreError> {
        let rows: Vec<TokenRow> = Statement::new(format!(
            "SELECT {TOKEN_COLUMNS} FROM auth_tokens WHERE user_id = $1 ORDER BY id DESC"
        ))
        .bind(user_id)
        .fetch_all::<B, _>(&mut *self.connection("list tokens").await?)
        .await
        .map_err(StoreError::query("list tokens"))?;
        rows.into_iter().map(token_from).collect()
    }

    async fn revoke_token(
        &self,
        user_id: i64,
        token_id: i64,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = Statement::new(
            "UPDATE auth_tokens SET revoked_at_ms = $1 \
             WHERE id = $2 AND user_id = $3 AND revoked_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(token_id)
        .bind(user_id)
        .execute::<B>(&mut *self.connection("revoke a token").await?)
        .await
        .map_err(StoreError::query("revoke a token"))?;
        Ok(done == 1)
    }
}
