-- The executor registry (built from ExecutorBeat records) and explicit route partitions.

-- One row per executor, upserted from its beats on {prefix}.beats. last_beat_at_ms is the
-- earlier of the beat's send time and the time the scheduler read it: a beat replayed from the
-- compacted topic after a restart is not mistaken for a fresh one, and an executor whose clock
-- runs ahead cannot make itself look alive.
CREATE TABLE executors (
    executor_id      TEXT    PRIMARY KEY,
    app              TEXT    NOT NULL,
    host             TEXT    NOT NULL,
    version          TEXT    NOT NULL,
    -- Comma-separated handler names, owned partitions, running and queued job ids.
    handlers         TEXT    NOT NULL DEFAULT '',
    owned_partitions TEXT    NOT NULL DEFAULT '',
    running_jobs     TEXT    NOT NULL DEFAULT '',
    queued_jobs      TEXT    NOT NULL DEFAULT '',
    -- RUNNING or STOPPING as the executor reports it; DEAD once its beats stop.
    state            TEXT    NOT NULL,
    first_seen_at_ms BIGINT  NOT NULL,
    last_beat_at_ms  BIGINT  NOT NULL
);
CREATE INDEX executors_app ON executors (app);

-- Candidate partitions of a trigger (comma-separated), when not all of the app's: a manual
-- trigger's partition override, or the one partition of a broadcast shard. NULL = all.
ALTER TABLE job_logs ADD COLUMN route_partitions TEXT;

-- The lost-run monitor's scan: unfinished runs by dispatch time.
CREATE INDEX job_logs_unfinished ON job_logs (dispatched_at_ms) WHERE state = 'DISPATCHED';
