-- The executor keys (see scheduler/src/store/executor_keys.rs): the secrets an app's executors
-- sign what they write with (results, logs, beats, dead letters), which the scheduler checks.
-- key_id is 16 hex digits, as the kadence.executor.key header names it; the secret is kept
-- here (base64url) because verifying an HMAC needs it: guard access to this database.
CREATE TABLE executor_keys (
    id            BIGSERIAL PRIMARY KEY,
    key_id        TEXT NOT NULL UNIQUE,
    app           TEXT NOT NULL,
    secret        TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    revoked_at_ms BIGINT
);
CREATE INDEX executor_keys_app ON executor_keys (app, id);
