-- What the console's pages read (see scheduler/src/store/console.rs).

-- Runs across jobs, newest first, of some apps: GET /api/runs for a member (the apps granted
-- to them) or with ?app=, without walking every other app's runs.
CREATE INDEX job_logs_app_id ON job_logs (app, id);
-- The latest failures (GET /api/overview) and ?outcome=FAILED, newest first, without walking
-- the successes. The queries spell this condition as a literal, so both planners match it.
CREATE INDEX job_logs_failed ON job_logs (id) WHERE state = 'FINISHED' AND handle_code <> 200;
-- Removing a job (DELETE /api/jobs/{id}) deletes its daily report rows and its counts of
-- dropped runs, whose keys begin with the day.
CREATE INDEX job_reports_job ON job_reports (job_id);
CREATE INDEX run_counts_job ON run_counts (job_id);
