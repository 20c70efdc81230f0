-- Kadence schema, SQLite. Times are UTC milliseconds since the epoch.

-- Executor apps (XXL-JOB's executor groups): one trigger topic each.
CREATE TABLE apps (
    name          TEXT    PRIMARY KEY,
    title         TEXT    NOT NULL DEFAULT '',
    partitions    INTEGER NOT NULL CHECK (partitions > 0),
    created_at_ms INTEGER NOT NULL
);

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
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
    timeout_ms       INTEGER NOT NULL DEFAULT 0,
    status           TEXT    NOT NULL,
    last_fire_ms     INTEGER,
    next_fire_ms     INTEGER,
    created_at_ms    INTEGER NOT NULL,
    updated_at_ms    INTEGER NOT NULL
);
CREATE INDEX jobs_due ON jobs (status, next_fire_ms);
CREATE INDEX jobs_app ON jobs (app);

-- One row per trigger. A row in state SCHEDULED is a pending fire: written in the pre-read
-- transaction, owned by a scheduler node until lease_until_ms, removed from that state once
-- the broker acknowledges its trigger record. The settings the trigger was planned with are
-- copied here so that any node can emit it without reading the job.
CREATE TABLE job_logs (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    trigger_id           TEXT    NOT NULL UNIQUE,
    job_id               INTEGER NOT NULL,
    app                  TEXT    NOT NULL,
    handler              TEXT    NOT NULL,
    params               TEXT    NOT NULL,
    trigger_type         TEXT    NOT NULL,
    shard_index          INTEGER NOT NULL DEFAULT 0,
    shard_total          INTEGER NOT NULL DEFAULT 1,
    attempt              INTEGER NOT NULL DEFAULT 0,
    scheduled_at_ms      INTEGER NOT NULL,
    fire_at_ms           INTEGER NOT NULL,
    route_strategy       TEXT    NOT NULL,
    block_strategy       TEXT    NOT NULL,
    timeout_ms           INTEGER NOT NULL DEFAULT 0,
    state                TEXT    NOT NULL,
    owner_node           TEXT,
    lease_until_ms       INTEGER,
    partition_no         INTEGER,
    dispatched_at_ms     INTEGER,
    executor_id          TEXT,
    handle_code          INTEGER,
    handle_msg           TEXT,
    handle_started_at_ms INTEGER,
    handle_at_ms         INTEGER,
    created_at_ms        INTEGER NOT NULL
);
CREATE INDEX job_logs_job ON job_logs (job_id, id);
CREATE INDEX job_logs_pending ON job_logs (lease_until_ms) WHERE state = 'SCHEDULED';

-- On SQLite the schedule lock is the database write lock (BEGIN IMMEDIATE); the row exists
-- so that both backends have the same tables.
CREATE TABLE schedule_lock (name TEXT PRIMARY KEY);
INSERT INTO schedule_lock (name) VALUES ('schedule');
