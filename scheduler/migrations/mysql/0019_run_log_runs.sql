-- Each run of a trigger keeps its lines apart by when it started on its executor. See
-- PostgreSQL's 0019.
ALTER TABLE run_log_lines
    ADD COLUMN run_started_at_ms BIGINT NOT NULL DEFAULT 0 AFTER log_id,
    DROP PRIMARY KEY,
    ADD PRIMARY KEY (log_id, run_started_at_ms, line_no);
ALTER TABLE run_log_lines ALTER COLUMN run_started_at_ms DROP DEFAULT;
