-- What happens after a run finished: retries, alarms, child jobs (the follow-up monitor),
-- daily reports and retention.

-- Each finished run is followed up once: PENDING until a scheduler node claims it (LOCKED,
-- until follow_up_locked_until, so a node that dies mid-way is replaced), DONE afterwards.
ALTER TABLE job_logs ADD COLUMN follow_up TEXT NOT NULL DEFAULT 'PENDING';
ALTER TABLE job_logs ADD COLUMN follow_up_locked_until INTEGER;
-- XXL-JOB's alarm status: UNPROCESSED, LOCKED, NOT_NEEDED, SENT, FAILED.
ALTER TABLE job_logs ADD COLUMN alarm_status TEXT NOT NULL DEFAULT 'UNPROCESSED';
-- Runs that finished before this migration were handled by the version that ran them: no
-- retries or alarms for them now.
UPDATE job_logs SET follow_up = 'DONE', alarm_status = 'NOT_NEEDED' WHERE state = 'FINISHED';
-- A retry's first attempt (NULL on first attempts): the rows of one run's attempts link to it.
ALTER TABLE job_logs ADD COLUMN first_log_id INTEGER;
-- The handler's "retry after" hint, ms.
ALTER TABLE job_logs ADD COLUMN retry_after_ms INTEGER;
-- Candidate partitions are copied to retries; the scan for unfollowed finished runs:
CREATE INDEX job_logs_follow_up ON job_logs (id) WHERE state = 'FINISHED' AND follow_up <> 'DONE';
-- Reports and retention read runs by time.
CREATE INDEX job_logs_scheduled ON job_logs (scheduled_at_ms);

-- For a sharded parent: fire child jobs for each succeeded shard (EACH_SHARD, XXL-JOB) or
-- once when every shard of a fire succeeded (ALL_SHARDS).
ALTER TABLE jobs ADD COLUMN child_trigger_mode TEXT NOT NULL DEFAULT 'EACH_SHARD';

-- Daily counts per app and job (UTC days, as the ms of their midnight), recounted by the
-- report monitor.
CREATE TABLE job_reports (
    day_ms    INTEGER NOT NULL,
    app       TEXT NOT NULL,
    job_id    INTEGER NOT NULL,
    running   INTEGER NOT NULL,
    succeeded INTEGER NOT NULL,
    failed    INTEGER NOT NULL,
    PRIMARY KEY (day_ms, app, job_id)
);
