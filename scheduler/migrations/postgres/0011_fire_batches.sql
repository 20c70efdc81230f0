-- Fire batches (see scheduler/src/store/fire_batch.rs and scheduler/src/store/batches.rs):
-- the durable promise of one pre-read scan of one schedule shard, one row holding every
-- fire it planned, compactly, instead of a job-log row per fire. The batch is its node's
-- until lease_until_ms = its earliest fire not yet acknowledged (pending_from_ms) + the
-- lease; after that any node may claim it and emit its fires from pending_from_ms on again,
-- with the same trigger ids. A batch whose fires were all acknowledged is deleted.
CREATE TABLE fire_batches (
    id              BIGSERIAL PRIMARY KEY,
    shard           BIGINT NOT NULL,
    owner_node      TEXT   NOT NULL,
    fire_count      BIGINT NOT NULL,
    pending_from_ms BIGINT NOT NULL,
    lease_until_ms  BIGINT NOT NULL,
    fires           BYTEA  NOT NULL,
    created_at_ms   BIGINT NOT NULL
);
CREATE INDEX fire_batches_lease ON fire_batches (lease_until_ms);
