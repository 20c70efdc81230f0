-- Kadence schema, MySQL 8 / MariaDB 10.11+: the schema PostgreSQL's migrations 0001-0015
-- arrive at, in one step (this backend has no older databases to carry forward). Later
-- migrations go in step with the other backends' (0016 on). Times are UTC milliseconds since
-- the epoch.
--
-- Differences from the PostgreSQL schema, and why:
-- - Every table is InnoDB and takes the database's character set and collation, which the
--   store sets before this migration on a database without tables: utf8mb4 with a case- and
--   accent-sensitive collation (MariaDB utf8mb4_uca1400_as_cs, MySQL utf8mb4_0900_as_cs),
--   so names, trigger ids and handlers compare as PostgreSQL compares them, where MySQL's
--   default collation would make "Demo" and "demo" the same app. (A binary collation would
--   do too, but marks every text column binary, and sqlx then refuses to read it as text.)
-- - Keys are VARCHAR (InnoDB indexes at most 3 072 bytes, 768 utf8mb4 characters); the
--   API's limits are far below (app names 64 characters, trigger ids 128). Long text is
--   MEDIUMTEXT: scripts (256 KiB) and params (64 KiB) outgrow TEXT's 64 KiB.
-- - No partial indexes: each becomes an index over its condition's column first.
-- - job_logs.id is not AUTO_INCREMENT: every id comes from the counter row of
--   `id_counters`, which the store moves in a transaction of its own (as PostgreSQL's
--   sequence lives outside transactions), so ids reserved for fires written later and ids of
--   rows written now never collide.

CREATE TABLE apps (
    name          VARCHAR(255) NOT NULL PRIMARY KEY,
    title         TEXT         NOT NULL DEFAULT (''),
    partitions    BIGINT       NOT NULL CHECK (partitions > 0),
    created_at_ms BIGINT       NOT NULL
) ENGINE = InnoDB;

CREATE TABLE jobs (
    id                   BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    app                  VARCHAR(255) NOT NULL,
    name                 TEXT         NOT NULL,
    schedule_type        VARCHAR(32)  NOT NULL,
    schedule_conf        TEXT         NOT NULL DEFAULT (''),
    time_zone            VARCHAR(64)  NOT NULL DEFAULT 'UTC',
    misfire_strategy     VARCHAR(32)  NOT NULL,
    route_strategy       VARCHAR(32)  NOT NULL,
    handler              VARCHAR(255) NOT NULL,
    params               MEDIUMTEXT   NOT NULL DEFAULT (''),
    block_strategy       VARCHAR(32)  NOT NULL,
    timeout_ms           BIGINT       NOT NULL DEFAULT 0,
    status               VARCHAR(16)  NOT NULL,
    last_fire_ms         BIGINT,
    next_fire_ms         BIGINT,
    created_at_ms        BIGINT       NOT NULL,
    updated_at_ms        BIGINT       NOT NULL,
    author               VARCHAR(255) NOT NULL DEFAULT '',
    alarm_emails         TEXT         NOT NULL DEFAULT (''),
    alarm_webhook        TEXT,
    retry_count          BIGINT       NOT NULL DEFAULT 0,
    retry_backoff        VARCHAR(16)  NOT NULL DEFAULT 'NONE',
    retry_backoff_ms     BIGINT       NOT NULL DEFAULT 0,
    retry_backoff_cap_ms BIGINT       NOT NULL DEFAULT 0,
    glue_type            VARCHAR(32)  NOT NULL DEFAULT 'BEAN',
    glue_source          MEDIUMTEXT,
    glue_remark          TEXT         NOT NULL DEFAULT (''),
    glue_updated_at_ms   BIGINT,
    child_job_ids        TEXT         NOT NULL DEFAULT (''),
    child_trigger_mode   VARCHAR(16)  NOT NULL DEFAULT 'EACH_SHARD',
    shard                BIGINT       NOT NULL DEFAULT 0,
    history              VARCHAR(16)  NOT NULL DEFAULT 'ALL',
    CONSTRAINT jobs_app_exists FOREIGN KEY (app) REFERENCES apps (name),
    INDEX jobs_due (status, next_fire_ms),
    INDEX jobs_app_id (app, id)
) ENGINE = InnoDB;

