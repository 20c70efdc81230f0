//! What an executor trusts and runs: the scheduler keys it verifies records with, whether it
//! runs unverified, its script jobs (the code triggers carry) with their private directory,
//! and the executor key it signs what it writes with. [`ExecutorBuilder::build`] checks them
//! together (`checked_trust`, `checked_executor_key`): verifying and signing are the default,
//! and running unverified or unsigned, or scripts without a key, are explicit opt-outs.

use kadence_kafka::{ExecutorKey, PublicKey, TrustedKeys};

use super::ExecutorBuilder;
use crate::error::ExecutorError;
use crate::script::prepare_script_dir;

impl ExecutorBuilder {
    /// Whether this executor runs script jobs (GLUE_SHELL, GLUE_PYTHON, GLUE_NODEJS, GLUE_PHP,
    /// GLUE_POWERSHELL), whose code travels in the trigger. Default `false`: a script job runs
    /// whatever source its trigger carries on this host, so only an executor whose operators
    /// mean it to run scripts (and whose trigger topic only the scheduler can write) should say
    /// `.scripts(true)`. XXL-JOB runs them by default, which made every executor a remote
    /// shell for whoever reached its admin or its executor port. Switched off, a script
    /// trigger gets a failure result saying so.
    ///
    /// Scripts need at least one [`trusted_key`](Self::trusted_key) (so only triggers the
    /// scheduler signed run), or [`allow_unverified_scripts`](Self::allow_unverified_scripts);
    /// [`build`](Self::build) fails otherwise.
    pub fn scripts(mut self, enabled: bool) -> Self {
        self.scripts = enabled;
        self
    }

    /// Lets [`scripts(true)`](Self::scripts) run without any trusted key, so unsigned
    /// triggers run scripts too: only for a trusted network where nobody but the scheduler can
    /// write the trigger topic (and its ACLs say so). Implies
    /// [`allow_unverified`](Self::allow_unverified). Prefer [`trusted_key`](Self::trusted_key).
    pub fn allow_unverified_scripts(mut self) -> Self {
        self.allow_unverified_scripts = true;
        self
    }

    /// Lets the executor run without any [`trusted_key`](Self::trusted_key): then nothing is
    /// verified, and whoever can write its trigger and control topics runs and kills its
    /// handlers. [`build`](Self::build) refuses an executor with no trusted key unless this
    /// says so, and such an executor logs an error when it starts. Only for a network where
    /// nobody but the scheduler can write those topics (and the ACLs say so), or a test that
    /// feeds hand-made records. With a trusted key given, it changes nothing.
    pub fn allow_unverified(mut self) -> Self {
        self.allow_unverified = true;
        self
    }

    /// Trusts the scheduler key whose public half is `base64_public_key` (the base64 of its 32
    /// bytes, as `kadence key list` shows it). Repeatable: during a key rotation give both the
    /// old and the new key.
    ///
    /// With at least one trusted key, every trigger and control record must carry a valid
    /// signature by one of them (`kadence.signature.key` and `kadence.signature` headers,
    /// over the record's exact bytes on its topic); one that is unsigned, signed by another
    /// key, changed after signing or copied from another topic never runs: a trigger goes to
    /// `{prefix}.dlq` with the reason, a control record is logged and ignored. At least one
    /// is required: without any, [`build`](Self::build) fails unless
    /// [`allow_unverified`](Self::allow_unverified) says to run unverified. A key that is not
    /// valid base64 of an Ed25519 public key fails [`build`](Self::build).
    pub fn trusted_key(mut self, base64_public_key: impl Into<String>) -> Self {
        self.trusted_keys.push(base64_public_key.into());
        self
    }

    /// Signs every record this executor writes (results, shadow results, log lines, beats,
    /// dead letters) with the executor key `key`, the text `{key id}.{secret}` that
    /// `kadence executor-key create --app APP` prints once. The scheduler refuses records of an
    /// app that are not signed by one of that app's keys (its `executor_auth.required`, on by
    /// default): a forged result can then complete no run, and a forged beat steer no routing.
    /// Required: without it, [`build`](Self::build) fails unless
    /// [`allow_unsigned`](Self::allow_unsigned) says to run unsigned. A text that is not a key
    /// fails [`build`](Self::build) (without repeating the secret).
    pub fn executor_key(mut self, key: impl Into<String>) -> Self {
        self.executor_key = Some(key.into());
        self
    }

