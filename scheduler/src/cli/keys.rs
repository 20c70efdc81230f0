//! `kadence key list|rotate|retire`: the keys triggers are signed with; `kadence executor-key
//! create|list|revoke`: the keys an app's executors sign what they write with.

use super::args::{ExecutorKeyCommand, KeyCommand};
use super::client::ApiClient;
use super::print::{OutputError, format_ms, outln};
use crate::http::api::{NewExecutorKeyView, SigningKeyView};
use crate::store::ExecutorKeyInfo;

/// Runs a `key` subcommand against the API.
pub(super) async fn key_command(client: &ApiClient, command: KeyCommand) -> anyhow::Result<()> {
    match command {
        KeyCommand::List => {
            let keys: Vec<SigningKeyView> = client.get("/api/signing-keys").await?;
            print_keys(&keys)?;
        }
        KeyCommand::Rotate => {
            let key: SigningKeyView = client.post("/api/signing-keys/rotate", &()).await?;
            print_keys(std::slice::from_ref(&key))?;
            eprintln!(
                "every scheduler node signs with key {} within signing.key_refresh_interval: \
                 add its public key to every executor's trusted keys now, and retire the old \
                 key (kadence key retire ID) once none needs it",
                key.key_id
            );
        }
        KeyCommand::Retire { id } => {
            let key: SigningKeyView = client
                .post(&format!("/api/signing-keys/{id}/retire"), &())
                .await?;
            outln!(
                "key {} retired at {}",
                key.key_id,
                format_ms(key.retired_at_ms)
            )?;
        }
    }
    Ok(())
}

/// One line per key: id, public key, created, retired, and `*` on the one signing now.
fn print_keys(keys: &[SigningKeyView]) -> Result<(), OutputError> {
    outln!(
        "{:<16} {:<44} {:<26} {:<26} SIGNING",
        "KEY",
        "PUBLIC KEY",
        "CREATED",
        "RETIRED"
    )?;
    for key in keys {
        outln!(
            "{:<16} {:<44} {:<26} {:<26} {}",
            key.key_id,
            key.public_key,
            format_ms(Some(key.created_at_ms)),
            format_ms(key.retired_at_ms),
            if key.signing { "*" } else { "" }
        )?;
    }
    Ok(())
}

/// Runs an `executor-key` subcommand against the API.
pub(super) async fn executor_key_command(
    client: &ApiClient,
    command: ExecutorKeyCommand,
) -> anyhow::Result<()> {
    match command {
        ExecutorKeyCommand::Create { app, quiet } => {
            let key: NewExecutorKeyView = client
                .post(&format!("/api/apps/{app}/executor-keys"), &())
                .await?;
            if quiet {
                outln!("{}", key.executor_key)?;
            } else {
                print_executor_keys(std::slice::from_ref(&key.info))?;
                outln!("\n{}", key.executor_key)?;
                eprintln!(
                    "give this text to every executor of app {app} (KADENCE_EXECUTOR_KEY): it \
                     is not shown again. Revoke the key it replaces, if any, once they use it \
                     (kadence executor-key revoke --app {app} ID)"
                );
            }
        }
        ExecutorKeyCommand::List { app } => {
            let keys: Vec<ExecutorKeyInfo> = client
                .get(&format!("/api/apps/{app}/executor-keys"))
                .await?;
            print_executor_keys(&keys)?;
        }
        ExecutorKeyCommand::Revoke { app, id } => {
            let key: ExecutorKeyInfo = client
                .delete(&format!("/api/apps/{app}/executor-keys/{id}"))
                .await?;
            outln!(
                "executor key {} of app {} revoked at {}",
                key.key_id,
                key.app,
                format_ms(key.revoked_at_ms)
            )?;
        }
    }
    Ok(())
}

/// One line per executor key: id, app, who made it, created, revoked.
fn print_executor_keys(keys: &[ExecutorKeyInfo]) -> Result<(), OutputError> {
    outln!(
        "{:<16} {:<20} {:<16} {:<26} REVOKED",
        "KEY",
        "APP",
        "CREATED BY",
        "CREATED"
    )?;
    for key in keys {
        outln!(
            "{:<16} {:<20} {:<16} {:<26} {}",
            key.key_id,
            key.app,
            key.created_by,
            format_ms(Some(key.created_at_ms)),
            format_ms(key.revoked_at_ms)
        )?;
    }
    Ok(())
}
