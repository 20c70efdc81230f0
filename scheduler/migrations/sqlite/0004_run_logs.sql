-- Job logs (XXL-JOB's rolling log): the lines each run wrote, from {prefix}.logs. A line is
-- stored once whatever the redeliveries (primary key); a run keeps at most
-- logs.max_lines_per_run lines.
CREATE TABLE run_log_lines (
    log_id  INTEGER NOT NULL,
    line_no INTEGER NOT NULL,
    line    TEXT NOT NULL,
    PRIMARY KEY (log_id, line_no)
);