    /// Lets the executor run without an [`executor_key`](Self::executor_key): what it writes
    /// goes unsigned, which a scheduler that requires executor signatures (the default)
    /// dead-letters, so its runs never complete. Only for a scheduler running with
    /// `executor_auth.required = false` (during an upgrade) or a test that reads the records
    /// itself. Such an executor logs an error when it starts. With a key given, it changes
    /// nothing.
    pub fn allow_unsigned(mut self) -> Self {
        self.allow_unsigned = true;
        self
    }

    /// Where script handlers write the scripts they run: a directory private to this
    /// executor's user (created 0700 when missing; [`build`](Self::build) refuses one that is
    /// a symbolic link, belongs to another user or is open to others). Each run's script is
    /// a file of its own, 0600, deleted when the run ends. Default
    /// `{temp dir}/kadence-scripts-{user id}`.
    pub fn script_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.script_dir = dir.into();
        self
    }

    /// The trusted keys, parsed, once the combination is acceptable: at least one key unless
    /// [`allow_unverified`](Self::allow_unverified); scripts need a key unless
    /// [`allow_unverified_scripts`](Self::allow_unverified_scripts), and a private script
    /// directory.
    pub(super) fn checked_trust(&self) -> Result<TrustedKeys, ExecutorError> {
        let keys = (self.trusted_keys.iter())
            .map(|text| PublicKey::parse(text))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| ExecutorError::Config(format!("trusted_key: {error}")))?;
        let trusted_keys = TrustedKeys::new(keys);
        if self.scripts && trusted_keys.is_empty() && !self.allow_unverified_scripts {
            return Err(ExecutorError::Config(
                "scripts(true) runs the source that triggers carry, so it needs at least one \
                 trusted_key (the scheduler's public key, from `kadence key list`) to run only \
                 signed triggers; on a trusted network, allow_unverified_scripts() runs \
                 unsigned ones too"
                    .to_owned(),
            ));
        }
        let unverified_allowed = self.allow_unverified || self.allow_unverified_scripts;
        if trusted_keys.is_empty() && !unverified_allowed {
            return Err(ExecutorError::Config(
                "no trusted_key: an executor runs only triggers the scheduler signed, so give \
                 it the scheduler's public key (`kadence key list`) with trusted_key; on a \
                 network where only the scheduler can write the trigger and control topics, \
                 allow_unverified() runs without verifying"
                    .to_owned(),
            ));
        }
        if self.scripts && self.script_runner.is_none() {
            prepare_script_dir(&self.script_dir).map_err(ExecutorError::Config)?;
        }
        Ok(trusted_keys)
    }

    /// The executor key, parsed, or `None` when [`allow_unsigned`](Self::allow_unsigned)
    /// says to run without one.
    pub(super) fn checked_executor_key(&self) -> Result<Option<ExecutorKey>, ExecutorError> {
        match &self.executor_key {
            Some(text) => ExecutorKey::parse(text)
                .map(Some)
                .map_err(|error| ExecutorError::Config(format!("executor_key: {error}"))),
            None if self.allow_unsigned => Ok(None),
            None => Err(ExecutorError::Config(
                "no executor_key: the scheduler takes only results, log lines and beats signed \
                 with a key of their app, so give the executor its app's key (`kadence \
                 executor-key create --app APP` prints one) with executor_key; against a \
                 scheduler that does not require them, allow_unsigned() runs without one"
                    .to_owned(),
            )),
        }
    }
}

/// `{temp dir}/kadence-scripts-{user id}`: one directory per local user, so that two users'
/// executors on one machine never contend for one (see [`ExecutorBuilder::script_dir`]).
pub(super) fn default_script_dir() -> std::path::PathBuf {
    #[cfg(unix)]
    let user = nix::unistd::geteuid().as_raw().to_string();
    #[cfg(not(unix))]
    let user = "user".to_owned();
    std::env::temp_dir().join(format!("kadence-scripts-{user}"))
}
