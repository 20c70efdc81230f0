-- Users, their grants per app, and their tokens (see scheduler/src/model/user.rs).

-- A user: ADMIN (everything) or MEMBER (only what user_grants allow). The password is kept
-- only as an Argon2id PHC string.
CREATE TABLE users (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    role          TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);

-- What a member may do on one app: VIEW, OPERATE or SCRIPTS (each includes the ones before).
CREATE TABLE user_grants (
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    app     TEXT NOT NULL,
    access  TEXT NOT NULL,
    PRIMARY KEY (user_id, app)
);
CREATE INDEX user_grants_app ON user_grants (app);

-- Session tokens (from a login) and API tokens (named, for automation). Only the SHA-256 of
-- a token is kept: the token itself is shown once, when it is made.
CREATE TABLE auth_tokens (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id       BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind          TEXT NOT NULL,
    name          TEXT NOT NULL,
    token_hash    TEXT NOT NULL UNIQUE,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    revoked_at_ms BIGINT
);
CREATE INDEX auth_tokens_user ON auth_tokens (user_id);
