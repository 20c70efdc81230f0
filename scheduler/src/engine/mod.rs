//! The engine: the fire path, from a due job to a trigger acknowledged by the broker.
//!
//! - [`shards`]: jobs hash into schedule shards; each node owns a share of them under a lease
//!   with a fencing token, renewed by its [`ShardLeaser`](shards::ShardLeaser). There is no
//!   global schedule lock.
//! - [`preread`]: `pre_read_once(now)` reads the due jobs of this node's shards (fences
//!   checked in the same transaction), plans their fires and writes them as one compact
//!   batch per shard, with reserved job-log ids (the durable half of the time wheel).
//! - [`intake`]: the one way into the wheel: every fire (schedule, claim, manual, retry,
//!   child) is written durably, owned by this node under a lease, then handed over.
//! - [`open_batches`]: the fires of this node's batches not yet acknowledged, which move each
//!   batch's lease.
//! - [`wheel`]: the in-memory millisecond time wheel that releases each pending fire at its
//!   time.
//! - [`routing`]: the route strategy picks the partition of `{prefix}.triggers.{app}`, among
//!   the app's partitions ([`partitions`]); FAILOVER and BUSYOVER read the live executors
//!   from the in-memory [`registry`].
//! - [`dispatch`]: builds the `TriggerRecord`, signs it ([`signer`]: Ed25519, with the
//!   cluster's newest key; alone or by the round, as [`signature_forms`] decides from the
//!   executors' beats), produces it with an idempotent producer, retries retriable errors,
//!   and drops fires cancelled meanwhile.
//! - [`acks`]: writes the runs of acknowledged triggers (DISPATCHED) and settles their
//!   batches, retrying until the database takes them; until then no claim re-emits them.
//! - [`cancellations`]: a stop or a schedule edit cancels the job's planned fires; every node
//!   learns of it and does not emit its copies.
//! - [`claims`]: takes over batches and pending fires whose owner's lease expired (a dead
//!   node) and emits their unacknowledged fires with the same trigger ids.
//! - [`kafka`]: the scheduler's own Kafka clients: topic administration (the trigger topics
//!   and the shared ones) and the control channel to executors, signed like triggers.
//!
//! The engine reads the store and the domain model; nothing in it reaches HTTP, the readers
//! or the monitors.

pub mod acks;
pub mod cancellations;
pub mod claims;
pub mod dispatch;
pub mod held_runs;
pub mod intake;
pub mod kafka;
pub mod open_batches;
pub mod partitions;
pub mod preread;
pub mod pressure;
pub mod registry;
pub mod routing;
pub mod shards;
pub mod signature_forms;
pub mod signer;
pub mod wheel;
