-- The executor keys: the secrets an app's executors sign what they write with. See
-- PostgreSQL's 0018.
CREATE TABLE executor_keys (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    key_id        VARCHAR(64)  NOT NULL,
    app           VARCHAR(255) NOT NULL,
    secret        TEXT         NOT NULL,
    created_by    VARCHAR(255) NOT NULL,
    created_at_ms BIGINT       NOT NULL,
    revoked_at_ms BIGINT,
    UNIQUE INDEX executor_keys_key_id (key_id),
    INDEX executor_keys_app (app, id)
) ENGINE = InnoDB;
