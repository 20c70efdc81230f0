//! The `key` and `executor-key` subcommands: the keys triggers are signed with, and the
//! keys an app's executors sign what they write with.

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub(in crate::cli) enum KeyCommand {
    /// List the signing keys: id, public key (for executors' trusted keys), created,
    /// retired, and which one signs now.
    List,
    /// Make a new signing key (admin): every scheduler node signs with it within
    /// signing.key_refresh_interval. Give executors its public key first thing.
    Rotate,
    /// Stop using a signing key (admin); the only active key cannot be retired.
    Retire {
        /// Key id (from `key list`).
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub(in crate::cli) enum ExecutorKeyCommand {
    /// Make a key for an app's executors (admin) and print its text, once: give it to every
    /// executor of the app (KADENCE_EXECUTOR_KEY, ExecutorBuilder::executor_key, Python's
    /// executor_key=). With --quiet only the text is printed, for scripts.
    Create {
        /// The app.
        #[arg(long)]
        app: String,
        /// Print only the key's text.
        #[arg(long, short)]
        quiet: bool,
    },
    /// List an app's executor keys: id, who made it, created, revoked (never the secrets).
    List {
        /// The app.
        #[arg(long)]
        app: String,
    },
    /// Revoke an executor key (admin): every scheduler node refuses what it signs within
    /// executor_auth.key_refresh_interval.
    Revoke {
        /// The key's app.
        #[arg(long)]
        app: String,
        /// Key id (from `executor-key list`).
        id: String,
    },
}
