-- Runs whose job's history policy does not keep them and that never got a job-log row. See
-- PostgreSQL's 0021.
CREATE TABLE unkept_run_sets (
    id               BIGINT   NOT NULL AUTO_INCREMENT PRIMARY KEY,
    scheduled_second BIGINT   NOT NULL,
    ended_at_ms      BIGINT   NOT NULL,
    run_count        BIGINT   NOT NULL,
    counted          SMALLINT NOT NULL DEFAULT 0,
    runs             LONGBLOB NOT NULL,
    INDEX unkept_run_sets_second (scheduled_second),
    INDEX unkept_run_sets_counted (counted, ended_at_ms)
) ENGINE = InnoDB;
