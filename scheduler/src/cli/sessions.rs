//! `kadence login` and `kadence logout`, and reading passwords (asked on the terminal
//! without echo, or read from standard input for scripts).

use std::io::BufRead as _;

use anyhow::Context as _;

use super::client::ApiClient;
use super::credentials::{SavedLogin, TOKEN_VARIABLE, forget_login, save_login};
use super::print::{format_ms, outln};
use crate::http::api::{IssuedToken, LoginRequest};

/// Reads passwords: from the terminal, one prompt each, or the lines of standard input.
pub(super) struct PasswordSource {
    from_stdin: bool,
}

impl PasswordSource {
    pub(super) fn new(from_stdin: bool) -> Self {
        PasswordSource { from_stdin }
    }

    /// The next password: asked with `prompt`, or the next line of standard input.
    pub(super) fn next(&self, prompt: &str) -> anyhow::Result<String> {
        if self.from_stdin {
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .context("reading a password from standard input")?;
            let password = line.trim_end_matches(['\r', '\n']).to_owned();
            anyhow::ensure!(!password.is_empty(), "no password on standard input");
            return Ok(password);
        }
        rpassword::prompt_password(prompt)
            .context("reading the password (no terminal? use --password-stdin)")
    }
}

/// `kadence login`.
pub(super) async fn login(
    client: &ApiClient,
    user: String,
    password_stdin: bool,
) -> anyhow::Result<()> {
    if std::env::var_os(TOKEN_VARIABLE).is_some() {
        eprintln!("note: {TOKEN_VARIABLE} is set and is used instead of the saved login");
    }
    let password = PasswordSource::new(password_stdin).next(&format!("password for {user}: "))?;
    let request = LoginRequest {
        name: user,
        password,
    };
    let issued: IssuedToken = client.post("/api/auth/login", &request).await?;
    let path = save_login(
        &client.base,
        SavedLogin {
            token: issued.token,
            user: issued.user.name.clone(),
            expires_at_ms: issued.expires_at_ms,
        },
    )?;
    outln!(
        "logged in to {} as {} ({}) until {}; token kept in {}",
        client.base,
        issued.user.name,
        issued.user.role,
        format_ms(Some(issued.expires_at_ms)),
        path.display()
    )?;
    Ok(())
}

/// `kadence logout`: revokes the saved token on the server, then forgets it.
pub(super) async fn logout(client: &ApiClient) -> anyhow::Result<()> {
    let Some(saved) = forget_login(&client.base)? else {
        outln!("not logged in to {}", client.base)?;
        return Ok(());
    };
    let revoked: anyhow::Result<()> = client
        .with_token(saved.token)
        .post("/api/auth/logout", &serde_json::json!({}))
        .await;
    match revoked {
        Ok(()) => outln!("logged out of {} ({})", client.base, saved.user)?,
        // Forgotten here either way; an expired token is no loss.
        Err(error) => outln!(
            "forgot the token for {}; the server said: {error:#}",
            client.base
        )?,
    }
    Ok(())
}
