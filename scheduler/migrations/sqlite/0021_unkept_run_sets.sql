-- Runs whose job's history policy does not keep them and that never got a job-log row. See
-- PostgreSQL's 0021.
CREATE TABLE unkept_run_sets (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    scheduled_second BIGINT  NOT NULL,
    ended_at_ms      BIGINT  NOT NULL,
    run_count        BIGINT  NOT NULL,
    counted          INTEGER NOT NULL DEFAULT 0,
    runs             BLOB    NOT NULL
);
CREATE INDEX unkept_run_sets_second ON unkept_run_sets (scheduled_second);
CREATE INDEX unkept_run_sets_counted ON unkept_run_sets (counted, ended_at_ms);
