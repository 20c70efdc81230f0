-- The audit trail: every write through the API (see scheduler/src/api/audit.rs), who made it,
-- when, with what outcome, and for job edits the definition before and after. Kept as long
-- as runs (retention.days).
CREATE TABLE audit_log (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms     BIGINT NOT NULL,
    user_id   BIGINT,
    user_name TEXT NOT NULL,
    action    TEXT NOT NULL,
    target    TEXT NOT NULL,
    app       TEXT,
    status    BIGINT NOT NULL,
    details   TEXT
);
CREATE INDEX audit_log_at ON audit_log (at_ms);
CREATE INDEX audit_log_app ON audit_log (app, id);
