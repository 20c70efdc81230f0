-- Kadence schema, PostgreSQL. Times are UTC milliseconds since the epoch.

-- Executor apps (XXL-JOB's executor groups): one trigger topic each.
CREATE TABLE apps (
    name          TEXT    PRIMARY KEY,
    title         TEXT    NOT NULL DEFAULT '',
    partitions    BIGINT  NOT NULL CHECK (partitions > 0),
    created_at_ms BIGINT  NOT NULL
);

CREATE TABLE jobs (
    id               BIGSERIAL PRIMARY KEY,
    app              TEXT    NOT NULL REFERENCES apps (name),
    name             TEXT    NOT NULL,
    schedule_type    TEXT    NOT NULL,
    schedule_conf    TEXT    NOT NULL DEFAULT '',
    time_zone        TEXT    NOT NULL DEFAULT 'UTC',
    misfire_strategy TEXT    NOT NULL,
    route_strategy   TEXT    NOT NULL,
    handler          TEXT    NOT NULL,
    params           TEXT    NOT NULL DEFAULT '',
    block_strategy   TEXT    NOT NULL,
    timeout_ms       BIGINT  NOT NULL DEFAULT 0,
    status           TEXT    NOT NULL,
    last_fire_ms     BIGINT,
    next_fire_ms     BIGINT,
    created_at_ms    BIGINT  NOT NULL,
    updated_at_ms    BIGINT  NOT NULL
);
CREATE INDEX jobs_due ON jobs (status, next_fire_ms);
CREATE INDEX jobs_app ON jobs (app);

-- One row per trigger. A row in state SCHEDULED is a pending fire: written in the pre-read
-- transaction, owned by a scheduler node until lease_until_ms, removed from that state once
-- the broker acknowledges its trigger record. The settings the trigger was planned with are
-- copied here so that any node can emit it without reading the job.
CREATE TABLE job_logs (
    id                   BIGSERIAL PRIMARY KEY,
    trigger_id           TEXT    NOT NULL UNIQUE,
    job_id               BIGINT  NOT NULL,
    app                  TEXT    NOT NULL,
    handler              TEXT    NOT NULL,
    params               TEXT    NOT NULL,
    trigger_type         TEXT    NOT NULL,
    shard_index          BIGINT  NOT NULL DEFAULT 0,
    shard_total          BIGINT  NOT NULL DEFAULT 1,
    attempt              BIGINT  NOT NULL DEFAULT 0,
    scheduled_at_ms      BIGINT  NOT NULL,
    fire_at_ms           BIGINT  NOT NULL,
    route_strategy       TEXT    NOT NULL,
    block_strategy       TEXT    NOT NULL,
    timeout_ms           BIGINT  NOT NULL DEFAULT 0,
    state                TEXT    NOT NULL,
    owner_node           TEXT,
    lease_until_ms       BIGINT,
    partition_no         BIGINT,
    dispatched_at_ms     BIGINT,
    executor_id          TEXT,
    handle_code          BIGINT,
    handle_msg           TEXT,
    handle_started_at_ms BIGINT,
    handle_at_ms         BIGINT,
    created_at_ms        BIGINT  NOT NULL
);
CREATE INDEX job_logs_job ON job_logs (job_id, id);
CREATE INDEX job_logs_pending ON job_logs (lease_until_ms) WHERE state = 'SCHEDULED';

-- The schedule lock: the pre-read transaction takes SELECT ... FOR UPDATE on this row, so one
-- scheduler at a time plans fires (XXL-JOB's xxl_job_lock).
CREATE TABLE schedule_lock (name TEXT PRIMARY KEY);
INSERT INTO schedule_lock (name) VALUES ('schedule');
