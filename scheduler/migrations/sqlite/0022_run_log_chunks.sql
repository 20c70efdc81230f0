-- A run's log lines are stored as the log records delivered them, one row per record. See
-- PostgreSQL's 0022.
CREATE TABLE run_log_chunks (
    log_id            INTEGER NOT NULL,
    run_started_at_ms INTEGER NOT NULL,
    first_line        INTEGER NOT NULL,
    last_line         INTEGER NOT NULL,
    texts             TEXT    NOT NULL,
    PRIMARY KEY (log_id, run_started_at_ms, first_line)
);
INSERT INTO run_log_chunks (log_id, run_started_at_ms, first_line, last_line, texts)
    SELECT log_id, run_started_at_ms, line_no, line_no, json_array(line) FROM run_log_lines;
DROP TABLE run_log_lines;
