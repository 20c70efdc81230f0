-- What an import from another scheduler created (see scheduler/src/import): one row per
-- source entity (an XXL-JOB executor group, job or user) with the Kadence entity made from
-- it (app name, job id, user id) and a fingerprint of the source row as it was read. A second
-- run skips every row listed here, and tells from the fingerprint whether the source changed
-- since; the undo removes what is listed here and nothing else.
CREATE TABLE imported_ids (
    source         TEXT   NOT NULL,
    kind           TEXT   NOT NULL,
    source_id      BIGINT NOT NULL,
    kadence_id     TEXT   NOT NULL,
    fingerprint    TEXT   NOT NULL,
    imported_at_ms BIGINT NOT NULL,
    PRIMARY KEY (source, kind, source_id)
);

-- One-time password reset tokens (see scheduler/src/api/password_resets.rs): an imported
-- user has no password until they redeem one; an admin may issue one to any user. Only the
-- SHA-256 of a token is kept; a token works once, until expires_at_ms.
CREATE TABLE password_reset_tokens (
    id            BIGSERIAL PRIMARY KEY,
    user_id       BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash    TEXT   NOT NULL UNIQUE,
    issued_by     TEXT   NOT NULL,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    used_at_ms    BIGINT
);
CREATE INDEX password_reset_tokens_user ON password_reset_tokens (user_id);
