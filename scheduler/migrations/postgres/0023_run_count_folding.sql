-- The daily reports count each run once, as it settles, instead of recounting all of
-- yesterday's and today's runs every minute (which read every row of the day, 864 million
-- of them at 10 000 runs a second). Job-log rows below `report_progress.folded_below` are
-- folded: a row that had its result by then is counted in `run_counts` with the runs a
-- history policy dropped, and a row still without one is listed in `report_open_runs`
-- until it gets it. The reports and the overview add the rows not folded yet and the open
-- ones to `run_counts` (see scheduler/src/store/sql/run_counts.rs).
CREATE TABLE report_progress (
    id           SMALLINT PRIMARY KEY,
    folded_below BIGINT NOT NULL,
    fold_next    BIGINT NOT NULL,
    fold_next_at_ms BIGINT NOT NULL
);
INSERT INTO report_progress (id, folded_below, fold_next, fold_next_at_ms) VALUES (1, 0, 0, 0);

CREATE TABLE report_open_runs (
    log_id BIGINT PRIMARY KEY
);

-- The lowest log id a batch reserved: rows of a batch's fires are written as the broker
-- acknowledges them, so no row below the lowest of the open batches is still to come. The
-- batches of the version before have 0: nothing is folded until they are gone (seconds).
ALTER TABLE fire_batches ADD COLUMN first_log_id BIGINT NOT NULL DEFAULT 0;
