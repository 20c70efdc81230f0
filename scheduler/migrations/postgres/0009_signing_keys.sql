-- The Ed25519 keys the scheduler signs trigger and control records with (see
-- scheduler/src/store/signing.rs). Every node signs with the newest key not retired; key_id is
-- the first 8 bytes of the SHA-256 of the public key, hex, as the kadence.signature.key header
-- names it. The private key is kept here (base64): guard access to this database.
CREATE TABLE signing_keys (
    id            BIGSERIAL PRIMARY KEY,
    key_id        TEXT NOT NULL UNIQUE,
    public_key    TEXT NOT NULL,
    private_key   TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    retired_at_ms BIGINT
);
-- Changes of the key set lock this row first, so that nodes never race on them.
INSERT INTO schedule_lock (name) VALUES ('signing_keys');
