-- Run history policy (see HistoryPolicy in scheduler/src/model/job.rs): which finished runs
-- keep their job-log rows. ALL (default, XXL-JOB), FAILURES or NONE.
ALTER TABLE jobs ADD COLUMN history TEXT NOT NULL DEFAULT 'ALL';

-- Runs whose rows a history policy dropped, counted per UTC day (of the scheduled time), app
-- and job when they are dropped; the daily reports add them to what they count in job_logs.
CREATE TABLE run_counts (
    day_ms    BIGINT NOT NULL,
    app       TEXT NOT NULL,
    job_id    BIGINT NOT NULL,
    succeeded BIGINT NOT NULL DEFAULT 0,
    failed    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (day_ms, app, job_id)
);

-- A failed attempt is kept while its retries are under way; finding them must not scan.
CREATE INDEX job_logs_first_attempt ON job_logs (first_log_id) WHERE first_log_id IS NOT NULL;
