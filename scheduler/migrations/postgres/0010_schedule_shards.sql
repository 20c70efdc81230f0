-- Schedule shards replace the one schedule lock (see scheduler/src/shards.rs). Every job
-- belongs to one shard (jobs.shard = id modulo the number of shards, fixed when the first
-- node starts); each shard is owned by one node at a time under a lease. `fence` grows by
-- one whenever the shard changes hands: a pre-read scan writes only after checking, in its
-- own transaction, that the shard still carries the fence its node acquired it with, so a
-- node that was paused past its lease can never write for a shard another node now owns.
-- The 'schedule' row of schedule_lock no longer guards scans: nodes starting at once take it
-- to create the shards one at a time.
CREATE TABLE schedule_shards (
    shard          BIGINT  PRIMARY KEY,
    owner_node     TEXT,
    lease_until_ms BIGINT  NOT NULL DEFAULT 0,
    fence          BIGINT  NOT NULL DEFAULT 0,
    scanned_at_ms  BIGINT  NOT NULL DEFAULT 0
);

-- Scheduler nodes seen recently: each shares the shards evenly with the others alive.
CREATE TABLE scheduler_nodes (
    node_id    TEXT   PRIMARY KEY,
    seen_at_ms BIGINT NOT NULL
);

ALTER TABLE jobs ADD COLUMN shard BIGINT NOT NULL DEFAULT 0;
