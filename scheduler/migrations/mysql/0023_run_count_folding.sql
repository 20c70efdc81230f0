-- The daily reports count each run once, as it settles. See PostgreSQL's 0023.
CREATE TABLE report_progress (
    id           SMALLINT NOT NULL PRIMARY KEY,
    folded_below BIGINT   NOT NULL,
    fold_next    BIGINT   NOT NULL,
    fold_next_at_ms BIGINT NOT NULL
) ENGINE = InnoDB;
INSERT INTO report_progress (id, folded_below, fold_next, fold_next_at_ms) VALUES (1, 0, 0, 0);

CREATE TABLE report_open_runs (
    log_id BIGINT NOT NULL PRIMARY KEY
) ENGINE = InnoDB;

ALTER TABLE fire_batches ADD COLUMN first_log_id BIGINT NOT NULL DEFAULT 0;
