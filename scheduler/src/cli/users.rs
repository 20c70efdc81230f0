//! `kadence user add|passwd|grant|revoke|list|role|disable|enable|delete|reset-token`,
//! `kadence token create|list|revoke` and `kadence audit`.

use super::args::{TokenCommand, UserCommand};
use super::client::ApiClient;
use super::print::{OutputError, format_ms, outln};
use super::sessions::PasswordSource;
use crate::domain::model::{AuditEntry, TokenInfo, User};
use crate::http::api::Page;
use crate::http::api::{
    GrantRequest, IssuedToken, NewTokenRequest, NewUserRequest, PasswordRequest, ResetTokenRequest,
    RoleRequest, StatusRequest,
};
use crate::operations::import::IssuedResetToken;

/// Runs a `user` subcommand against the API.
pub(super) async fn user_command(client: &ApiClient, command: UserCommand) -> anyhow::Result<()> {
    match command {
        UserCommand::Add {
            name,
            admin,
            password_stdin,
        } => {
            let passwords = PasswordSource::new(password_stdin);
            let request = NewUserRequest {
                password: passwords.next(&format!("password for {name}: "))?,
                name,
                role: Some(if admin { "ADMIN" } else { "MEMBER" }.to_owned()),
            };
            let user: User = client.post("/api/users", &request).await?;
            outln!("created {} {}", user.role, user.name)?;
        }
        UserCommand::Passwd {
            name,
            password_stdin,
        } => {
            let passwords = PasswordSource::new(password_stdin);
            let me: User = client.get("/api/auth/me").await?;
            let password = passwords.next(&format!("new password for {name}: "))?;
            let current_password = if me.name == name {
                Some(passwords.next("your present password: ")?)
            } else {
                None
            };
            let request = PasswordRequest {
                password,
                current_password,
            };
            let () = client
                .put(&format!("/api/users/{name}/password"), &request)
                .await?;
            outln!("password of {name} changed")?;
        }
        UserCommand::Grant { name, app, access } => {
            let request = GrantRequest { access };
            let user: User = client
                .put(&format!("/api/users/{name}/grants/{app}"), &request)
                .await?;
            print_users(&[user])?;
        }
        UserCommand::Revoke { name, app } => {
            let user: User = client
                .delete(&format!("/api/users/{name}/grants/{app}"))
                .await?;
            print_users(&[user])?;
        }
        UserCommand::List => print_users(&client.get::<Vec<User>>("/api/users").await?)?,
        UserCommand::Role { name, role } => {
            let user: User = client
                .put(&format!("/api/users/{name}/role"), &RoleRequest { role })
                .await?;
            print_users(&[user])?;
        }
        UserCommand::Disable { name } => set_status(client, &name, "DISABLED").await?,
        UserCommand::Enable { name } => set_status(client, &name, "ENABLED").await?,
        UserCommand::Delete { name } => {
            let () = client.delete(&format!("/api/users/{name}")).await?;
            outln!("user {name} deleted, with their grants and tokens")?;
        }
        UserCommand::ResetToken { name, hours } => {
            let request = ResetTokenRequest { hours: Some(hours) };
            let issued: IssuedResetToken = client
                .post(&format!("/api/users/{name}/password-reset"), &request)
                .await?;
            outln!(
                "reset token for {} (shown only now; works once, until {}):",
                issued.user,
                format_ms(Some(issued.expires_at_ms))
            )?;
            outln!("{}", issued.token)?;
        }
    }
    Ok(())
}

/// `PUT /api/users/{name}/status`, and the user as they are now.
async fn set_status(client: &ApiClient, name: &str, status: &str) -> anyhow::Result<()> {
    let request = StatusRequest {
        status: status.to_owned(),
    };
    let user: User = client
        .put(&format!("/api/users/{name}/status"), &request)
        .await?;
    print_users(&[user])?;
    Ok(())
}

fn print_users(users: &[User]) -> Result<(), OutputError> {
    outln!("{:<24} {:<8} {:<9} GRANTS", "USER", "ROLE", "STATUS")?;
    for user in users {
        let grants: Vec<String> = user
            .grants
            .iter()
            .map(|grant| format!("{}:{}", grant.app, grant.access))
            .collect();
        let grants = if grants.is_empty() {
            "-".to_owned()
        } else {
            grants.join(" ")
        };
        let status = user.status();
        outln!(
            "{:<24} {:<8} {:<9} {grants}",
            user.name,
            user.role.as_str(),
            status.as_str()
        )?;
    }
    Ok(())
}

/// Runs a `token` subcommand against the API.
pub(super) async fn token_command(client: &ApiClient, command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create { name, days } => {
            let request = NewTokenRequest {
                name,
                expires_in_days: days,
            };
            let issued: IssuedToken = client.post("/api/tokens", &request).await?;
            outln!("{}", issued.token)?;
            eprintln!(
                "token {} of {} until {}: shown only now; use it as KADENCE_TOKEN or \
                 `Authorization: Bearer …`",
                issued.token_id,
                issued.user.name,
                format_ms(Some(issued.expires_at_ms))
            );
        }
        TokenCommand::List { user } => {
            let tokens: Vec<TokenInfo> = client.get(&tokens_path(user.as_deref())).await?;
            outln!(
                "{:>6} {:<8} {:<26} {:<26} NAME",
                "ID",
                "KIND",
                "EXPIRES",
                "REVOKED"
            )?;
            for token in tokens {
                outln!(
                    "{:>6} {:<8} {:<26} {:<26} {}",
                    token.id,
                    token.kind.as_str(),
                    format_ms(Some(token.expires_at_ms)),
                    format_ms(token.revoked_at_ms),
                    token.name
                )?;
            }
        }
        TokenCommand::Revoke { id, user } => {
            let () = client
                .delete(&format!("{}/{id}", tokens_path(user.as_deref())))
                .await?;
            outln!("token {id} revoked")?;
        }
    }
    Ok(())
}

/// The tokens of `user`, or the caller's own.
fn tokens_path(user: Option<&str>) -> String {
    match user {
        Some(name) => format!("/api/users/{name}/tokens"),
        None => "/api/tokens".to_owned(),
    }
}

/// `kadence audit`: a page of the audit trail, newest first.
pub(super) async fn print_audit(
    client: &ApiClient,
    filter: [(&str, Option<String>); 3],
    limit: u32,
    after: Option<String>,
) -> anyhow::Result<()> {
    let mut query = filter.to_vec();
    query.push(("limit", Some(limit.to_string())));
    query.push(("after", after));
    let page: Page<AuditEntry> = client.page("/api/audit", &query).await?;
    outln!(
        "{:<26} {:<16} {:>6} {:<12} {:<36} TARGET",
        "AT",
        "USER",
        "STATUS",
        "APP",
        "ACTION"
    )?;
    for AuditEntry { entry, .. } in &page.items {
        let app = entry.app.as_ref().map_or("-", |app| app.as_str());
        outln!(
            "{:<26} {:<16} {:>6} {:<12} {:<36} {}",
            format_ms(Some(entry.at_ms)),
            entry.user_name,
            entry.status,
            app,
            entry.action,
            entry.target
        )?;
    }
    if let Some(next) = page.next {
        outln!("more: kadence audit --after {next}")?;
    }
    Ok(())
}
