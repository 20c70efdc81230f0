-- A trigger runs twice when its first run is handed back in a rebalance or its executor
-- crashes; both runs number their lines from 1 under the same log id. Each run's lines are
-- kept apart by when the run started on its executor (LogRecord v2's run_started_at_ms; 0 for
-- lines of version-1 records and for the lines stored before this migration), and a run's
-- log shows the run that started last. SQLite cannot change a primary key in place: the table
-- is rebuilt.
CREATE TABLE run_log_lines_by_run (
    log_id            INTEGER NOT NULL,
    run_started_at_ms INTEGER NOT NULL,
    line_no           INTEGER NOT NULL,
    line              TEXT NOT NULL,
    PRIMARY KEY (log_id, run_started_at_ms, line_no)
);
INSERT INTO run_log_lines_by_run (log_id, run_started_at_ms, line_no, line)
    SELECT log_id, 0, line_no, line FROM run_log_lines;
DROP TABLE run_log_lines;
ALTER TABLE run_log_lines_by_run RENAME TO run_log_lines;
