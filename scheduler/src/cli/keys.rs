//! `kadence key list|rotate|retire`: the keys triggers are signed with.

use super::args::KeyCommand;
use super::client::ApiClient;
use super::print::{OutputError, format_ms, outln};
use crate::api::SigningKeyView;

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
