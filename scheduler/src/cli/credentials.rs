//! Where `kadence login` keeps its token: `credentials.json` in the user's Kadence config
//! directory (`$KADENCE_CONFIG_DIR`, else `$XDG_CONFIG_HOME/kadence`, else
//! `~/.config/kadence`), one entry per API URL, the file readable by its owner only (0600,
//! its directory 0700). `KADENCE_TOKEN` in the environment wins over the file, for
//! automation that holds an API token.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::PathBuf;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// The environment variable a token is taken from before the file.
pub(super) const TOKEN_VARIABLE: &str = "KADENCE_TOKEN";

/// One API's saved login.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SavedLogin {
    /// The session token.
    pub(super) token: String,
    /// Who logged in.
    pub(super) user: String,
    /// When the token stops working, ms since the epoch.
    pub(super) expires_at_ms: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CredentialsFile {
    /// By API base URL.
    servers: BTreeMap<String, SavedLogin>,
}

/// The file's path.
pub(super) fn credentials_path() -> anyhow::Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    let directory = if let Some(directory) = var("KADENCE_CONFIG_DIR") {
        PathBuf::from(directory)
    } else if let Some(config) = var("XDG_CONFIG_HOME") {
        PathBuf::from(config).join("kadence")
    } else if let Some(home) = var("HOME") {
        PathBuf::from(home).join(".config").join("kadence")
    } else {
        anyhow::bail!("cannot tell where to keep the token: set HOME or KADENCE_CONFIG_DIR");
    };
    Ok(directory.join("credentials.json"))
}

/// The token to send to `api`: `KADENCE_TOKEN`, else the saved login's, else none.
pub(super) fn token_for(api: &str) -> Option<String> {
    if let Some(token) = std::env::var(TOKEN_VARIABLE)
        .ok()
        .filter(|token| !token.is_empty())
    {
        return Some(token);
    }
    let file = read_file().ok()?;
    file.servers.get(api).map(|login| login.token.clone())
}

/// Saves `login` for `api`, replacing an earlier one.
pub(super) fn save_login(api: &str, login: SavedLogin) -> anyhow::Result<PathBuf> {
    let mut file = read_file().unwrap_or_default();
    file.servers.insert(api.to_owned(), login);
    write_file(&file)
}

/// Forgets the login for `api`; the token it held, if any.
pub(super) fn forget_login(api: &str) -> anyhow::Result<Option<SavedLogin>> {
    let mut file = read_file().unwrap_or_default();
    let removed = file.servers.remove(api);
    if removed.is_some() {
        write_file(&file)?;
    }
    Ok(removed)
}

fn read_file() -> anyhow::Result<CredentialsFile> {
    let path = credentials_path()?;
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))
}

fn write_file(file: &CredentialsFile) -> anyhow::Result<PathBuf> {
    let path = credentials_path()?;
    if let Some(directory) = path.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(directory)
            .with_context(|| format!("creating {}", directory.display()))?;
    }
    // Written beside and renamed over, so a crash never leaves half a file; created 0600 so
    // the token is never readable by others, not even for a moment.
    let partial = path.with_extension("json.partial");
    let mut out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)
        .with_context(|| format!("writing {}", partial.display()))?;
    // A file left by an older version with wider permissions is narrowed too.
    out.set_permissions(fs::Permissions::from_mode(0o600))?;
    out.write_all(serde_json::to_string_pretty(file)?.as_bytes())?;
    out.sync_all()?;
    fs::rename(&partial, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
