//! Credentials: passwords hashed with Argon2id, tokens minted at random and kept only as
//! their SHA-256, and the first admin of a fresh database.
//!
//! A password is checked once per login, so it gets a deliberately slow hash (Argon2id with
//! the `argon2` crate's defaults: 19 MiB, 2 passes), stored as a PHC string that names its
//! own parameters. A token is checked on every request, so it is long and random instead
//! (256 bits: guessing is hopeless, and a fast hash is then as good as a slow one) and the
//! store keeps its SHA-256: a stolen table holds no usable token.

use argon2::Argon2;
use argon2::password_hash::rand_core::{OsRng, RngCore};
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

use crate::domain::model::Role;
use crate::store::{Accounts, NewUser, StoreError};

/// Every token starts with this, so that one pasted in the wrong place is recognisable (and
/// secret scanners can find leaked ones).
pub const TOKEN_PREFIX: &str = "kdn_";

/// The first admin's login name.
pub const FIRST_ADMIN: &str = "admin";

/// A failure to hash a password (the OS gave no randomness, or a parameter is out of range).
#[derive(Debug, thiserror::Error)]
#[error("cannot hash the password: {0}")]
pub struct HashError(String);

/// The Argon2id PHC string of `password`, with a fresh random salt.
pub fn hash_password(password: &str) -> Result<String, HashError> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| HashError(error.to_string()))
}

/// Whether `password` matches the PHC string `hash` (false for a malformed hash too).
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// A new token: the prefix and 256 random bits in hex. Shown once; only its
/// [`token_hash`] is stored.
pub fn mint_token() -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    format!("{TOKEN_PREFIX}{}", hex::encode(bytes))
}

/// What the store keeps of a token: its SHA-256, hex.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A random password for the first admin: 20 letters and digits (about 119 bits).
fn random_password() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
    (0..20)
        .map(|_| ALPHABET[(OsRng.next_u32() as usize) % ALPHABET.len()] as char)
        .collect()
}

/// What the first start did about the first admin.
#[derive(Debug, PartialEq, Eq)]
pub enum FirstAdmin {
    /// Users exist already: nothing to do.
    UsersExist,
    /// Created with the configured password (`auth.admin_password`).
    CreatedWithConfiguredPassword,
    /// Created with this random password, which the caller shows once.
    CreatedWithRandomPassword(String),
}

/// On a database without users, creates the [`FIRST_ADMIN`] with `configured` as password, or
/// a random one returned for the log. Several nodes starting at once on a fresh database
/// create it once: the losers of the race find it exists.
pub async fn ensure_first_admin(
    store: &dyn Accounts,
    configured: Option<&SecretString>,
    now_ms: i64,
) -> anyhow::Result<FirstAdmin> {
    if store.count_users().await? > 0 {
        return Ok(FirstAdmin::UsersExist);
    }
    let (password, outcome) = match configured {
        Some(password) if password.expose_secret().trim().is_empty() => anyhow::bail!(
            "auth.admin_password is empty: give the first admin a password, or leave the \
             setting out for a random one printed to the log"
        ),
        Some(password) => (
            password.expose_secret().to_owned(),
            FirstAdmin::CreatedWithConfiguredPassword,
        ),
        None => {
            let password = random_password();
            (
                password.clone(),
                FirstAdmin::CreatedWithRandomPassword(password),
            )
        }
    };
    let user = NewUser {
        name: FIRST_ADMIN.to_owned(),
        password_hash: hash_password(&password)?,
        role: Role::Admin,
    };
    match store.create_user(&user, now_ms).await {
        Ok(_) => Ok(outcome),
        Err(StoreError::UserExists(_)) => Ok(FirstAdmin::UsersExist),
        Err(error) => Err(error.into()),
    }
}

/// Says what the first start did about the first admin; a random password is shown here
/// once, and nowhere else.
pub fn announce_first_admin(outcome: FirstAdmin) {
    match outcome {
        FirstAdmin::UsersExist => {}
        FirstAdmin::CreatedWithConfiguredPassword => tracing::info!(
            user = FIRST_ADMIN,
            "created the first admin with the configured password (auth.admin_password)"
        ),
        FirstAdmin::CreatedWithRandomPassword(password) => tracing::warn!(
            user = FIRST_ADMIN,
            %password,
            "created the first admin with this random password, shown only now: \
             log in and change it (or set auth.admin_password before the first start)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_matches_its_hash_and_nothing_else() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("correct horse ", &hash));
        assert!(!verify_password("correct horse", "not a phc string"));
        assert_ne!(
            hash,
            hash_password("correct horse").unwrap(),
            "a fresh salt each time"
        );
    }

    #[test]
    fn tokens_are_long_random_and_stored_as_their_sha256() {
        let token = mint_token();
        assert!(token.starts_with(TOKEN_PREFIX));
        assert_eq!(token.len(), TOKEN_PREFIX.len() + 64);
        assert_ne!(token, mint_token());
        let hash = token_hash(&token);
        assert_eq!(hash.len(), 64);
        assert_eq!(hash, token_hash(&token));
        assert!(!hash.contains(&token[TOKEN_PREFIX.len()..]));
    }

    #[test]
    fn random_passwords_are_twenty_unambiguous_characters() {
        let password = random_password();
        assert_eq!(password.len(), 20);
        assert!(
            password
                .chars()
                .all(|c| c.is_ascii_alphanumeric() && !"0O1lI".contains(c))
        );
        assert_ne!(password, random_password());
    }
}
