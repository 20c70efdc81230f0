-- A run's log lines are stored as the log records delivered them, one row per record. See
-- PostgreSQL's 0022.
CREATE TABLE run_log_chunks (
    log_id            BIGINT     NOT NULL,
    run_started_at_ms BIGINT     NOT NULL,
    first_line        BIGINT     NOT NULL,
    last_line         BIGINT     NOT NULL,
    texts             MEDIUMTEXT NOT NULL,
    PRIMARY KEY (log_id, run_started_at_ms, first_line)
) ENGINE = InnoDB;
INSERT INTO run_log_chunks (log_id, run_started_at_ms, first_line, last_line, texts)
    SELECT log_id, run_started_at_ms, line_no, line_no, JSON_ARRAY(line) FROM run_log_lines;
DROP TABLE run_log_lines;