-- One row per trigger (see PostgreSQL's 0001 for the life of a row).
CREATE TABLE job_logs (
    id                     BIGINT       NOT NULL PRIMARY KEY,
    trigger_id             VARCHAR(255) NOT NULL,
    job_id                 BIGINT       NOT NULL,
    app                    VARCHAR(255) NOT NULL,
    handler                VARCHAR(255) NOT NULL,
    params                 MEDIUMTEXT   NOT NULL DEFAULT (''),
    trigger_type           VARCHAR(16)  NOT NULL,
    shard_index            BIGINT       NOT NULL DEFAULT 0,
    shard_total            BIGINT       NOT NULL DEFAULT 1,
    attempt                BIGINT       NOT NULL DEFAULT 0,
    scheduled_at_ms        BIGINT       NOT NULL,
    fire_at_ms             BIGINT       NOT NULL,
    route_strategy         VARCHAR(32)  NOT NULL,
    block_strategy         VARCHAR(32)  NOT NULL,
    timeout_ms             BIGINT       NOT NULL DEFAULT 0,
    state                  VARCHAR(16)  NOT NULL,
    owner_node             VARCHAR(255),
    lease_until_ms         BIGINT,
    partition_no           BIGINT,
    dispatched_at_ms       BIGINT,
    executor_id            VARCHAR(255),
    handle_code            BIGINT,
    handle_msg             MEDIUMTEXT,
    handle_started_at_ms   BIGINT,
    handle_at_ms           BIGINT,
    created_at_ms          BIGINT       NOT NULL,
    glue_type              VARCHAR(32)  NOT NULL DEFAULT 'BEAN',
    glue_source            MEDIUMTEXT,
    glue_updated_at_ms     BIGINT,
    route_partitions       TEXT,
    follow_up              VARCHAR(16)  NOT NULL DEFAULT 'PENDING',
    follow_up_locked_until BIGINT,
    alarm_status           VARCHAR(16)  NOT NULL DEFAULT 'UNPROCESSED',
    first_log_id           BIGINT,
    retry_after_ms         BIGINT,
    replay_of              VARCHAR(255),
    operation_id           BIGINT,
    UNIQUE INDEX job_logs_trigger (trigger_id),
    INDEX job_logs_job (job_id, id),
    INDEX job_logs_pending (state, lease_until_ms),
    INDEX job_logs_unfinished (state, dispatched_at_ms),
    INDEX job_logs_follow_up (state, follow_up, id),
    INDEX job_logs_scheduled (scheduled_at_ms),
    INDEX job_logs_first_attempt (first_log_id),
    INDEX job_logs_replay_of (replay_of),
    INDEX job_logs_app_id (app, id),
    INDEX job_logs_failed (state, handle_code, id)
) ENGINE = InnoDB;

-- The last id given out per table whose ids the store reserves ahead of its rows.
CREATE TABLE id_counters (
    name    VARCHAR(64) NOT NULL PRIMARY KEY,
    last_id BIGINT      NOT NULL
) ENGINE = InnoDB;
INSERT INTO id_counters (name, last_id) VALUES ('job_logs', 0);

-- Rows locked with SELECT ... FOR UPDATE to serialise what must not run twice at once:
-- 'schedule' (kept from XXL-JOB's xxl_job_lock), 'signing_keys' (the first key), 'replays'
-- (recording a replay or backfill: PostgreSQL locks the replays table instead).
CREATE TABLE schedule_lock (
    name VARCHAR(64) NOT NULL PRIMARY KEY
) ENGINE = InnoDB;
INSERT INTO schedule_lock (name) VALUES ('schedule'), ('signing_keys'), ('replays');

CREATE TABLE job_glue_versions (
    id            BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id        BIGINT      NOT NULL,
    glue_type     VARCHAR(32) NOT NULL,
    glue_source   MEDIUMTEXT  NOT NULL,
    glue_remark   TEXT        NOT NULL DEFAULT (''),
    created_at_ms BIGINT      NOT NULL,
    INDEX job_glue_versions_job (job_id, id)
) ENGINE = InnoDB;

CREATE TABLE executors (
    executor_id      VARCHAR(255) NOT NULL PRIMARY KEY,
    app              VARCHAR(255) NOT NULL,
    host             TEXT         NOT NULL,
    version          TEXT         NOT NULL,
    handlers         TEXT         NOT NULL DEFAULT (''),
    owned_partitions TEXT         NOT NULL DEFAULT (''),
    running_jobs     TEXT         NOT NULL DEFAULT (''),
    queued_jobs      TEXT         NOT NULL DEFAULT (''),
    state            VARCHAR(16)  NOT NULL,
    first_seen_at_ms BIGINT       NOT NULL,
    last_beat_at_ms  BIGINT       NOT NULL,
    INDEX executors_app_id (app, executor_id)
) ENGINE = InnoDB;

CREATE TABLE run_log_lines (
    log_id  BIGINT     NOT NULL,
    line_no BIGINT     NOT NULL,
    line    MEDIUMTEXT NOT NULL,
    PRIMARY KEY (log_id, line_no)
) ENGINE = InnoDB;

CREATE TABLE job_reports (
    day_ms    BIGINT       NOT NULL,
    app       VARCHAR(255) NOT NULL,
    job_id    BIGINT       NOT NULL,
    running   BIGINT       NOT NULL,
    succeeded BIGINT       NOT NULL,
    failed    BIGINT       NOT NULL,
    PRIMARY KEY (day_ms, app, job_id),
    INDEX job_reports_job (job_id)
) ENGINE = InnoDB;

CREATE TABLE fire_cancellations (
    id            BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id        BIGINT NOT NULL,
    up_to_log_id  BIGINT NOT NULL,
    from_ms       BIGINT NOT NULL,
    until_ms      BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    INDEX fire_cancellations_until (until_ms)
) ENGINE = InnoDB;

CREATE TABLE users (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name          VARCHAR(255) NOT NULL,
    password_hash TEXT         NOT NULL,
    role          VARCHAR(16)  NOT NULL,
    created_at_ms BIGINT       NOT NULL,
    updated_at_ms BIGINT       NOT NULL,
    locale        VARCHAR(16),
    UNIQUE INDEX users_name (name)
) ENGINE = InnoDB;

CREATE TABLE user_grants (
    user_id BIGINT       NOT NULL,
    app     VARCHAR(255) NOT NULL,
    access  VARCHAR(16)  NOT NULL,
    PRIMARY KEY (user_id, app),
    INDEX user_grants_app (app),
    CONSTRAINT user_grants_user FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE = InnoDB;

CREATE TABLE auth_tokens (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    user_id       BIGINT       NOT NULL,
    kind          VARCHAR(16)  NOT NULL,
    name          TEXT         NOT NULL,
    token_hash    VARCHAR(255) NOT NULL,
    created_at_ms BIGINT       NOT NULL,
    expires_at_ms BIGINT       NOT NULL,
    revoked_at_ms BIGINT,
    UNIQUE INDEX auth_tokens_hash (token_hash),
    INDEX auth_tokens_user (user_id),
    CONSTRAINT auth_tokens_owner FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE = InnoDB;

CREATE TABLE audit_log (
    id        BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at_ms     BIGINT       NOT NULL,
    user_id   BIGINT,
    user_name VARCHAR(255) NOT NULL,
    action    VARCHAR(64)  NOT NULL,
    target    VARCHAR(255) NOT NULL,
    app       VARCHAR(255),
    status    BIGINT       NOT NULL,
    details   MEDIUMTEXT,
    INDEX audit_log_at (at_ms),
    INDEX audit_log_app (app, id)
) ENGINE = InnoDB;

CREATE TABLE signing_keys (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    key_id        VARCHAR(255) NOT NULL,
    public_key    TEXT         NOT NULL,
    private_key   TEXT         NOT NULL,
    created_at_ms BIGINT       NOT NULL,
    retired_at_ms BIGINT,
    UNIQUE INDEX signing_keys_key_id (key_id)
) ENGINE = InnoDB;

CREATE TABLE schedule_shards (
    shard          BIGINT       NOT NULL PRIMARY KEY,
    owner_node     VARCHAR(255),
    lease_until_ms BIGINT       NOT NULL DEFAULT 0,
    fence          BIGINT       NOT NULL DEFAULT 0,
    scanned_at_ms  BIGINT       NOT NULL DEFAULT 0
) ENGINE = InnoDB;

CREATE TABLE scheduler_nodes (
    node_id    VARCHAR(255) NOT NULL PRIMARY KEY,
    seen_at_ms BIGINT       NOT NULL
) ENGINE = InnoDB;

CREATE TABLE fire_batches (
    id              BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    shard           BIGINT       NOT NULL,
    owner_node      VARCHAR(255) NOT NULL,
    fire_count      BIGINT       NOT NULL,
    pending_from_ms BIGINT       NOT NULL,
    lease_until_ms  BIGINT       NOT NULL,
    fires           LONGBLOB     NOT NULL,
    created_at_ms   BIGINT       NOT NULL,
    INDEX fire_batches_lease (lease_until_ms)
) ENGINE = InnoDB;

CREATE TABLE run_counts (
    day_ms    BIGINT       NOT NULL,
    app       VARCHAR(255) NOT NULL,
    job_id    BIGINT       NOT NULL,
    succeeded BIGINT       NOT NULL DEFAULT 0,
    failed    BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (day_ms, app, job_id),
    INDEX run_counts_job (job_id)
) ENGINE = InnoDB;

CREATE TABLE replays (
    id              BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind            VARCHAR(16)  NOT NULL,
    app             VARCHAR(255) NOT NULL,
    target_app      VARCHAR(255) NOT NULL,
    job_id          BIGINT,
    selection       MEDIUMTEXT   NOT NULL,
    from_ms         BIGINT,
    to_ms           BIGINT,
    rate_per_second BIGINT       NOT NULL,
    forced          BIGINT       NOT NULL DEFAULT 0,
    triggers        BIGINT       NOT NULL,
    requested_by    VARCHAR(255) NOT NULL,
    requested_at_ms BIGINT       NOT NULL,
    INDEX replays_app (app, id)
) ENGINE = InnoDB;

CREATE TABLE shadow_results (
    trigger_id     VARCHAR(255) NOT NULL PRIMARY KEY,
    app            VARCHAR(255) NOT NULL,
    job_id         BIGINT       NOT NULL,
    executor_id    VARCHAR(255) NOT NULL,
    code           BIGINT       NOT NULL,
    message        MEDIUMTEXT,
    started_at_ms  BIGINT       NOT NULL,
    finished_at_ms BIGINT       NOT NULL,
    received_at_ms BIGINT       NOT NULL,
    INDEX shadow_results_app_started (app, started_at_ms)
) ENGINE = InnoDB;
