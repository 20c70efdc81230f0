//! The tables of who may do what and what they did: `users`, `auth_tokens`, `audit_log` and
//! `executor_keys`, read as tuples.

/// A row of `audit_log`, in [`AUDIT_COLUMNS`] order.
pub type AuditRow = (
    i64,
    i64,
    Option<i64>,
    String,
    String,
    String,
    Option<String>,
    i64,
    Option<String>,
);

/// The columns of an [`AuditRow`].
pub(crate) const AUDIT_COLUMNS: &str =
    "id, at_ms, user_id, user_name, action, target, app, status, details";

/// What a key's row says of it, in [`KEY_INFO_COLUMNS`] order.
pub type KeyInfoRow = (String, String, String, i64, Option<i64>);

pub(crate) const KEY_INFO_COLUMNS: &str = "key_id, app, created_by, created_at_ms, revoked_at_ms";

/// A row of `users`, in [`USER_COLUMNS`] order.
pub type UserRow = (
    i64,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<i64>,
);
/// A row of `auth_tokens`, in [`TOKEN_COLUMNS`] order.
pub type TokenRow = (i64, i64, String, String, i64, i64, Option<i64>);

pub(crate) const USER_COLUMNS: &str =
    "id, name, role, password_hash, created_at_ms, locale, disabled_at_ms";
pub(crate) const TOKEN_COLUMNS: &str =
    "id, user_id, kind, name, created_at_ms, expires_at_ms, revoked_at_ms";
