-- A trigger runs twice when its first run is handed back in a rebalance or its executor
-- crashes; both runs number their lines from 1 under the same log id. Each run's lines are
-- kept apart by when the run started on its executor (LogRecord v2's run_started_at_ms; 0 for
-- lines of version-1 records and for the lines stored before this migration), and a run's
-- log shows the run that started last.
ALTER TABLE run_log_lines ADD COLUMN run_started_at_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE run_log_lines ALTER COLUMN run_started_at_ms DROP DEFAULT;
ALTER TABLE run_log_lines DROP CONSTRAINT run_log_lines_pkey;
ALTER TABLE run_log_lines ADD PRIMARY KEY (log_id, run_started_at_ms, line_no);
