-- The language a user chose for the web console (`en`, `zh-CN`); NULL: the browser's.
ALTER TABLE users ADD COLUMN locale TEXT;
