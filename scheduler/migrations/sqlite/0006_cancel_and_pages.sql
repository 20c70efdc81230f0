-- Cancelled fires, and indexes for paginated listings.

-- A stop or a schedule edit cancels the job's planned fires (their job_logs rows become
-- CANCELLED) and records the cancellation here, one row each: every scheduler node reads the
-- recent ones a few times a second so that none emits a copy still held in its wheel. Fires
-- of the job with a job-log id up to up_to_log_id, due after from_ms, were cancelled.
-- Kept apart from job_logs because a cancelled row may be replaced by the new schedule's fire
-- for the same instant, and the nodes must still know about the cancellation.
CREATE TABLE fire_cancellations (
    id            INTEGER PRIMARY KEY,
    job_id        BIGINT NOT NULL,
    up_to_log_id  BIGINT NOT NULL,
    from_ms       BIGINT NOT NULL,
    until_ms      BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX fire_cancellations_until ON fire_cancellations (until_ms);

-- Pages of jobs of one app, by id; pages of executors, by app and id.
DROP INDEX jobs_app;
CREATE INDEX jobs_app_id ON jobs (app, id);
DROP INDEX executors_app;
CREATE INDEX executors_app_id ON executors (app, executor_id);
