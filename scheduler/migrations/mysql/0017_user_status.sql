-- A disabled user: since when, NULL while the user may log in. See PostgreSQL's 0017.
ALTER TABLE users ADD COLUMN disabled_at_ms BIGINT NULL;
