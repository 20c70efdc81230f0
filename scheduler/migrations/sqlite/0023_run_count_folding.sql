-- The daily reports count each run once, as it settles. See PostgreSQL's 0023.
CREATE TABLE report_progress (
    id           INTEGER PRIMARY KEY,
    folded_below INTEGER NOT NULL,
    fold_next    INTEGER NOT NULL,
    fold_next_at_ms INTEGER NOT NULL
);
INSERT INTO report_progress (id, folded_below, fold_next, fold_next_at_ms) VALUES (1, 0, 0, 0);

CREATE TABLE report_open_runs (
    log_id INTEGER PRIMARY KEY
);

ALTER TABLE fire_batches ADD COLUMN first_log_id INTEGER NOT NULL DEFAULT 0;
