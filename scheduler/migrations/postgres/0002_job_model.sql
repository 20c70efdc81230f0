-- The rest of XXL-JOB's job model, and glue (script) versions.
ALTER TABLE jobs ADD COLUMN author TEXT NOT NULL DEFAULT '';
-- Comma-separated e-mail addresses.
ALTER TABLE jobs ADD COLUMN alarm_emails TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN alarm_webhook TEXT;
ALTER TABLE jobs ADD COLUMN retry_count BIGINT NOT NULL DEFAULT 0;
-- NONE, FIXED or EXPONENTIAL; delay (and cap) in ms.
ALTER TABLE jobs ADD COLUMN retry_backoff TEXT NOT NULL DEFAULT 'NONE';
ALTER TABLE jobs ADD COLUMN retry_backoff_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN retry_backoff_cap_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN glue_type TEXT NOT NULL DEFAULT 'BEAN';
ALTER TABLE jobs ADD COLUMN glue_source TEXT;
ALTER TABLE jobs ADD COLUMN glue_remark TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN glue_updated_at_ms BIGINT;
-- Comma-separated job ids fired as PARENT when this job succeeds.
ALTER TABLE jobs ADD COLUMN child_job_ids TEXT NOT NULL DEFAULT '';

-- A trigger carries the script it was planned with (NULL for BEAN jobs, the common case).
ALTER TABLE job_logs ADD COLUMN glue_type TEXT NOT NULL DEFAULT 'BEAN';
ALTER TABLE job_logs ADD COLUMN glue_source TEXT;
ALTER TABLE job_logs ADD COLUMN glue_updated_at_ms BIGINT;

-- The newest 30 versions of each job's script (XXL-JOB's xxl_job_logglue).
CREATE TABLE job_glue_versions (
    id            BIGSERIAL PRIMARY KEY,
    job_id        BIGINT NOT NULL,
    glue_type     TEXT    NOT NULL,
    glue_source   TEXT    NOT NULL,
    glue_remark   TEXT    NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX job_glue_versions_job ON job_glue_versions (job_id, id);
