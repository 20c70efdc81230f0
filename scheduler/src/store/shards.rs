//! Schedule shards in the store: which node owns which shard, under which lease and fence
//! (tables `schedule_shards` and `scheduler_nodes`; see [`crate::engine::shards`] for the design).
//!
//! A shard changes hands only in [`ScheduleShards::lease_shards`]: a node takes a shard that
//! is free or whose lease ended, and the shard's `fence` grows by one. Every pre-read scan
//! checks, in its own transaction, that its shards still carry the fences it holds (see
//! [`PreReadRequest::shards`](super::PreReadRequest::shards)), so an owner that was paused or
//! cut off past its lease writes nothing once another node took over.

/// A shard a node holds, with the fence it acquired it under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OwnedShard {
    /// The shard number, `0..shard count`.
    pub shard: u32,
    /// The fencing token: the shard's `fence` when this node took it.
    pub fence: i64,
}

/// One lease step of one node (see [`ScheduleShards::lease_shards`]).
#[derive(Debug, Clone)]
pub struct ShardLeaseRequest {
    /// The node.
    pub node_id: String,
    /// Its clock, ms.
    pub now_ms: i64,
    /// How long a lease lasts without renewal, ms; also how long a node counts as alive after
    /// its last step.
    pub lease_ms: i64,
}

/// How a lease step got a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquisition {
    /// Nobody owned it: never owned, or released by a node that stopped.
    Free,
    /// Its owner's lease had run out: the owner died, froze or lost the database.
    Takeover,
    /// From a live node owning more than its share, for a node short of its share.
    Rebalance,
}

impl Acquisition {
    /// As a metric label.
    pub fn label(self) -> &'static str {
        match self {
            Acquisition::Free => "free",
            Acquisition::Takeover => "takeover",
            Acquisition::Rebalance => "rebalance",
        }
    }
}

/// A shard a lease step took, and from whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquiredShard {
    /// The shard and its new fence.
    pub owned: OwnedShard,
    /// How.
    pub how: Acquisition,
    /// Its previous owner, if it had one.
    pub from: Option<String>,
    /// When its last owner last scanned it, ms (0 if never).
    pub scanned_at_ms: i64,
}

/// What one lease step found and changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardLease {
    /// Every shard the node owns after the step, with its fence, by shard number.
    pub owned: Vec<OwnedShard>,
    /// The shards this step took (also in `owned`).
    pub acquired: Vec<AcquiredShard>,
    /// Nodes alive, this one included.
    pub live_nodes: u32,
    /// Shards in all.
    pub total_shards: u32,
}

/// A shard and its owner, as an operator sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardOwner {
    /// The shard number.
    pub shard: u32,
    /// The node holding it, if any.
    pub owner_node: Option<String>,
    /// When its lease ends, ms.
    pub lease_until_ms: i64,
    /// Its fencing token.
    pub fence: i64,
    /// When its owner last scanned it, ms.
    pub scanned_at_ms: i64,
}

/// Ownership of the schedule shards.
#[async_trait::async_trait]
pub trait ScheduleShards: Send + Sync {
    /// Creates `count` shards if there are none yet (the first node to start decides, and
    /// every job gets `shard = id % count`); returns the number of shards there are, which
    /// differs from `count` when an earlier start chose another.
    async fn ensure_shards(&self, count: u32) -> Result<u32, super::StoreError>;

    /// One lease step, in one transaction: records the node as alive, renews the leases of
    /// every shard it owns, then, below its share `ceil(shards / live nodes)`, takes free or
    /// expired shards and then the highest-numbered shards of live nodes above their share.
    /// A node never gives shards up itself (but when it stops): the node that needs them
    /// takes them, so the shard goes from scanned by one to scanned by the other with no
    /// gap in between (the fence keeps the old owner from writing after the change).
    async fn lease_shards(
        &self,
        request: &ShardLeaseRequest,
    ) -> Result<ShardLease, super::StoreError>;

    /// Gives up every shard `node_id` owns (graceful shutdown) and forgets the node, so the
    /// others take its shards at their next step instead of after its lease.
    async fn release_all_shards(&self, node_id: &str) -> Result<(), super::StoreError>;

    /// Every shard and its owner, by shard number.
    async fn shard_owners(&self) -> Result<Vec<ShardOwner>, super::StoreError>;
}
