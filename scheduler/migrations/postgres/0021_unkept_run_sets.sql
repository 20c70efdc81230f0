-- Runs whose job's history policy does not keep them (FAILURES, NONE) and whose rows were held
-- back until their results came: such a run never gets a job-log row. The results transaction
-- writes one set per second of scheduled time instead: `runs` (log id, app and trigger id of
-- each, encoded; see scheduler/src/store/unkept_run_set.rs), `run_count` of them, the last of
-- which ended at `ended_at_ms`. The sets recognise a result delivered again and tell a node
-- that claims a dead node's batches which fires were acknowledged; the report recount adds
-- them to run_counts (`counted`), and retention forgets them, with their log lines,
-- retention.unkept_runs_for after they ended.
CREATE TABLE unkept_run_sets (
    id               BIGSERIAL PRIMARY KEY,
    scheduled_second BIGINT   NOT NULL,
    ended_at_ms      BIGINT   NOT NULL,
    run_count        BIGINT   NOT NULL,
    counted          SMALLINT NOT NULL DEFAULT 0,
    runs             BYTEA    NOT NULL
);
CREATE INDEX unkept_run_sets_second ON unkept_run_sets (scheduled_second);
CREATE INDEX unkept_run_sets_counted ON unkept_run_sets (counted, ended_at_ms);
