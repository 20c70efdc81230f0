-- What an import from another scheduler created, and one-time password reset tokens: see
-- PostgreSQL's 0016 for what each row means.
CREATE TABLE imported_ids (
    source         VARCHAR(255) NOT NULL,
    kind           VARCHAR(16)  NOT NULL,
    source_id      BIGINT       NOT NULL,
    kadence_id     VARCHAR(255) NOT NULL,
    fingerprint    VARCHAR(255) NOT NULL,
    imported_at_ms BIGINT       NOT NULL,
    PRIMARY KEY (source, kind, source_id)
) ENGINE = InnoDB;

CREATE TABLE password_reset_tokens (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    user_id       BIGINT       NOT NULL,
    token_hash    VARCHAR(255) NOT NULL,
    issued_by     VARCHAR(255) NOT NULL,
    created_at_ms BIGINT       NOT NULL,
    expires_at_ms BIGINT       NOT NULL,
    used_at_ms    BIGINT,
    UNIQUE INDEX password_reset_tokens_hash (token_hash),
    INDEX password_reset_tokens_user (user_id),
    CONSTRAINT password_reset_tokens_owner FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE = InnoDB;
