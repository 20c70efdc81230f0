//! Operations: what operators do to a running cluster.
//!
//! - [`jobs`]: the rules of a job's life (a definition read with XXL-JOB's defaults; create,
//!   edit, start, stop and delete, and what each means for the job's planned fires), which
//!   the API and the import both follow;
//! - [`import`]: `kadence import xxl-job`: an XXL-JOB database's groups, jobs, script
//!   versions and users mapped onto apps, jobs and users (a pure plan with every difference in
//!   behaviour, written in one transaction through the store's
//!   [`Imports`](crate::store::Imports) half);
//! - [`replay`]: replays past triggers read back from a trigger topic, backfills fires that
//!   never fired, and keeps shadow runs' results for a diff report against production;
//! - [`auth`]: passwords (Argon2id), tokens (random, stored as SHA-256) and the first admin
//!   of a fresh database; users, grants and tokens are kept by the store's
//!   [`Accounts`](crate::store::Accounts) half, and imported users set a password with a
//!   one-time reset token ([`PasswordResets`](crate::store::PasswordResets)).

pub mod auth;
pub mod import;
pub mod jobs;
pub mod replay;
