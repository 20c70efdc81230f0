-- A run's log lines are stored as the log records delivered them: one row per record (a
-- chunk of consecutive lines, first_line..last_line, `texts` a JSON array of the lines)
-- rather than one row per line. An executor ships a run's lines every 250 ms and at its end,
-- so a short run's lines are one record: one row and one index entry where there were as
-- many as its lines (the largest part of what history cost the database under load). A
-- record delivered again has the same key and is a repeat. The lines stored before this
-- migration become one-line chunks.
CREATE TABLE run_log_chunks (
    log_id            BIGINT NOT NULL,
    run_started_at_ms BIGINT NOT NULL,
    first_line        BIGINT NOT NULL,
    last_line         BIGINT NOT NULL,
    texts             TEXT   NOT NULL,
    PRIMARY KEY (log_id, run_started_at_ms, first_line)
);
INSERT INTO run_log_chunks (log_id, run_started_at_ms, first_line, last_line, texts)
    SELECT log_id, run_started_at_ms, line_no, line_no, json_build_array(line)::text
    FROM run_log_lines;
DROP TABLE run_log_lines;
