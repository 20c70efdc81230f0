-- A disabled user (see scheduler/src/api/users.rs): since when, NULL while the user may log
-- in. Disabling revokes the user's tokens and voids their unused reset tokens; logins and
-- tokens of a disabled user are refused. The row stays, with its grants, for a re-enable.
ALTER TABLE users ADD COLUMN disabled_at_ms BIGINT;
