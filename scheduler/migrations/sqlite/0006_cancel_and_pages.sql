-- Cancelled fires, and indexes for paginated listings.

-- A stop or a schedule edit cancels the job's planned fires (state CANCELLED). Every scheduler
-- node reads the recent ones (lease not over yet) a few times a second so that none emits a
-- copy still held in its wheel; this partial index keeps that read to the few rows concerned.
CREATE INDEX job_logs_cancelled ON job_logs (lease_until_ms) WHERE state = 'CANCELLED';

-- Pages of jobs of one app, by id; pages of executors, by app and id.
DROP INDEX jobs_app;
CREATE INDEX jobs_app_id ON jobs (app, id);
DROP INDEX executors_app;
CREATE INDEX executors_app_id ON executors (app, executor_id);
