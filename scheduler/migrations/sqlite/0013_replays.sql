-- Replays and backfills (see scheduler/src/replay): each is recorded once, with who asked,
-- what it selected and how many triggers it emitted, and every run it made is linked to it
-- (job_logs.operation_id) and, for a replay, to the trigger it replays (job_logs.replay_of).
CREATE TABLE replays (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT   NOT NULL,
    app              TEXT   NOT NULL,
    target_app       TEXT   NOT NULL,
    job_id           BIGINT,
    selection        TEXT   NOT NULL,
    from_ms          BIGINT,
    to_ms            BIGINT,
    rate_per_second  BIGINT NOT NULL,
    forced           BIGINT NOT NULL DEFAULT 0,
    triggers         BIGINT NOT NULL,
    requested_by     TEXT   NOT NULL,
    requested_at_ms  BIGINT NOT NULL
);
CREATE INDEX replays_app ON replays (app, id);

ALTER TABLE job_logs ADD COLUMN replay_of TEXT;
ALTER TABLE job_logs ADD COLUMN operation_id BIGINT;
-- The double-replay guard looks up the runs that replayed given triggers.
CREATE INDEX job_logs_replay_of ON job_logs (replay_of) WHERE replay_of IS NOT NULL;

-- Results of shadow runs ({prefix}.shadow-results): candidate handler versions run on a copy
-- of the triggers. They complete nothing; the diff report compares them with job_logs by
-- trigger id. The first shadow result of a trigger wins, as in production.
CREATE TABLE shadow_results (
    trigger_id     TEXT   PRIMARY KEY,
    app            TEXT   NOT NULL,
    job_id         BIGINT NOT NULL,
    executor_id    TEXT   NOT NULL,
    code           BIGINT NOT NULL,
    message        TEXT,
    started_at_ms  BIGINT NOT NULL,
    finished_at_ms BIGINT NOT NULL,
    received_at_ms BIGINT NOT NULL
);
CREATE INDEX shadow_results_app_started ON shadow_results (app, started_at_ms);
